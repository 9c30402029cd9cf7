"""``replay(workload, deployment, planner=None)``: the replay host on the virtual clock (ms).

The host owns time. An arrival source (``plansim.sim.arrivals``: the trace's arrivals, first at
0 and gaps divided by ``arrival_speedup_ratio``; closed-loop release on dependencies; a
concurrency cap) lets requests enter; they are routed to engine ranks; ranks run passes (or
runs of passes) and report tokens, completions and rejections back; a disaggregated request is
routed to a decode rank as its prefill ends and joins it when its KV handoff lands; a sampler
records the pools once per virtual second; an optional planner is ticked at the times it asks
for and its targets are applied (through a ``ClusterView``). The finished replay's tables are
assembled by ``plansim.sim.assembly``.

Time is ``plansim.sim.clock``'s; its docstring states the order of events at one instant (pass
ends first, then arrivals, pass starts, handoffs, ticks in scheduling order, so a request
arriving exactly when a pass ends joins the next pass, as in the reference).

A ``WorkerSupply`` (``plansim.sim.supply``) may grant or refuse each new worker and preempt
spot workers; ``replay_shared`` runs several replays on one clock (a fleet whose models share
one supply of GPUs).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from plansim.limits import check_span, describe_span
from plansim.roles import Mode, Role
from plansim.sim.arrivals import OpenLoop, arrival_source
from plansim.sim.assembly import assemble_result
from plansim.sim.batch import Request
from plansim.sim.clock import Clock, Handle, Priority
from plansim.sim.cluster import DRAINING, PREEMPTED, READY, REMOVED, STARTING, Pool, Worker
from plansim.sim.deployment import Deployment
from plansim.sim.engine_protocol import EngineHooks, EngineRank
from plansim.sim.recorder import Recorder
from plansim.sim.result import ReplayResult
from plansim.sim.routing import RoutingPolicy, make_router, recurring_blocks
from plansim.sim.seeded_draws import SeededDraws
from plansim.sim.supply import NEVER
from plansim.sim.timing import make_timing_model

if TYPE_CHECKING:
    from plansim.sim.planner_host import PlannerHost
    from plansim.sim.supply import Lease, WorkerSupply

SAMPLE_INTERVAL_MS = 1000.0
# Samples between two checks that nothing scheduled lies past the replay's bound of virtual
# time (a scan of the clock's queue: once a virtual minute costs nothing).
_HORIZON_CHECK_SAMPLES = 60
# Block keys are computed for this many requests (at most this many trace blocks) at a time.
_KEY_CHUNK_REQUESTS = 256
_KEY_CHUNK_HASHES = 1 << 15


def replay(
    workload: Any,
    deployment: Deployment,
    planner: Any = None,
    *,
    progress: Callable[[float, float], None] | None = None,
    pass_log: Any = None,
    supply: WorkerSupply | None = None,
) -> ReplayResult:
    """Replay ``workload`` against ``deployment``; see ``plansim.sim.result`` for the tables.

    ``planner``: an object with ``initial_tick(now_s)``, ``tick(TickInput)`` returning
    ``PlannerEffects`` and ``advisory``; it is ticked on the virtual clock and its targets applied.
    ``progress(virtual_ms, last_arrival_ms)`` is called about once per simulated second.
    ``pass_log`` (a ``sim.pass_log.PassLog``) receives every pass of every rank.
    ``supply``: where the workers come from (``plansim.sim.supply``; None: granted at once).
    """
    wall_start = time.perf_counter()
    host = ReplayHost(workload, deployment, planner, progress, pass_log=pass_log, supply=supply)
    host.run()
    return host.result(wall_ms=(time.perf_counter() - wall_start) * 1000.0)


@dataclass(frozen=True, slots=True)
class SharedMember:
    """One replay of ``replay_shared``: a workload on a deployment, with an optional planner
    (as for ``replay``) and supply."""

    workload: Any
    deployment: Deployment
    planner: Any = None
    supply: WorkerSupply | None = None


def replay_shared(members: Sequence[SharedMember]) -> list[ReplayResult]:
    """Replay every member on one virtual clock, each workload's first arrival at 0: events of
    one instant run in scheduling order, members set up (initial workers, first arrivals,
    samplers, planners) in the order given. A member's replay differs from its replay alone
    only through what its supply grants, so members that share one supply compete for it.
    Every result's wall time is the whole run's."""
    wall_start = time.perf_counter()
    clock = Clock()
    hosts = [
        ReplayHost(m.workload, m.deployment, m.planner, clock=clock, supply=m.supply)
        for m in members
    ]
    for host in hosts:
        host.start()
    clock.run()
    wall_ms = (time.perf_counter() - wall_start) * 1000.0
    return [host.result(wall_ms=wall_ms) for host in hosts]


def block_end_offsets(block_size: int, trace_block_size: int) -> np.ndarray | None:
    """Where each engine block ends inside its trace block (token offsets), when engine blocks
    tile trace blocks; None otherwise."""
    if trace_block_size <= 0 or trace_block_size % block_size:
        return None
    return np.arange(block_size - 1, trace_block_size, block_size, dtype=np.int64)


def key_grid(
    block_size: int, trace_block_size: int, *, dense: bool
) -> tuple[int, np.ndarray] | None:
    """``(stride, subs)`` when engine blocks tile trace blocks: the ``k``-th block of a trace
    block of hash ``c`` is keyed ``c * stride + subs[k]``, with ``(trace_block_size, block end
    offsets)`` (the rule of ``plansim.sim.kv``) or, ``dense``, ``(blocks per trace block,
    0, 1, ...)``; None otherwise."""
    offsets = block_end_offsets(block_size, trace_block_size)
    if offsets is None:
        return None
    if dense:
        return offsets.shape[0], np.arange(offsets.shape[0], dtype=np.int64)
    return trace_block_size, offsets


def _check_replay_span(last_arrival_ms: float, speedup: float) -> None:
    """Refuse a virtual span over ``limits.MAX_SPAN_S`` before anything is sized by it."""
    what = "the replay"
    if speedup != 1.0:
        what += (
            f" (the trace's {describe_span(last_arrival_ms * speedup / 1000.0)} / "
            f"arrival_speedup_ratio {speedup:g})"
        )
    if speedup < 1.0:
        check_span(
            last_arrival_ms / 1000.0,
            what=what,
            hint="raise arrival_speedup_ratio",
            field="arrival_speedup_ratio",
        )
    check_span(last_arrival_ms / 1000.0, what=what)


def _check_horizon(latest_ms: float) -> None:
    """Refuse a replay whose engines would run past ``limits.MAX_SPAN_S`` of virtual time (a
    pass timed in years: ``speedup_ratio`` 1e-300, a timing model's huge constant): the time
    series would be sampled every second up to there."""
    check_span(
        latest_ms / 1000.0,
        what="the replay (an engine pass or delay ending there)",
        hint="check the engines' speedup_ratio and timing model",
    )


@dataclass(frozen=True, slots=True)
class KeyChunk:
    """The prompt block keys of requests ``lo .. hi - 1``: request ``i``'s trace blocks give
    ``keys[starts[i - lo]:starts[i - lo + 1]]``, of which its full blocks are the first."""

    lo: int
    hi: int
    keys: np.ndarray
    starts: list[int]


@dataclass(frozen=True, slots=True)
class Handoff:
    """A prefilled request's KV transfer to the decode rank it is routed to: ``ms_per_token``
    of prompt moved; ``missing_only``: only the tokens past that rank's cached prefix move
    (``kv_transfer_timing_mode: destination_missing``), else the whole prompt."""

    ms_per_token: float
    missing_only: bool


class ReplayHost:
    """One replay: cluster, routers, recorder, arrival source and planner host on one clock;
    the host routes requests, starts and finishes passes, and relays what ranks report."""

    def __init__(
        self,
        workload: Any,
        deployment: Deployment,
        planner: Any = None,
        progress: Callable[[float, float], None] | None = None,
        *,
        decode_runs: bool = True,
        clock: Clock | None = None,
        supply: WorkerSupply | None = None,
        pass_log: Any = None,
    ) -> None:
        """``decode_runs=False`` simulates every pass one by one (the reference behaviour the
        decode-run fast path must reproduce; for tests). ``clock``: a clock shared with other
        replays (``replay_shared``); ``supply``: where workers come from (``sim.supply``)."""
        self.workload = workload
        self.deployment = deployment
        self.clock = Clock() if clock is None else clock
        self.supply = supply
        self.progress = progress
        n = len(workload)
        self.source = arrival_source(
            self,
            workload,
            arrival_speedup_ratio=deployment.arrival_speedup_ratio,
            max_concurrency=deployment.max_concurrency,
        )
        # The plain open-loop source: arrivals known up front, nothing tracked per request.
        plain = isinstance(self.source, OpenLoop) and self.source.cap is None
        if n:
            _check_replay_span(self.source.span_ms(workload), deployment.arrival_speedup_ratio)
        self.isl = np.asarray(workload.isl_tokens, dtype=np.int64)
        self.osl = np.maximum(np.asarray(workload.osl_tokens, dtype=np.int64), 1)
        if plain:
            self.rec = Recorder(n, self.source.arrival_ms, self.isl)
            self.enter = self._enter_open
            self._terminal = None
        else:
            self.rec = Recorder(n, np.full(n, np.nan), self.isl, release_ms=np.full(n, np.nan))
            self.enter = self._enter_tracked
            self._terminal = self.source.on_terminal
        self.mode = Mode(deployment.mode)
        # One stream for every pool's router: numpy's default_rng(seed), drawn without
        # importing numpy.random (sim.seeded_draws).
        rng = SeededDraws(deployment.seed)
        hooks = EngineHooks(
            self._on_admit,
            self._on_tokens,
            self._on_complete,
            self._on_reject,
            self._on_run,
            self._on_wakeup,
        )
        self._worker_ids = 0
        self.pools: dict[Role, Pool] = {}
        self.routers: dict[Role, RoutingPolicy] = {}
        for name, count in deployment.pool_sizes().items():
            args = deployment.pool_args(name)
            router = make_router(
                deployment.router,
                args.block_size,
                rng,
                pool=name,
                max_batched_tokens=args.max_num_batched_tokens,
            )
            self.routers[name] = router
            pool = Pool(
                name,
                args,
                make_timing_model(args.effective_timing),
                hooks,
                self._next_worker_id,
                decode_runs=decode_runs,
                prompt_runs=not router.reads_prefix_cache,
                head_runs=not router.observes_first_tokens,
                pass_window=planner is not None or pass_log is not None,
                pass_log=pass_log,
                on_gone=self._gone if supply is not None else None,
            )
            self.pools[name] = pool
            for _ in range(count):
                lease = supply.acquire(name, 0.0) if supply is not None else None
                if supply is not None and lease is None:
                    raise ValueError(
                        f"the worker supply refused the {name} pool's initial {count} workers"
                    )
                worker = pool.provision(0.0)
                pool.mark_ready(worker, 0.0)
                if lease is not None:
                    self._lease(worker, lease)
        self.block_size = deployment.pool_args(self.mode.visible_pool).block_size
        # Dense keys unless a host tier orders blocks by their key values (``cohort_rank``).
        self._key_grid = key_grid(
            self.block_size,
            workload.trace_block_size,
            dense=all(p.args.native_host_offload is None for p in self.pools.values()),
        )
        self._key_chunk: KeyChunk | None = None
        indexing = [r for r in self.routers.values() if r.indexes_prompt_blocks]
        if indexing and n:
            # The prompt blocks each request may share with another (routers index only those).
            recurring = recurring_blocks(
                workload.hash_ids, workload.hash_offsets, workload.trace_block_size, self.block_size
            )
            for router in indexing:
                router.recurring = recurring
        self.entry_pool = self.mode.entry_pool
        self._finish_call: dict[int, Handle] = {}  # id(rank) -> its pass end's call
        # Scaled-up workers' ranks (and DP workers) whose first pass waits: id -> ready ms.
        self._cold_until: dict[int, float] = {}
        self._startup_draws = random.Random(deployment.seed)
        self._start_pending: set[int] = set()  # ids of ranks (of workers with DP) to start
        self._group_pass: dict[int, list[EngineRank]] = {}  # id(worker) -> ranks in its pass
        self._rank_pool: dict[int, Role] = {}
        # The pools' handoff roles, read per request: a dict look-up each, not a property call.
        self._hands_off = {name: name.hands_off for name in self.pools}
        self._receives_handoff = {name: name.receives_handoff for name in self.pools}
        self._rank_worker: dict[int, Worker] = {}
        self._pending: dict[Role, list[int]] = {name: [] for name in self.pools}
        # KV handoffs with a transfer time, waiting for their decode rank: rid -> Handoff.
        self._handoffs: dict[int, Handoff] = {}
        # Pools whose router queue re-checks once the pass ending now is fully applied; None
        # outside a pass end (a re-check then runs at once).
        self._recheck: set[Role] | None = None
        self._outstanding = n
        self._last_arrival = self.source.last_release_ms
        self.planner_host: PlannerHost | None = None
        if planner is not None:
            # Imported here: a replay without a planner never loads the planner's records.
            from plansim.sim.cluster_view import ClusterView
            from plansim.sim.planner_host import PlannerHost

            view = ClusterView(
                self.clock,
                self.mode,
                self.pools,
                self.routers,
                scale=self.scale_pool,
                patch_router=self.patch_router,
                arrived_by=self.source.arrived_by,
                done=self.done,
            )
            self.planner_host = PlannerHost(view, planner, workload, self._last_arrival)
        for pool in self.pools.values():
            for w in pool.workers:
                self._index_worker(w)

    # ---------------------------------------------------------------- setup helpers

    def _next_worker_id(self) -> int:
        wid = self._worker_ids
        self._worker_ids += 1
        return wid

    def _index_worker(self, worker: Worker) -> None:
        for rank in worker.ranks:
            self._rank_pool[id(rank)] = worker.pool
            self._rank_worker[id(rank)] = worker

    # ---------------------------------------------------------------- arrival source hooks

    def call_at(self, delay_ms: float, fn: Callable[[], None]) -> None:
        self.clock.call_at(delay_ms, fn)

    def _enter_open(self, rid: int) -> None:
        # Request ``rid`` is the ``rid``-th arrival: it is its instant's last when the next one
        # comes later, and may then start an idle rank's pass at once (``_kick``).
        arrival = self.source.arrival_ms
        last = rid + 1 == arrival.shape[0] or arrival.item(rid + 1) != arrival.item(rid)
        self._dispatch(rid, self.entry_pool, last)

    def _enter_tracked(self, rid: int) -> None:
        self.rec.arrival[rid] = self.clock.now
        self._dispatch(rid, self.entry_pool)
        self.source.on_enter(rid)

    def released(self, rid: int) -> None:
        self.rec.release[rid] = self.clock.now

    def never_released(self, rid: int, waits_on: int) -> None:
        self.rec.reason[rid] = (
            f"never released: waits on rejected request {self.workload.request_id[waits_on]}"
        )
        self._outstanding -= 1

    # ---------------------------------------------------------------- main loop

    def run(self) -> None:
        self.start()
        self.clock.run()

    def start(self) -> None:
        """Start the arrivals, the sampler and the planner (the clock is run by the caller)."""
        self.source.start()
        self.clock.process(self._sampler())
        if self.planner_host is not None:
            self.planner_host.start()

    def finished(self) -> bool:
        """Every request completed or was rejected."""
        return self._outstanding == 0

    def done(self) -> bool:
        """Nothing left to do: every request finished and none is still to be released."""
        return self.finished() and self.clock.now >= self._last_arrival

    def _sampler(self):
        clock = self.clock
        samples = 0
        while True:
            self.rec.sample(clock.now, self.pools)
            if self.progress is not None:
                self.progress(clock.now, self._last_arrival)
            if self.done():
                return
            if clock.peek() == float("inf"):
                return  # nothing else can happen: what is left stays incomplete
            samples += 1
            if samples % _HORIZON_CHECK_SAMPLES == 0:
                _check_horizon(clock.latest())
            yield SAMPLE_INTERVAL_MS

    # ---------------------------------------------------------------- routing

    def _prompt_keys(self, rid: int) -> list[int]:
        """The keys of the request's full prompt blocks (``plansim.sim.kv``): block ``j`` ends at
        token ``e = j * bs + bs - 1`` and is keyed ``hash[e // tbs] * tbs + e % tbs``, for the
        blocks whose trace block has a hash. Where engine blocks tile trace blocks (``per`` to
        one) and no host tier orders blocks by key, block ``j`` is keyed ``hash[j // per] * per
        + j % per`` instead (``key_grid``): the same blocks are equal, and the keys' low bits
        vary, which the prefix cache's hash sets probe far faster (the first form's low bits
        take only ``per`` values)."""
        bs = self.block_size
        isl = self.isl.item(rid)
        n_full = isl // bs
        if n_full == 0:
            return []
        if self._key_grid is not None:
            chunk = self._key_chunk
            if chunk is None or not chunk.lo <= rid < chunk.hi:
                chunk = self._key_chunk = self._grid_keys(rid)
            first = chunk.starts[rid - chunk.lo]
            last = chunk.starts[rid - chunk.lo + 1]
            return chunk.keys[first : min(first + n_full, last)].tolist()
        h = self.workload.hashes(rid)
        tbs = self.workload.trace_block_size
        ends = np.arange(bs - 1, n_full * bs, bs, dtype=np.int64)
        idx = ends // tbs
        ends = ends[idx < h.shape[0]]
        idx = idx[: ends.shape[0]]
        return (h[idx].astype(np.int64) * tbs + ends % tbs).tolist()

    def _grid_keys(self, rid: int) -> KeyChunk:
        """Every block key of requests ``rid`` onwards (up to ``_KEY_CHUNK_REQUESTS`` of them and
        ``_KEY_CHUNK_HASHES`` trace blocks) in one outer sum: the ``k``-th engine block of a
        trace block of hash ``c`` is keyed ``c * stride + subs[k]`` (``key_grid``)."""
        stride, subs = self._key_grid
        off = self.workload.hash_offsets
        last = off.shape[0] - 1
        hi = min(
            last,
            rid + _KEY_CHUNK_REQUESTS,
            int(np.searchsorted(off, off[rid] + _KEY_CHUNK_HASHES, side="right")) - 1,
        )
        hi = max(hi, rid + 1)
        h = self.workload.hash_ids[off[rid] : off[hi]]
        keys = (h.astype(np.int64)[:, None] * stride + subs).ravel()
        return KeyChunk(rid, hi, keys, ((off[rid : hi + 1] - off[rid]) * subs.shape[0]).tolist())

    def _dispatch(self, rid: int, pool_name: Role, last: bool = False) -> None:
        """Route request ``rid`` to ``pool_name`` now. ``last``: nothing else happens at this
        instant after it but what is already scheduled (see ``_kick``)."""
        pool = self.pools[pool_name]
        if not pool.ready_ranks:
            self._pending[pool_name].append(rid)
            return
        keys = self.rec.keys[rid]
        if keys is None:
            keys = self._prompt_keys(rid)
            self.rec.keys[rid] = keys
        isl = self.isl.item(rid)
        if self.routers[pool_name].hold(
            rid, isl, keys, pool.ready_views, pool.ready_loads, self.clock.now
        ):
            return
        self._route(rid, pool_name, isl, keys, last=last)

    def patch_router(self, pool_name: Role, params: Mapping[str, Any]) -> dict[str, Any]:
        """Patch a pool's router knobs mid-replay; returns what changed. A changed queue
        threshold or order may release waiting requests at once."""
        changed = self.routers[pool_name].set_parameters(params)
        if changed:
            self._release(pool_name)
        return changed

    def _release(self, pool_name: Role) -> None:
        """Route the requests the pool's router releases from its queue. During a pass end
        this waits until the whole pass is applied: the reference's router learns a pass's
        first tokens and its finished requests together, so a request it releases then sees
        the finished requests' blocks gone."""
        if self._recheck is not None:
            self._recheck.add(pool_name)
            return
        router = self.routers[pool_name]
        pool = self.pools[pool_name]
        while pool.ready_ranks:
            released = router.release(pool.ready_loads)
            if released is None:
                return
            rid, overlaps = released
            self._route(rid, pool_name, self.isl.item(rid), self.rec.keys[rid], overlaps)

    def _route(
        self,
        rid: int,
        pool_name: Role,
        isl: int,
        keys: list[int],
        overlaps: Any = None,
        last: bool = False,
    ) -> None:
        pool = self.pools[pool_name]
        ranks = pool.ready_ranks
        router = self.routers[pool_name]
        if overlaps is None:
            route = router.choose(isl, keys, pool.ready_views, pool.ready_loads)
        else:
            route = router.choose(isl, keys, pool.ready_views, pool.ready_loads, overlaps=overlaps)
        rank = ranks[route.index]
        router.sent(rid, isl, keys, route, pool.ready_loads[route.index])
        # A request reaching the decode pool has been counted on arrival at the prefill pool and
        # brings its prompt KV with it.
        handed_off = self._receives_handoff[pool_name]
        req = Request(rid, isl, self.osl.item(rid), keys, prebuilt=handed_off)
        if self._hands_off[pool_name]:
            self.rec.prefill_worker[rid] = rank.worker_id
        else:
            self.rec.decode_worker[rid] = rank.worker_id
        if not handed_off:
            self.rec.arrived(pool_name)
        handoff = self._handoffs.pop(rid, None) if self._handoffs else None
        if handoff is not None:
            moved = isl
            if handoff.missing_only:
                # destination_missing: the prompt tokens past the rank's cached prefix move.
                moved -= min(rank.cached_blocks(keys) * rank.block_size, isl)
            transfer_ms = moved * handoff.ms_per_token
            if transfer_ms > 0:
                worker = self._rank_worker[id(rank)]
                worker.inbound += 1
                self.clock.call_at(transfer_ms, lambda: self._land(worker, rank, req))
                return
        if rank.enqueue(req):
            self._kick(rank, last)

    def _land(self, worker: Worker, rank: EngineRank, req: Request) -> None:
        """A handoff routed to ``rank`` before its transfer has landed there."""
        worker.inbound -= 1
        if worker.state == PREEMPTED:
            self.routers[worker.pool].finished(req.rid)
            self._migrate(req.rid)
            return
        if rank.enqueue(req):
            self._kick(rank)
        elif worker.state == DRAINING:
            self.pools[worker.pool].drained(worker, self.clock.now)  # refused: nothing left

    def _flush_pending(self, pool_name: Role) -> None:
        pending = self._pending[pool_name]
        self._pending[pool_name] = []
        for rid in pending:
            self._dispatch(rid, pool_name)

    # ---------------------------------------------------------------- rank events

    def _kick(self, rank: EngineRank, last: bool = False) -> None:
        """Work reached ``rank``: cut its decode run, or schedule its next pass start. ``last``:
        the caller does nothing more at this instant (the instant's last arrival, or a pass
        end)."""
        key = id(rank)
        worker = self._rank_worker[key]
        if len(worker.ranks) > 1:
            self._kick_group(worker)
            return
        if rank.busy:
            now = self.clock.now
            new_end = rank.interrupt(now)
            if new_end is not None:
                self._finish_call[key].cancel()
                self._finish_call[key] = self.clock.call_at_time(
                    new_end, lambda: self._finish(rank), Priority.PASS_END
                )
            return
        if key in self._start_pending or not rank.has_work():
            return
        if self._cold_until and self._cold(key, lambda: self._start(rank)):
            return
        if last and self.clock.peek() > self.clock.now:
            # Nothing else is due at this instant: the pass start scheduled below would be the
            # very next call, so it runs here.
            self._begin(rank)
            return
        self._start_pending.add(key)
        self.clock.call_at(0.0, lambda: self._start(rank))

    def _start(self, rank: EngineRank) -> None:
        self._start_pending.discard(id(rank))
        if rank.busy or not rank.has_work():
            return
        self._begin(rank)

    def _begin(self, rank: EngineRank) -> None:
        end = rank.start_pass(self.clock.now)
        self._finish_call[id(rank)] = self.clock.call_at_time(
            end, lambda: self._finish(rank), Priority.PASS_END
        )

    # Attention-DP ranks of one worker run each pass together (the reference's group barrier):
    # a pass starts on every rank with work at once, and each of them ends when the slowest
    # does; a rank that gets work meanwhile waits for the next group pass.

    def _kick_group(self, worker: Worker) -> None:
        key = id(worker)
        if key in self._group_pass or key in self._start_pending:
            return
        if any(r.has_work() for r in worker.ranks):
            if self._cold_until and self._cold(key, lambda: self._start_group(worker)):
                return
            self._start_pending.add(key)
            self.clock.call_at(0.0, lambda: self._start_group(worker))

    def _cold(self, key: int, start: Any) -> bool:
        """A cold worker's first pass: start it when its warm-up ends; False once warm."""
        until = self._cold_until.get(key)
        if until is None:
            return False
        del self._cold_until[key]
        if until <= self.clock.now:
            return False
        self._start_pending.add(key)
        self.clock.call_at(until - self.clock.now, start)
        return True

    def _start_group(self, worker: Worker) -> None:
        key = id(worker)
        self._start_pending.discard(key)
        started = [r for r in worker.ranks if r.has_work()]
        if key in self._group_pass or not started:
            return
        now = self.clock.now
        end = max([r.start_pass(now) for r in started])
        self._group_pass[key] = started
        self.clock.call_at_time(end, lambda: self._finish_group(worker), Priority.PASS_END)

    def _apply_pass_end(self, ranks: Sequence[EngineRank], now: float) -> None:
        """End the pass of ``ranks`` at ``now``, then re-check the router queues it touched."""
        self._recheck = recheck = set()
        try:
            for rank in ranks:
                rank.finish(now)
        finally:
            self._recheck = None
        if recheck:
            for pool_name in sorted(recheck):
                self._release(pool_name)

    def _finish_group(self, worker: Worker) -> None:
        now = self.clock.now
        self._apply_pass_end(self._group_pass.pop(id(worker)), now)
        if worker.state != READY:
            self._leaving(worker, worker.ranks, now)
        self._kick_group(worker)

    def _finish(self, rank: EngineRank) -> None:
        now = self.clock.now
        self._apply_pass_end((rank,), now)
        worker = self._rank_worker[id(rank)]
        if worker.state != READY:
            self._leaving(worker, (rank,), now)
        self._kick(rank, last=True)

    def _leaving(self, worker: Worker, ranks: Sequence[EngineRank], now: float) -> None:
        """A pass of a worker out of service ended: a draining worker is gone once idle, a
        preempted one's ``ranks`` hand their requests back."""
        if worker.state == DRAINING:
            self.pools[worker.pool].drained(worker, now)
        elif worker.state == PREEMPTED:
            for rank in ranks:
                self._evacuate(rank)

    # ---------------------------------------------------------------- engine hooks

    def _on_admit(self, rank: EngineRank, req: Request, now: float, reused: int) -> None:
        self.rec.admitted(
            req.rid, self._rank_pool[id(rank)], now, reused, req.preempted, req.prebuilt
        )

    def _on_tokens(
        self, rank: EngineRank, reqs: list[Request], end: float, counts: list[int] | None = None
    ) -> None:
        if not rank.role.decodes:
            return  # a prefill worker's token is internal
        first = self.rec.tokens(reqs, end, counts)
        if first:
            pool_name = self._rank_pool[id(rank)]
            router = self.routers[pool_name]
            for rid in first:
                router.prefill_done(rid)
            self._release(pool_name)

    def _on_wakeup(self, rank: EngineRank, at_ms: float) -> None:
        # A held-back request becomes ready: start (or shorten a decode run for) the next pass.
        def wake() -> None:
            rank.wake(self.clock.now)
            self._kick(rank)

        self.clock.call_at(max(at_ms - self.clock.now, 0.0), wake)

    def _on_run(
        self,
        rank: EngineRank,
        rids: list[int] | np.ndarray,
        ends: list[float] | np.ndarray,
        first_ms: float | None,
    ) -> None:
        self.rec.run(rids, ends, first_ms)

    def _on_complete(self, rank: EngineRank, req: Request, end: float) -> None:
        pool_name = self._rank_pool[id(rank)]
        self.routers[pool_name].finished(req.rid)
        self._release(pool_name)
        if self._hands_off[pool_name]:
            args = self.pools[pool_name].args
            rid = req.rid
            if args.kv_bytes_per_token and args.kv_transfer_bandwidth:
                # The decode rank is chosen (and its load counted) as the prefill ends, as the
                # reference reserves the destination then; ``_route`` times the transfer.
                # kv_transfer_bandwidth is in GB/s.
                self._handoffs[rid] = Handoff(
                    args.kv_bytes_per_token / (args.kv_transfer_bandwidth * 1e6),
                    args.kv_transfer_timing_mode == "destination_missing",
                )
            self.clock.call_at(end - self.clock.now, lambda: self._dispatch(rid, Role.DECODE))
            return
        self.rec.completed(req.rid)
        self.rec.keys[req.rid] = None
        self._outstanding -= 1
        if self.planner_host is not None:
            self.planner_host.on_complete(self.rec.completion(req.rid))
        if self._terminal is not None:
            self._terminal(req.rid, True)

    def _on_reject(self, rank: EngineRank, req: Request, reason: str) -> None:
        pool_name = self._rank_pool[id(rank)]
        self.routers[pool_name].finished(req.rid)
        self._release(pool_name)
        self.rec.rejected(req.rid, reason)
        self._outstanding -= 1
        if self._terminal is not None:
            self._terminal(req.rid, False)

    # ---------------------------------------------------------------- scaling (planner host)

    def scale_pool(self, pool_name: Role, target: int) -> tuple[int, int]:
        """Set the pool's serving count (ready + starting) to ``target``; returns (from, to),
        ``to`` short of ``target`` when the worker supply refused workers."""
        pool = self.pools[pool_name]
        now = self.clock.now
        current = pool.active_count()
        if target > current:
            granted = self._add_workers(pool_name, target - current)
            if granted < target - current:
                self.supply.refused(pool_name, target, current + granted, now)
            return current, current + granted
        if target < current:
            for _ in range(current - target):
                pool.remove_newest(now)
        return current, target

    def _add_workers(self, pool_name: Role, count: int) -> int:
        """Provision up to ``count`` workers, each ready after the engine's ``startup_time``;
        returns how many the supply granted."""
        pool = self.pools[pool_name]
        now = self.clock.now
        for added in range(count):
            lease = None
            if self.supply is not None:
                lease = self.supply.acquire(pool_name, now)
                if lease is None:
                    return added
            worker = pool.provision(now)
            self._index_worker(worker)
            if lease is not None:
                self._lease(worker, lease)
            self.clock.call_at(self._startup_ms(pool.args), lambda w=worker: self._worker_ready(w))
        return count

    def _startup_ms(self, args: Any) -> float:
        """A new worker's start-up: ``startup_time``, or a seeded lognormal draw of that mean
        and ``startup_time_cv``."""
        mean_s = args.startup_time or 0.0
        if args.startup_time_cv <= 0 or mean_s <= 0:
            return mean_s * 1000.0
        sigma2 = math.log1p(args.startup_time_cv**2)
        draw = self._startup_draws.lognormvariate(math.log(mean_s) - sigma2 / 2, math.sqrt(sigma2))
        return draw * 1000.0

    def _worker_ready(self, worker: Worker) -> None:
        if worker.state != STARTING:
            return
        pool = self.pools[worker.pool]
        delay_s = pool.args.first_pass_delay_s
        if delay_s > 0:
            until = self.clock.now + delay_s * 1000.0
            keys = [id(worker)] if len(worker.ranks) > 1 else [id(r) for r in worker.ranks]
            self._cold_until.update(dict.fromkeys(keys, until))
        pool.mark_ready(worker, self.clock.now)
        self._flush_pending(worker.pool)
        self._release(worker.pool)

    # ---------------------------------------------------------------- worker supply

    def _lease(self, worker: Worker, lease: Lease) -> None:
        worker.lease = lease
        if lease.preempt_after_ms != NEVER:
            self.clock.call_at(lease.preempt_after_ms, lambda: self._preempt(worker))

    def _gone(self, worker: Worker, now: float) -> None:
        self.supply.release(worker.pool, worker.lease, now)

    def _preempt(self, worker: Worker) -> None:
        """Spot capacity taken back: the worker leaves now, each busy rank stops at the end of
        its pass in flight (``_leaving``), the others hand their requests back at once, and a
        replacement starts unless the worker was draining."""
        state = worker.state
        if state in (REMOVED, PREEMPTED) or self.done():
            return
        now = self.clock.now
        pool_name = worker.pool
        self.pools[pool_name].preempt(worker, now)
        self.supply.preempted(pool_name, worker.worker_id, now)
        for rank in worker.ranks:
            if not rank.busy:
                self._evacuate(rank)
            elif len(worker.ranks) == 1:
                # A run in flight keeps the passes already started (as an arrival would).
                new_end = rank.interrupt(now)
                if new_end is not None:
                    key = id(rank)
                    self._finish_call[key].cancel()
                    self._finish_call[key] = self.clock.call_at_time(
                        new_end, lambda r=rank: self._finish(r), Priority.PASS_END
                    )
        if state != DRAINING:
            serving = self.pools[pool_name].active_count()
            if not self._add_workers(pool_name, 1):
                self.supply.refused(pool_name, serving + 1, serving, now)

    def _evacuate(self, rank: EngineRank) -> None:
        """Re-route the requests of a preempted worker's ``rank``."""
        reqs = rank.evacuate()
        if not reqs:
            return
        pool_name = self._rank_pool[id(rank)]
        router = self.routers[pool_name]
        for req in reqs:
            router.finished(req.rid)
        self.supply.migrated(pool_name, len(reqs), self.clock.now)
        self._release(pool_name)
        for req in reqs:
            self._migrate(req.rid)

    def _migrate(self, rid: int) -> None:
        """Send request ``rid`` back to the entry pool with the tokens it emitted appended to
        its prompt and that many fewer left to emit (Dynamo's request migration); its record
        (arrival, TTFT, token gaps) goes on."""
        if self.isl is self.rec.isl:
            self.isl = self.isl.copy()  # the recorder keeps the trace's prompt lengths
        emitted = self.rec.n_tokens.item(rid)
        self.isl[rid] = self.rec.isl.item(rid) + emitted
        self.osl[rid] = max(int(self.workload.osl_tokens[rid]), 1) - emitted
        self._dispatch(rid, self.entry_pool)

    # ---------------------------------------------------------------- result

    def result(self, wall_ms: float) -> ReplayResult:
        return assemble_result(
            self.workload, self.deployment, self.pools, self.rec, self.planner_host, wall_ms
        )
