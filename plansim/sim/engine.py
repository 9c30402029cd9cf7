"""One engine rank: the mechanics of a scheduler over a KV block pool, advanced pass by pass on
the virtual clock, with runs of decode-only passes advanced in one step.

The rank's ``SchedulerPolicy`` (``plansim.sim.schedulers``, chosen by the engine's backend)
decides who gets tokens in a pass, who is admitted and who is preempted; the rank does the rest
(reference mocker rules):

1. Granting ``n`` tokens to a request allocates the blocks its computed tokens reach (free
   blocks, then LRU eviction of inactive cached blocks) and registers its newly full prompt
   blocks in the prefix cache. On shortage the policy's victim is preempted: it releases its KV,
   its computed tokens reset to 0, it goes back to the head of the waiting queue, and its grant
   in this pass (if any) is given back. A request alone in the batch and still short can never
   run here: it is rejected.
2. Admission acquires the cached prefix (active or inactive blocks); the cached prefix is not
   recomputed, at least the last token always is. A prompt transferred from a prefill worker
   arrives computed but for its last token.
3. Prefill time from the requests granted prompt tokens: ``T = count * (mean_isl -
   mean_prefix)`` new tokens (integer means), divided by ``speedup_ratio``; 0 on decode workers.
4. Every granted request whose computed tokens reach its known length emits one token. Decode
   time from those granted no prompt tokens, and, where the policy ``recompute_decodes``, from
   preempted requests recomputing prompt and output tokens (batch, KV tokens = sum of their
   lengths, mean context), divided by ``speedup_ratio * decode_speedup_ratio``; 0 on prefill
   workers (their one token is part of the prefill pass). In a pass that also prefills, a timing
   model with ``mixed_decode_ms`` gives the decode share instead.
5. Pass end = start + prefill + decode, each rounded to whole nanoseconds as the reference's
   durations are. Tokens are stamped at the pass end.

Speculative decoding (``aic_nextn``): a pass emits ``1 + accepted drafts`` tokens per request
(``plansim.sim.speculative``, drawn in batch order from the rank's stream; a prompt's own pass
draws only if the policy ``verifies_prefill``, and then is timed as a decode too); the KV for
the drafts is reserved when the tokens are granted and the rejected drafts' blocks go back at
the pass end. With drafts, a cached prefix is reused minus its last block (the draft head needs
its hidden states). Speculative ranks time every pass one by one.

Decode runs: when every running request is decoding, the policy says nothing would be admitted
(``steady_decode``), and KV suffices, the passes up to the first completion are timed in one
step (a slice of the pool's ``plansim.sim.decode_table`` where the timing model offers one).
An arrival during the run truncates it after the pass in flight (``interrupt``), so the arrival
joins the next pass exactly as in pass-by-pass simulation.

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

Every end time a rank returns is the one the clock reaches pass end after pass end
(``start + (end - start)`` each pass), so a run ends at the very float its passes would.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable
from functools import partial
from itertools import accumulate
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from plansim.roles import Role
from plansim.sim import batch as soa
from plansim.sim import decode_table
from plansim.sim.batch import Batch
from plansim.sim.engine_protocol import EngineHooks, RankOccupancy
from plansim.sim.host_offload import HostOffload, OffloadView
from plansim.sim.kv import KvCache, gen_keys
from plansim.sim.schedulers import PrefixMatch, SchedulerPolicy, make_scheduler
from plansim.sim.speculative import DraftSampler, accept_rates
from plansim.sim.timing import TimingModel

# Imported where used: a replay without a planner never loads them (the planner's
# observation records cost about 6 ms to define).
if TYPE_CHECKING:
    from plansim.planner_core.observations import ForwardPassMetrics
    from plansim.sim.pass_window import PassWindow

_NS = decode_table.NS_PER_MS
# ``_kv_limit`` lists the passes needing a new block in Python up to this many at most (a
# few array calls cost more than that many list items).
_KV_LIMIT_LIST = 64


def _q(ms: float) -> float:
    """Round a duration to whole nanoseconds, as the reference's ``Duration`` does."""
    return round(ms * _NS) / _NS


class Request:
    """A request's state on one rank. ``generated`` counts tokens emitted on this rank;
    ``prebuilt``: its prompt KV came from a prefill worker; ``preempted``: it was preempted at
    least once; ``in_batch``: it is running. ``pass_no`` is the rank pass that last granted it
    tokens, ``computed_before`` its computed tokens before that grant.

    While the request runs, ``computed``, ``generated``, ``n_blocks``, ``pass_no`` and
    ``computed_before`` live in its row of the rank's ``Batch`` (the attributes read and write
    it), so that the rank can advance many rows in one vector step."""

    __slots__ = ("rid", "isl", "osl", "prompt_keys", "held", "prebuilt", "preempted",
                 "stored_blocks", "host_loaded", "store_done_ms", "_batch", "_row", "_computed",
                 "_generated", "_n_blocks", "_pass_no", "_before")

    def __init__(self, rid: int, isl: int, osl: int, prompt_keys: list[int], *,
                 prebuilt: bool = False) -> None:
        self.rid = rid
        self.isl = isl
        self.osl = osl
        self.prompt_keys = prompt_keys
        self.held: list[int] = []
        self._batch: Batch | None = None
        self._row = 0
        self._n_blocks = 0
        # A transferred prompt arrives computed but for its last token, whose pass on the
        # decode worker emits the first visible token (the prefill worker's token is internal).
        self._computed = isl - 1 if prebuilt else 0
        self._generated = 0
        self._pass_no = -1
        self._before = 0
        self.prebuilt = prebuilt
        self.preempted = False
        # Host offload (``HostOffload``): the store cursor in prompt blocks, whether a load is
        # done for the coming admission, when the latest store lands.
        self.stored_blocks = 0
        self.host_loaded = False
        self.store_done_ms = 0.0

    @property
    def in_batch(self) -> bool:
        return self._batch is not None

    @property
    def computed(self) -> int:
        b = self._batch
        return self._computed if b is None else b.computed.item(self._row)

    @computed.setter
    def computed(self, value: int) -> None:
        b = self._batch
        if b is None:
            self._computed = value
        else:
            b.computed[self._row] = value

    @property
    def generated(self) -> int:
        b = self._batch
        return self._generated if b is None else b.known.item(self._row) - self.isl

    @generated.setter
    def generated(self, value: int) -> None:
        b = self._batch
        if b is None:
            self._generated = value
        else:
            b.known[self._row] = self.isl + value

    @property
    def n_blocks(self) -> int:
        b = self._batch
        return self._n_blocks if b is None else b.blocks.item(self._row)

    @n_blocks.setter
    def n_blocks(self, value: int) -> None:
        b = self._batch
        if b is None:
            self._n_blocks = value
        else:
            b.blocks[self._row] = value

    @property
    def pass_no(self) -> int:
        b = self._batch
        return self._pass_no if b is None else b.pass_no.item(self._row)

    @pass_no.setter
    def pass_no(self, value: int) -> None:
        b = self._batch
        if b is None:
            self._pass_no = value
        else:
            b.pass_no[self._row] = value

    @property
    def computed_before(self) -> int:
        b = self._batch
        return self._before if b is None else b.before.item(self._row)

    @computed_before.setter
    def computed_before(self, value: int) -> None:
        b = self._batch
        if b is None:
            self._before = value
        else:
            b.before[self._row] = value

    def seq_keys(self, n_full: int) -> list[int]:
        """Keys of the first ``n_full`` full blocks of the known sequence."""
        pk = self.prompt_keys
        if n_full <= len(pk):
            return pk[:n_full]
        return pk + gen_keys(self.rid, len(pk), n_full)


class PassRecord(NamedTuple):
    """One pass as the planner's pass window counts it (``PassWindow.add_pass``'s arguments:
    wall seconds, prompt requests and tokens, decoding requests and their KV tokens), and the
    waiting queue's totals as it was scheduled (``ForwardPassMetrics``' queued fields)."""

    wall_s: float
    prefill_requests: int
    prefill_tokens: int
    decode_requests: int
    decode_kv_tokens: int
    queued: tuple[int, int, int, int]


_UNRECORDED = PassRecord(0.0, 0, 0, 0, 0, (0, 0, 0, 0))


def _unrecorded(wall_s: float, n_prefill: int, prefill_tokens: int, n_decode: int,
                decode_kv: int) -> PassRecord:
    """``Rank._record`` of a rank without a pass window: nothing reads the record (about a
    microsecond saved per pass and run)."""
    return _UNRECORDED


class QueueTotals:
    """Waiting-queue totals, kept as requests enter and leave it (for pass metrics): fresh
    prompts and their tokens; preempted or transferred requests and their KV tokens."""

    __slots__ = ("prefill_requests", "prefill_tokens", "decode_requests", "decode_kv_tokens")

    def __init__(self) -> None:
        self.prefill_requests = self.prefill_tokens = 0
        self.decode_requests = self.decode_kv_tokens = 0


class DecodeRun(NamedTuple):
    """A decode run in flight: every request of the batch (its ``n`` rows, ``kv0_tokens``
    tokens long in all at the start) emits one token at each of ``ends_ms``; ``dts_ms`` are
    the pass times (lists for short runs, arrays for long ones); the run started at
    ``start_ms``. ``head``: the metrics of the composed pass the run follows on from (it ends
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

    def kept(self, passes: int) -> DecodeRun:
        """The run cut to its first ``passes`` decode passes."""
        return DecodeRun(self.n, self.kv0_tokens, self.ends_ms[:passes], self.dts_ms[:passes],
                         self.start_ms, self.head, self.columns)


class PromptRun(NamedTuple):
    """A prompt run in flight: the last row's prompt takes ``chunks[j]`` tokens in pass ``j``
    while the ``n - 1`` rows before it decode one token each (``kv0_tokens`` tokens long in all
    at the start); pass ``j`` ends at ``ends_ms[j]`` and its metrics are ``fpms[j]``; the run
    started at ``start_ms``. The prompt's last chunk, when the run holds it, emits its first
    token at the run's end."""

    n: int
    kv0_tokens: int
    chunks: tuple[int, ...]
    ends_ms: list[float]
    dts_ms: list[float]
    fpms: tuple[PassRecord, ...]
    start_ms: float

    def kept(self, passes: int) -> PromptRun:
        """The run cut to its first ``passes`` passes."""
        return PromptRun(self.n, self.kv0_tokens, self.chunks[:passes], self.ends_ms[:passes],
                         self.dts_ms[:passes], self.fpms[:passes], self.start_ms)


class Rank:
    """One data-parallel rank of one worker (an ``EngineRank``) with engine ``args``
    (``EngineArgs``), playing ``role`` (default: the args' role), scheduled by ``policy``
    (default: the registry's policy for ``args.engine_type``). ``decode_runs=False`` simulates
    every pass one by one, ``vector_grants=False`` grants every request its tokens one by one
    (both off: the reference mode the fast paths must reproduce; for tests)."""

    def __init__(self, worker_id: int, dp_rank: int, args: Any, timing: TimingModel,
                 hooks: EngineHooks, *, policy: SchedulerPolicy | None = None,
                 role: Role | None = None, decode_runs: bool = True, vector_grants: bool = True,
                 prompt_runs: bool = False, head_runs: bool = False, pass_window: bool = True,
                 stream: int = 0, decode_tables: dict | None = None) -> None:
        """``stream``: the rank's index in its pool (``worker x dp_size + dp_rank``), which
        offsets its speculative-decoding seed. ``prompt_runs``: runs of passes may carry a
        prompt's chunks (with ``decode_runs``; only where nothing reads the rank's prefix cache
        while it runs, since a run applies its KV changes at its end). ``head_runs`` (with
        ``prompt_runs``): a composed pass after which every request decodes runs on into the
        decode run that follows it, in one step, and reports its tokens at the run's end (only
        where nothing acts on a request's first token when it comes). ``pass_window=False``:
        nothing takes the rank's pass metrics (no planner), so they are neither recorded nor
        accumulated, and ``take_fpm`` and ``last_fpm`` are not available. ``decode_tables``: a
        cache the ranks of one pool share (``decode_table.shared``; None: the rank's own)."""
        role = args.role if role is None else role
        self.worker_id = worker_id
        self.dp_rank = dp_rank
        self.role = role
        self._prefill_timed = role.prefills
        self._decode_timed = role.decodes
        self._hands_off = role.hands_off
        self.block_size = args.block_size
        self.total_kv_tokens = args.num_gpu_blocks * args.block_size
        self.prefill_div = args.speedup_ratio
        self.decode_div = args.speedup_ratio * args.decode_speedup_ratio
        self.timing = timing
        # Timing models that know a mixed pass shares one weights pass (see sim.timing).
        self._mixed_decode = getattr(timing, "mixed_decode_ms", None)
        self._decode_table = decode_table.shared({} if decode_tables is None else decode_tables,
                                                 timing, self.total_kv_tokens, self.decode_div)
        self.cache = KvCache(args.num_gpu_blocks, args.block_size, args.enable_prefix_caching)
        self.prefix_view = self.cache
        self.hooks = hooks
        self.policy = make_scheduler(args) if policy is None else policy
        self.prompt_runs = decode_runs and prompt_runs and role.prefills and role.decodes
        # Nothing routes by the prefix cache: the router's view of it need not be kept.
        self.cache.publishes = not prompt_runs
        self.vector_grants = vector_grants
        # Speculative decoding: a verification pass emits 1 + accepted drafts per request.
        self.sampler: DraftSampler | None = None
        if args.aic_nextn and role.decodes:
            self.sampler = DraftSampler(accept_rates(args.aic_nextn, args.aic_nextn_accept_rates),
                                        args.aic_mtp_seed + stream)
        self._bursts: list[int] = []
        self._speculative = bool(args.aic_nextn)
        # Host (G2) KV offload tier, with prefix caching only (what it stores is cached blocks).
        self.offload: HostOffload | None = None
        # The scheduler's host lookup of a waiting request it considers (None: no host tier).
        self.host_lookup: Callable[[Request, PrefixMatch, float], int] | None = None
        host = args.native_host_offload
        if host is not None and args.enable_prefix_caching:
            self.offload = HostOffload(host.num_host_blocks,
                                       args.block_size * args.kv_cache_bytes_per_token,
                                       host.d2h_bandwidth_gbps, host.h2d_bandwidth_gbps,
                                       lambda at_ms: hooks.on_wakeup(self, at_ms))
            self.prefix_view = OffloadView(self.cache, self.offload.tier)
            # A block evicted while a host store still reads it fences the pass reusing it.
            self.cache.store_sources = self.offload.tier.storing
            self.host_lookup = partial(self.offload.lookup, self)
        self.max_burst = 1 + (args.aic_nextn or 0)
        self.head_runs = (self.prompt_runs and head_runs and self.sampler is None
                          and self.offload is None)
        # Decode runs are possible at all (``_try_run``'s first test, fixed from here on).
        self._may_run = not role.hands_off and decode_runs and self.sampler is None
        self.batch = Batch()
        # The batch's requests in batch order (the batch owns the list).
        self.running: list[Request] = self.batch.reqs
        self.waiting: deque[Request] = deque()
        self.queued = QueueTotals()
        self.busy = False
        # Nothing can run until a host transfer in flight lands (``wake``) or a request arrives.
        self.stalled = False
        # The pass being composed: its number, tokens granted, whether a grant was undone.
        self.pass_no = 0
        self.pass_tokens = 0
        self.pass_undone = False
        self.preemptions = 0
        # The pass being composed or in flight: requests granted tokens one by one, and the
        # row slices granted one decode token each in a vector step (``grant_decoding``);
        # then the requests that emit one by one (batch order) and those slices.
        self._granted: list[Request] = []
        self._slices: list[tuple[int, int]] = []
        self._emit: list[Request] = []
        self._run: DecodeRun | PromptRun | None = None
        self._last_pass: PassRecord | None = None
        # Completed passes since the planner host last took them; a decode run's first
        # ``_run_taken`` passes are already in it.
        self.passes: PassWindow | None = None
        if pass_window:
            from plansim.sim.pass_window import PassWindow

            self.passes = PassWindow()
        else:
            # Nothing reads a pass's record without a window: one placeholder stands for all.
            self._record = _unrecorded
        self._run_taken = 0

    # ---------------------------------------------------------------- host interface

    def enqueue(self, req: Request) -> bool:
        """Queue a request; False (and rejected through hooks) when it can never run here."""
        if req.isl + 1 > self.total_kv_tokens:
            reason: str | None = "prompt_exceeds_kv_pool"
        else:
            reason = self.policy.refusal(req)
        if reason is not None:
            self.hooks.on_reject(self, req, reason)
            return False
        self.stalled = False
        self._wait(req, left=False)
        return True

    def wake(self, now: float) -> None:
        """Time ``now`` asked for by ``on_wakeup``: requests whose host transfer landed rejoin
        the waiting queue."""
        self.stalled = False
        if self.offload is not None:
            self.offload.settle(self, now)

    def has_work(self) -> bool:
        return not self.stalled and bool(self.running or self.waiting)

    def cached_blocks(self, keys: list[int]) -> int:
        return self.cache.cached_run(keys)

    def holds_requests(self) -> bool:
        return bool(self.running or self.waiting or (self.offload is not None
                                                     and self.offload.held))

    def evacuate(self) -> list[Request]:
        """Take every request off the rank, whose worker is gone (preempted), between passes:
        the running ones in batch order, then the waiting ones, then those held back for a host
        transfer. The rank never runs again, so its KV pool and queue totals are left as
        they are."""
        out = [*self.running, *self.waiting]
        if self.offload is not None:
            out += [held[1] for held in self.offload.held]
            self.offload.held = []
        self.running.clear()
        self.waiting.clear()
        return out

    def start_pass(self, now: float) -> float:
        """Schedule one pass (or a run of passes) starting at ``now``; returns its end time as
        the clock reaches it, pass end after pass end (both virtual ms)."""
        self.busy = True
        offload = self.offload
        if offload is not None:
            offload.settle(self, now)
        end = None
        if self.running:  # a run needs running requests (an idle rank's start admits first)
            end = self._try_run(now)
            if end is None and self.prompt_runs:
                end = self._try_prompt_run(now)
        if end is not None:
            # A run's last end is already the clock's, pass end after pass end (``now + (end -
            # now)`` on it could be a float off when the run lasts longer than ``now``).
            return end
        end = self._single_pass(now)
        while (not self._emit and not self._slices and not self.pass_tokens
               and not self.running and self.waiting):
            if offload is not None and offload.held:
                # The head waits for device blocks that loads in flight hold: the rank
                # idles until a transfer lands.
                self.stalled = True
                break
            # Nothing runs and the head cannot start: it never will, so it must not stall
            # the rank (a replay never hangs).
            stuck = self._unwait(self.waiting[0])
            if offload is not None:
                offload.dropped(stuck, self.cache)
            self.hooks.on_reject(self, stuck, "cannot_be_scheduled")
            end = self._single_pass(now)
        end = now + (end - now)  # the pass end as the clock reaches it
        if self.head_runs:
            run_end = self._try_run(end, head=True)
            if run_end is not None:
                return run_end
        return end

    def interrupt(self, t: float) -> float | None:
        """An arrival at ``t`` (virtual ms) during a decode run: keep the passes that started
        before ``t``. Returns the new end time (ms), or None when the run is unchanged."""
        run = self._run
        if run is None:
            return None
        ends = run.ends_ms
        k = len(ends)
        # Pass j starts at ends[j-1] (start for j=0); keep those starting strictly before t.
        kept = 1 + bisect_left(ends, t, 0, k - 1) if t > run.start_ms else 0
        if kept >= k:
            return None
        if kept == 0:
            if isinstance(run, DecodeRun) and run.head is not None:
                # Only the composed pass the run follows on from is under way.
                self._run = run.kept(0)
                return run.start_ms
            kept = 1  # the first pass is already running at its own start time
        self._run = run.kept(kept)
        return float(ends[kept - 1])

    def finish(self, now: float) -> None:
        """Apply the pass (or run) ending at ``now`` (virtual ms)."""
        self.busy = False
        cache = self.cache
        if cache.pending:  # only while it ``publishes`` (a router reads it)
            cache.publish()  # the router learns the pass's blocks now
        run = self._run
        if run is None:
            if self.passes is not None:
                self._count_pass(self._last_pass)
            self._finish_pass(now)
            return
        if type(run) is PromptRun:
            self._finish_prompt_run(now)
        else:
            self._finish_run()
        if cache.pending:
            cache.publish()

    def take_fpm(self, t: float) -> ForwardPassMetrics:
        """The rank's per-pass means over the passes completed since the previous call, with
        the waiting queue and the unfinished prompt tokens of running requests at virtual time
        ``t`` (ms); starts a new window. A decode run in flight contributes the passes that
        ended by ``t``."""
        run = self._run
        if run is not None and self.busy:
            done = bisect_right(run.ends_ms, t)
            if isinstance(run, DecodeRun) and run.head is not None and t >= run.start_ms:
                done += 1
            self._add_run_passes(done)
        if self.passes is None:
            raise RuntimeError("take_fpm: this rank keeps no pass window (pass_window=False)")
        mixed, decode_only = self.passes.take()
        b = self.batch
        n = len(self.running)
        rows = np.flatnonzero(b.computed[:n] < b.isl[:n]).tolist()
        running = self.running
        inflight = sum(int(b.isl[i] - b.computed[i]) for i in rows if not running[i].prebuilt)
        if isinstance(run, PromptRun) and self.busy:
            # The prompt's chunks granted by ``t``: those of the passes started before it (the
            # batch holds the prompt's state at the run's start).
            started = 1 + bisect_left(run.ends_ms, t, 0, len(run.chunks) - 1)
            inflight -= sum(run.chunks[:started])
        q = self.queued
        from plansim.planner_core.observations import ForwardPassMetrics

        return ForwardPassMetrics.from_window(
            self.worker_id, self.dp_rank, mixed, decode_only,
            queued=(q.prefill_requests, q.prefill_tokens, q.decode_requests, q.decode_kv_tokens),
            inflight_prefill_tokens=inflight)

    def _add_run_passes(self, upto: int) -> None:
        """Add the run's passes ``_run_taken .. upto - 1`` to the pass window (a decode run's
        head pass first)."""
        run = self._run
        lo = self._run_taken
        if upto <= lo or self.passes is None:
            return
        self._run_taken = upto
        if isinstance(run, PromptRun):
            for f in run.fpms[lo:upto]:
                self._count_pass(f)
            return
        if run.head is not None:
            if lo == 0:
                self._count_pass(run.head)
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
        self.passes.add_decode_passes(k, wall_ms / 1000.0, n * k, kv)

    def occupancy(self) -> RankOccupancy:
        cache = self.cache
        # Positional (running, waiting, queued_prefill_tokens, kv_usage): one a rank a sample.
        return RankOccupancy(len(self.running), len(self.waiting), self.queued.prefill_tokens,
                             cache.active / cache.num_blocks)

    # ---------------------------------------------------------------- policy interface

    def kv_available(self) -> int:
        return self.cache.available()

    def prefix_match(self, req: Request) -> PrefixMatch:
        bs = self.block_size
        L = req.isl + req.generated
        if req.prebuilt:
            keys = req.prompt_keys
            n_match, n_active = self.cache.match(keys)
            cached = min(n_match * bs, req.isl)
        else:
            keys = req.seq_keys(L // bs)
            n_match, n_active = self.cache.match(keys)
            cached = n_match * bs
            if cached >= L:
                # At least the last token is computed, to emit the next one.
                cached = ((L - 1) // bs) * bs
                n_match = cached // bs
            if self._speculative and n_match and self.policy.verifies_prefill:
                # The draft head needs the last cached block's hidden states: recompute it.
                n_match -= 1
                cached = n_match * bs
        return PrefixMatch(keys, n_match, n_active, -(-L // bs) - n_active, cached)

    def admit(self, req: Request, match: PrefixMatch, now: float) -> None:
        bs = self.block_size
        cache = self.cache
        self._unwait(req)
        n_match = match.n_match
        held = match.keys[:n_match]
        cache.acquire(held)
        req.held = held
        # Not in the batch yet: its state is in its attributes.
        req._n_blocks = n_match
        if req.prebuilt:
            # Transferred prompt KV: allocate and register what was not already cached.
            n_prompt = -(-req.isl // bs)
            fence = cache.allocate(n_prompt - n_match)
            if fence:
                self.offload.hold_compute(fence)
            req._n_blocks = n_prompt
            self._register(req, n_match, req.isl // bs)
        else:
            req._computed = match.cached_tokens
        self.batch.add(req)
        if self.offload is not None:
            self.offload.admitted(req, cache, match.cached_tokens, bs)
        self.hooks.on_admit(self, req, now, match.cached_tokens)

    def grant(self, req: Request, n: int) -> bool:
        # ``req`` runs: its state is read and written in its batch row (the attributes would do
        # the same through a property call each).
        bs = self.block_size
        cache = self.cache
        b = self.batch
        row = req._row
        before = b.computed.item(row)
        reach = before + n
        if self.sampler is not None and reach == b.known.item(row):
            # A verification pass writes KV for its drafts too: reserve room for the tokens it
            # may emit.
            lookahead = req.osl - req.generated
            if lookahead > self.max_burst:
                lookahead = self.max_burst
            if lookahead > 1:
                reach += lookahead - 1
        n_blocks = b.blocks.item(row)
        need = -(-reach // bs) - n_blocks
        if need > cache.available():
            running = self.running
            victim_of = self.policy.victim
            while need > cache.available():
                index = victim_of(running, req)
                victim = running[index]
                self.preemptions += 1
                if victim is req and len(running) == 1:
                    # Alone and still short of KV: this request can never finish here.
                    self.batch.remove([0])
                    self._release(req)
                    self.hooks.on_reject(self, req, "kv_pool_too_small_for_sequence")
                    return False
                self._preempt(victim, index)
                if victim is req:
                    return False
            row = req._row  # the rows behind a preempted request moved up
        if need > 0:
            fence = cache.allocate(need)
            if fence:
                self.offload.hold_compute(fence)
            b.blocks[row] = n_blocks + need
        after = before + n
        b.computed[row] = after
        if cache.prefix_caching:
            n_pk = len(req.prompt_keys)
            lo = before // bs
            hi = after // bs
            if lo < n_pk and hi > lo:
                self._register(req, lo, hi if hi < n_pk else n_pk)
        b.pass_no[row] = self.pass_no
        b.before[row] = before
        self.pass_tokens += n
        self._granted.append(req)
        return True

    def grant_decoding(self, start: int, budget: int) -> int:
        """One token each for the decoding requests of the batch from row ``start`` on, in
        one step (a vector step, or ``_grant_decoding_rows`` for a short slice): the rows up
        to the first that is not decoding (one known token left, prompt computed), at most
        ``budget`` of them, and only as many as the KV available can extend (a grant that
        would preempt is left to ``grant``). Returns the row after the last one granted
        (``start``: none). The same as ``grant(req, 1)`` row by row."""
        b = self.batch
        n = len(self.running)
        if not self.vector_grants or self.sampler is not None or budget <= 0:
            return start
        stop = n if n - start <= budget else start + budget
        if stop - start < soa.SCALAR_GRANT_ROWS or stop <= start:
            return start  # a few rows: ``grant`` one by one costs less than the vector step
        if stop - start < soa.SCALAR_ROWS:
            return self._grant_decoding_rows(start, stop)
        computed = b.computed[start:stop]
        decoding = (b.known[start:stop] - computed == 1) & (computed >= b.isl[start:stop])
        if not decoding[0]:
            return start
        # The first row not decoding (0: every one is, the first being so); argmin costs a
        # fraction of all().
        short = int(decoding.argmin())
        if short:
            stop = start + short
            computed = computed[:short]
        bs = self.block_size
        blocks = b.blocks[start:stop]
        # A decode token needs a new block exactly when the computed tokens fill the held ones.
        new = computed >= blocks * bs
        total = int(np.count_nonzero(new))
        cache = self.cache
        if total:
            avail = cache.available()
            if total > avail:
                # Stop before the first row whose block the pool cannot give without preempting.
                stop = start + int(np.searchsorted(np.cumsum(new), avail, side="right"))
                if stop == start:
                    return start
                new = new[:stop - start]
                computed = computed[:stop - start]
                blocks = blocks[:stop - start]
                total = int(np.count_nonzero(new))
            fence = cache.allocate(total)
            if fence:
                self.offload.hold_compute(fence)
            blocks += new
        b.before[start:stop] = computed
        computed += 1
        b.pass_no[start:stop] = self.pass_no
        self.pass_tokens += stop - start
        self._slices.append((start, stop))
        return stop

    def _grant_decoding_rows(self, start: int, stop: int) -> int:
        """``grant_decoding`` of rows ``start:stop`` in one loop over their lists (fewer rows
        than ``soa.SCALAR_ROWS``): the same rows granted, blocks allocated and state."""
        b = self.batch
        _, isl, _, computed, known, blocks, _, _ = b.columns(start, stop)
        bs = self.block_size
        avail = -1
        grown = []
        m = 0
        for i in range(stop - start):
            c = computed[i]
            if known[i] - c != 1 or c < isl[i]:
                break  # not decoding
            if c >= blocks[i] * bs:
                # A new block: stop before the first row the pool cannot give one without
                # preempting.
                if avail < 0:
                    avail = self.cache.available()
                if len(grown) == avail:
                    break
                grown.append(i)
            m += 1
        if not m:
            return start
        stop = start + m
        if grown:
            fence = self.cache.allocate(len(grown))
            if fence:
                self.offload.hold_compute(fence)
            rows = b.blocks
            for i in grown:
                rows[start + i] = blocks[i] + 1
        del computed[m:]
        b.before[start:stop] = computed
        b.computed[start:stop] = [c + 1 for c in computed]
        b.pass_no[start:stop] = self.pass_no
        self.pass_tokens += m
        self._slices.append((start, stop))
        return stop

    # ---------------------------------------------------------------- single pass

    def _single_pass(self, now: float) -> float:
        self.pass_no += 1
        self.pass_tokens = 0
        self.pass_undone = False
        self._granted = []
        self._slices = []
        preemptions = self.preemptions
        self.policy.compose(self, now)

        # Prefill and decode batches of this pass.
        pass_no = self.pass_no
        b = self.batch
        slices = self._slices
        if self.preemptions != preemptions:
            # Requests left the batch while it was composed: row slices moved; every granted
            # request is counted one by one.
            n = len(self.running)
            rows = np.flatnonzero(b.pass_no[:n] == pass_no).tolist()
            running = self.running
            granted = [running[i] for i in rows]
            slices = []
        else:
            granted = self._granted
            if len(granted) > 1:
                granted = sorted({id(r): r for r in granted if r._batch is not None}.values(),
                                 key=lambda r: r._row)
        prefill_timed = self._prefill_timed
        sampler = self.sampler
        offload = self.offload
        verifies = sampler is not None and self.policy.verifies_prefill
        draws: list[bool] = []
        stores: list[Request] = []
        count = total_isl = total_prefix = 0
        emit: list[Request] = []
        n_dec = kv_dec = 0
        sum_prefill_tokens = 0
        # Every granted request runs: its state is read from its batch row.
        pass_nos, befores, computeds, knowns = b.pass_no, b.before, b.computed, b.known
        for req in granted:
            row = req._row
            if pass_nos.item(row) != pass_no:
                continue
            isl = req.isl
            before = befores.item(row)
            prefix = before if before < isl else isl
            computed = computeds.item(row)
            prompt = (computed if computed < isl else isl) - prefix
            if offload is not None and req.stored_blocks < len(req.prompt_keys):
                stores.append(req)
            if prompt > 0 and prefill_timed:
                count += 1
                total_isl += prefix + prompt
                total_prefix += prefix
                sum_prefill_tokens += prompt
            length = knowns.item(row)
            if computed >= length:
                emit.append(req)
                if sampler is not None:
                    # A prompt's own pass verifies drafts only where the backend does so.
                    draws.append(verifies or prompt == 0 or not prefill_timed)
                # With speculative decoding a request finishing its prompt also runs the
                # verification step in this pass. A preempted request recomputing its output
                # past the prompt is timed as a decode too where the policy says so.
                if (prompt == 0 or not prefill_timed or verifies
                        or (length > isl and self.policy.recompute_decodes)):
                    n_dec += 1
                    kv_dec += length
        for lo, hi in slices:
            # Decoding rows: every one emits and is timed as a decode.
            n_dec += hi - lo
            kv_dec += int(np.add.reduce(b.known[lo:hi]))
        mean_isl = mean_prefix = new_tokens = 0
        if count:
            mean_isl = total_isl // count
            mean_prefix = total_prefix // count
            new_tokens = count * (mean_isl - mean_prefix)
        prefill_ms, decode_ms = self._pass_ms(count, new_tokens, mean_isl, mean_prefix, n_dec,
                                              kv_dec)
        start = now
        if offload is not None and offload.not_before_ms > now:
            # The pass reuses blocks host stores still read (or a preempted request's).
            start = offload.not_before_ms
        end = start + prefill_ms + decode_ms
        for req in stores:
            # Prompt blocks computed by the pass's end are offered to the host as it is
            # scheduled (vLLM's connector prepares stores then) and copied from its end.
            offload.store(req, self.block_size, end, now)
        if sampler is not None:
            self._bursts = self._draw_bursts(emit, draws)
        self._emit = emit
        self._slices = slices
        self._granted = []
        self._run = None
        self._last_pass = self._record((end - now) / 1000.0, count, sum_prefill_tokens, n_dec,
                                       kv_dec)
        return end

    def _pass_ms(self, count: int, new_tokens: int, mean_isl: int, mean_prefix: int,
                 n_dec: int, kv_dec: int) -> tuple[float, float]:
        """(prefill ms, decode ms) of a pass: ``count`` prompts computing ``new_tokens`` (their
        mean length and cached prefix), ``n_dec`` decoding requests over ``kv_dec`` tokens; each
        part divided by its speedup and quantised."""
        prefill_ms = 0.0
        if count and self.prefill_div > 0:
            prefill_ms = _q(self.timing.prefill_ms(new_tokens, count, mean_isl, mean_prefix)
                            / self.prefill_div)
        decode_ms = 0.0
        if n_dec and self._decode_timed and self.decode_div > 0:
            if count and self._mixed_decode is not None:
                raw = self._mixed_decode(n_dec, kv_dec, kv_dec // n_dec, self.total_kv_tokens,
                                         new_tokens)
            else:
                raw = self.timing.decode_ms(n_dec, kv_dec, kv_dec // n_dec, self.total_kv_tokens)
            decode_ms = _q(raw / self.decode_div)
        return prefill_ms, decode_ms

    def _register(self, req: Request, lo: int, hi: int) -> None:
        self.cache.register(req.prompt_keys[lo:hi], req.held)

    def _preempt(self, victim: Request, index: int) -> None:
        if victim.pass_no == self.pass_no:
            # Give its grant in this pass back.
            self.pass_tokens -= victim.computed - victim.computed_before
            victim.computed = victim.computed_before
            victim.pass_no = -1
            self.pass_undone = True
        self.batch.remove([index])
        self._release(victim)
        victim.computed = 0
        victim.preempted = True
        if self.offload is not None:
            self.offload.preempted(victim)
        self._wait(victim, left=True)

    def _release(self, req: Request) -> None:
        """Return all of ``req``'s KV blocks; full generated blocks stay cached (inactive)."""
        bs = self.block_size
        held = req.held
        # Generated blocks re-acquired after a preemption are already among the held keys.
        start = len(req.prompt_keys)
        i = len(held) - 1
        while i >= 0 and held[i] < 0:
            start += 1
            i -= 1
        # The request has left the batch: its state is in its attributes.
        n_private = req._n_blocks - len(held)
        # Its full generated blocks, at most one per private block.
        full = min(req._computed // bs, start + n_private)
        self.cache.release(held, n_private, gen_keys(req.rid, start, full))
        req.held = []
        req._n_blocks = 0

    def _draw_bursts(self, emit: list[Request], draws: list[bool]) -> list[int]:
        """Tokens each emitting request emits this pass: ``1 + accepted drafts`` (drawn, in
        batch order, for the requests whose pass verifies drafts; 1 for the others), clipped to
        its output left and to the KV reserved for it."""
        sampler = self.sampler
        bs = self.block_size
        bursts = []
        for req, draw in zip(emit, draws):
            k = sampler.tokens() if draw else 1
            left = req.osl - req.generated
            if k > left:
                k = left
            # Only drafts whose KV was reserved can be kept (``grant`` reserves the burst).
            while k > 1 and -(-(req.computed + k - 1) // bs) > req.n_blocks:
                k -= 1
            bursts.append(k)
        return bursts

    def _finish_pass(self, end: float) -> None:
        emit = self._emit
        slices = self._slices
        self._emit = []
        self._slices = []
        if not emit and not slices:
            return
        if self.sampler is not None:
            self._finish_burst(emit, end)
            return
        b = self.batch
        hands_off = self._hands_off
        # The requests emitting one by one: each one's known length (its row) one longer; done
        # when its output is (every one, for a prefill worker handing off).
        known = b.known
        rids = []
        rows = []
        for req in emit:
            row = req._row
            length = known.item(row) + 1
            known[row] = length
            rids.append(req.rid)
            if hands_off or length - req.isl >= req.osl:
                rows.append(row)
        if slices:
            parts = []
            total = b.total
            for lo, hi in slices:
                grown = known[lo:hi]
                grown += 1
                parts.append(b.rid[lo:hi])
                if hands_off:
                    rows.extend(range(lo, hi))
                else:
                    done = np.flatnonzero(grown >= total[lo:hi])
                    if done.shape[0]:
                        rows.extend((done + lo).tolist())
            if rids:
                parts.append(np.array(rids, dtype=np.int64))
            rids = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self.hooks.on_tokens(self, rids, end)
        if rows:
            rows.sort()
            self._finish(rows, end)

    def _finish_burst(self, emit: list[Request], end: float) -> None:
        """A speculative pass's tokens: each request's accepted drafts are computed KV too."""
        bs = self.block_size
        cache = self.cache
        bursts = self._bursts
        for req, k in zip(emit, bursts):
            req.generated += k
            req.computed += k - 1
            # The blocks reserved for rejected drafts go back (the KV of the last emitted token
            # is computed by the next pass).
            spare = req.n_blocks - -(-req.computed // bs)
            if spare > 0:
                cache.release((), spare, ())
                req.n_blocks -= spare
        self.hooks.on_tokens(self, [r.rid for r in emit], end, bursts)
        done = emit if self._hands_off else [r for r in emit if r.generated >= r.osl]
        if done:
            self._finish([r._row for r in done], end)

    def _finish(self, rows: list[int], end: float) -> None:
        """The requests of ``rows`` (ascending) emitted their last token at ``end``: they leave
        the batch and free their KV, in batch order."""
        running = self.running
        done = [running[i] for i in rows]
        self.batch.remove(rows)
        for req in done:
            self._release(req)
            self.hooks.on_complete(self, req, end)

    # ---------------------------------------------------------------- decode runs

    def _try_run(self, now: float, head: bool = False) -> float | None:
        """Start a run of at least two decode-only passes at ``now`` if nothing can change
        during it. ``head``: the run follows on from the pass just composed, which ends at
        ``now`` (its tokens not yet emitted: every request must emit one in it)."""
        if not self._may_run:
            return None
        offload = self.offload
        if offload is not None and offload.not_before_ms > now:
            return None  # the next pass waits for host stores
        b = self.batch
        n = len(self.running)
        if n == 0:
            return None
        if head:
            emitting = len(self._emit)
            for lo, hi in self._slices:
                emitting += hi - lo
            if emitting != n:
                return None
        # With requests waiting, the policy first (it admits the head, the usual failure, with
        # no need to look at the rows); else after the rows (it then costs little).
        waiting = bool(self.waiting)
        if waiting and not self.policy.steady_decode(self):
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
            k = self._decoding_left(isl, total, computed, known_list, n, d)
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
        if k < 2 or (not waiting and not self.policy.steady_decode(self)):
            return None
        bs = self.block_size
        avail = self.cache.available()
        if offload is not None and offload.tier.d2h.tail_ms > now:
            # Evicting a block a host store still reads would fence a pass of the run: the run
            # takes only free blocks.
            avail = self.cache.free_blocks()
        if n * (k // bs + 1) > avail:
            # KV may run short: pass j needs a new block for request i when
            # L_i + j > n_blocks_i * bs.
            k = self._kv_limit(b.blocks[:n] * bs - b.known[:n] + (0 if head else 1), avail, k,
                               bs)
            if k < 2:
                return None
        times = self._run_times if k <= soa.SCALAR_PASSES else self._run_times_array
        dts, ends = times(now, n, sum_len, k)
        self._run_taken = 0
        if head:
            self._run = DecodeRun(n, sum_len, ends, dts, now, self._last_pass, columns)
        else:
            self._run = DecodeRun(n, sum_len, ends, dts, now, None, columns)
            self._emit = []
            self._slices = []
        return float(ends[-1])

    def _run_times(self, now: float, n: int, kv0: int, k: int) -> tuple[list[float], list[float]]:
        """(pass times, pass ends) of a decode run of ``k`` passes of ``n`` requests from
        ``now``, ``kv0`` tokens long in all at the start, in plain Python: the passes taken from
        the decode table, or timed by the model's ``decode_ms`` pass by pass and quantised as
        ``decode_table.quantised`` does, the ends summed one by one as the clock would (the same
        floats as the array path)."""
        div = self.decode_div
        if div <= 0:
            return [0.0] * k, [now] * k
        table = self._decode_table
        if table is not None:
            dts = table.run(kv0, n, k).tolist()
            ends = list(accumulate(dts, initial=now))
            del ends[0]
            return dts, ends
        total = self.total_kv_tokens
        decode_ms = self.timing.decode_ms
        raws = [decode_ms(n, kv, kv // n, total) for kv in range(kv0, kv0 + k * n, n)]
        dts = []
        ends = []
        t = now
        for raw in raws:
            dt = round(raw / div * _NS) / _NS  # _q(raw / div), without a call per pass
            dts.append(dt)
            t += dt
            ends.append(t)
        return dts, ends

    def _run_times_array(self, now: float, n: int, kv0: int,
                         k: int) -> tuple[np.ndarray, np.ndarray]:
        """``_run_times`` as arrays, for long runs: the same floats."""
        div = self.decode_div
        table = self._decode_table
        if table is not None:
            dts = table.run(kv0, n, k)
        elif div <= 0:
            dts = np.zeros(k)
        else:
            # Pass j: every request one token longer than at pass j - 1.
            kv = np.arange(kv0, kv0 + k * n, n, dtype=np.int64)
            raw = self.timing.decode_ms_bulk(np.full(k, n), kv, kv // n, self.total_kv_tokens)
            dts = decode_table.quantised(raw, div)
        # The clock's sums, pass end after pass end: now + dts[0], then + dts[1], ...
        ends = dts.copy()
        ends[0] += now
        np.add.accumulate(ends, out=ends)  # cumsum's sequential sums, without its wrapper
        return dts, ends

    @staticmethod
    def _decoding_left(isl: list[int], total: list[int], computed: list[int],
                       known: list[int], rows: int, ahead: int = 0) -> int | None:
        """The fewest tokens any of the first ``rows`` rows (``Batch.columns``) has left to
        emit when every one of them is decoding (one known token left, past the first token),
        each ``ahead`` tokens longer than ``known`` says (a pass's tokens not yet emitted);
        None when one is not; ``1 << 30`` for no rows."""
        k = 1 << 30
        for i in range(rows):
            L = known[i] + ahead
            if computed[i] != L - 1 or L <= isl[i]:
                return None
            if total[i] - L < k:
                k = total[i] - L
        return k

    @staticmethod
    def _kv_limit(first_need: np.ndarray, avail: int, k: int, bs: int) -> int:
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

    def _finish_run(self) -> None:
        run = self._run
        ends = run.ends_ms
        m = len(ends)
        head = run.head is not None
        if self.passes is not None:
            self._add_run_passes(m + 1 if head else m)
        self._run = None
        first_ms = None
        if head:
            if not m:
                # Cut to the composed pass alone.
                self._finish_pass(run.start_ms)
                self._last_pass = run.head
                return
            # Every request emits in the composed pass too: its tokens are the run's first, at
            # its end (the run's start).
            self._emit = []
            self._slices = []
            first_ms = run.start_ms
        n = run.n
        b = self.batch
        bs = self.block_size
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
                if L >= total[i]:
                    rows.append(i)
            if new_blocks:
                b.blocks[:n] = blocks
                self.cache.allocate(new_blocks)
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
                self.cache.allocate(new_blocks)
            b.computed[:n] = L
            known += m
            rows = np.flatnonzero(known >= b.total[:n]).tolist()
            rids = b.rid[:n]  # read by the hook before any row leaves the batch
        end = float(ends[-1])
        kv = run.kv0_tokens + (m - 1) * n
        self._last_pass = self._record(float(run.dts_ms[-1]) / 1000.0, 0, 0, n, kv)
        self.policy.decode_run(m)
        self.hooks.on_run(self, rids, ends, first_ms)
        if rows:
            self._finish(rows, end)

    # ---------------------------------------------------------------- prompt runs

    def _try_prompt_run(self, now: float) -> float | None:
        """Start a run of at least two passes in which the last running request's prompt
        takes the policy's steady chunk each pass (the last chunk too, if the policy says it
        admits nothing) while every other running request decodes one token, if nothing else
        can change during it: no completion before its last pass, no preemption, no offload
        or speculative decoding. Batches under ``SCALAR_ROWS`` rows (the run is planned row by
        row)."""
        if self.sampler is not None or self.offload is not None:
            return None
        b = self.batch
        n = len(self.running)
        if n == 0 or n >= soa.SCALAR_ROWS:
            return None
        p = n - 1
        last = self.running[p]
        c0 = b.computed.item(p)
        if b.known.item(p) != last.isl or c0 >= last.isl - 1 or last.prebuilt:
            return None  # the last request is not a fresh prompt with chunks to go
        _, isl, total, computed, known, blocks, _, _ = b.columns()
        k_dec = self._decoding_left(isl, total, computed, known, p)
        if k_dec is None:
            return None
        chunk, last_admits_nothing = self.policy.steady_prompt(self)
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
        bs = self.block_size
        avail = self.cache.available()
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
            prefill_ms, decode_ms = self._pass_ms(1, c, before + c, before, m, kv)
            end = start + prefill_ms + decode_ms
            fpms.append(self._record((end - start) / 1000.0, 1, c, m, kv))
            dts.append(end - start)
            # The next pass starts when the clock reaches this one's end, as the host
            # schedules it.
            start = start + (end - start)
            ends.append(start)
            before += c
        self._run = PromptRun(n, kv0, tuple(chunks), ends, dts, tuple(fpms), now)
        self._run_taken = 0
        self._emit = []
        self._slices = []
        return ends[-1]

    def _finish_prompt_run(self, now: float) -> None:
        run = self._run
        self._add_run_passes(len(run.chunks))
        self._run = None
        b = self.batch
        bs = self.block_size
        cache = self.cache
        n = run.n
        p = n - 1
        prompt = self.running[p]
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
                self._register(prompt, lo, hi if hi < n_pk else n_pk)
        m = len(run.chunks)
        b.blocks[:n] = blocks
        b.computed[:p] = [L + m - 1 for L in known[:p]]
        b.known[:p] = [L + m for L in known[:p]]
        b.computed[p] = before
        # Tokens are stamped at the clock's time, as a pass's are.
        end = now
        ends = run.ends_ms.copy()
        ends[-1] = now
        self._last_pass = run.fpms[-1]
        if p:
            self.hooks.on_run(self, rid[:p], ends, None)
        rows = [i for i in range(p) if known[i] + m >= total[i]]
        if before >= isl[p]:
            # The last chunk: the prompt's first token.
            b.known[p] = known[p] + 1
            self.hooks.on_tokens(self, rid[p:], end)
            if known[p] + 1 >= total[p]:
                rows.append(p)
        if rows:
            self._finish(rows, end)

    # ---------------------------------------------------------------- queue and metrics

    def requeue(self, req: Request) -> None:
        """Put a request held back by the host offload back at the head of the queue."""
        self._wait(req, left=True)

    def unqueue(self, req: Request) -> None:
        """Hold a waiting request back (host offload): it leaves the queue until ``requeue``."""
        self._unwait(req)

    def _wait(self, req: Request, *, left: bool) -> None:
        q = self.queued
        if req.preempted or req.prebuilt:
            q.decode_requests += 1
            q.decode_kv_tokens += req.isl + req.generated
        else:
            q.prefill_requests += 1
            q.prefill_tokens += req.isl
        if left:
            self.waiting.appendleft(req)
        else:
            self.waiting.append(req)

    def _unwait(self, req: Request) -> Request:
        """Take ``req`` out of the waiting queue (the head, unless a policy admits out of
        order)."""
        waiting = self.waiting
        if waiting[0] is req:
            waiting.popleft()
        else:
            waiting.remove(req)
        q = self.queued
        if req.preempted or req.prebuilt:
            q.decode_requests -= 1
            q.decode_kv_tokens -= req.isl + req.generated
        else:
            q.prefill_requests -= 1
            q.prefill_tokens -= req.isl
        return req

    def _record(self, wall_s: float, n_prefill: int, prefill_tokens: int, n_decode: int,
                decode_kv: int) -> PassRecord:
        """A pass's record (``_unrecorded`` stands in for it on ranks without a pass window)."""
        q = self.queued
        return PassRecord(wall_s, n_prefill, prefill_tokens, n_decode, decode_kv,
                          (q.prefill_requests, q.prefill_tokens, q.decode_requests,
                           q.decode_kv_tokens))

    def _count_pass(self, f: PassRecord) -> None:
        if self.passes is None:
            return
        self.passes.add_pass(f.wall_s, f.prefill_requests, f.prefill_tokens, f.decode_requests,
                             f.decode_kv_tokens)

    @property
    def last_fpm(self) -> ForwardPassMetrics | None:
        """The metrics of the rank's latest pass (of a run: its last), with the waiting queue as
        that pass was scheduled; None before any. Kept with the pass window only."""
        if self.passes is None:
            raise RuntimeError("last_fpm: this rank keeps no pass window (pass_window=False)")
        f = self._last_pass
        if f is None:
            return None
        qpr, qpt, qdr, qdk = f.queued
        from plansim.planner_core.observations import ForwardPassMetrics

        return ForwardPassMetrics(
            worker_id=self.worker_id, dp_rank=self.dp_rank, wall_time_s=f.wall_s,
            num_prefill_requests=f.prefill_requests, sum_prefill_tokens=f.prefill_tokens,
            num_decode_requests=f.decode_requests, sum_decode_kv_tokens=f.decode_kv_tokens,
            queued_prefill_requests=qpr, queued_prefill_tokens=qpt, queued_decode_requests=qdr,
            queued_decode_kv_tokens=qdk)
