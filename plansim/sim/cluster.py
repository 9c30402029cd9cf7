"""Worker pools whose size can change during a replay.

A worker is ``starting`` from the moment it is provisioned until ``startup_time`` seconds later,
then ``ready`` (it receives requests). A removed worker becomes ``draining``: it receives nothing
new, finishes what it has, and is gone once idle. A ``preempted`` worker (spot capacity taken
back, ``plansim.sim.supply``) is gone at once; its ranks stop at the end of the pass in flight.
Worker-seconds integrate the provisioned count (starting + ready + draining) over virtual time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from plansim.roles import Role, rank_role
from plansim.sim.engine import Rank
from plansim.sim.engine_protocol import EngineHooks, PrefixView
from plansim.sim.routing import RankLoad
from plansim.sim.timing import TimingModel

STARTING, READY, DRAINING, REMOVED = "starting", "ready", "draining", "removed"
PREEMPTED = "preempted"


class Worker:
    """One worker: ``dp_size`` ranks sharing a lifecycle."""

    __slots__ = (
        "inbound",
        "lease",
        "loads",
        "pool",
        "provisioned_ms",
        "ranks",
        "ready_ms",
        "removed_ms",
        "state",
        "worker_id",
    )

    def __init__(
        self, worker_id: int, pool: Role, ranks: list[Rank], provisioned_ms: float
    ) -> None:
        self.worker_id = worker_id
        self.pool = pool
        self.ranks = ranks
        self.loads = [RankLoad() for _ in ranks]
        self.state = STARTING
        self.provisioned_ms = provisioned_ms
        self.ready_ms = float("nan")
        self.removed_ms = float("nan")
        # Requests routed here whose KV handoff is still in flight (they count as work).
        self.inbound = 0
        # What a worker supply granted (``plansim.sim.supply.Lease``); None without one.
        self.lease = None

    def idle(self) -> bool:
        return not self.inbound and not any(r.busy or r.holds_requests() for r in self.ranks)


class Pool:
    """Workers of one role (``agg``, ``prefill`` or ``decode``) with the same engine args; the
    pool's name is its role."""

    def __init__(
        self,
        name: Role,
        args: Any,
        timing: TimingModel,
        hooks: EngineHooks,
        new_worker_id: Callable[[], int],
        *,
        decode_runs: bool = True,
        prompt_runs: bool = False,
        head_runs: bool = False,
        pass_window: bool = True,
        pass_log: Any = None,
        on_gone: Callable[[Worker, float], None] | None = None,
    ) -> None:
        """``on_gone(worker, now_ms)`` is called when a worker is removed or preempted."""
        self.name = name
        self.rank_role = rank_role(name, args.role)
        self.args = args
        self.timing = timing
        self.hooks = hooks
        self._new_worker_id = new_worker_id
        self.decode_runs = decode_runs
        # Its ranks' runs may carry prompt chunks: nothing reads their prefix caches mid-run.
        self.prompt_runs = prompt_runs
        # Its ranks may report a pass's tokens at the end of the decode run it runs on into:
        # nothing acts on a request's first token when it comes.
        self.head_runs = head_runs
        # Something (a planner) takes its ranks' pass metrics; a timeline logs their passes.
        self.pass_window = pass_window
        self.pass_log = pass_log
        self.on_gone = on_gone
        self.workers: list[Worker] = []
        # Routing candidates, rebuilt when membership changes: the ranks, the router's view of
        # their prefix caches and its load records of them, index for index.
        self.ready_ranks: list[Rank] = []
        self.ready_views: list[PrefixView] = []
        self.ready_loads: list[RankLoad] = []
        # What its ranks share: their decode-time tables (``plansim.sim.decode_table``).
        self._decode_tables: dict = {}

    def provision(self, now_ms: float) -> Worker:
        wid = self._new_worker_id()
        dp = self.args.dp_size
        first = len(self.workers) * dp
        # DP ranks pass in lockstep (sim.host), so each of their passes is timed on its own.
        runs = self.decode_runs and dp == 1
        ranks = [
            Rank(
                wid,
                r,
                self.args,
                self.timing,
                self.hooks,
                role=self.rank_role,
                decode_runs=runs,
                vector_grants=self.decode_runs,
                prompt_runs=self.prompt_runs,
                head_runs=self.head_runs,
                pass_window=self.pass_window,
                stream=first + r,
                decode_tables=self._decode_tables,
            )
            for r in range(dp)
        ]
        for rank in ranks:
            rank.pass_log = self.pass_log
        worker = Worker(wid, self.name, ranks, now_ms)
        self.workers.append(worker)
        return worker

    def mark_ready(self, worker: Worker, now_ms: float) -> None:
        if worker.state != STARTING:
            return
        worker.state = READY
        worker.ready_ms = now_ms
        self._refresh()

    def remove_newest(self, now_ms: float) -> Worker | None:
        """Take the newest non-draining worker out of service (a starting one first)."""
        for state in (STARTING, READY):
            for worker in reversed(self.workers):
                if worker.state == state:
                    if state == STARTING or worker.idle():
                        self._gone(worker, REMOVED, now_ms)
                    else:
                        worker.state = DRAINING
                    self._refresh()
                    return worker
        return None

    def drained(self, worker: Worker, now_ms: float) -> None:
        """A draining worker went idle: it is gone."""
        if worker.state == DRAINING and worker.idle():
            self._gone(worker, REMOVED, now_ms)

    def preempt(self, worker: Worker, now_ms: float) -> None:
        """The worker's capacity was taken back: it serves nothing more from now."""
        refresh = worker.state == READY
        self._gone(worker, PREEMPTED, now_ms)
        if refresh:
            self._refresh()

    def _gone(self, worker: Worker, state: str, now_ms: float) -> None:
        worker.state = state
        worker.removed_ms = now_ms
        if self.on_gone is not None:
            self.on_gone(worker, now_ms)

    def count(self, state: str) -> int:
        return sum(1 for w in self.workers if w.state == state)

    def active_count(self) -> int:
        """Workers that are or will be serving: ready + starting."""
        return sum(1 for w in self.workers if w.state in (READY, STARTING))

    def worker_seconds(self, end_ms: float) -> float:
        """Seconds each worker was provisioned (from provisioning until removal, or ``end_ms``
        if still there; virtual ms in), summed over the pool's workers."""
        total = 0.0
        for w in self.workers:
            stop = end_ms if math.isnan(w.removed_ms) else min(w.removed_ms, end_ms)
            if stop > w.provisioned_ms:
                total += stop - w.provisioned_ms
        return total / 1000.0

    def _refresh(self) -> None:
        ranks: list[Rank] = []
        loads: list[RankLoad] = []
        ready = [w for w in self.workers if w.state == READY]
        # Rank-major, as the reference lists routing targets: every worker's rank 0, then every
        # worker's rank 1, ... (round robin spreads over workers first).
        for r in range(self.args.dp_size):
            for w in ready:
                ranks.append(w.ranks[r])
                loads.append(w.loads[r])
        self.ready_ranks = ranks
        self.ready_views = [r.prefix_view for r in ranks]
        self.ready_loads = loads
