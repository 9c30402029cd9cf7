"""One engine rank: a vLLM-style scheduler over a KV block pool, advanced pass by pass on the
virtual clock, with runs of decode-only passes advanced in one step.

Pass rules (reference mocker, vLLM core):

1. Token budget ``max_num_batched_tokens``. Running requests are scheduled first, in order, each
   taking ``min(remaining known tokens, budget)``: a prompt chunk, or 1 token for a decode.
   Without chunked prefill, a prompt whose remainder exceeds the budget blocks the pass.
2. KV for the scheduled tokens is allocated (free blocks, then LRU eviction of inactive cached
   blocks). On shortage a running request is preempted (``lifo``: newest, ``fifo``: oldest): it
   releases its KV, its computed tokens reset to 0 and it goes back to the head of the waiting
   queue; if it was already scheduled in this pass its work is undone.
3. If nothing was preempted, waiting requests are admitted in order while ``running <
   max_num_seqs`` and budget remains; admission needs KV for the whole known sequence, counting
   only *active* cached prefix blocks as present. The cached prefix (active or inactive blocks)
   is not recomputed; at least the last token always is.
4. Prefill time from the requests that scheduled prompt tokens: ``T = count * (mean_isl -
   mean_prefix)`` new tokens (integer means), divided by ``speedup_ratio``; 0 on decode workers.
5. Every scheduled request whose computed tokens reach its known length emits one token.
   Decode time from those that scheduled no prompt tokens (batch, KV tokens = sum of their
   lengths, mean context), divided by ``speedup_ratio * decode_speedup_ratio``; 0 on prefill
   workers (their one token is part of the prefill pass). In a pass that also prefills, a
   timing model with ``mixed_decode_ms`` gives the decode share instead.
6. Pass end = start + prefill + decode, each rounded to whole nanoseconds as the reference's
   durations are. Tokens are stamped at the pass end.

Decode runs: when every running request is decoding, no waiting request can be admitted before a
completion, and KV suffices, the passes up to the first completion are timed with numpy in one
step. An arrival during the run truncates it after the pass in flight (``interrupt``), so the
arrival joins the next pass exactly as in pass-by-pass simulation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from plansim.planner_core.observations import ForwardPassMetrics
from plansim.sim.kv import KvCache, gen_key
from plansim.sim.pass_window import PassWindow
from plansim.sim.timing import TimingModel

_NS = 1e6  # ns per ms


def _q(ms: float) -> float:
    """Round a duration to whole nanoseconds, as the reference's ``Duration`` does."""
    return round(ms * _NS) / _NS


class Request:
    """A request's state on one rank. ``generated`` counts tokens emitted on this rank;
    ``prebuilt``: its prompt KV came from a prefill worker."""

    __slots__ = ("rid", "isl", "osl", "prompt_keys", "held", "n_blocks", "computed", "generated",
                 "prebuilt", "preempted")

    def __init__(self, rid: int, isl: int, osl: int, prompt_keys: list[int], *,
                 prebuilt: bool = False) -> None:
        self.rid = rid
        self.isl = isl
        self.osl = osl
        self.prompt_keys = prompt_keys
        self.held: list[int] = []
        self.n_blocks = 0
        # A transferred prompt arrives computed but for its last token, whose pass on the
        # decode worker emits the first visible token (the prefill worker's token is internal).
        self.computed = isl - 1 if prebuilt else 0
        self.generated = 0
        self.prebuilt = prebuilt
        self.preempted = False

    def seq_keys(self, n_full: int) -> list[int]:
        """Keys of the first ``n_full`` full blocks of the known sequence."""
        pk = self.prompt_keys
        if n_full <= len(pk):
            return pk[:n_full]
        return pk + [gen_key(self.rid, b) for b in range(len(pk), n_full)]


class EngineHooks:
    """What a rank reports to the host. The host supplies these callables."""

    __slots__ = ("on_admit", "on_tokens", "on_complete", "on_reject", "on_run")

    def __init__(self, on_admit: Callable[..., None], on_tokens: Callable[..., None],
                 on_complete: Callable[..., None], on_reject: Callable[..., None],
                 on_run: Callable[..., None]) -> None:
        self.on_admit = on_admit          # (rank, req, now_ms, reused_tokens)
        self.on_tokens = on_tokens        # (rank, reqs, end_ms) one pass's tokens
        self.on_complete = on_complete    # (rank, req, end_ms)
        self.on_reject = on_reject        # (rank, req, reason)
        self.on_run = on_run              # (rank, reqs, ends, dts) a finished decode run


class Rank:
    """One data-parallel rank of one worker. ``role``: ``aggregated``, ``prefill`` or
    ``decode``. The host calls ``start_pass(now)`` when the rank is idle and has work, and
    ``finish(now)`` at the end time it returned; ``interrupt(t)`` when an arrival reaches the
    rank during a decode run."""

    def __init__(self, worker_id: int, dp_rank: int, args: Any, timing: TimingModel,
                 hooks: EngineHooks, *, decode_runs: bool = True) -> None:
        self.worker_id = worker_id
        self.dp_rank = dp_rank
        self.role = args.role
        self.block_size = args.block_size
        self.budget = args.max_num_batched_tokens
        self.max_seqs = args.max_num_seqs
        self.chunked = args.enable_chunked_prefill
        self.lifo = args.preemption_mode == "lifo"
        self.max_model_len = args.max_model_len
        self.total_kv_tokens = args.num_gpu_blocks * args.block_size
        self.prefill_div = args.speedup_ratio
        self.decode_div = args.speedup_ratio * args.decode_speedup_ratio
        self.timing = timing
        # Timing models that know a mixed pass shares one weights pass (see sim.timing).
        self._mixed_decode = getattr(timing, "mixed_decode_ms", None)
        self.cache = KvCache(args.num_gpu_blocks, args.block_size, args.enable_prefix_caching)
        self.hooks = hooks
        self.decode_runs = decode_runs
        self.running: list[Request] = []
        self.waiting: deque[Request] = deque()
        # Waiting-queue totals, kept as requests enter and leave it (for pass metrics):
        # [fresh prompts, their tokens, preempted or transferred requests, their KV tokens].
        self._queued = [0, 0, 0, 0]
        self.busy = False
        # The pass in flight: emitting requests, or a decode run's arrays.
        self._emit: list[Request] = []
        self._run: tuple[list[Request], np.ndarray, np.ndarray, float] | None = None
        self._scheduled_any = False
        self.last_fpm: ForwardPassMetrics | None = None
        # Completed passes since the planner host last took them; a decode run's first
        # ``_run_taken`` passes are already in it.
        self.passes = PassWindow()
        self._run_taken = 0

    # ---------------------------------------------------------------- host interface

    def enqueue(self, req: Request) -> bool:
        """Queue a request; False (and rejected through hooks) when it can never run here."""
        limit = self.total_kv_tokens
        if req.isl + 1 > limit:
            self.hooks.on_reject(self, req, "prompt_exceeds_kv_pool")
            return False
        if self.max_model_len is not None and req.isl >= self.max_model_len:
            self.hooks.on_reject(self, req, "prompt_exceeds_max_model_len")
            return False
        if not self.chunked and req.isl > self.budget:
            self.hooks.on_reject(self, req, "prompt_exceeds_batch_budget")
            return False
        if self.max_model_len is not None:
            req.osl = min(req.osl, self.max_model_len - req.isl)
        self._wait(req, left=False)
        return True

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    def start_pass(self, now: float) -> float:
        """Schedule one pass (or a decode run) starting at ``now``; returns its end time (both
        virtual ms)."""
        self.busy = True
        end = self._try_run(now)
        if end is None:
            end = self._single_pass(now)
            while not self._emit and not self._scheduled_any and not self.running and self.waiting:
                # Nothing runs and the head cannot start: it never will, so it must not stall
                # the rank (a replay never hangs).
                self.hooks.on_reject(self, self._unwait(), "cannot_be_scheduled")
                end = self._single_pass(now)
        return end

    def interrupt(self, t: float) -> float | None:
        """An arrival at ``t`` (virtual ms) during a decode run: keep the passes that started
        before ``t``. Returns the new end time (ms), or None when the run is unchanged."""
        run = self._run
        if run is None:
            return None
        reqs, ends, dts, start = run
        k = ends.shape[0]
        # Pass j starts at ends[j-1] (start for j=0); keep those starting strictly before t.
        kept = 1 + int(np.searchsorted(ends[:-1], t, side="left")) if t > start else 0
        if kept >= k:
            return None
        if kept == 0:
            kept = 1  # the first pass is already running at its own start time
        self._run = (reqs, ends[:kept], dts[:kept], start)
        return float(ends[kept - 1])

    def finish(self, now: float) -> None:
        """Apply the pass (or run) ending at ``now`` (virtual ms)."""
        self.busy = False
        if self._run is not None:
            self._finish_run()
        else:
            f = self.last_fpm
            self.passes.add_pass(f.wall_time_s, f.num_prefill_requests, f.sum_prefill_tokens,
                                 f.num_decode_requests, f.sum_decode_kv_tokens)
            self._finish_pass(now)

    def take_fpm(self, t: float) -> ForwardPassMetrics:
        """The rank's per-pass means over the passes completed since the previous call, with
        the waiting queue and the unfinished prompt tokens of running requests at virtual time
        ``t`` (ms); starts a new window. A decode run in flight contributes the passes that
        ended by ``t``."""
        run = self._run
        if run is not None and self.busy:
            done = int(np.searchsorted(run[1], t, side="right"))
            self._add_run_passes(done)
        mixed, decode_only = self.passes.take()
        inflight = sum(r.isl - r.computed for r in self.running
                       if not r.prebuilt and r.computed < r.isl)
        return ForwardPassMetrics.from_window(
            self.worker_id, self.dp_rank, mixed, decode_only, queued=tuple(self._queued),
            inflight_prefill_tokens=inflight)

    def _add_run_passes(self, upto: int) -> None:
        """Add the decode run's passes ``_run_taken .. upto - 1`` to the pass window."""
        reqs, ends, dts, _ = self._run
        lo = self._run_taken
        if upto <= lo:
            return
        n = len(reqs)
        k = upto - lo
        # Pass j's KV is every request's length at the run start plus j tokens each.
        kv0 = sum(r.isl + r.generated for r in reqs)
        kv = k * kv0 + n * (lo + upto - 1) * k // 2
        self.passes.add_decode_passes(k, float(dts[lo:upto].sum()) / 1000.0, n * k, kv)
        self._run_taken = upto

    # ---------------------------------------------------------------- single pass

    def _single_pass(self, now: float) -> float:
        bs = self.block_size
        cache = self.cache
        budget = self.budget
        running = self.running
        # rid -> (tokens, prompt tokens, prompt tokens before, computed before)
        scheduled: dict[int, tuple[int, int, int, int]] = {}
        preempted_any = False
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            out = self._schedule(req, budget, scheduled, running, i)
            if out is None:
                break
            used, undone, removed_before = out
            budget += undone
            if removed_before < 0:       # the request itself was preempted
                preempted_any = True
                continue
            if removed_before:
                preempted_any = True
                i -= removed_before
            budget -= used
            i += 1

        if not preempted_any:
            waiting = self.waiting
            while waiting and len(running) < self.max_seqs and budget > 0:
                req = waiting[0]
                L = req.isl + req.generated
                if req.prebuilt:
                    keys = req.prompt_keys
                    n_match, n_active = cache.match(keys)
                    need = -(-L // bs) - n_active
                    if need > cache.available():
                        break
                    cached = min(n_match * bs, req.isl)
                else:
                    keys = req.seq_keys(L // bs)
                    n_match, n_active = cache.match(keys)
                    need = -(-L // bs) - n_active
                    if need > cache.available():
                        break
                    cached = n_match * bs
                    if cached >= L:
                        cached = ((L - 1) // bs) * bs
                        n_match = cached // bs
                    if not self.chunked and req.isl - min(cached, req.isl) > budget:
                        break
                self._unwait()
                cache.acquire(keys[:n_match])
                req.held = keys[:n_match]
                req.n_blocks = n_match
                if req.prebuilt:
                    # Transferred prompt KV: allocate and register what was not already cached.
                    n_prompt = -(-req.isl // bs)
                    cache.allocate(n_prompt - n_match)
                    req.n_blocks = n_prompt
                    self._register(req, n_match, req.isl // bs)
                else:
                    req.computed = cached
                running.append(req)
                self.hooks.on_admit(self, req, now, cached)
                out = self._schedule(req, budget, scheduled, running, len(running) - 1)
                if out is None:
                    break
                used, undone, removed_before = out
                budget += undone
                if removed_before:
                    break
                budget -= used

        # Prefill and decode batches of this pass.
        count = total_isl = total_prefix = 0
        emit: list[Request] = []
        n_dec = kv_dec = 0
        sum_prefill_tokens = 0
        for req in running:
            work = scheduled.get(req.rid)
            if work is None:
                continue
            _, prompt, prefix, _ = work
            if prompt > 0 and self.role != "decode":
                count += 1
                total_isl += prefix + prompt
                total_prefix += prefix
                sum_prefill_tokens += prompt
            if req.computed >= req.isl + req.generated:
                emit.append(req)
                if prompt == 0 or self.role == "decode":
                    n_dec += 1
                    kv_dec += req.isl + req.generated
        prefill_ms = 0.0
        new_tokens = 0
        if count:
            mean_isl = total_isl // count
            mean_prefix = total_prefix // count
            new_tokens = count * (mean_isl - mean_prefix)
            if self.prefill_div > 0:
                prefill_ms = _q(self.timing.prefill_ms(new_tokens, count, mean_isl, mean_prefix)
                                / self.prefill_div)
        decode_ms = 0.0
        if n_dec and self.role != "prefill" and self.decode_div > 0:
            if count and self._mixed_decode is not None:
                raw = self._mixed_decode(n_dec, kv_dec, kv_dec // n_dec, self.total_kv_tokens,
                                         new_tokens)
            else:
                raw = self.timing.decode_ms(n_dec, kv_dec, kv_dec // n_dec, self.total_kv_tokens)
            decode_ms = _q(raw / self.decode_div)
        end = now + prefill_ms + decode_ms
        self._scheduled_any = bool(scheduled)
        self._emit = emit
        self._run = None
        self.last_fpm = self._fpm((end - now) / 1000.0, count, sum_prefill_tokens, n_dec, kv_dec)
        return end

    def _schedule(self, req: Request, budget: int, scheduled: dict, running: list[Request],
                  index: int) -> tuple[int, int, int] | None:
        """Schedule ``req`` (at ``running[index]``). Returns (tokens used, budget given back by
        undone preemptions, preempted-before count; -1 when ``req`` itself was preempted), or
        None when blocked."""
        bs = self.block_size
        cache = self.cache
        before = req.computed
        L = req.isl + req.generated
        prompt_before = before if before < req.isl else req.isl
        prompt_remaining = req.isl - prompt_before
        if prompt_remaining > 0 and not self.chunked and prompt_remaining > budget:
            return None
        n = L - before
        if n > budget:
            n = budget
        if n <= 0:
            return None
        need = -(-(before + n) // bs) - req.n_blocks
        undone = 0
        removed_before = 0
        while need > cache.available():
            victim_index = len(running) - 1 if self.lifo else 0
            victim = running[victim_index]
            if victim is req and len(running) == 1:
                # Alone and still short of KV: this request can never finish here.
                running.pop()
                self._release(req)
                self.hooks.on_reject(self, req, "kv_pool_too_small_for_sequence")
                return 0, undone, -1
            work = scheduled.pop(victim.rid, None)
            if work is not None:
                undone += work[0]
            self._preempt(victim, victim_index, work)
            if victim is req:
                return 0, undone, -1
            if victim_index < index:
                removed_before += 1
                index -= 1
        if need > 0:
            cache.allocate(need)
            req.n_blocks += need
        req.computed = before + n
        if cache.prefix_caching:
            n_pk = len(req.prompt_keys)
            lo = before // bs
            hi = req.computed // bs
            if lo < n_pk and hi > lo:
                self._register(req, lo, hi if hi < n_pk else n_pk)
        prompt_after = req.computed if req.computed < req.isl else req.isl
        scheduled[req.rid] = (n, prompt_after - prompt_before, prompt_before, before)
        return n, undone, removed_before

    def _register(self, req: Request, lo: int, hi: int) -> None:
        self.cache.register(req.prompt_keys[lo:hi], req.held)

    def _preempt(self, victim: Request, index: int, work: tuple | None) -> None:
        self.running.pop(index)
        if work is not None:
            victim.computed = work[3]
        self._release(victim)
        victim.computed = 0
        victim.preempted = True
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
        full = req.computed // bs
        cache_keys = [gen_key(req.rid, b) for b in range(start, full)] if full > start else []
        n_private = req.n_blocks - len(req.held)
        if len(cache_keys) > n_private:
            cache_keys = cache_keys[:n_private]
        self.cache.release(req.held, n_private, cache_keys)
        req.held = []
        req.n_blocks = 0

    def _finish_pass(self, end: float) -> None:
        emit = self._emit
        self._emit = []
        if not emit:
            return
        for req in emit:
            req.generated += 1
        self.hooks.on_tokens(self, emit, end)
        self._finish([r for r in emit if r.generated >= r.osl or self.role == "prefill"], end)

    def _finish(self, done: list[Any], end: float) -> None:
        """Requests that emitted their last token at ``end`` leave the batch and free their KV."""
        running = self.running
        for req in done:
            running.remove(req)
            self._release(req)
            self.hooks.on_complete(self, req, end)

    # ---------------------------------------------------------------- decode runs

    def _try_run(self, now: float) -> float | None:
        """Start a run of at least two decode-only passes if nothing can change during it."""
        if self.role == "prefill" or not self.decode_runs:
            return None
        running = self.running
        n = len(running)
        if n == 0 or n > self.budget:
            return None
        k = 1 << 30
        sum_len = 0
        for req in running:
            L = req.isl + req.generated
            # Decoding: one known token left, and past the first token (a prompt can also stop
            # one token short of its end, which is still prefill).
            if req.computed != L - 1 or req.generated == 0:
                return None
            rem = req.osl - req.generated
            if rem < k:
                k = rem
            sum_len += L
        if k < 2:
            return None
        bs = self.block_size
        cache = self.cache
        if self.waiting and n < self.max_seqs:
            head = self.waiting[0]
            L = head.isl + head.generated
            n_active = cache.match(head.prompt_keys if head.prebuilt else head.seq_keys(L // bs))[1]
            if -(-L // bs) - n_active <= cache.available():
                return None
        # KV shortage: pass j needs a new block for request i when L_i + j > n_blocks_i * bs.
        avail = cache.available()
        first_need = np.fromiter(((r.n_blocks * bs) - (r.isl + r.generated) + 1 for r in running),
                                 dtype=np.int64, count=n)
        k = self._kv_limit(first_need, avail, k, bs)
        if k < 2:
            return None
        j = np.arange(k, dtype=np.int64)
        kv = sum_len + j * n
        raw = self.timing.decode_ms_bulk(np.full(k, n), kv, kv // n, self.total_kv_tokens)
        if self.decode_div <= 0:
            dts = np.zeros(k)
        else:
            dts = np.round(raw / self.decode_div * _NS) / _NS
        ends = np.cumsum(np.concatenate(([now], dts)))[1:]
        self._run = (list(running), ends, dts, now)
        self._run_taken = 0
        self._emit = []
        return float(ends[-1])

    @staticmethod
    def _kv_limit(first_need: np.ndarray, avail: int, k: int, bs: int) -> int:
        """Largest run length <= k whose new blocks fit in ``avail``."""
        first_need = np.maximum(first_need, 0)
        if first_need.shape[0] * (k // bs + 1) <= avail:
            return k
        counts = np.where(first_need < k, (k - 1 - first_need) // bs + 1, 0)
        total = int(counts.sum())
        if total <= avail:
            return k
        need_at = np.concatenate([np.arange(f, k, bs) for f in first_need[counts > 0]])
        need_at.sort()
        # Pass need_at[avail] is the first that cannot allocate: stop before it.
        return int(need_at[avail])

    def _finish_run(self) -> None:
        self._add_run_passes(self._run[1].shape[0])
        reqs, ends, dts, start = self._run
        self._run = None
        m = ends.shape[0]
        bs = self.block_size
        cache = self.cache
        new_blocks = 0
        for req in reqs:
            L = req.isl + req.generated + m - 1
            need = -(-L // bs) - req.n_blocks
            if need > 0:
                new_blocks += need
                req.n_blocks += need
            req.computed = L
        if new_blocks:
            cache.allocate(new_blocks)
        end = float(ends[-1])
        n = len(reqs)
        kv = sum(r.isl + r.generated for r in reqs) + (m - 1) * n
        self.last_fpm = self._fpm(float(dts[-1]) / 1000.0, 0, 0, n, kv)
        self.hooks.on_run(self, reqs, ends, dts)
        for req in reqs:
            req.generated += m
        self._finish([r for r in reqs if r.generated >= r.osl], end)

    # ---------------------------------------------------------------- metrics

    def _wait(self, req: Request, *, left: bool) -> None:
        q = self._queued
        if req.preempted or req.prebuilt:
            q[2] += 1
            q[3] += req.isl + req.generated
        else:
            q[0] += 1
            q[1] += req.isl
        if left:
            self.waiting.appendleft(req)
        else:
            self.waiting.append(req)

    def _unwait(self) -> Request:
        req = self.waiting.popleft()
        q = self._queued
        if req.preempted or req.prebuilt:
            q[2] -= 1
            q[3] -= req.isl + req.generated
        else:
            q[0] -= 1
            q[1] -= req.isl
        return req

    def _fpm(self, wall_s: float, n_prefill: int, prefill_tokens: int, n_decode: int,
             decode_kv: int) -> ForwardPassMetrics:
        q_prefill, q_prefill_tokens, q_decode, q_decode_kv = self._queued
        return ForwardPassMetrics(
            worker_id=self.worker_id, dp_rank=self.dp_rank, wall_time_s=wall_s,
            num_prefill_requests=n_prefill, sum_prefill_tokens=prefill_tokens,
            num_decode_requests=n_decode, sum_decode_kv_tokens=decode_kv,
            queued_prefill_requests=q_prefill, queued_prefill_tokens=q_prefill_tokens,
            queued_decode_requests=q_decode, queued_decode_kv_tokens=q_decode_kv)

    def kv_usage(self) -> float:
        return self.cache.active / self.cache.num_blocks

    def queued_prefill_tokens(self) -> int:
        return self._queued[1]
