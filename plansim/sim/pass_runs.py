"""Runs of passes an engine rank times in one step: decode runs, prompt runs and head runs.

The functions here are steps of one ``plansim.sim.engine.Rank``, written apart from its pass
mechanics; only the rank calls them, with itself. A ``start_`` function either starts a run at
``now`` (virtual ms), sets it as the rank's run in flight and returns its last pass's end as the
clock reaches it, pass end after pass end, or returns None (the rank then composes one pass);
its ``finish_`` function applies the run at that end: the KV and token changes of every pass,
the pass record, the tokens reported through the rank's hooks (``on_run``, ``on_tokens``) and the
completions (``Rank._finish``). Between the two nothing changes the rank's batch or cache; an
arrival cuts the run (``DecodeRun.cut``, ``PromptRun.cut`` through ``Rank.interrupt``) and a
planner observation counts the passes ended so far (``count_passes``).

What the functions read and write of the rank: its batch, waiting queue, cache, policy
(``steady_decode``, ``steady_prompt``, ``decode_run``), offload tier and pass timing
(``_pass_ms``, ``_decode_table``, ``timing``, ``decode_div``); and its run state, which they
share with the rank's pass mechanics alone: ``_run`` (the run in flight or None),
``_run_taken`` (its passes already in the pass window), ``_emit`` and ``_slices`` (the composed
pass's emitting requests and row slices: a run starts with them empty, or follows on from them
as a head run), ``_last_pass`` (the latest pass's ``PassRecord``).

Decode runs: when every running request is decoding, the policy says nothing would be admitted
(``steady_decode``), and KV suffices, the passes up to the first completion are timed in one
step (a slice of the pool's ``plansim.sim.decode_table`` where the timing model offers one).
An arrival during the run truncates it after the pass in flight, so the arrival joins the next
pass exactly as in pass-by-pass simulation.

Prompt runs (ranks built with ``prompt_runs``): when the last running request is computing its
prompt, the others decode, and the policy says each pass would give the prompt a fixed chunk and
admit nothing (``steady_prompt``), the passes up to the prompt's last chunk (or the first
completion, or the first pass short of KV) are timed in one step, each as its own pass; their
grants (allocations, then the chunk's prompt blocks registered, pass by pass) are applied when
the run ends, which is why only ranks whose prefix cache no router reads meanwhile use them.

Head runs (ranks built with ``head_runs`` too): a composed pass in which every running request
emits, none for the last time, runs on into the decode run that would start at its end, in one
step: its grants are applied as it is composed, its tokens are reported as the run's first, and
an arrival during it cuts the run to that pass alone. Only where nothing acts on a request's
first token when it comes (the router's ``observes_first_tokens``).

A run's pass ends are the floats the clock reaches pass end after pass end (``start + (end -
start)`` each pass), so a run ends at the very float its passes would.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from plansim.sim import batch as soa
from plansim.sim import decode_table
from plansim.sim.pass_window import PassRecord

if TYPE_CHECKING:
    from plansim.sim.engine import Rank

_NS = decode_table.NS_PER_MS
# ``kv_limit`` lists the passes needing a new block in Python up to this many at most (a
# few array calls cost more than that many list items).
_KV_LIMIT_LIST = 64


class DecodeRun(NamedTuple):
    """A decode run in flight: every request of the batch (its ``n`` rows, ``kv0_tokens``
    tokens long in all at the start) emits one token at each of ``ends_ms``; ``dts_ms`` are
    the pass times (lists for short runs, arrays for long ones); the run started at
    ``start_ms``. ``head``: the record of the composed pass the run follows on from (it ends
    at ``start_ms``; its grants are applied and its tokens are the rank's pending ``_emit`` and
    ``_slices``), or None. ``columns``: for a batch under ``SCALAR_ROWS`` rows, its
    ``Batch.columns`` as the run starts (no row changes until the run's end), else None. (A
    named tuple: one is made for most passes a rank starts, and it costs a fifth of a frozen
    dataclass.)"""

    n: int
    kv0_tokens: int
    ends_ms: list[float] | np.ndarray
    dts_ms: list[float] | np.ndarray
    start_ms: float
    head: PassRecord | None = None
    columns: list[list[int]] | None = None

    def cut(self, t: float) -> tuple[DecodeRun, float] | None:
        """The run as an arrival at ``t`` (ms) leaves it, and its new end: the passes started
        before ``t``, at least the first (already running at the start), or with a head none
        when ``t`` is at the start (the composed pass alone is under way); None when every pass
        started before ``t``."""
        ends = self.ends_ms
        k = len(ends)
        # Pass j starts at ends[j - 1] (the first at the start). One call per arrival: inline.
        kept = 1 + bisect_left(ends, t, 0, k - 1) if t > self.start_ms else 0
        if kept >= k:
            return None
        if kept == 0:
            if self.head is not None:
                return (
                    DecodeRun(
                        self.n,
                        self.kv0_tokens,
                        ends[:0],
                        self.dts_ms[:0],
                        self.start_ms,
                        self.head,
                        self.columns,
                    ),
                    self.start_ms,
                )
            kept = 1
        return (
            DecodeRun(
                self.n,
                self.kv0_tokens,
                ends[:kept],
                self.dts_ms[:kept],
                self.start_ms,
                self.head,
                self.columns,
            ),
            float(ends[kept - 1]),
        )

    def ended_by(self, t: float) -> int:
        """The run's passes (its head first) ended by ``t`` (ms)."""
        done = bisect_right(self.ends_ms, t)
        return done + 1 if self.head is not None and t >= self.start_ms else done


class PromptRun(NamedTuple):
    """A prompt run in flight: the last row's prompt takes ``chunks[j]`` tokens in pass ``j``
    while the ``n - 1`` rows before it decode one token each (``kv0_tokens`` tokens long in all
    at the start); pass ``j`` ends at ``ends_ms[j]`` and its record is ``fpms[j]``; the run
    started at ``start_ms``. The prompt's last chunk, when the run holds it, emits its first
    token at the run's end."""

    n: int
    kv0_tokens: int
    chunks: tuple[int, ...]
    ends_ms: list[float]
    dts_ms: list[float]
    fpms: tuple[PassRecord, ...]
    start_ms: float

    def cut(self, t: float) -> tuple[PromptRun, float] | None:
        """The run as an arrival at ``t`` (ms) leaves it, and its new end: the passes started
        before ``t``, at least the first; None when every pass started before ``t``."""
        ends = self.ends_ms
        k = len(ends)
        kept = 1 + bisect_left(ends, t, 0, k - 1) if t > self.start_ms else 0
        if kept >= k:
            return None
        kept = kept or 1
        return (
            PromptRun(
                self.n,
                self.kv0_tokens,
                self.chunks[:kept],
                ends[:kept],
                self.dts_ms[:kept],
                self.fpms[:kept],
                self.start_ms,
            ),
            float(ends[kept - 1]),
        )

    def ended_by(self, t: float) -> int:
        """The run's passes ended by ``t`` (ms)."""
        return bisect_right(self.ends_ms, t)

    def granted_by(self, t: float) -> int:
        """The prompt tokens the run's passes started by ``t`` (ms) grant (at least the first
        pass's: it runs from the start)."""
        return sum(self.chunks[: 1 + bisect_left(self.ends_ms, t, 0, len(self.chunks) - 1)])


def start_decode_run(rank: Rank, now: float, head: bool = False) -> float | None:
    """Start a run of at least two decode-only passes at ``now`` if nothing can change
    during it. ``head``: the run follows on from the pass just composed, which ends at
    ``now`` (its tokens not yet emitted: every request must emit one in it)."""
    if not rank._may_run:
        return None
    offload = rank.offload
    if offload is not None and offload.not_before_ms > now:
        return None  # the next pass waits for host stores
    b = rank.batch
    n = len(rank.running)
    if n == 0:
        return None
    if head:
        emitting = len(rank._emit)
        for lo, hi in rank._slices:
            emitting += hi - lo
        if emitting != n:
            return None
    # With requests waiting, the policy first (it admits the head, the usual failure, with
    # no need to look at the rows); else after the rows (it then costs little).
    waiting = bool(rank.waiting)
    if waiting and not rank.policy.steady_decode(rank):
        return None
    # Decoding: one known token left, and past the first token (a prompt can also stop
    # one token short of its end, which is still prefill). After a head pass every known
    # length is one more. The last row first, from its own items: the newest request
    # still computing its prompt is the usual failure.
    last = n - 1
    known_last = b.known.item(last) + (1 if head else 0)
    if b.computed.item(last) != known_last - 1 or known_last <= b.isl.item(last):
        return None
    columns = None
    if n < soa.SCALAR_ROWS:
        columns = b.columns()
        _, isl, total, computed, known_list, _, _, _ = columns
        d = 1 if head else 0
        k = _decoding_left(isl, total, computed, known_list, n, d)
        if k is None:
            return None
        sum_len = sum(known_list) + n * d
    else:
        known = b.known[:n] + 1 if head else b.known[:n]
        decoding = (known - b.computed[:n] == 1) & (known > b.isl[:n])
        if np.count_nonzero(decoding) != n:
            return None
        # ufunc reductions: the ndarray methods add a Python-level wrapper each.
        k = int(np.minimum.reduce(b.total[:n] - known))
        sum_len = int(np.add.reduce(known))
    if k < 2 or (not waiting and not rank.policy.steady_decode(rank)):
        return None
    bs = rank.block_size
    avail = rank.cache.available()
    if offload is not None and offload.tier.d2h.tail_ms > now:
        # Evicting a block a host store still reads would fence a pass of the run: the run
        # takes only free blocks.
        avail = rank.cache.free_blocks()
    if n * (k // bs + 1) > avail:
        # KV may run short: pass j needs a new block for request i when
        # L_i + j > n_blocks_i * bs.
        k = kv_limit(b.blocks[:n] * bs - b.known[:n] + (0 if head else 1), avail, k, bs)
        if k < 2:
            return None
    times = _run_times if k <= soa.SCALAR_PASSES else _run_times_array
    dts, ends = times(rank, now, n, sum_len, k)
    rank._run_taken = 0
    if head:
        rank._run = DecodeRun(n, sum_len, ends, dts, now, rank._last_pass, columns)
    else:
        rank._run = DecodeRun(n, sum_len, ends, dts, now, None, columns)
        rank._emit = []
        rank._slices = []
    return float(ends[-1])


def _run_times(rank: Rank, now: float, n: int, kv0: int, k: int) -> tuple[list[float], list[float]]:
    """(pass times, pass ends) of a decode run of ``k`` passes of ``n`` requests from
    ``now``, ``kv0`` tokens long in all at the start, in plain Python: the passes taken from
    the decode table, or timed by the model's ``decode_ms`` pass by pass and quantised as
    ``decode_table.quantised`` does, the ends summed one by one as the clock would (the same
    floats as the array path)."""
    div = rank.decode_div
    if div <= 0:
        return [0.0] * k, [now] * k
    table = rank._decode_table
    if table is not None:
        dts = table.run(kv0, n, k).tolist()
        ends = list(accumulate(dts, initial=now))
        del ends[0]
        return dts, ends
    total = rank.total_kv_tokens
    decode_ms = rank.timing.decode_ms
    raws = [decode_ms(n, kv, kv // n, total) for kv in range(kv0, kv0 + k * n, n)]
    dts = []
    ends = []
    t = now
    for raw in raws:
        dt = round(raw / div * _NS) / _NS  # as ``Rank._pass_ms`` rounds
        dts.append(dt)
        t += dt
        ends.append(t)
    return dts, ends


def _run_times_array(
    rank: Rank, now: float, n: int, kv0: int, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """``_run_times`` as arrays, for long runs: the same floats."""
    div = rank.decode_div
    table = rank._decode_table
    if table is not None:
        dts = table.run(kv0, n, k)
    elif div <= 0:
        dts = np.zeros(k)
    else:
        # Pass j: every request one token longer than at pass j - 1.
        kv = np.arange(kv0, kv0 + k * n, n, dtype=np.int64)
        raw = rank.timing.decode_ms_bulk(np.full(k, n), kv, kv // n, rank.total_kv_tokens)
        dts = decode_table.quantised(raw, div)
    # The clock's sums, pass end after pass end: now + dts[0], then + dts[1], ...
    ends = dts.copy()
    ends[0] += now
    np.add.accumulate(ends, out=ends)  # cumsum's sequential sums, without its wrapper
    return dts, ends


def _decoding_left(
    isl: list[int],
    total: list[int],
    computed: list[int],
    known: list[int],
    rows: int,
    ahead: int = 0,
) -> int | None:
    """The fewest tokens any of the first ``rows`` rows (``Batch.columns``) has left to
    emit when every one of them is decoding (one known token left, past the first token),
    each ``ahead`` tokens longer than ``known`` says (a pass's tokens not yet emitted);
    None when one is not; ``1 << 30`` for no rows."""
    k = 1 << 30
    for i in range(rows):
        L = known[i] + ahead
        if computed[i] != L - 1 or isl[i] >= L:
            return None
        if total[i] - L < k:
            k = total[i] - L
    return k


def kv_limit(first_need: np.ndarray, avail: int, k: int, bs: int) -> int:
    """Largest run length <= k whose new blocks fit in ``avail`` (``first_need[i]``: the
    first pass at which request i needs a new block, then one every ``bs`` passes)."""
    if first_need.shape[0] * (k // bs + 1) <= _KV_LIMIT_LIST:
        # Few new blocks at most: the passes needing one as a list (no array calls).
        need_at = []
        for f in first_need.tolist():
            need_at.extend(range(f if f > 0 else 0, k, bs))
        if len(need_at) <= avail:
            return k
        need_at.sort()
        return need_at[avail]
    first_need = np.maximum(first_need, 0)
    counts = np.where(first_need < k, (k - 1 - first_need) // bs + 1, 0)
    total = int(counts.sum())
    if total <= avail:
        return k
    need_at = np.concatenate([np.arange(f, k, bs) for f in first_need[counts > 0]])
    need_at.sort()
    # Pass need_at[avail] is the first that cannot allocate: stop before it.
    return int(need_at[avail])


def finish_decode_run(rank: Rank) -> None:
    """Apply the rank's decode run at its last end (a head run cut to its composed pass: that
    pass alone): every request emits one token a pass, holds the blocks its last pass reaches,
    and leaves the batch when done; the policy's ``decode_run`` advances its state."""
    run = rank._run
    ends = run.ends_ms
    m = len(ends)
    head = run.head is not None
    if rank.passes is not None:
        count_passes(rank, m + 1 if head else m)
    rank._run = None
    first_ms = None
    if head:
        if not m:
            # Cut to the composed pass alone.
            rank._finish_pass(run.start_ms)
            rank._last_pass = run.head
            return
        # Every request emits in the composed pass too: its tokens are the run's first, at
        # its end (the run's start).
        rank._emit = []
        rank._slices = []
        first_ms = run.start_ms
    n = run.n
    b = rank.batch
    bs = rank.block_size
    # The batch's state after the run; the hooks below read none of it.
    if n < soa.SCALAR_ROWS:
        # One loop over the rows' lists (as the run started: they are the batch's now):
        # each emits ``d`` tokens, holds the blocks its last pass reaches, and is done when
        # its known length reaches its total.
        rids, _, total, _, known, blocks, _, _ = run.columns
        d = m + 1 if head else m
        new_blocks = 0
        computed = []
        rows = []
        for i in range(n):
            L = known[i] + d
            need = -(-(L - 1) // bs) - blocks[i]
            if need > 0:
                new_blocks += need
                blocks[i] += need
            known[i] = L
            computed.append(L - 1)
            if total[i] <= L:
                rows.append(i)
        if new_blocks:
            b.blocks[:n] = blocks
            rank.cache.allocate(new_blocks)
        b.computed[:n] = computed
        b.known[:n] = known
    else:
        known = b.known[:n]
        if head:
            known += 1
        L = known + (m - 1)
        need = np.maximum(-(-L // bs) - b.blocks[:n], 0)
        new_blocks = int(np.add.reduce(need))
        if new_blocks:
            b.blocks[:n] += need
            rank.cache.allocate(new_blocks)
        b.computed[:n] = L
        known += m
        rows = np.flatnonzero(known >= b.total[:n]).tolist()
        rids = b.rid[:n]  # read by the hook before any row leaves the batch
    end = float(ends[-1])
    kv = run.kv0_tokens + (m - 1) * n
    rank._last_pass = rank._record(float(run.dts_ms[-1]) / 1000.0, 0, 0, n, kv)
    rank.policy.decode_run(m)
    rank.hooks.on_run(rank, rids, ends, first_ms)
    if rows:
        rank._finish(rows, end)


def start_prompt_run(rank: Rank, now: float) -> float | None:
    """Start a run of at least two passes in which the last running request's prompt
    takes the policy's steady chunk each pass (the last chunk too, if the policy says it
    admits nothing) while every other running request decodes one token, if nothing else
    can change during it: no completion before its last pass, no preemption, no offload
    or speculative decoding. Batches under ``SCALAR_ROWS`` rows (the run is planned row by
    row)."""
    if rank.drafts is not None or rank.offload is not None:
        return None
    b = rank.batch
    n = len(rank.running)
    if n == 0 or n >= soa.SCALAR_ROWS:
        return None
    p = n - 1
    last = rank.running[p]
    c0 = b.computed.item(p)
    if b.known.item(p) != last.isl or c0 >= last.isl - 1 or last.prebuilt:
        return None  # the last request is not a fresh prompt with chunks to go
    _, isl, total, computed, known, blocks, _, _ = b.columns()
    k_dec = _decoding_left(isl, total, computed, known, p)
    if k_dec is None:
        return None
    chunk, last_admits_nothing = rank.policy.steady_prompt(rank)
    if chunk <= 0:
        return None
    # The passes: full chunks, then the last one if it fills the budget or admits nothing;
    # no more than up to the first decoder's completion.
    left = isl[p] - c0
    full = (left - 1) // chunk
    chunks = [chunk] * full
    if left - full * chunk == chunk or last_admits_nothing:
        chunks.append(left - full * chunk)
    if len(chunks) > k_dec:
        del chunks[k_dec:]
    if len(chunks) < 2:
        return None  # one pass (the usual failure: a prompt's last chunk is next)
    # KV: pass j needs the blocks its grants reach; stop before the first that cannot
    # allocate without preempting.
    bs = rank.block_size
    avail = rank.cache.available()
    reach = c0
    for j, c in enumerate(chunks):
        reach += c
        need_p = -(-reach // bs) - blocks[p]
        need_d = 0
        for i in range(p):
            extra = -(-(known[i] + j) // bs) - blocks[i]
            if extra > 0:
                need_d += extra
        need = need_d + (need_p if need_p > 0 else 0)
        if need > avail:
            del chunks[j:]
            break
    if len(chunks) < 2:
        return None
    # Each pass timed as ``_single_pass`` times it: one prompt chunk, the decoders.
    m = p
    kv0 = sum(known[:p])
    ends = []
    dts = []
    fpms = []
    start = now
    before = c0
    for j, c in enumerate(chunks):
        kv = kv0 + j * m
        prefill_ms, decode_ms = rank._pass_ms(1, c, before + c, before, m, kv)
        end = start + prefill_ms + decode_ms
        fpms.append(rank._record((end - start) / 1000.0, 1, c, m, kv))
        dts.append(end - start)
        # The next pass starts when the clock reaches this one's end, as the host
        # schedules it.
        start = start + (end - start)
        ends.append(start)
        before += c
    rank._run = PromptRun(n, kv0, tuple(chunks), ends, dts, tuple(fpms), now)
    rank._run_taken = 0
    rank._emit = []
    rank._slices = []
    return ends[-1]


def finish_prompt_run(rank: Rank, now: float) -> None:
    """Apply the rank's prompt run at ``now``, its last end: each pass's grants in order, the
    decoders' tokens, and the prompt's first token if the run held its last chunk."""
    run = rank._run
    count_passes(rank, len(run.chunks))
    rank._run = None
    b = rank.batch
    bs = rank.block_size
    cache = rank.cache
    n = run.n
    p = n - 1
    prompt = rank.running[p]
    rid, isl, total, computed, known, blocks, _, _ = b.columns()
    # The passes' grants in order: each pass allocates the blocks its decoders and its
    # chunk reach, then registers the prompt blocks the chunk filled (an eviction in one
    # pass can change what the next pass registers).
    before = computed[p]
    n_pk = len(prompt.prompt_keys)
    for j, c in enumerate(run.chunks):
        need = 0
        for i in range(p):
            extra = -(-(known[i] + j) // bs) - blocks[i]
            if extra > 0:
                need += extra
                blocks[i] += extra
        extra = -(-(before + c) // bs) - blocks[p]
        if extra > 0:
            need += extra
            blocks[p] += extra
        if need:
            cache.allocate(need)
        lo = before // bs
        before += c
        hi = before // bs
        if cache.prefix_caching and lo < n_pk and hi > lo:
            rank._register(prompt, lo, hi if hi < n_pk else n_pk)
    m = len(run.chunks)
    b.blocks[:n] = blocks
    b.computed[:p] = [L + m - 1 for L in known[:p]]
    b.known[:p] = [L + m for L in known[:p]]
    b.computed[p] = before
    # Tokens are stamped at the clock's time, as a pass's are.
    end = now
    ends = run.ends_ms.copy()
    ends[-1] = now
    rank._last_pass = run.fpms[-1]
    if p:
        rank.hooks.on_run(rank, rid[:p], ends, None)
    rows = [i for i in range(p) if known[i] + m >= total[i]]
    if before >= isl[p]:
        # The last chunk: the prompt's first token.
        b.known[p] = known[p] + 1
        rank.hooks.on_tokens(rank, rid[p:], end)
        if known[p] + 1 >= total[p]:
            rows.append(p)
    if rows:
        rank._finish(rows, end)


def count_passes(rank: Rank, upto: int) -> None:
    """Add the rank's run's passes ``rank._run_taken .. upto - 1`` to its pass window (a decode
    run's head pass first); nothing without a window."""
    run = rank._run
    lo = rank._run_taken
    if upto <= lo or rank.passes is None:
        return
    rank._run_taken = upto
    if isinstance(run, PromptRun):
        for f in run.fpms[lo:upto]:
            rank.passes.add_pass(f)
        return
    if run.head is not None:
        if lo == 0:
            rank.passes.add_pass(run.head)
        else:
            lo -= 1
        upto -= 1
        if upto <= lo:
            return
    n = run.n
    k = upto - lo
    # Pass j's KV is every request's length at the run start plus j tokens each.
    kv = k * run.kv0_tokens + n * (lo + upto - 1) * k // 2
    # numpy's sum for lists too: the same float whichever form the run has.
    wall_ms = float(np.add.reduce(run.dts_ms[lo:upto]))
    rank.passes.add_decode_passes(k, wall_ms / 1000.0, n * k, kv)
