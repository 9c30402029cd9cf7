"""The job graph of one fleet run (``plansim.capacity.scheduler`` protocol), every replay a
request to capacity's ``Runner`` (the one place that runs, caches and counts them):

1. per model and variant, capacity's static search (``static_search.run_search``) at the
   inventory's on-demand prices, over at most the GPUs the variant's systems have;
2. per model and variant whose GPU systems all have spot capacity, a spot search: the static
   answer's counts with every worker on spot (preempted at its rate, replaced after its
   start-up time), and ``k`` more workers per pool until it meets the target (k = 0, 1, 3, 7,
   ..., then bisection: capacity's ``smallest_count``);
3. ``choice``: every model's candidates, its front and the joint choice (``assign``), no
   replay;
4. ``autoscaled``: when a model's deployment has a planner block and the fleet fits, the
   fleet's choice replayed with every model on one clock and one ledger of the inventory (the
   planners scale; a refused scale-up waits for the next tick), and each planner's model
   replayed on its own beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plansim.capacity.objective import GpuCost
from plansim.capacity.result import counts_label
from plansim.capacity.scheduler import JobSpec, ReplayRequest
from plansim.capacity.static_search import (
    Evaluated,
    StaticSearch,
    drive,
    evaluate,
    run_search,
    smallest_count,
)
from plansim.capacity.tasks import replay_full_task
from plansim.capacity.variants import Variant
from plansim.fleet import assign
from plansim.fleet.candidates import Candidate, cheapest, closest, front, rate, usage_of
from plansim.fleet.ledger import pool_supplies
from plansim.fleet.plan import ON_DEMAND, SPOT, FleetPlan, ModelPlan, planner_for
from plansim.fleet.tasks import MemberTask, replay_fleet_task, replay_member_task
from plansim.roles import Mode

Counts = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SpotSearch:
    """A variant's spot search: every point replayed (with its replay's preemptions), and the
    counts that met the target (None: none within the budget)."""

    variant: Variant
    evaluated: tuple[tuple[Evaluated, int], ...]
    answer: Counts | None


@dataclass(frozen=True, slots=True)
class ModelOutcome:
    """One model's searches and candidates: ``candidates`` every point within its budget,
    ``front`` those the choice picks from (its closest point alone when none meets the
    target), ``cheapest`` its best answer on its own."""

    statics: tuple[StaticSearch, ...]
    spots: tuple[SpotSearch | None, ...]
    candidates: tuple[Candidate, ...]
    front: tuple[Candidate, ...]
    cheapest: Candidate | None


@dataclass(frozen=True, slots=True)
class Chosen:
    """The joint choice: per model its outcome and the candidate the fleet runs."""

    models: tuple[ModelOutcome, ...]
    choice: assign.Choice
    picks: tuple[Candidate, ...]
    bindings: tuple[assign.Binding, ...]

    @property
    def feasible(self) -> bool:
        return self.choice.feasible and all(m.cheapest is not None for m in self.models)


@dataclass(frozen=True, slots=True)
class Autoscaled:
    """The autoscaled fleet: the members' replays together, and each planner's model alone
    (None for a static model)."""

    members: tuple[MemberTask, ...]
    shared: tuple[Any, ...]
    alone: tuple[Any, ...]
    notes: tuple[str, ...]


class FleetJobs:
    """One run's job graph over the models' trace files (``trace_paths``, in model order)."""

    def __init__(
        self, plan: FleetPlan, trace_paths: Sequence[str], requests: Sequence[int]
    ) -> None:
        self.plan = plan
        self.trace_paths = tuple(trace_paths)
        self.first_rows = tuple((0, int(n)) for n in requests)
        inventory = plan.inventory
        self.prices = {s: inventory.on_demand(s).price_per_gpu_hour for s in inventory.counts}
        self.spot_prices = {
            s: t.price_per_gpu_hour
            for s in inventory.counts
            if (t := inventory.spot(s)) is not None
        }

    # -- names -------------------------------------------------------------------------

    @staticmethod
    def static_name(m: ModelPlan, i: int) -> str:
        return f"{m.name} static {i}"

    @staticmethod
    def spot_name(m: ModelPlan, i: int) -> str:
        return f"{m.name} spot {i}"

    def has_spot(self, m: ModelPlan, variant: Variant) -> bool:
        return all(s in self.spot_prices for s in m.systems(variant))

    def jobs(self) -> list[JobSpec]:
        specs = []
        for m in self.plan.models:
            for i, variant in enumerate(m.variants):
                specs.append(JobSpec(self.static_name(m, i), self._static_job(m, i)))
                if self.has_spot(m, variant):
                    specs.append(
                        JobSpec(
                            self.spot_name(m, i), self._spot_job(m, i), (self.static_name(m, i),)
                        )
                    )
        searches = tuple(spec.name for spec in specs)
        specs.append(JobSpec("choice", self._choice_job, searches))
        specs.append(JobSpec("autoscaled", self._autoscaled_job, ("choice",)))
        return specs

    # -- searches ----------------------------------------------------------------------

    def _request(self, m: ModelPlan, variant: Variant, counts: Counts, kind: str) -> ReplayRequest:
        key = f"{m.name}: {variant.label} @ {counts_label(variant.layout.mode, counts)}"
        deployment = variant.with_counts(counts)
        trace = self.trace_paths[m.index]
        if kind == ON_DEMAND:
            return ReplayRequest(
                key, replay_full_task, (trace, deployment, self.first_rows[m.index]), "static"
            )
        member = MemberTask(trace, deployment, pool_supplies(self.plan.inventory, m, variant, SPOT))
        return ReplayRequest(
            f"{key} on spot", replay_member_task, (member, self.plan.seed, m.index), "spot"
        )

    def _static_job(self, m: ModelPlan, i: int) -> Callable[[Mapping[str, Any]], Generator]:
        variant, budget = m.variants[i], m.budgets[i]
        objective = GpuCost(self.prices)

        def evaluate_counts(counts: Sequence[Counts]) -> Generator:
            replays = yield [self._request(m, variant, c, ON_DEMAND) for c in counts]
            return [
                evaluate(variant, c, r, target=m.target, budget=budget, objective=objective)
                for c, r in zip(counts, replays)
            ]

        def job(_: Mapping[str, Any]) -> Generator:
            return (yield from run_search(variant, budget, objective, evaluate_counts))

        return job

    def _spot_job(self, m: ModelPlan, i: int) -> Callable[[Mapping[str, Any]], Generator]:
        variant, budget = m.variants[i], m.budgets[i]
        objective = GpuCost(self.spot_prices)
        layout = variant.layout

        def job(deps: Mapping[str, Any]) -> Generator:
            static: StaticSearch = deps[self.static_name(m, i)]
            if static.answer is None:
                return None
            base = static.answer

            def point(n: int) -> Counts:
                return tuple(c + n - 1 for c in base)

            limit = 1
            while layout.within_budget(point(limit + 1), budget):
                limit += 1
            preempted: dict[Counts, int] = {}

            def evaluate_counts(counts: Sequence[Counts]) -> Generator:
                replays = yield [self._request(m, variant, c, SPOT) for c in counts]
                for c, r in zip(counts, replays):
                    preempted[c] = r.preemptions
                return [
                    evaluate(
                        variant, c, r.full, target=m.target, budget=budget, objective=objective
                    )
                    for c, r in zip(counts, replays)
                ]

            answer, evaluated, _ = yield from drive(smallest_count(point, limit), evaluate_counts)
            return SpotSearch(
                variant,
                tuple((e, preempted[e.counts]) for e in evaluated),
                answer and point(answer[0]),
            )

        return job

    # -- the choice --------------------------------------------------------------------

    def _choice_job(self, deps: Mapping[str, Any]) -> Generator:
        yield from ()
        return self.choose(deps)

    def outcome(self, m: ModelPlan, deps: Mapping[str, Any]) -> ModelOutcome:
        statics = tuple(deps[self.static_name(m, i)] for i in range(len(m.variants)))
        spots = tuple(deps.get(self.spot_name(m, i)) for i in range(len(m.variants)))
        candidates = []
        for static in statics:
            candidates += [
                self._candidate(m, static.variant, e, ON_DEMAND, 0)
                for e in static.evaluated
                if e.within_budget
            ]
        for spot in spots:
            if spot is not None:
                candidates += [
                    self._candidate(m, spot.variant, e, SPOT, n)
                    for e, n in spot.evaluated
                    if e.within_budget
                ]
        best = cheapest(candidates)
        near = front(candidates) or [closest(candidates)]
        return ModelOutcome(statics, spots, tuple(candidates), tuple(near), best)

    def _candidate(
        self, m: ModelPlan, variant: Variant, e: Evaluated, tier: str, preemptions: int
    ) -> Candidate:
        layout = variant.layout
        usage = usage_of(m.systems(variant), layout.gpus_per_worker, e.counts)
        prices = self.spot_prices if tier == SPOT else self.prices
        return Candidate(
            model=m.name,
            variant=variant.label,
            overrides=variant.overrides,
            mode=layout.mode.value,
            counts=e.counts,
            tier=tier,
            usage=usage,
            cost_per_hour=rate(usage, prices),
            cost=e.cost,
            gpu_hours=float(e.replay.summary["gpu_hours"]),
            requests=e.requests,
            good_requests=e.good,
            meets_target=e.meets_target,
            preemptions=preemptions,
            summary=e.replay.summary,
        )

    def choose(self, deps: Mapping[str, Any]) -> Chosen:
        plan = self.plan
        models = tuple(self.outcome(m, deps) for m in plan.models)
        options = [list(o.front) for o in models]
        inventory = plan.inventory
        choice = assign.solve(options, inventory.counts, inventory.budget_per_hour, self.prices)
        picks = tuple(options[k][p] for k, p in enumerate(choice.picks))
        bindings = [
            assign.Binding(assign.TARGET, m.name, m.target, o.front[0].goodput_ratio)
            for m, o in zip(plan.models, models)
            if o.cheapest is None
        ]
        if not choice.feasible:
            bindings += assign.bindings(
                choice,
                options,
                [m.name for m in plan.models],
                inventory.counts,
                inventory.budget_per_hour,
            )
        return Chosen(models, choice, picks, tuple(bindings))

    # -- the autoscaled fleet ----------------------------------------------------------

    def _autoscaled_job(self, deps: Mapping[str, Any]) -> Generator:
        chosen: Chosen = deps["choice"]
        plan = self.plan
        if all(m.planner is None for m in plan.models) or not chosen.feasible:
            return None
        inventory = plan.inventory
        members, notes = [], []
        for m, pick in zip(plan.models, chosen.picks):
            variant = next(v for v in m.variants if v.label == pick.variant)
            planner, note = planner_for(m, Mode(pick.mode))
            if note:
                notes.append(note)
            members.append(
                MemberTask(
                    self.trace_paths[m.index],
                    variant.with_counts(pick.counts),
                    pool_supplies(inventory, m, variant, pick.tier),
                    planner,
                )
            )
        requests = [
            ReplayRequest(
                "fleet: every model on one clock",
                replay_fleet_task,
                (tuple(members), inventory.counts, inventory.budget_per_hour, plan.seed),
                "fleet",
            )
        ]
        scaled = [k for k, member in enumerate(members) if member.planner is not None]
        requests += [
            ReplayRequest(
                f"{plan.models[k].name}: autoscaled alone",
                replay_member_task,
                (members[k], plan.seed, k),
                "alone",
            )
            for k in scaled
        ]
        replays = yield requests
        alone = dict(zip(scaled, replays[1:]))
        return Autoscaled(
            tuple(members),
            tuple(replays[0]),
            tuple(alone.get(k) for k in range(len(members))),
            tuple(notes),
        )
