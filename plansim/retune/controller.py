"""``RetuneController``: retune inside the planner engine (seed: Engine Integration, Windows,
Decision Timing, Predictor Swap, Replay Integration).

The engine builds one when ``config.retune`` is set, calls ``initial_tick(s0)`` once, then
``on_tick(now_s, worker_counts)`` every tick after its plugin pipeline. Each tick the controller

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

import itertools
import logging
import threading
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plansim.errors import ConfigError, located
from plansim.planner_core.config import PREDICTOR_FIELDS
from plansim.planner_core.observations import WorkerCounts
from plansim.retune import domains, record
from plansim.roles import Mode
from plansim.sim import routing
from plansim.retune.config import RetuneConfig, planner_retune_config
from plansim.retune.domains import Knob, Point
from plansim.retune.presweep import build_forecaster
from plansim.retune.sweep import VALIDATION_FAILED, SweepPlan, SweepReport, run_sweep
from plansim.retune.tasks import ReplaySpec, WindowSpec
from plansim.workers.executor import Executor

log = logging.getLogger("plansim.retune")

# Planner fields that are not searchable: structure, files, reporting and retune itself.
UNSEARCHABLE_PLANNER_FIELDS = frozenset(
    {
        "mode", "retune", "advisory", "plugins", "scheduling", "profile_results_dir",
        "report_interval_hours", "report_output_dir", "load_predictor_warmup_trace",
        "optimization_target", "enable_throughput_scaling", "enable_load_scaling",
    }
)
_EPS_S = 1e-9


@dataclass(frozen=True, slots=True)
class RetuneInputs:
    """What the replay host derives from its own arguments (seed: Replay Integration): the
    pinned deployment (engines, router mode and startup parameters, arrival speed-up), the trace
    files, the first trace arrival (the time origin), and extra history (the planner's
    ``load_predictor_warmup_trace``; read only with throughput scaling)."""

    deployment: Any
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

    ``planner_config`` is the startup ``PlannerConfig`` (its ``retune`` block set);
    ``scale_interval_s`` is delta, the planner's base tick interval. ``executor`` builds the
    executor for candidate work (default: a ``SpawnPool`` of ``max_parallel`` workers).
    ``on_decision`` is called with each decision record as it lands (progress output).
    """

    def __init__(
        self,
        planner_config: Any,
        inputs: RetuneInputs,
        *,
        scale_interval_s: float | None = None,
        executor: Callable[[int], Executor] | None = None,
        wait_for_sweep: bool = True,
        sweep_root: str | None = None,
        on_decision: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        cfg = planner_retune_config(planner_config)
        if cfg is None:
            raise ConfigError("retune is not set", field="retune")
        self.cfg: RetuneConfig = cfg
        self.inputs = inputs
        self.delta_s = float(scale_interval_s or planner_config.scale_interval_s)
        self._make_executor = executor or _spawn_pool
        self._executor: Executor | None = None
        self.wait_for_sweep = wait_for_sweep
        self.on_decision = on_decision
        self.sweep_root = sweep_root
        self.scaling = planner_config.enable_load_scaling or planner_config.enable_throughput_scaling
        if getattr(planner_config, "retune_only", False):
            self.scaling = False
        self.live_config = planner_config
        self.startup_config = planner_config
        dep = inputs.deployment
        from plansim.sim import worker_capabilities

        self.capabilities = worker_capabilities(dep)
        self.sla = cfg.scoring_sla(planner_config.ttft_ms, planner_config.itl_ms)

        router_knobs = domains.expand_knobs(domains.ROUTER, cfg.router)
        self._check_router_knobs(router_knobs)
        planner_knobs = domains.expand_knobs(
            domains.PLANNER, cfg.planner, integer_fields=_integer_fields(planner_config)
        )
        self._check_planner_knobs(planner_knobs)
        # The predictor is never a grid dimension: its fields are searched by the pre-sweep.
        self.grid_knobs = router_knobs + [k for k in planner_knobs if k.name not in PREDICTOR_FIELDS]
        self.predictor_knobs = [k for k in planner_knobs if k.name in PREDICTOR_FIELDS]
        self.predictor_candidates = self._predictor_candidates()
        size = domains.grid_size(self.grid_knobs)
        if size > cfg.max_candidates:
            raise ConfigError(
                f"the candidate grid has {size} points, more than max_candidates "
                f"{cfg.max_candidates}; narrow the domains or raise max_candidates",
                field="retune.max_candidates",
            )
        self.grid = self._valid_grid(domains.grid(self.grid_knobs))

        self.router_knob_names = [k.name for k in router_knobs]
        self.planner_knob_names = [k.name for k in planner_knobs]
        startup_router = {name: _startup_router_value(dep.router, name)
                          for name in self.router_knob_names}
        startup_planner = {name: getattr(planner_config, name) for name in self.planner_knob_names}
        self.startup_point = Point.of(startup_router, startup_planner)
        self.current_point = self.startup_point
        # The complete desired map: every patchable knob of the deployment's router policy,
        # searched or not.
        patchable = {k.name: getattr(dep.router, k.name)
                     for k in routing.router_knobs(dep.router.mode)
                     if k.patchable and k.alias_of is None}
        self.router_parameters = {pool: dict(patchable) for pool in _router_pools(dep)}

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
            arrival_speedup_ratio=self.inputs.deployment.arrival_speedup_ratio,
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
            deployment=self.inputs.deployment,
            planner_config=live if self.scaling else None,
            ready_counts=ready_counts,
            seed=self.cfg.seed,
            sla=self.sla.model_dump(),
            throughput_interval_s=self._bucket_interval_s(),
        )
        current_predictor = (
            {name: getattr(live, name) for name in PREDICTOR_FIELDS} if self.predictor_knobs else {}
        )
        return SweepPlan(
            window=window,
            replay=replay,
            current=self.current_point,
            startup=self.startup_point,
            grid=tuple(self.grid),
            current_predictor=current_predictor,
            predictor_candidates=tuple(self.predictor_candidates),
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
                flight.box.append(run_sweep(plan, executor, sweep_root=self.sweep_root))
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
                if outcome == "applied" else None
            ),
            predictor_warmup=predictor_warmup,
            advisory=self.cfg.advisory,
        )
        self.events.append(event)
        if self.on_decision is not None:
            self.on_decision(event)
        log.info("retune window %d: %s%s", flight.window.index, outcome,
                 f" ({reason})" if reason else "")
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
        return _fit_problem(changed, self.capabilities)

    def _apply(self, winner: Point, router_changes: Mapping[str, Any],
               planner_changes: Mapping[str, Any]) -> None:
        from plansim.planner_core.config import with_changes

        for params in self.router_parameters.values():
            params.update(router_changes)
        if planner_changes:
            self.live_config = with_changes(self.live_config, dict(planner_changes))
        self.current_point = winner

    # -- construction checks -------------------------------------------------------------------

    def _check_router_knobs(self, knobs: list[Knob]) -> None:
        """Searched router knobs are knobs a tick can patch, of any routing policy (a knob the
        deployment's policy does not use changes nothing: its candidates share one replay)."""
        searchable = {k.name: k for k in routing.all_router_knobs().values() if k.patchable}
        for knob in knobs:
            declared = searchable.get(knob.name)
            if declared is None:
                raise ConfigError(
                    "not a router parameter a tick can patch "
                    f"(searchable: {', '.join(searchable) or 'none'})", field=knob.path)
            for value in knob.values:
                declared.check(value, field=knob.path)

    def _check_planner_knobs(self, knobs: list[Knob]) -> None:
        fields = type(self.startup_config).model_fields
        for knob in knobs:
            if knob.name not in fields or knob.name in UNSEARCHABLE_PLANNER_FIELDS:
                raise ConfigError("not a searchable planner field", field=knob.path)
        predictor = [k for k in knobs if k.name in PREDICTOR_FIELDS]
        if predictor:
            cfg = self.startup_config
            if not (cfg.optimization_target == "sla" and cfg.enable_throughput_scaling
                    and self.scaling):
                raise ConfigError(
                    "the load predictor is chosen by the pre-sweep, which needs "
                    "optimization_target sla with throughput scaling",
                    field=predictor[0].path,
                )

    def _predictor_candidates(self) -> list[dict[str, Any]]:
        """The product of the predictor field domains, each candidate complete (the startup
        predictor fields with the searched ones replaced) and validated once: an invalid
        candidate fails construction."""
        if not self.predictor_knobs:
            return []
        base = {k: getattr(self.startup_config, k) for k in PREDICTOR_FIELDS}
        out = []
        for combo in itertools.product(*(k.values for k in self.predictor_knobs)):
            fields = {**base, **{k.name: v for k, v in zip(self.predictor_knobs, combo)}}
            try:
                build_forecaster(fields, self._bucket_interval_s() or 180.0)
            except ConfigError as exc:
                searched = {k.name: fields[k.name] for k in self.predictor_knobs}
                raise ConfigError(
                    f"invalid load-predictor candidate {searched}: {exc.message}",
                    field=f"retune.planner.{exc.field or 'load_predictor'}",
                ) from None
            out.append(fields)
        return out

    def _valid_grid(self, points: list[Point]) -> list[Point]:
        """Drop grid points whose planner fields fail validation or do not fit the deployment,
        with one warning; fail when a searched planner value fits no remaining point."""
        from plansim.planner_core.config import with_changes

        kept: list[Point] = []
        dropped: list[tuple[Point, str]] = []
        checked: dict[tuple, str | None] = {}
        for point in points:
            key = point.planner
            if not key:  # router knobs only: the startup config, which the engine accepted
                kept.append(point)
                continue
            if key not in checked:
                try:
                    changed = with_changes(self.startup_config, point.planner_map)
                    checked[key] = _fit_problem(changed, self.capabilities)
                except ConfigError as exc:
                    checked[key] = str(exc)
            if checked[key] is None:
                kept.append(point)
            else:
                dropped.append((point, checked[key]))  # type: ignore[arg-type]
        if dropped:
            example, error = dropped[0]
            log.warning(
                "retune: dropped %d of %d grid points that do not validate or fit the "
                "deployment; e.g. %s: %s", len(dropped), len(points), example.label(), error,
            )
        for knob in self.grid_knobs:
            if knob.group != domains.PLANNER:
                continue
            for value in knob.values:
                if not any((knob.name, value) in p.planner for p in kept):
                    raise ConfigError(
                        f"value {value!r} fits no grid point after dropping invalid ones "
                        f"(e.g. {dropped[0][1] if dropped else 'no point'})",
                        field=knob.path,
                    )
        return kept

    def _bucket_interval_s(self) -> float | None:
        """The inner planner's throughput interval, when it scales on throughput."""
        cfg = self.live_config
        if self.scaling and cfg.enable_throughput_scaling and cfg.optimization_target == "sla":
            return float(cfg.throughput_adjustment_interval_seconds)
        return None


def _spawn_pool(max_parallel: int) -> Executor:
    from plansim.workers.pool import SpawnPool

    return SpawnPool(max_parallel)


def _startup_router_value(router: Any, name: str) -> Any:
    """A knob's startup value; a deprecated spelling (cleared when the deployment was built)
    starts at its target's value."""
    knob = routing.all_router_knobs().get(name)
    if knob is not None and knob.alias_of is not None and getattr(router, name) is None:
        return getattr(router, knob.alias_of)
    return getattr(router, name)


def _router_pools(deployment: Any) -> tuple[str, ...]:
    """Worker types whose router parameters the host patches: the planner roles of the
    deployment's pools (``decode`` stands for the one pool in agg mode, as in
    ``WorkerCounts``)."""
    return tuple(role.value for role in Mode(deployment.mode).planner_roles)


def _integer_fields(planner_config: Any) -> list[str]:
    out = []
    for name, info in type(planner_config).model_fields.items():
        args = typing.get_args(info.annotation) or (info.annotation,)
        if int in args and bool not in args:
            out.append(name)
    return out


def _fit_problem(config: Any, capabilities: Any) -> str | None:
    """Why ``config`` does not fit the deployment's workers (None when it does): the planner's
    own check (mode, roles, minimum endpoints within the GPU budget)."""
    from plansim.planner_core import check_fits

    try:
        check_fits(config, capabilities)
    except ConfigError as exc:
        return str(exc)
    return None


def controller_for_replay(
    planner_config: Any,
    deployment: Any,
    workload: Any,
    trace_paths: Sequence[str],
    *,
    executor: Callable[[int], Executor] | None = None,
    on_decision: Callable[[dict[str, Any]], None] | None = None,
) -> RetuneController:
    """The retune controller for a replay of ``workload`` (read from ``trace_paths``, unless the
    workload names its own sources): the time origin is its first arrival, extra history the
    planner's ``load_predictor_warmup_trace``."""
    history = ((planner_config.load_predictor_warmup_trace,)
               if planner_config.load_predictor_warmup_trace else ())
    origin_ms = float(workload.arrival_ms.min()) if len(workload) else 0.0
    inputs = RetuneInputs(
        deployment=deployment,
        trace_paths=tuple(str(s) for s in (workload.sources or trace_paths)),
        origin_ms=origin_ms,
        history_paths=history,
    )
    return RetuneController(planner_config, inputs, executor=executor, on_decision=on_decision)


def check_retune(planner_config: Any, deployment: Any, *, source: str) -> None:
    """Every check of the planner's retune block that needs no trace (its fields, its search
    domains against the planner and the deployment, the grid size), before any work starts;
    ``ConfigError`` names ``source``."""
    planner_retune_config(planner_config, source=source)
    with located(source):
        RetuneController(planner_config, RetuneInputs(deployment, (), 0.0)).close()
