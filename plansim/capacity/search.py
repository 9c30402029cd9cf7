"""``search``: the cheapest static deployment that meets a goodput target on a trace, the
hindsight lower bound on any scaling policy, and planner policies side by side.

``prepare`` validates everything that does not need the trace (target, search dimensions,
variants, planner policies, budget); ``run`` replays. The work is a graph of jobs
(``scheduler``): one static search per variant; then, on the recommended variant (known at once
when nothing is searched), the bound's refinement rounds, one job per planner policy and the
seed replays of the chosen points. Every replay is a task on the executor (the retune spawn
pool by default, or Ray), each at most once.

Columns of ``CapacityResult.points`` (one row per replay): ``kind`` (``static``: a count of the
static search, ``seed``: a chosen point at another router seed, ``segment``: a segment replay of
the bound, ``policy``: a planner replay), ``variant`` and one column per search key, ``mode``,
``num_workers`` / ``num_prefill_workers`` / ``num_decode_workers`` (a policy's starting counts),
``gpus``, ``seed``, ``segment`` (-1 for whole-trace replays), ``policy`` ("" unless a policy),
``requests``, ``good_requests``, ``goodput_ratio``, ``meets_target``, ``within_budget``,
``gpu_hours``, ``cost`` and the latency percentiles (NaN for segment rows), ``scaling_events``.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from plansim.capacity import objective as objectives
from plansim.capacity.bound import (
    BoundInputs,
    Schedule,
    SegmentValues,
    line_threshold,
    lockstep,
    solve,
)
from plansim.capacity import policies as planner_policies
from plansim.capacity.policies import Policy
from plansim.capacity.result import (
    Bound,
    CapacityResult,
    PolicyResult,
    ReplayedSchedule,
    SegmentRow,
    StaticPoint,
    VariantResult,
    counts_label,
)
from plansim.capacity.scheduler import JobSpec, ReplayRequest, Runner, RunStats
from plansim.capacity.scripted import change_to
from plansim.capacity.segments import (
    DEFAULT_LEAD_IN_S,
    DEFAULT_SEGMENT_S,
    SegmentWindow,
    Segments,
    cut,
    per_minute_arrivals,
    replay_arrivals_ms,
    windows,
)
from plansim.capacity.static_search import Evaluated, StaticSearch, evaluate, required_good, run_search
from plansim.capacity.tasks import FullReplay, SegmentReplay, replay_full_task, replay_segment_task
from plansim.capacity.uncertainty import Interval, bootstrap
from plansim.capacity.variants import SearchDimension, Variant, build_variants, parse_search
from plansim.errors import InputError
from plansim.retune.executor import Executor, TaskContext
from plansim.sim.deployment import Deployment

log = logging.getLogger("plansim.capacity")
Counts = tuple[int, ...]
DEFAULT_MAX_GPU_BUDGET = 64
DEFAULT_BOUND_ROUNDS = 16
LATENCY_COLUMNS = ("median_ttft_ms", "p90_ttft_ms", "p90_itl_ms", "p90_e2e_latency_ms")


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated capacity run, ready to replay a workload."""

    deployment: Deployment
    target: float
    dimensions: tuple[SearchDimension, ...]
    variants: tuple[Variant, ...]
    policies: tuple[Policy, ...]
    max_gpu_budget: int
    segment_s: float
    lead_in_s: float
    seeds: int
    objective: objectives.Objective
    max_bound_rounds: int
    notes: tuple[str, ...] = ()


def prepare(deployment: Deployment, target: float = 0.95, *,
            search: Sequence[SearchDimension | str] | Mapping[str, Sequence[Any]] = (),
            planner_configs: Sequence[str | Path | Policy] = (), default_policies: bool = True,
            max_gpu_budget: int = DEFAULT_MAX_GPU_BUDGET, segment_s: float = DEFAULT_SEGMENT_S,
            lead_in_s: float = DEFAULT_LEAD_IN_S, seeds: int = 1,
            objective: objectives.Objective | None = None,
            max_bound_rounds: int = DEFAULT_BOUND_ROUNDS) -> Plan:
    """Validate a capacity run; ``InputError`` names the option at fault."""
    if not (isinstance(target, (int, float)) and 0 < target <= 1):
        raise InputError(f"must be in (0, 1], got {target}", field="--target")
    if not deployment.sla.is_set:
        raise InputError("plansim capacity scores goodput and needs an SLA: set sla.ttft_ms, "
                         "sla.itl_ms or sla.e2e_ms in the deployment, or --sla-ttft-ms, "
                         "--sla-itl-ms, --sla-e2e-ms", field="--sla-ttft-ms")
    if max_gpu_budget < 1:
        raise InputError(f"must be at least 1, got {max_gpu_budget}", field="--max-gpu-budget")
    if not segment_s > 0:
        raise InputError(f"must be > 0, got {segment_s}", field="--segment-s")
    if not lead_in_s >= 0:
        raise InputError(f"must be >= 0, got {lead_in_s}", field="lead_in_s")
    if seeds < 1:
        raise InputError(f"must be at least 1, got {seeds}", field="--seeds")
    dims = _dimensions(search)
    variants = build_variants(deployment, dims, max_gpu_budget=max_gpu_budget)
    if isinstance(objective, objectives.GpuCost):
        for variant in variants:
            objective.check(variant.label, variant.layout)
    policies, notes = (planner_policies.default_policies(deployment, max_gpu_budget)
                       if default_policies else ([], []))
    policies += [p for p in planner_configs if isinstance(p, Policy)]
    paths = [p for p in planner_configs if not isinstance(p, Policy)]
    policies += planner_policies.file_policies(paths, deployment,
                                               taken=[p.name for p in policies])
    return Plan(deployment, float(target), tuple(dims), tuple(variants), tuple(policies),
                max_gpu_budget, float(segment_s), float(lead_in_s), int(seeds),
                objective or objectives.GpuHours(), max_bound_rounds, tuple(notes))


def _dimensions(search: Any) -> list[SearchDimension]:
    if isinstance(search, Mapping):
        return [SearchDimension(str(k), tuple(v)) for k, v in search.items()]
    return [d if isinstance(d, SearchDimension) else parse_search(d) for d in search]


def search(workload: Any, deployment: Deployment, target: float = 0.95, *,
           executor: Executor | None = None, max_parallel: int | None = None,
           on_round: Callable[[RunStats], None] | None = None, **options: Any
           ) -> CapacityResult:
    """The capacity answer for ``workload`` on ``deployment`` (see ``prepare`` for
    ``options``: ``search``, ``planner_configs``, ``default_policies``, ``max_gpu_budget``,
    ``segment_s``, ``lead_in_s``, ``seeds``, ``objective``, ``max_bound_rounds``)."""
    plan = prepare(deployment, target, **options)
    return run(plan, workload, executor=executor, max_parallel=max_parallel, on_round=on_round)


def run(plan: Plan, workload: Any, *, executor: Executor | None = None,
        max_parallel: int | None = None,
        on_round: Callable[[RunStats], None] | None = None) -> CapacityResult:
    """Replay ``plan`` on ``workload``. Without ``executor`` a spawn pool of ``max_parallel``
    workers (default: the CPU count) is started and closed."""
    if len(workload) == 0:
        raise InputError("the trace has no requests", field="TRACE")
    notes = list(plan.notes)
    if getattr(workload, "graph", None) is not None:
        # Segments and their lead-ins cut sessions apart; every replay runs the same open loop.
        workload = workload.open_loop()
        notes.append("the trace's sessions were replayed open loop: every request at its "
                     "recorded arrival, not released by the turn before it")
    started = time.perf_counter()
    arrivals = replay_arrivals_ms(workload.arrival_ms, plan.deployment.arrival_speedup_ratio)
    segments = cut(arrivals, plan.segment_s)
    own_executor = executor is None
    if executor is None:
        from plansim.retune.pool import SpawnPool

        executor = SpawnPool(max_parallel or os.cpu_count() or 1)
    try:
        with tempfile.TemporaryDirectory(prefix="plansim-capacity-") as folder:
            from plansim.retune.tasks import save_window

            trace_path = os.path.join(folder, "trace.npz")
            save_window(trace_path, workload)
            run_ = _Run(plan, segments, trace_path)
            runner = Runner(executor, TaskContext(folder), on_round)
            results = runner.run(run_.jobs())
    finally:
        if own_executor:
            executor.close()
    return run_.result(results, runner.stats, arrivals, time.perf_counter() - started, notes)


@dataclass(frozen=True, slots=True)
class _Chosen:
    """What the static searches chose: the cheapest feasible point and the best infeasible one
    (with their variants), and the variant the bound and the policies run on."""

    cheapest: tuple[Variant, Evaluated] | None
    best_infeasible: tuple[Variant, Evaluated] | None
    variant: Variant


@dataclass(frozen=True, slots=True)
class _BoundOutcome:
    variant: Variant
    schedule: Schedule | None
    values: SegmentValues
    rounds: int
    exact: bool


class _Run:
    """One run's job graph and result assembly."""

    def __init__(self, plan: Plan, segments: Segments, trace_path: str) -> None:
        self.plan = plan
        self.segments = segments
        self.trace_path = trace_path
        self.first_rows = tuple(int(r) for r in segments.first_row)
        self.windows: list[SegmentWindow] = windows(segments, plan.lead_in_s)
        base_seed = plan.deployment.seed
        self.seed_sensitive = plan.deployment.router.mode != "round_robin"
        extra = plan.seeds - 1 if self.seed_sensitive else 0
        self.extra_seeds = tuple(base_seed + k for k in range(1, extra + 1))

    # -- requests -------------------------------------------------------------------------

    def _static_request(self, variant: Variant, counts: Counts, seed: int | None = None,
                        kind: str = "static") -> ReplayRequest:
        key = f"{variant.label} @ {counts_label(variant.layout.mode, counts)}"
        if seed is not None:
            key += f" seed {seed}"
        return ReplayRequest(key, replay_full_task,
                             (self.trace_path, variant.with_counts(counts, seed), self.first_rows),
                             kind)

    def _segment_request(self, variant: Variant, segment: int, counts: Counts,
                         reference: Counts) -> ReplayRequest:
        """Segment ``segment`` at ``counts``, its lead-in served by at least ``reference``."""
        window = self.windows[segment]
        lead = tuple(max(c, r) for c, r in zip(counts, reference)) if window.has_lead_in \
            else counts
        mode = variant.layout.mode
        key = f"segment {segment} {variant.label} @ {counts_label(mode, counts)}"
        if lead != counts:
            key += f" after {counts_label(mode, lead)}"
        return ReplayRequest(key, replay_segment_task,
                             (self.trace_path, variant.with_counts(lead), window, counts),
                             "segment", full=False)

    def _policy_request(self, variant: Variant, policy: Policy, seed: int) -> ReplayRequest:
        key = f"policy {policy.name} on {variant.label}"
        if seed != self.plan.deployment.seed:
            key += f" seed {seed}"
        deployment = variant.deployment.model_copy(update={"seed": seed})
        return ReplayRequest(key, replay_full_task,
                             (self.trace_path, deployment, self.first_rows, policy.config),
                             "policy")

    # -- jobs -------------------------------------------------------------------------------

    def jobs(self) -> list[JobSpec]:
        plan = self.plan
        statics = tuple(f"static {i}" for i in range(len(plan.variants)))
        specs = [JobSpec(name, self._static_job(v)) for name, v in zip(statics, plan.variants)]
        # With one variant the policies need nothing from the search and start at once.
        policy_after = () if len(plan.variants) == 1 else statics
        specs.append(JobSpec("bound", self._bound_job, statics))
        specs.append(JobSpec("schedule", self._schedule_job, ("bound",)))
        specs.append(JobSpec("seeds", self._seeds_job, statics))
        specs += [JobSpec(f"policy {k}", self._policy_job(p), policy_after)
                  for k, p in enumerate(plan.policies)]
        return specs

    def _static_job(self, variant: Variant) -> Callable[[Mapping[str, Any]], Generator]:
        plan = self.plan

        def evaluate_counts(counts: Sequence[Counts]) -> Generator:
            replays = yield [self._static_request(variant, c) for c in counts]
            return [evaluate(variant, c, r, target=plan.target, budget=plan.max_gpu_budget,
                             objective=plan.objective) for c, r in zip(counts, replays)]

        def job(_: Mapping[str, Any]) -> Generator:
            return (yield from run_search(variant, plan.max_gpu_budget, plan.objective,
                                          evaluate_counts))

        return job

    def choose(self, statics: Sequence[StaticSearch]) -> _Chosen:
        """The cheapest feasible point; the best infeasible one (within budget, the most good
        requests, then the lowest cost), among those cheaper than the cheapest when there are
        any (what spending less buys); and the variant the bound and policies run on."""
        feasible = [(s.variant, s.cheapest) for s in statics if s.cheapest is not None]
        cheapest = min(feasible, key=lambda ve: (ve[1].cost, ve[1].counts)) if feasible else None
        missed = [(s.variant, e) for s in statics for e in s.evaluated
                  if e.within_budget and not e.meets_target]
        cheaper = [ve for ve in missed if cheapest is not None and ve[1].cost < cheapest[1].cost]
        best_bad = min(cheaper or missed, key=lambda ve: (-ve[1].good, ve[1].cost),
                       default=None)
        variant = (cheapest or best_bad or (self.plan.variants[0], None))[0]
        return _Chosen(cheapest, best_bad, variant)

    def _statics(self, deps: Mapping[str, Any]) -> list[StaticSearch]:
        return [deps[f"static {i}"] for i in range(len(self.plan.variants))]

    def _bound_job(self, deps: Mapping[str, Any]) -> Generator:
        plan, segs = self.plan, self.segments
        statics = self._statics(deps)
        chosen = self.choose(statics)
        variant = chosen.variant
        layout = variant.layout
        limits = layout.max_counts(plan.max_gpu_budget)
        # The lead-in of a segment replay runs on the chosen static counts (or more).
        reference = next((p[1].counts for p in (chosen.cheapest, chosen.best_infeasible)
                          if p is not None and p[0] is variant), limits)
        values = SegmentValues(segs.requests)
        for s in statics:
            if s.variant is variant:
                for e in s.evaluated:
                    values.add_static(e.counts, e.replay.segment_good, e.replay.end_ms)
        allowed = np.zeros(limits, dtype=bool)
        for idx in np.ndindex(*limits):
            allowed[idx] = layout.within_budget(tuple(i + 1 for i in idx), plan.max_gpu_budget)
        total = int(segs.requests.sum())
        inputs = BoundInputs(
            limits=limits, allowed=allowed,
            worker_rates=plan.objective.worker_rates(layout), startup_s=layout.startup_s,
            length_s=segs.length_s, requests=segs.requests,
            allowed_bad=total - required_good(plan.target, total),
            last_edge_ms=float(segs.edges_ms[-1]))
        rounds = 0

        def replay_cells(cells: Sequence[tuple[int, Counts]]) -> Generator:
            nonlocal rounds
            rounds += 1
            cells = list(dict.fromkeys(cells))
            replays: list[SegmentReplay] = yield [
                self._segment_request(variant, k, c, reference) for k, c in cells]
            for (k, c), r in zip(cells, replays):
                values.add_segment(k, c, r.good, r.end_ms)

        # First, in every segment, the threshold of each pool along its line (the other pools
        # at their limits), by bisection below the smallest count whose floor met the segment's
        # own target: what bounds the optimistic values of every count below it.
        searches = [line_threshold(values, k, pool, limits,
                                   required_good(plan.target, int(segs.requests[k])))
                    for k in range(len(segs)) for pool in range(len(limits))]
        for cells in lockstep(searches):
            yield from replay_cells(cells)
        while True:
            good = [values.good_grid(k, limits) for k in range(len(segs))]
            schedule = solve(inputs, good, values.last_end_ms())
            missing = [] if schedule is None else [
                (k, c) for k, c in enumerate(schedule.counts) if not values.is_final(k, c)]
            log.debug("bound round %d: schedule %s (cost %s), not yet replayed %s", rounds,
                      schedule and schedule.counts, schedule and schedule.cost, missing)
            if not missing or rounds >= plan.max_bound_rounds:
                break
            yield from replay_cells([(k, cell) for k, c in missing
                                     for cell in values.probe(k, c, limits)])
        return _BoundOutcome(variant, schedule, values, rounds, not missing)

    def _schedule_job(self, deps: Mapping[str, Any]) -> Generator:
        """The bound's schedule replayed on the whole trace: workers added for a segment are
        started ``startup_time`` before its edge, removed ones drain from the edge."""
        outcome: _BoundOutcome = deps["bound"]
        schedule = outcome.schedule
        if schedule is None:
            return None
        variant = outcome.variant
        layout = variant.layout
        changes = []
        for k in range(1, len(schedule.counts)):
            edge_s = float(self.segments.edges_ms[k] / 1000.0)
            for i, (b, a) in enumerate(zip(schedule.counts[k - 1], schedule.counts[k])):
                if a != b:
                    at_s = max(edge_s - layout.startup_s[i], 0.0) if a > b else edge_s
                    only = [a if j == i else None for j in range(len(layout.names))]
                    changes.append(change_to(layout.mode, at_s, only))
        deployment = variant.with_counts(schedule.counts[0])
        key = f"schedule {variant.label} " + ",".join(
            counts_label(layout.mode, c) for c in schedule.counts)
        (replay,) = yield [ReplayRequest(key, replay_full_task,
                                         (self.trace_path, deployment, self.first_rows, None,
                                          tuple(changes)), "schedule")]
        return replay

    def _seeds_job(self, deps: Mapping[str, Any]) -> Generator:
        chosen = self.choose(self._statics(deps))
        points = [p for p in (chosen.cheapest, chosen.best_infeasible) if p is not None]
        requests = [self._static_request(v, e.counts, seed, "seed")
                    for v, e in points for seed in self.extra_seeds]
        replays = (yield requests) if requests else []
        per_point = len(self.extra_seeds)
        return {(v.label, e.counts): replays[i * per_point:(i + 1) * per_point]
                for i, (v, e) in enumerate(points)}

    def _policy_job(self, policy: Policy) -> Callable[[Mapping[str, Any]], Generator]:
        def job(deps: Mapping[str, Any]) -> Generator:
            variant = (self.choose(self._statics(deps)).variant if deps
                       else self.plan.variants[0])
            seeds = (self.plan.deployment.seed, *self.extra_seeds)
            replays = yield [self._policy_request(variant, policy, s) for s in seeds]
            return variant, replays

        return job

    # -- result ---------------------------------------------------------------------------

    def _interval(self, replays: Sequence[FullReplay]) -> Interval:
        good = np.array([r.segment_good for r in replays])
        return bootstrap(good, self.segments.requests, seed=self.plan.deployment.seed)

    def _point(self, variant: Variant, e: Evaluated,
               seeds: Mapping[tuple[str, Counts], list[FullReplay]] | None) -> StaticPoint:
        extra = (seeds or {}).get((variant.label, e.counts), [])
        return StaticPoint(
            variant=variant.label, overrides=variant.overrides, mode=variant.layout.mode,
            counts=e.counts, gpus=variant.layout.gpus(e.counts), requests=e.requests,
            good_requests=e.good, gpu_hours=float(e.replay.summary["gpu_hours"]), cost=e.cost,
            meets_target=e.meets_target, within_budget=e.within_budget,
            summary=e.replay.summary,
            interval=self._interval([e.replay, *extra]) if seeds is not None else None)

    def result(self, results: Mapping[str, Any], stats: RunStats, arrivals: np.ndarray,
               wall_s: float, notes: Sequence[str] = ()) -> CapacityResult:
        plan = self.plan
        statics = self._statics(results)
        chosen = self.choose(statics)
        seeds = results["seeds"]
        cheapest = self._point(*chosen.cheapest, seeds) if chosen.cheapest else None
        best_bad = self._point(*chosen.best_infeasible, seeds) if chosen.best_infeasible else None
        variants = tuple(self._variant_result(s) for s in statics)
        bound = self._bound(results["bound"], results["schedule"], chosen)
        policies = tuple(self._policy_result(p, *results[f"policy {k}"], bound)
                         for k, p in enumerate(plan.policies))
        notes = [*notes, *self._notes(chosen, statics, bound)]
        return CapacityResult(
            target=plan.target,
            sla={k: v for k, v in plan.deployment.sla.model_dump().items() if v is not None},
            objective=plan.objective.name, objective_unit=plan.objective.unit,
            max_gpu_budget=plan.max_gpu_budget,
            search={d.key: list(d.values) for d in plan.dimensions},
            variants=variants, cheapest=cheapest, best_infeasible=best_bad, bound=bound,
            policies=policies,
            points=self._points(statics, seeds, results),
            replays=dict(sorted(stats.replays.items())), rounds=stats.rounds,
            requests=int(len(arrivals)),
            traffic={"interval_s": 60, "arrivals": per_minute_arrivals(arrivals)},
            notes=tuple(notes), wall_s=wall_s)

    def _variant_result(self, s: StaticSearch) -> VariantResult:
        best = s.cheapest or s.best_within_budget
        return VariantResult(
            variant=s.variant.label, overrides=s.variant.overrides, mode=s.variant.layout.mode,
            point=self._point(s.variant, best, None) if best else None,
            feasible=s.cheapest is not None, replayed=tuple(e.counts for e in s.evaluated),
            complete=s.complete)

    def _bound(self, outcome: _BoundOutcome, replay: FullReplay | None,
               chosen: _Chosen) -> Bound:
        plan, segs, layout = self.plan, self.segments, outcome.variant.layout
        schedule = outcome.schedule
        rows: list[SegmentRow] = []
        cost = None
        capped = False
        startup_cost = 0.0
        if schedule is not None:
            for k, counts in enumerate(schedule.counts):
                rows.append(SegmentRow(
                    segment=k, start_s=float(segs.edges_ms[k] / 1000.0),
                    end_s=float(segs.edges_ms[k + 1] / 1000.0),
                    requests=int(segs.requests[k]), counts=counts, gpus=layout.gpus(counts),
                    good_requests=schedule.good[k], replayed=outcome.values.is_final(k, counts)))
            cost, startup_cost = schedule.cost, schedule.startup_cost
            if chosen.cheapest is not None and chosen.cheapest[0] is outcome.variant:
                static_cost = chosen.cheapest[1].cost
                if static_cost < cost:
                    cost, capped = static_cost, True
        return Bound(variant=outcome.variant.label, mode=layout.mode, cost=cost,
                     startup_cost=startup_cost, segment_s=plan.segment_s,
                     lead_in_s=plan.lead_in_s, startup_s=layout.startup_s,
                     gpus_per_worker=layout.gpus_per_worker,
                     segments=tuple(rows), exact=outcome.exact, rounds=outcome.rounds,
                     capped=capped, replayed=self._replayed(outcome.variant, replay))

    def _replayed(self, variant: Variant, replay: FullReplay | None) -> ReplayedSchedule | None:
        if replay is None:
            return None
        requests = int(replay.summary["num_requests"])
        good = sum(replay.segment_good)
        return ReplayedSchedule(
            requests=requests, good_requests=good, gpu_hours=float(replay.summary["gpu_hours"]),
            cost=objectives.measured(self.plan.objective, variant.layout, replay.summary),
            meets_target=good >= required_good(self.plan.target, requests),
            scaling_events=replay.scaling_events, worker_series=replay.worker_series)

    def _policy_result(self, policy: Policy, variant: Variant, replays: Sequence[FullReplay],
                       bound: Bound) -> PolicyResult:
        plan = self.plan
        first = replays[0]
        requests = int(first.summary["num_requests"])
        good = sum(first.segment_good)
        cost = objectives.measured(plan.objective, variant.layout, first.summary)
        gap = None
        if bound.cost:
            gap = (cost - bound.cost) / bound.cost * 100.0
        return PolicyResult(
            name=policy.name, source=policy.source, mode=variant.layout.mode,
            start_counts=tuple(variant.deployment.pool_sizes().values()), requests=requests,
            good_requests=good, gpu_hours=float(first.summary["gpu_hours"]), cost=cost,
            scaling_events=first.scaling_events,
            meets_target=good >= required_good(plan.target, requests), gap_to_oracle_pct=gap,
            worker_series=first.worker_series, interval=self._interval(replays))

    def _notes(self, chosen: _Chosen, statics: Sequence[StaticSearch], bound: Bound) -> list[str]:
        plan = self.plan
        notes = []
        if chosen.cheapest is None:
            notes.append(f"no deployment within {plan.max_gpu_budget} GPUs meets the "
                         f"{plan.target:.1%} goodput target; the best infeasible point is shown")
        for s in statics:
            if not s.complete:
                notes.append(f"{s.variant.label}: the disaggregated split walk stopped at its "
                             "replay cap without meeting the target")
        if plan.seeds > 1 and not self.seed_sensitive:
            notes.append("round_robin routing does not use the router seed: --seeds adds no "
                         "replays, the interval is over segments only")
        if bound.cost is None:
            notes.append("no scaling schedule within the budget meets the target either")
        elif not bound.exact:
            notes.append(f"the bound stopped refining after {bound.rounds} rounds; it uses "
                         "optimistic values for segments not replayed (still a lower bound)")
        return notes

    def _points(self, statics: Sequence[StaticSearch],
                seeds: Mapping[tuple[str, Counts], list[FullReplay]],
                results: Mapping[str, Any]) -> pd.DataFrame:
        plan = self.plan
        keys = [d.key for d in plan.dimensions]
        rows: list[dict[str, Any]] = []

        def full_row(kind: str, variant: Variant, counts: Counts, replay: FullReplay, seed: int,
                     policy: str = "") -> dict[str, Any]:
            requests = int(replay.summary["num_requests"])
            good = sum(replay.segment_good)
            return {
                **self._identity(kind, variant, counts, seed, -1, policy),
                "requests": requests, "good_requests": good,
                "goodput_ratio": good / requests if requests else 0.0,
                "meets_target": good >= required_good(plan.target, requests),
                "within_budget": variant.layout.within_budget(counts, plan.max_gpu_budget),
                "gpu_hours": float(replay.summary["gpu_hours"]),
                "cost": objectives.measured(plan.objective, variant.layout, replay.summary),
                **{c: float(replay.summary.get(c, np.nan)) for c in LATENCY_COLUMNS},
                "scaling_events": replay.scaling_events,
            }

        by_label = {v.label: v for v in plan.variants}
        base_seed = plan.deployment.seed
        for s in statics:
            for e in s.evaluated:
                rows.append(full_row("static", s.variant, e.counts, e.replay, base_seed))
        for (label, counts), replays in seeds.items():
            for seed, replay in zip(self.extra_seeds, replays):
                rows.append(full_row("seed", by_label[label], counts, replay, seed))
        outcome: _BoundOutcome = results["bound"]
        for k, final in enumerate(outcome.values.final):
            n_k = int(self.segments.requests[k])
            for counts, good in sorted(final.items()):
                rows.append({
                    **self._identity("segment", outcome.variant, counts, base_seed, k, ""),
                    "requests": n_k, "good_requests": good,
                    "goodput_ratio": good / n_k if n_k else 0.0,
                    "meets_target": good >= required_good(plan.target, n_k),
                    "within_budget": True, "gpu_hours": np.nan, "cost": np.nan,
                    **dict.fromkeys(LATENCY_COLUMNS, np.nan), "scaling_events": 0})
        if results["schedule"] is not None:
            first = outcome.schedule.counts[0]
            rows.append(full_row("schedule", outcome.variant, first, results["schedule"],
                                 base_seed))
        for k, policy in enumerate(plan.policies):
            variant, replays = results[f"policy {k}"]
            start = tuple(variant.deployment.pool_sizes().values())
            for seed, replay in zip((base_seed, *self.extra_seeds), replays):
                rows.append(full_row("policy", variant, start, replay, seed, policy.name))
        frame = pd.DataFrame(rows)
        for column in ("num_workers", "num_prefill_workers", "num_decode_workers"):
            frame[column] = frame[column].astype("Int64")
        for key in keys:
            values = frame[key].tolist()
            if len({type(v) for v in values}) > 1:
                frame[key] = [str(v) for v in values]
        return frame

    def _identity(self, kind: str, variant: Variant, counts: Counts, seed: int, segment: int,
                  policy: str) -> dict[str, Any]:
        mode = variant.layout.mode
        dims = {d.key: dict(variant.overrides)[d.key] for d in self.plan.dimensions}
        return {
            "kind": kind, "variant": variant.label, **dims, "mode": mode,
            "num_workers": counts[0] if mode == "agg" else pd.NA,
            "num_prefill_workers": counts[0] if mode == "disagg" else pd.NA,
            "num_decode_workers": counts[1] if mode == "disagg" else pd.NA,
            "gpus": variant.layout.gpus(counts), "seed": seed, "segment": segment,
            "policy": policy,
        }
