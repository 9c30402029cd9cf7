"""``RetuneController``: retune inside the planner engine (seed: Engine Integration, Windows,
Decision Timing, Predictor Swap, Replay Integration).

``plansim.api.replay`` builds one per replay from the setup's ``RetuneSetup``
(``controller_for_replay``) and hands it to the planner engine, which calls ``initial_tick(s0)``
once, then ``on_tick(now_s, worker_counts)`` every tick after its plugin pipeline. Each tick
the controller

1. records the ready worker counts;
2. harvests a finished sweep whose decision is due: a sweep launched at tick time ``t`` is ready
   at ``t + max(D, delta)`` and its decision lands on the first tick at or after that at which
   the sweep is done, never in the launch tick;
3. launches the sweep of window ``k`` once ``now_s >= L_k = s0 + (k+1) T + G`` (one sweep in
   flight at a time; the oldest window that has come due first).

It returns the complete desired router parameter map per worker type (level-triggered: the host
applies the difference) and the decision records harvested this tick (their ``planner_changes``
the host applies after the tick, warming a swapped predictor from ``predictor_warmup``).

Under a virtual clock (``wait_for_sweep=True``, the replay host) the controller waits for the
sweep inside the launch tick, so virtual time does not move while it runs, and a measured D (the
sweep's wall time) is known at launch. A wall-clock host (``wait_for_sweep=False``) polls the
sweep thread on later ticks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plansim.errors import ConfigError
from plansim.planner_core.config import PREDICTOR_FIELDS
from plansim.planner_core.observations import WorkerCounts
from plansim.retune import record
from plansim.retune.config import RetuneConfig
from plansim.retune.domains import Point
from plansim.retune.setup import RetuneSetup, bucket_interval_s, fit_problem
from plansim.retune.sweep import VALIDATION_FAILED, SweepPlan, SweepReport, run_sweep
from plansim.retune.tasks import ReplaySpec, WindowSpec
from plansim.workers.executor import Executor

# Runs one window's sweep on the controller's executor (``run_sweep`` by default; the CLI's
# ``--resume`` passes one that records and reuses what it finds).
Sweeper = Callable[[SweepPlan, Executor], SweepReport]

log = logging.getLogger("plansim.retune")

_EPS_S = 1e-9


@dataclass(frozen=True, slots=True)
class RetuneInputs:
    """What the replay host derives from its own arguments (seed: Replay Integration): the trace
    files, the first trace arrival (the time origin), and extra history (the planner's
    ``load_predictor_warmup_trace``; read only with throughput scaling)."""

    trace_paths: tuple[str, ...]
    origin_ms: float
    history_paths: tuple[str, ...] = ()


@dataclass(slots=True)
class _InFlight:
    window: WindowSpec
    launch_s: float
    launch_tick: int
    plan: SweepPlan
    box: list[SweepReport] = field(default_factory=list)
    # Set once the sweep thread no longer touches the executor. Waited on instead of
    # ``Thread.join``: in CPython 3.11 a join interrupted by a signal handler's exception (Ctrl-C,
    # SIGTERM) can mark the running thread as stopped, and a later join then returns at once.
    ended: threading.Event = field(default_factory=threading.Event)

    def done(self) -> bool:
        return bool(self.box)


class RetuneController:
    """Periodic window sweeps and their decisions; see the module docstring.

    ``setup`` is the checked retune block of the startup ``PlannerConfig``
    (``plansim.retune.setup.retune_setup``: nothing is checked again here); ``scale_interval_s``
    is delta, the planner's base tick interval. ``executor`` builds the executor for candidate
    work (default: a ``SpawnPool`` of ``max_parallel`` workers).
    ``on_decision`` is called with each decision record as it lands (progress output).
    """

    def __init__(
        self,
        setup: RetuneSetup,
        inputs: RetuneInputs,
        *,
        scale_interval_s: float | None = None,
        executor: Callable[[int], Executor] | None = None,
        wait_for_sweep: bool = True,
        sweep_root: str | None = None,
        on_decision: Callable[[dict[str, Any]], None] | None = None,
        sweep: Sweeper | None = None,
    ) -> None:
        self.setup = setup
        self.cfg: RetuneConfig = setup.config
        self.inputs = inputs
        self.delta_s = float(scale_interval_s or setup.planner_config.scale_interval_s)
        self._make_executor = executor or _spawn_pool
        self._executor: Executor | None = None
        self.wait_for_sweep = wait_for_sweep
        self.on_decision = on_decision
        self.sweep_root = sweep_root
        self._sweep = sweep or (lambda plan, pool: run_sweep(plan, pool, sweep_root=sweep_root))
        self.live_config = setup.planner_config
        self.current_point = setup.startup_point
        # The complete desired map, level-triggered: patched as decisions apply.
        self.router_parameters = {pool: dict(p) for pool, p in setup.router_parameters.items()}

        self.s0: float | None = None
        self.next_window = 0
        self._tick = 0
        self._counts: list[tuple[float, WorkerCounts]] = []
        self._inflight: _InFlight | None = None
        self.events: list[dict[str, Any]] = []

    # -- engine hooks ------------------------------------------------------------------------

    def initial_tick(self, start_s: float) -> None:
        """Anchor the window schedule at the planner start ``s0`` (0 in replay)."""
        self.s0 = float(start_s)

    def on_tick(
        self, now_s: float, worker_counts: WorkerCounts
    ) -> tuple[dict[str, dict[str, Any]], tuple[dict[str, Any], ...]]:
        """Record counts, harvest a due decision, launch a due sweep; see the module docstring.
        Returns ``(router_parameters, decisions)``."""
        if self.s0 is None:
            raise RuntimeError("initial_tick must be called before on_tick")
        self._tick += 1
        self._counts.append((now_s, worker_counts))
        decisions: list[dict[str, Any]] = []
        harvested = self._harvest(now_s)
        if harvested is not None:
            decisions.append(harvested)
        if self._inflight is None and now_s + _EPS_S >= self.cutoff_s(self.next_window):
            self._launch(now_s)
        return {pool: dict(p) for pool, p in self.router_parameters.items()}, tuple(decisions)

    def close(self) -> None:
        """Kill the sweep workers (an in-flight sweep ends as timeout) and wait for the thread."""
        if self._executor is not None:
            self._executor.cancel()
        if self._inflight is not None:
            self._inflight.ended.wait()
            self._inflight = None
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    # -- windows -----------------------------------------------------------------------------

    def window_bounds(self, k: int) -> tuple[float, float]:
        """Planner-time bounds ``[s0 + kT, s0 + (k+1)T)`` of window ``k``."""
        assert self.s0 is not None
        t = self.cfg.interval_seconds
        return self.s0 + k * t, self.s0 + (k + 1) * t

    def cutoff_s(self, k: int) -> float:
        """``L_k = s0 + (k+1)T + G``: the launch time and censoring cutoff of window ``k``."""
        return self.window_bounds(k)[1] + self.cfg.grace_seconds

    def window_spec(self, k: int) -> WindowSpec:
        start, end = self.window_bounds(k)
        return WindowSpec(
            index=k,
            start_s=start,
            end_s=end,
            cutoff_s=self.cutoff_s(k),
            trace_paths=tuple(self.inputs.trace_paths),
            origin_ms=self.inputs.origin_ms,
            arrival_speedup_ratio=self.setup.deployment.arrival_speedup_ratio,
            history_paths=tuple(self.inputs.history_paths),
            bucket_interval_s=self._bucket_interval_s(),
        )

    def ready_counts_at(self, start_s: float, end_s: float) -> WorkerCounts | None:
        """Counts in force at the window start: the last record at or before it; before the
        first tick nothing has scaled, so window 0 uses the first tick's record."""
        before = [c for t, c in self._counts if t <= start_s + _EPS_S]
        if before:
            return before[-1]
        inside = [c for t, c in self._counts if t < end_s]
        return inside[0] if inside else None

    def _forget_counts_before(self, start_s: float) -> None:
        """Keep only the records a later window can still need (the last one at or before its
        start, and everything after)."""
        last = max((i for i, (t, _) in enumerate(self._counts) if t <= start_s + _EPS_S), default=0)
        del self._counts[:last]

    # -- sweep ---------------------------------------------------------------------------------

    def build_plan(self, k: int, ready_counts: WorkerCounts | None) -> SweepPlan:
        """The sweep of window ``k`` from the current point."""
        window = self.window_spec(k)
        live = self.live_config
        replay = ReplaySpec(
            deployment=self.setup.deployment,
            planner_config=live if self.setup.scaling else None,
            ready_counts=ready_counts,
            seed=self.cfg.seed,
            sla=self.setup.sla.model_dump(),
            throughput_interval_s=self._bucket_interval_s(),
        )
        current_predictor = (
            {name: getattr(live, name) for name in PREDICTOR_FIELDS}
            if self.setup.predictor_candidates
            else {}
        )
        return SweepPlan(
            window=window,
            replay=replay,
            current=self.current_point,
            startup=self.setup.startup_point,
            grid=self.setup.grid,
            current_predictor=current_predictor,
            predictor_candidates=self.setup.predictor_candidates,
            objective=self.cfg.objective,
            min_improvement_percentage=self.cfg.min_improvement_percentage,
            timeout_s=self.cfg.timeout_s,
        )

    def executor(self) -> Executor:
        if self._executor is None:
            self._executor = self._make_executor(self.cfg.max_parallel)
        return self._executor

    def _launch(self, now_s: float) -> None:
        k = self.next_window
        self.next_window += 1
        start, end = self.window_bounds(k)
        plan = self.build_plan(k, self.ready_counts_at(start, end))
        self._forget_counts_before(self.window_bounds(self.next_window)[0])
        executor = self.executor()

        def sweep() -> None:
            try:
                flight.box.append(self._sweep(plan, executor))
            except BaseException as exc:  # a bug: re-raised on the planner's thread
                flight.box.append(exc)  # type: ignore[arg-type]
            finally:
                flight.ended.set()

        flight = self._inflight = _InFlight(plan.window, now_s, self._tick, plan)
        threading.Thread(target=sweep, name="plansim-retune-sweep", daemon=True).start()
        if self.wait_for_sweep:
            flight.ended.wait()
            self._raise_sweep_error()

    def _raise_sweep_error(self) -> None:
        flight = self._inflight
        if flight is not None and flight.done() and isinstance(flight.box[0], BaseException):
            self._inflight = None
            raise flight.box[0]

    def _harvest(self, now_s: float) -> dict[str, Any] | None:
        flight = self._inflight
        if flight is None or flight.launch_tick == self._tick or not flight.done():
            return None
        self._raise_sweep_error()
        report = flight.box[0]
        ready_s = flight.launch_s + max(self._decision_latency_s(report), self.delta_s)
        if now_s + _EPS_S < ready_s:
            return None
        self._inflight = None
        return self._decide(flight, report, ready_s, now_s)

    def _decision_latency_s(self, report: SweepReport) -> float:
        d = self.cfg.decision_latency_seconds
        return report.wall_s if d == "measured" else float(d)

    # -- decisions -----------------------------------------------------------------------------

    def _decide(
        self, flight: _InFlight, report: SweepReport, ready_s: float, now_s: float
    ) -> dict[str, Any]:
        outcome, reason = report.outcome, report.reason
        router_changes: dict[str, Any] = {}
        planner_changes: dict[str, Any] = {}
        predictor_warmup = None
        if outcome == "apply":
            winner = report.winner_point
            assert winner is not None
            diff = winner.changes_from(self.current_point)
            router_changes, planner_changes = diff["router"], diff["planner"]
            problem = self.recheck(planner_changes)
            if problem is not None:
                outcome, reason = "failed", f"{VALIDATION_FAILED}: {problem}"
                router_changes, planner_changes = {}, {}
            elif self.cfg.advisory:
                outcome = "advisory"
            else:
                outcome = "applied"
                self._apply(winner, router_changes, planner_changes)
                if any(k in PREDICTOR_FIELDS for k in planner_changes):
                    # (num_req, avg_isl, avg_osl) per throughput interval, oldest first; an
                    # empty bucket has no averages.
                    predictor_warmup = [
                        [n, i if n else None, o if n else None]
                        for n, i, o in (report.predictor_warmup or [])
                    ]
        event = record.decision_record(
            window=flight.window,
            launch_s=flight.launch_s,
            ready_s=ready_s,
            decision_s=now_s,
            outcome=outcome,
            reason=reason,
            report=report,
            objective=self.cfg.objective,
            router_changes=router_changes,
            planner_changes=planner_changes,
            router_parameters=(
                {pool: dict(p) for pool, p in self.router_parameters.items()}
                if outcome == "applied"
                else None
            ),
            predictor_warmup=predictor_warmup,
            advisory=self.cfg.advisory,
        )
        self.events.append(event)
        if self.on_decision is not None:
            self.on_decision(event)
        log.info(
            "retune window %d: %s%s", flight.window.index, outcome, f" ({reason})" if reason else ""
        )
        return event

    def recheck(self, planner_changes: Mapping[str, Any]) -> str | None:
        """Why the combination the host would apply no longer validates or fits (None if it
        does): checked against the live config before anything changes."""
        if not planner_changes:
            return None
        from plansim.planner_core.config import with_changes

        try:
            changed = with_changes(self.live_config, dict(planner_changes))
        except ConfigError as exc:
            return str(exc)
        return fit_problem(changed, self.setup.capabilities)

    def _apply(
        self, winner: Point, router_changes: Mapping[str, Any], planner_changes: Mapping[str, Any]
    ) -> None:
        from plansim.planner_core.config import with_changes

        for params in self.router_parameters.values():
            params.update(router_changes)
        if planner_changes:
            self.live_config = with_changes(self.live_config, dict(planner_changes))
        self.current_point = winner

    def _bucket_interval_s(self) -> float | None:
        """The inner planner's throughput interval, when it scales on throughput."""
        return bucket_interval_s(self.live_config, self.setup.scaling)


def _spawn_pool(max_parallel: int) -> Executor:
    from plansim.workers.pool import SpawnPool

    return SpawnPool(max_parallel)


def controller_for_replay(
    setup: RetuneSetup,
    workload: Any,
    trace_paths: Sequence[str],
    *,
    executor: Callable[[int], Executor] | None = None,
    on_decision: Callable[[dict[str, Any]], None] | None = None,
    sweep: Sweeper | None = None,
) -> RetuneController:
    """The retune controller for a replay of ``workload`` (read from ``trace_paths``, unless the
    workload names its own sources): the time origin is its first arrival, extra history the
    planner's ``load_predictor_warmup_trace``; ``sweep`` runs each window's sweep (default
    ``run_sweep``)."""
    warmup = setup.planner_config.load_predictor_warmup_trace
    origin_ms = float(workload.arrival_ms.min()) if len(workload) else 0.0
    inputs = RetuneInputs(
        trace_paths=tuple(str(s) for s in (workload.sources or trace_paths)),
        origin_ms=origin_ms,
        history_paths=(warmup,) if warmup else (),
    )
    return RetuneController(setup, inputs, executor=executor, on_decision=on_decision, sweep=sweep)
