"""One engine rank: the mechanics of a scheduler over a KV block pool, advanced pass by pass on
the virtual clock, with runs of passes advanced in one step.

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
6. With ``async_scheduling`` (vLLM's async scheduling: the next step is scheduled while one
   runs) a request reaching a busy rank is not seen by the pass composed when the running one
   ends, only by the one after (a run stops after that pass); when nothing else would run, it
   joins that pass. Off: it joins the next pass (the reference).

Speculative decoding (``aic_nextn``, the rank's ``plansim.sim.speculative.Drafts``): a pass
emits ``1 + accepted drafts`` tokens per request (a prompt's own pass only if the policy
``verifies_prefill``, and then it is timed as a decode too); a cached prefix is reused minus its
last block (the draft head needs its hidden states); every pass is timed one by one.

The runs of passes a rank times in one step (decode, prompt and head runs) are its steps in
``plansim.sim.pass_runs``; its pass metrics are ``plansim.sim.pass_window``'s. Every end time a
rank returns is the one the clock reaches pass end after pass end (``start + (end - start)``
each pass), so a run ends at the very float its passes would.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from plansim.roles import Role
from plansim.sim import decode_grants, decode_table
from plansim.sim.batch import Batch, Request
from plansim.sim.engine_protocol import EngineHooks, RankOccupancy
from plansim.sim.host_offload import HostOffload, OffloadView
from plansim.sim.kv import KvCache, gen_keys
from plansim.sim.pass_runs import (
    DecodeRun,
    PromptRun,
    count_passes,
    finish_decode_run,
    finish_prompt_run,
    start_decode_run,
    start_prompt_run,
)
from plansim.sim.pass_window import PassRecord, PassWindow, QueueTotals, unrecorded
from plansim.sim.schedulers import PrefixMatch, SchedulerPolicy, make_scheduler
from plansim.sim.speculative import Drafts
from plansim.sim.timing import TimingModel

if TYPE_CHECKING:
    from plansim.planner_core.observations import ForwardPassMetrics

_NS = decode_table.NS_PER_MS


class Rank:
    """One data-parallel rank of one worker (an ``EngineRank``) with engine ``args``
    (``EngineArgs``), playing ``role`` (default: the args' role), scheduled by ``policy``
    (default: the registry's policy for ``args.engine_type``). ``decode_runs=False`` simulates
    every pass one by one, ``vector_grants=False`` grants every request its tokens one by one
    (both off: the reference mode the fast paths must reproduce; for tests)."""

    def __init__(
        self,
        worker_id: int,
        dp_rank: int,
        args: Any,
        timing: TimingModel,
        hooks: EngineHooks,
        *,
        policy: SchedulerPolicy | None = None,
        role: Role | None = None,
        decode_runs: bool = True,
        vector_grants: bool = True,
        prompt_runs: bool = False,
        head_runs: bool = False,
        pass_window: bool = True,
        stream: int = 0,
        decode_tables: dict | None = None,
    ) -> None:
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
        self._decode_table = decode_table.shared(
            {} if decode_tables is None else decode_tables,
            timing,
            self.total_kv_tokens,
            self.decode_div,
        )
        self.cache = KvCache(args.num_gpu_blocks, args.block_size, args.enable_prefix_caching)
        self.prefix_view = self.cache
        self.hooks = hooks
        self.policy = make_scheduler(args) if policy is None else policy
        self.prompt_runs = decode_runs and prompt_runs and role.prefills and role.decodes
        # Nothing routes by the prefix cache: the router's view of it need not be kept.
        self.cache.publishes = not prompt_runs
        self.vector_grants = vector_grants
        self.drafts = (
            Drafts(
                args.aic_nextn,
                args.aic_nextn_accept_rates,
                args.aic_mtp_seed + stream,
                args.block_size,
            )
            if args.aic_nextn and role.decodes
            else None
        )
        self._speculative = bool(args.aic_nextn)
        # Host (G2) KV offload tier, with prefix caching only (what it stores is cached blocks).
        self.offload: HostOffload | None = None
        # The scheduler's host lookup of a waiting request it considers (None: no host tier).
        self.host_lookup: Callable[[Request, PrefixMatch, float], int] | None = None
        host = args.native_host_offload
        if host is not None and args.enable_prefix_caching:
            self.offload = HostOffload(
                host.num_host_blocks,
                args.block_size * args.kv_cache_bytes_per_token,
                host.d2h_bandwidth_gbps,
                host.h2d_bandwidth_gbps,
                lambda at_ms: hooks.on_wakeup(self, at_ms),
            )
            self.prefix_view = OffloadView(self.cache, self.offload.tier)
            # A block evicted while a host store still reads it fences the pass reusing it.
            self.cache.store_sources = self.offload.tier.storing
            self.host_lookup = partial(self.offload.lookup, self)
        self.head_runs = (
            self.prompt_runs and head_runs and self.drafts is None and self.offload is None
        )
        # Decode runs are possible at all (``start_decode_run``'s first test, fixed from here on).
        self._may_run = not role.hands_off and decode_runs and self.drafts is None
        self.batch = Batch()
        # The batch's requests in batch order (the batch owns the list).
        self.running: list[Request] = self.batch.reqs
        self.waiting: deque[Request] = deque()
        # Async scheduling: requests that reached the rank while its pass ran (rule 6).
        self.async_scheduling = args.async_scheduling
        self._unseen: list[Request] = []
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
        self.passes = PassWindow() if pass_window else None
        # A replay's timeline (``sim.pass_log.PassLog``), when one was asked for.
        self.pass_log: Any = None
        self._record = self.queued.record if pass_window else unrecorded
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
        if self.busy and self.async_scheduling:
            self._unseen.append(req)
        else:
            self._wait(req, left=False)
        return True

    def wake(self, now: float) -> None:
        """Time ``now`` asked for by ``on_wakeup``: requests whose host transfer landed rejoin
        the waiting queue."""
        self.stalled = False
        if self.offload is not None:
            self.offload.settle(self, now)

    def has_work(self) -> bool:
        return not self.stalled and bool(self.running or self.waiting or self._unseen)

    def cached_blocks(self, keys: list[int]) -> int:
        return self.cache.cached_run(keys)

    def holds_requests(self) -> bool:
        return bool(
            self.running
            or self.waiting
            or self._unseen
            or (self.offload is not None and self.offload.held)
        )

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
        unseen = self._unseen
        if not unseen:
            return self._start_pass(now)
        self._unseen = []
        if not (self.running or self.waiting):
            # The step scheduled while the last one ran was empty: they join this one.
            for req in unseen:
                self._wait(req, left=False)
            return self._start_pass(now)
        end = self._start_pass(now)
        for req in unseen:
            self._wait(req, left=False)
        # They are seen as this pass ends: a run stops there.
        cut = self.interrupt(now)
        return end if cut is None else cut

    def _start_pass(self, now: float) -> float:
        self.busy = True
        offload = self.offload
        if offload is not None:
            offload.settle(self, now)
        end = None
        if self.running:  # a run needs running requests (an idle rank's start admits first)
            end = start_decode_run(self, now)
            if end is None and self.prompt_runs:
                end = start_prompt_run(self, now)
        if end is not None:
            # A run's last end is already the clock's, pass end after pass end (``now + (end -
            # now)`` on it could be a float off when the run lasts longer than ``now``).
            return end
        before = self._state()
        end = self._single_pass(now)
        while (
            not self._emit
            and not self._slices
            and not self.pass_tokens
            and (self.running or self.waiting)
        ):
            # An empty pass takes no time: one that changed nothing would be composed again
            # and again, so the request that blocks it never runs and must not stall the rank
            # (a replay never hangs).
            if self.running:
                if self._state() != before:
                    break
                self._reject_running(self._blocking(), "cannot_be_scheduled")
            else:
                if offload is not None and offload.held:
                    # The head waits for device blocks that loads in flight hold: the rank
                    # idles until a transfer lands.
                    self.stalled = True
                    break
                stuck = self._unwait(self.waiting[0])
                if offload is not None:
                    offload.dropped(stuck, self.cache)
                self.hooks.on_reject(self, stuck, "cannot_be_scheduled")
            before = self._state()
            end = self._single_pass(now)
        end = now + (end - now)  # the pass end as the clock reaches it
        if self.head_runs:
            run_end = start_decode_run(self, end, head=True)
            if run_end is not None:
                return run_end
        return end

    def interrupt(self, t: float) -> float | None:
        """An arrival at ``t`` (virtual ms) during a run: keep the passes that started before
        ``t``. Returns the new end time (ms), or None when the run is unchanged."""
        run = self._run
        cut = None if run is None else run.cut(t)
        if cut is None:
            return None
        self._run, end = cut
        return end

    def finish(self, now: float) -> None:
        """Apply the pass (or run) ending at ``now`` (virtual ms)."""
        self.busy = False
        cache = self.cache
        if cache.pending:  # only while it ``publishes`` (a router reads it)
            cache.publish()  # the router learns the pass's blocks now
        run = self._run
        if self.pass_log is not None:
            self.pass_log.add(self, now, run)
        if run is None:
            if self.passes is not None:
                self.passes.add_pass(self._last_pass)
            self._finish_pass(now)
            return
        if type(run) is PromptRun:
            finish_prompt_run(self, now)
        else:
            finish_decode_run(self)
        if cache.pending:
            cache.publish()

    def take_fpm(self, t: float) -> ForwardPassMetrics:
        """The rank's per-pass means over the passes completed since the previous call, with
        the waiting queue and the unfinished prompt tokens of running requests at virtual time
        ``t`` (ms); starts a new window. A decode run in flight contributes the passes that
        ended by ``t``."""
        run = self._run
        if run is not None and self.busy:
            count_passes(self, run.ended_by(t))
        if self.passes is None:
            raise RuntimeError("take_fpm: this rank keeps no pass window (pass_window=False)")
        inflight = self.batch.prompt_tokens_left()
        if type(run) is PromptRun and self.busy:
            # The batch holds the prompt's state at the run's start.
            inflight -= run.granted_by(t)
        return self.passes.take_fpm(self.worker_id, self.dp_rank, self.queued, inflight)

    def occupancy(self) -> RankOccupancy:
        cache = self.cache
        # Positional (running, waiting, queued_prefill_tokens, kv_usage): one a rank a sample.
        return RankOccupancy(
            len(self.running),
            len(self.waiting),
            self.queued.prefill_tokens,
            cache.active / cache.num_blocks,
        )

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
        if self.drafts is not None and reach == b.known.item(row):
            # A verification pass writes KV for its drafts too.
            reach = self.drafts.reach(req, reach)
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
                    self._reject_running(0, "kv_pool_too_small_for_sequence")
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

    # One token each for a slice of decoding rows in one step (the module's contract).
    grant_decoding = decode_grants.grant_decoding

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
                granted = sorted(
                    {id(r): r for r in granted if r._batch is not None}.values(),
                    key=lambda r: r._row,
                )
        prefill_timed = self._prefill_timed
        drafts = self.drafts
        offload = self.offload
        verifies = drafts is not None and self.policy.verifies_prefill
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
                if drafts is not None:
                    # A prompt's own pass verifies drafts only where the backend does so.
                    draws.append(verifies or prompt == 0 or not prefill_timed)
                # With speculative decoding a request finishing its prompt also runs the
                # verification step in this pass. A preempted request recomputing its output
                # past the prompt is timed as a decode too where the policy says so.
                if (
                    prompt == 0
                    or not prefill_timed
                    or verifies
                    or (length > isl and self.policy.recompute_decodes)
                ):
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
        prefill_ms, decode_ms = self._pass_ms(
            count, new_tokens, mean_isl, mean_prefix, n_dec, kv_dec
        )
        start = now
        if offload is not None and offload.not_before_ms > now:
            # The pass reuses blocks host stores still read (or a preempted request's).
            start = offload.not_before_ms
        end = start + prefill_ms + decode_ms
        for req in stores:
            # Prompt blocks computed by the pass's end are offered to the host as it is
            # scheduled (vLLM's connector prepares stores then) and copied from its end.
            offload.store(req, self.block_size, end, now)
        if drafts is not None:
            drafts.draw(emit, draws)
        self._emit = emit
        self._slices = slices
        self._granted = []
        self._run = None
        self._last_pass = self._record(
            (end - now) / 1000.0, count, sum_prefill_tokens, n_dec, kv_dec
        )
        return end

    def _pass_ms(
        self, count: int, new_tokens: int, mean_isl: int, mean_prefix: int, n_dec: int, kv_dec: int
    ) -> tuple[float, float]:
        """(prefill ms, decode ms) of a pass: ``count`` prompts computing ``new_tokens`` (their
        mean length and cached prefix), ``n_dec`` decoding requests over ``kv_dec`` tokens; each
        part divided by its speedup and rounded to whole nanoseconds, as the reference's
        ``Duration`` is."""
        prefill_ms = 0.0
        if count and self.prefill_div > 0:
            raw = self.timing.prefill_ms(new_tokens, count, mean_isl, mean_prefix)
            prefill_ms = round(raw / self.prefill_div * _NS) / _NS
        decode_ms = 0.0
        if n_dec and self._decode_timed and self.decode_div > 0:
            if count and self._mixed_decode is not None:
                raw = self._mixed_decode(
                    n_dec, kv_dec, kv_dec // n_dec, self.total_kv_tokens, new_tokens
                )
            else:
                raw = self.timing.decode_ms(n_dec, kv_dec, kv_dec // n_dec, self.total_kv_tokens)
            decode_ms = round(raw / self.decode_div * _NS) / _NS
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

    def _state(self) -> tuple[object, ...]:
        """What a pass can change without granting a token: preemptions, admissions, the
        policy's own state."""
        return self.preemptions, len(self.running), len(self.waiting), self.policy.pass_state()

    def _blocking(self) -> int:
        """Batch row of the request an empty pass could not serve: the first whose prompt is
        unfinished (a prompt that no budget can take), else the head."""
        for index, req in enumerate(self.running):
            if req.computed < req.isl:
                return index
        return 0

    def _reject_running(self, index: int, reason: str) -> None:
        """Take the running request at batch row ``index`` off the rank for good: its KV
        returns and the host hears why."""
        req = self.running[index]
        self.batch.remove([index])
        self._release(req)
        self.hooks.on_reject(self, req, reason)

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

    def _finish_pass(self, end: float) -> None:
        emit = self._emit
        slices = self._slices
        self._emit = []
        self._slices = []
        if not emit and not slices:
            return
        if self.drafts is not None:
            # A speculative pass: each request emits its burst.
            bursts = self.drafts.settle(emit, self.cache)
            self.hooks.on_tokens(self, [r.rid for r in emit], end, bursts)
            done = emit if self._hands_off else [r for r in emit if r.generated >= r.osl]
            if done:
                self._finish([r._row for r in done], end)
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

    def _finish(self, rows: list[int], end: float) -> None:
        """The requests of ``rows`` (ascending) emitted their last token at ``end``: they leave
        the batch and free their KV, in batch order."""
        running = self.running
        done = [running[i] for i in rows]
        self.batch.remove(rows)
        for req in done:
            self._release(req)
            self.hooks.on_complete(self, req, end)

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

    @property
    def last_fpm(self) -> ForwardPassMetrics | None:
        """The metrics of the rank's latest pass (of a run: its last), with the waiting queue as
        that pass was scheduled; None before any. Kept with the pass window only."""
        if self.passes is None:
            raise RuntimeError("last_fpm: this rank keeps no pass window (pass_window=False)")
        f = self._last_pass
        return None if f is None else f.metrics(self.worker_id, self.dp_rank)
