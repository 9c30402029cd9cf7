"""The job graph of one capacity run (``scheduler`` protocol): one static search per variant;
then, on the recommended variant (known at once when nothing is searched), the bound's rounds,
the bound's schedule replayed, the seed replays of the chosen points, with a calibration the
replays of the chosen points at its timing draws, and one job per planner policy. ``RunJobs`` also
builds every replay request, so that equal work has one key."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plansim.capacity import objective as objectives
from plansim.capacity import planner_search
from plansim.capacity.bound import (
    BoundInputs,
    Schedule,
    SegmentValues,
    line_threshold,
    lockstep,
    solve,
)
from plansim.capacity.plan import Plan
from plansim.capacity.policies import Policy, default_base
from plansim.capacity.result import counts_label
from plansim.capacity.scheduler import JobSpec, ReplayRequest
from plansim.capacity.scripted import change_to
from plansim.capacity.segments import Segments, SegmentWindow, windows
from plansim.capacity.static_search import (
    Evaluated,
    StaticSearch,
    evaluate,
    required_good,
    run_search,
)
from plansim.capacity.tasks import SegmentReplay, replay_full_task, replay_segment_task
from plansim.capacity.variants import Variant
from plansim.sim.routing import ROUTERS

log = logging.getLogger("plansim.capacity")
Counts = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Chosen:
    """What the static searches chose: the cheapest feasible point and the best infeasible one
    (with their variants), and the variant the bound and the policies run on."""

    cheapest: tuple[Variant, Evaluated] | None
    best_infeasible: tuple[Variant, Evaluated] | None
    variant: Variant


@dataclass(frozen=True, slots=True)
class TuneOutcome:
    """The planner knob search on ``variant``: the knobs searched, every trial in the order
    replayed, the answer (None: no setting replayed holds the target) with its Dynamo
    planner mapping and its replays at every seed."""

    variant: Variant
    knobs: tuple[planner_search.Knob, ...]
    trials: tuple[planner_search.Trial, ...]
    answer: planner_search.Trial | None
    mapping: dict[str, Any] | None
    policy: Policy | None
    replays: tuple[Any, ...] = ()
    # The policy each trial's setting replayed as.
    policies: Mapping[planner_search.Setting, Policy] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BoundOutcome:
    variant: Variant
    schedule: Schedule | None
    values: SegmentValues
    rounds: int
    exact: bool


class RunJobs:
    """One run's job graph: the replay requests and the jobs that ask for them."""

    def __init__(self, plan: Plan, segments: Segments, trace_path: str) -> None:
        self.plan = plan
        self.segments = segments
        self.trace_path = trace_path
        self.first_rows = tuple(int(r) for r in segments.first_row)
        self.windows: list[SegmentWindow] = windows(segments, plan.lead_in_s)
        base_seed = plan.deployment.seed
        self.seed_sensitive = ROUTERS.get(plan.deployment.router.mode).draws
        extra = plan.seeds - 1 if self.seed_sensitive else 0
        self.extra_seeds = tuple(base_seed + k for k in range(1, extra + 1))
        # --planner-start static: the cheapest static counts per variant label, once chosen.
        self.static_starts: dict[str, Counts] = {}

    # -- requests -------------------------------------------------------------------------

    def _static_request(
        self, variant: Variant, counts: Counts, seed: int | None = None, kind: str = "static"
    ) -> ReplayRequest:
        key = f"{variant.label} @ {counts_label(variant.layout.mode, counts)}"
        if seed is not None:
            key += f" seed {seed}"
        return ReplayRequest(
            key,
            replay_full_task,
            (self.trace_path, variant.with_counts(counts, seed), self.first_rows),
            kind,
        )

    def _segment_request(
        self, variant: Variant, segment: int, counts: Counts, reference: Counts
    ) -> ReplayRequest:
        """Segment ``segment`` at ``counts``, its lead-in served by at least ``reference``."""
        window = self.windows[segment]
        lead = tuple(max(c, r) for c, r in zip(counts, reference)) if window.has_lead_in else counts
        mode = variant.layout.mode
        key = f"segment {segment} {variant.label} @ {counts_label(mode, counts)}"
        if lead != counts:
            key += f" after {counts_label(mode, lead)}"
        return ReplayRequest(
            key,
            replay_segment_task,
            (self.trace_path, variant.with_counts(lead), window, counts),
            "segment",
            full=False,
        )

    def _policy_request(
        self, variant: Variant, policy: Policy, seed: int, kind: str = "policy"
    ) -> ReplayRequest:
        key = f"policy {policy.name} on {variant.label}"
        if seed != self.plan.deployment.seed:
            key += f" seed {seed}"
        deployment = variant.with_counts(self.policy_start(variant, policy), seed)
        return ReplayRequest(
            key,
            replay_full_task,
            (self.trace_path, deployment, self.first_rows, policy.config),
            kind,
        )

    def policy_start(self, variant: Variant, policy: Policy) -> Counts:
        """Where a policy replay starts: the deployment's counts fitted into the budget (with
        ``--planner-start static``, the cheapest static counts when the search found them on
        this variant), and at least the planner's minimum endpoints (a deployment whose planner
        keeps N workers is deployed with N), fitted again."""
        budget = self.plan.max_gpu_budget
        floors = [n for n in policy.config.active_min_endpoints() if n is not None]
        start = self.static_starts.get(variant.label) or variant.policy_start(budget)
        return variant.layout.fit([max(c, f) for c, f in zip(start, floors)], budget)

    def _chosen_for_policies(self, deps: Mapping[str, Any]) -> Chosen | None:
        """The static search's choice (None when the policies do not wait for it), noting the
        cheapest counts as the policies' start under ``--planner-start static``."""
        if not deps:
            return None
        chosen = self.choose(self.statics(deps))
        if self.plan.planner_start == "static" and chosen.cheapest is not None:
            variant, point = chosen.cheapest
            self.static_starts[variant.label] = point.counts
        return chosen

    # -- jobs -------------------------------------------------------------------------------

    def jobs(self) -> list[JobSpec]:
        plan = self.plan
        statics = tuple(f"static {i}" for i in range(len(plan.variants)))
        specs = [JobSpec(name, self._static_job(v)) for name, v in zip(statics, plan.variants)]
        # With one variant starting from the deployment's counts the policies need nothing
        # from the search and start at once.
        waits = len(plan.variants) > 1 or plan.planner_start == "static"
        policy_after = statics if waits else ()
        specs.append(JobSpec("bound", self._bound_job, statics))
        specs.append(JobSpec("schedule", self._schedule_job, ("bound",)))
        specs.append(JobSpec("seeds", self._seeds_job, statics))
        if plan.timing is not None:
            specs.append(JobSpec("timing", self._timing_job, statics))
        specs += [
            JobSpec(f"policy {k}", self._policy_job(p), policy_after)
            for k, p in enumerate(plan.policies)
        ]
        if plan.tunes_planner:
            specs.append(JobSpec("tune", self._tune_job, statics))
        return specs

    def _static_job(self, variant: Variant) -> Callable[[Mapping[str, Any]], Generator]:
        plan = self.plan

        def evaluate_counts(counts: Sequence[Counts]) -> Generator:
            replays = yield [self._static_request(variant, c) for c in counts]
            return [
                evaluate(
                    variant,
                    c,
                    r,
                    target=plan.target,
                    budget=plan.max_gpu_budget,
                    objective=plan.objective,
                )
                for c, r in zip(counts, replays)
            ]

        def job(_: Mapping[str, Any]) -> Generator:
            return (
                yield from run_search(variant, plan.max_gpu_budget, plan.objective, evaluate_counts)
            )

        return job

    def choose(self, statics: Sequence[StaticSearch]) -> Chosen:
        """The cheapest feasible point; the best infeasible one (within budget, the most good
        requests, then the lowest cost), among those with a lower cost per hour than the
        cheapest when there are any (what spending less buys: a split of as many GPUs that ends
        a little sooner is not cheaper); and the variant the bound and policies run on."""
        feasible = [(s.variant, s.cheapest) for s in statics if s.cheapest is not None]
        cheapest = min(feasible, key=lambda ve: (ve[1].cost, ve[1].counts)) if feasible else None
        missed = [
            (s.variant, e)
            for s in statics
            for e in s.evaluated
            if e.within_budget and not e.meets_target
        ]
        cheaper = []
        if cheapest is not None:
            limit = self._rate(*cheapest)
            cheaper = [ve for ve in missed if self._rate(*ve) < limit * (1 - 1e-9)]
        best_bad = min(cheaper or missed, key=lambda ve: (-ve[1].good, ve[1].cost), default=None)
        variant = (cheapest or best_bad or (self.plan.variants[0], None))[0]
        return Chosen(cheapest, best_bad, variant)

    def _rate(self, variant: Variant, point: Evaluated) -> float:
        return objectives.rate(self.plan.objective, variant.layout, point.counts)

    def statics(self, deps: Mapping[str, Any]) -> list[StaticSearch]:
        return [deps[f"static {i}"] for i in range(len(self.plan.variants))]

    def _bound_job(self, deps: Mapping[str, Any]) -> Generator:
        plan, segs = self.plan, self.segments
        statics = self.statics(deps)
        chosen = self.choose(statics)
        variant = chosen.variant
        layout = variant.layout
        limits = layout.max_counts(plan.max_gpu_budget)
        # The lead-in of a segment replay runs on the chosen static counts (or more).
        reference = next(
            (
                p[1].counts
                for p in (chosen.cheapest, chosen.best_infeasible)
                if p is not None and p[0] is variant
            ),
            limits,
        )
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
            limits=limits,
            allowed=allowed,
            worker_rates=plan.objective.worker_rates(layout),
            startup_s=layout.startup_s,
            length_s=segs.length_s,
            requests=segs.requests,
            allowed_bad=total - required_good(plan.target, total),
            last_edge_ms=float(segs.edges_ms[-1]),
        )
        rounds = 0

        def replay_cells(cells: Sequence[tuple[int, Counts]]) -> Generator:
            nonlocal rounds
            rounds += 1
            cells = list(dict.fromkeys(cells))
            replays: list[SegmentReplay] = yield [
                self._segment_request(variant, k, c, reference) for k, c in cells
            ]
            for (k, c), r in zip(cells, replays):
                values.add_segment(k, c, r.good, r.end_ms)

        # First, in every segment, the threshold of each pool along its line (the other pools
        # at their limits), by bisection below the smallest count whose floor met the segment's
        # own target: what bounds the optimistic values of every count below it.
        searches = [
            line_threshold(
                values, k, pool, limits, required_good(plan.target, int(segs.requests[k]))
            )
            for k in range(len(segs))
            for pool in range(len(limits))
        ]
        for cells in lockstep(searches):
            yield from replay_cells(cells)
        while True:
            good = [values.good_grid(k, limits) for k in range(len(segs))]
            schedule = solve(inputs, good, values.last_end_ms())
            missing = (
                []
                if schedule is None
                else [(k, c) for k, c in enumerate(schedule.counts) if not values.is_final(k, c)]
            )
            log.debug(
                "bound round %d: schedule %s (cost %s), not yet replayed %s",
                rounds,
                schedule and schedule.counts,
                schedule and schedule.cost,
                missing,
            )
            if not missing or rounds >= plan.max_bound_rounds:
                break
            yield from replay_cells(
                [(k, cell) for k, c in missing for cell in values.probe(k, c, limits)]
            )
        return BoundOutcome(variant, schedule, values, rounds, not missing)

    def _schedule_job(self, deps: Mapping[str, Any]) -> Generator:
        """The bound's schedule replayed on the whole trace: workers added for a segment are
        started ``startup_time`` before its edge, removed ones drain from the edge."""
        outcome: BoundOutcome = deps["bound"]
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
            counts_label(layout.mode, c) for c in schedule.counts
        )
        (replay,) = yield [
            ReplayRequest(
                key,
                replay_full_task,
                (self.trace_path, deployment, self.first_rows, None, tuple(changes)),
                "schedule",
            )
        ]
        return replay

    def _seeds_job(self, deps: Mapping[str, Any]) -> Generator:
        chosen = self.choose(self.statics(deps))
        points = [p for p in (chosen.cheapest, chosen.best_infeasible) if p is not None]
        requests = [
            self._static_request(v, e.counts, seed, "seed")
            for v, e in points
            for seed in self.extra_seeds
        ]
        replays = (yield requests) if requests else []
        per_point = len(self.extra_seeds)
        return {
            (v.label, e.counts): replays[i * per_point : (i + 1) * per_point]
            for i, (v, e) in enumerate(points)
        }

    def _timing_job(self, deps: Mapping[str, Any]) -> Generator:
        """The chosen points at each of the calibration's timing draws."""
        from plansim.sim.deployment import with_overrides

        chosen = self.choose(self.statics(deps))
        points = [p for p in (chosen.cheapest, chosen.best_infeasible) if p is not None]
        draws = self.plan.timing.draws
        requests = [
            ReplayRequest(
                f"{v.label} @ {counts_label(v.layout.mode, e.counts)} timing draw {i}",
                replay_full_task,
                (self.trace_path, with_overrides(v.with_counts(e.counts), draw), self.first_rows),
                "timing",
            )
            for v, e in points
            for i, draw in enumerate(draws)
        ]
        replays = (yield requests) if requests else []
        return {
            (v.label, e.counts): replays[i * len(draws) : (i + 1) * len(draws)]
            for i, (v, e) in enumerate(points)
        }

    def _policy_job(self, policy: Policy) -> Callable[[Mapping[str, Any]], Generator]:
        def job(deps: Mapping[str, Any]) -> Generator:
            chosen = self._chosen_for_policies(deps)
            variant = chosen.variant if chosen is not None else self.plan.variants[0]
            seeds = (self.plan.deployment.seed, *self.extra_seeds)
            replays = yield [self._policy_request(variant, policy, s) for s in seeds]
            return variant, replays

        return job

    def _tune_job(self, deps: Mapping[str, Any]) -> Generator:
        """The planner knob search (``planner_search``) on the chosen variant; the preset's
        minimum endpoints go up to the cheapest static counts (or the budget's limits)."""
        plan = self.plan
        chosen = self._chosen_for_policies(deps)
        variant = chosen.variant
        layout = variant.layout
        static = (
            chosen.cheapest[1].counts
            if chosen.cheapest is not None and chosen.cheapest[0] is variant
            else layout.max_counts(plan.max_gpu_budget)
        )
        base = planner_search.tune_base(default_base(variant.deployment, plan.max_gpu_budget))
        knobs = list(plan.knobs)
        if plan.tune_planner:
            limits = dict(zip(planner_search.min_endpoint_keys(layout.mode), static))
            knobs = planner_search.merged(knobs, planner_search.preset(base, limits))
        sla = plan.deployment.sla.model_dump()

        made: dict[planner_search.Setting, Policy] = {}

        def policy(setting: planner_search.Setting) -> Policy:
            if setting not in made:
                made[setting] = Policy(
                    f"tune {planner_search.label(setting)}",
                    planner_search.setting_config(base, setting, sla),
                    "planner search",
                )
            return made[setting]

        def replay(settings: Sequence[planner_search.Setting]) -> Generator:
            replays = yield [
                self._policy_request(variant, policy(s), plan.deployment.seed, "tune")
                for s in settings
            ]
            trials = []
            for s, r in zip(settings, replays):
                requests = int(r.summary["num_requests"])
                good = sum(r.segment_good)
                trials.append(
                    planner_search.Trial(
                        s,
                        good,
                        requests,
                        objectives.measured(plan.objective, layout, r.summary),
                        good >= required_good(plan.target, requests),
                        r,
                    )
                )
            return trials

        answer, trials = yield from planner_search.drive(planner_search.search(knobs), replay)
        if answer is None:
            return TuneOutcome(
                variant, tuple(knobs), tuple(trials), None, None, None, policies=made
            )
        tuned = Policy("dynamo-tuned", policy(answer.setting).config, "planner search")
        extra = [
            self._policy_request(variant, policy(answer.setting), s, "tune")
            for s in self.extra_seeds
        ]
        more = (yield extra) if extra else []
        return TuneOutcome(
            variant,
            tuple(knobs),
            tuple(trials),
            answer,
            planner_search.planner_mapping(base, answer.setting, sla),
            tuned,
            (answer.replay, *more),
            made,
        )

    # -- result ---------------------------------------------------------------------------
