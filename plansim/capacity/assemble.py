"""Turning a run's job results into a ``CapacityResult``: the chosen points with their
intervals, one record per variant, the bound and its schedule replayed, the policies with their
gap to the bound, the notes and the table of every replay (``points``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from plansim.capacity import objective as objectives
from plansim.capacity.jobs import BoundOutcome, Chosen, RunJobs, TuneOutcome
from plansim.capacity.policies import Policy
from plansim.capacity.result import (
    Bound,
    CapacityResult,
    PlannerTuning,
    PolicyResult,
    ReplayedSchedule,
    SegmentRow,
    StaticPoint,
    VariantResult,
    counts_label,
    savings,
)
from plansim.capacity.scheduler import RunStats
from plansim.capacity.segments import per_minute_arrivals
from plansim.capacity.static_search import Evaluated, StaticSearch, required_good
from plansim.capacity.tasks import FullReplay
from plansim.capacity.uncertainty import Interval, bootstrap
from plansim.capacity.variants import Variant
from plansim.roles import POOL_COUNT_FIELDS

Counts = tuple[int, ...]
LATENCY_COLUMNS = (
    "median_ttft_ms",
    "p90_ttft_ms",
    "p90_tpot_ms",
    "p90_itl_ms",
    "p90_e2e_latency_ms",
)


class Assembly:
    """The result of one run from its ``RunJobs`` and the jobs' results."""

    def __init__(self, jobs: RunJobs) -> None:
        self.jobs = jobs
        self.plan = jobs.plan
        self.segments = jobs.segments
        self.extra_seeds = jobs.extra_seeds
        self.seed_sensitive = jobs.seed_sensitive

    def _interval(self, replays: Sequence[FullReplay], timing_draws: int = 0) -> Interval:
        good = np.array([r.segment_good for r in replays])
        return bootstrap(
            good, self.segments.requests, seed=self.plan.deployment.seed, timing_draws=timing_draws
        )

    def _point(
        self,
        variant: Variant,
        e: Evaluated,
        seeds: Mapping[tuple[str, Counts], list[FullReplay]] | None,
        timing: Mapping[tuple[str, Counts], list[FullReplay]] | None = None,
    ) -> StaticPoint:
        extra = (seeds or {}).get((variant.label, e.counts), [])
        drawn = (timing or {}).get((variant.label, e.counts), [])
        low = min((sum(r.segment_good) for r in drawn), default=None)
        return StaticPoint(
            variant=variant.label,
            overrides=variant.overrides,
            mode=variant.layout.mode,
            counts=e.counts,
            gpus=variant.layout.gpus(e.counts),
            requests=e.requests,
            good_requests=e.good,
            gpu_hours=float(e.replay.summary["gpu_hours"]),
            cost=e.cost,
            meets_target=e.meets_target,
            within_budget=e.within_budget,
            summary=e.replay.summary,
            interval=(
                self._interval([e.replay, *extra, *drawn], len(drawn))
                if seeds is not None
                else None
            ),
            pessimistic_good=low,
            holds_at_pessimistic=(
                None if low is None else low >= required_good(self.plan.target, e.requests)
            ),
        )

    def result(
        self,
        results: Mapping[str, Any],
        stats: RunStats,
        arrivals: np.ndarray,
        wall_s: float,
        notes: Sequence[str] = (),
    ) -> CapacityResult:
        plan = self.plan
        statics = self.jobs.statics(results)
        chosen = self.jobs.choose(statics)
        seeds = results["seeds"]
        timing = results.get("timing")
        cheapest = self._point(*chosen.cheapest, seeds, timing) if chosen.cheapest else None
        best_bad = (
            self._point(*chosen.best_infeasible, seeds, timing) if chosen.best_infeasible else None
        )
        variants = tuple(self._variant_result(s) for s in statics)
        bound = self._bound(results["bound"], results["schedule"], chosen)
        static_cost = cheapest.cost if cheapest is not None else None
        policies = [
            self._policy_result(p, *results[f"policy {k}"], bound, static_cost)
            for k, p in enumerate(plan.policies)
        ]
        tune: TuneOutcome | None = results.get("tune")
        tuning = None
        if tune is not None:
            tuning = PlannerTuning(
                tune.variant.label,
                tune.knobs,
                tune.trials,
                dict(tune.answer.setting) if tune.answer is not None else None,
                tune.mapping,
            )
            if tune.policy is not None:
                policies.append(
                    self._policy_result(tune.policy, tune.variant, tune.replays, bound, static_cost)
                )
        notes = [*notes, *self._notes(chosen, statics, bound), *self._timing_notes(cheapest)]
        if tune is not None and tune.answer is None:
            notes.append(
                f"no setting of the planner knobs replayed ({len(tune.trials)}) meets "
                f"the {plan.target:.1%} goodput target"
            )
        if plan.policies:
            notes += self._start_notes(results["policy 0"][0], cheapest)
        return CapacityResult(
            target=plan.target,
            sla={k: v for k, v in plan.deployment.sla.model_dump().items() if v is not None},
            objective=plan.objective.name,
            objective_unit=plan.objective.unit,
            max_gpu_budget=plan.max_gpu_budget,
            search={d.key: list(d.values) for d in plan.dimensions},
            variants=variants,
            cheapest=cheapest,
            best_infeasible=best_bad,
            bound=bound,
            policies=tuple(policies),
            tuning=tuning,
            points=self._points(statics, seeds, results),
            replays=dict(sorted(stats.replays.items())),
            rounds=stats.rounds,
            requests=int(len(arrivals)),
            traffic={"interval_s": 60, "arrivals": per_minute_arrivals(arrivals)},
            notes=tuple(notes),
            wall_s=wall_s,
        )

    def _variant_result(self, s: StaticSearch) -> VariantResult:
        best = s.cheapest or s.best_within_budget
        return VariantResult(
            variant=s.variant.label,
            overrides=s.variant.overrides,
            mode=s.variant.layout.mode,
            point=self._point(s.variant, best, None) if best else None,
            feasible=s.cheapest is not None,
            replayed=tuple(e.counts for e in s.evaluated),
            complete=s.complete,
        )

    def _bound(self, outcome: BoundOutcome, replay: FullReplay | None, chosen: Chosen) -> Bound:
        plan, segs, layout = self.plan, self.segments, outcome.variant.layout
        schedule = outcome.schedule
        rows: list[SegmentRow] = []
        cost = None
        capped = False
        startup_cost = 0.0
        if schedule is not None:
            for k, counts in enumerate(schedule.counts):
                rows.append(
                    SegmentRow(
                        segment=k,
                        start_s=float(segs.edges_ms[k] / 1000.0),
                        end_s=float(segs.edges_ms[k + 1] / 1000.0),
                        requests=int(segs.requests[k]),
                        counts=counts,
                        gpus=layout.gpus(counts),
                        good_requests=schedule.good[k],
                        replayed=outcome.values.is_final(k, counts),
                    )
                )
            cost, startup_cost = schedule.cost, schedule.startup_cost
            if chosen.cheapest is not None and chosen.cheapest[0] is outcome.variant:
                static_cost = chosen.cheapest[1].cost
                if static_cost < cost:
                    cost, capped = static_cost, True
        return Bound(
            variant=outcome.variant.label,
            mode=layout.mode,
            cost=cost,
            startup_cost=startup_cost,
            segment_s=plan.segment_s,
            lead_in_s=plan.lead_in_s,
            startup_s=layout.startup_s,
            gpus_per_worker=layout.gpus_per_worker,
            segments=tuple(rows),
            exact=outcome.exact,
            rounds=outcome.rounds,
            capped=capped,
            replayed=self._replayed(outcome.variant, replay),
        )

    def _replayed(self, variant: Variant, replay: FullReplay | None) -> ReplayedSchedule | None:
        if replay is None:
            return None
        requests = int(replay.summary["num_requests"])
        good = sum(replay.segment_good)
        return ReplayedSchedule(
            requests=requests,
            good_requests=good,
            gpu_hours=float(replay.summary["gpu_hours"]),
            cost=objectives.measured(self.plan.objective, variant.layout, replay.summary),
            meets_target=good >= required_good(self.plan.target, requests),
            scaling_events=replay.scaling_events,
            worker_series=replay.worker_series,
        )

    def _policy_result(
        self,
        policy: Policy,
        variant: Variant,
        replays: Sequence[FullReplay],
        bound: Bound,
        static_cost: float | None,
    ) -> PolicyResult:
        plan = self.plan
        first = replays[0]
        requests = int(first.summary["num_requests"])
        good = sum(first.segment_good)
        cost = objectives.measured(plan.objective, variant.layout, first.summary)
        gap = None
        if bound.cost:
            gap = (cost - bound.cost) / bound.cost * 100.0
        meets = good >= required_good(plan.target, requests)
        saving, share = savings(cost, meets, static_cost, bound.cost)
        return PolicyResult(
            name=policy.name,
            source=policy.source,
            mode=variant.layout.mode,
            start_counts=self.jobs.policy_start(variant, policy),
            requests=requests,
            good_requests=good,
            gpu_hours=float(first.summary["gpu_hours"]),
            cost=cost,
            scaling_events=first.scaling_events,
            meets_target=meets,
            gap_to_oracle_pct=gap,
            worker_series=first.worker_series,
            interval=self._interval(replays),
            saving_pct=saving,
            hindsight_share=share,
        )

    def _notes(self, chosen: Chosen, statics: Sequence[StaticSearch], bound: Bound) -> list[str]:
        plan = self.plan
        notes = []
        if chosen.cheapest is None:
            notes.append(
                f"no deployment within {plan.max_gpu_budget} GPUs meets the "
                f"{plan.target:.1%} goodput target; the best infeasible point is shown"
            )
        for s in statics:
            if not s.complete:
                notes.append(
                    f"{s.variant.label}: the disaggregated split walk stopped at its "
                    "replay cap without meeting the target"
                )
        if plan.seeds > 1 and not self.seed_sensitive:
            notes.append(
                "round_robin routing does not use the router seed: --seeds adds no "
                "replays, the interval is over segments only"
            )
        if bound.cost is None:
            notes.append("no scaling schedule within the budget meets the target either")
        elif not bound.exact:
            notes.append(
                f"the bound stopped refining after {bound.rounds} rounds; it uses "
                "optimistic values for segments not replayed (still a lower bound)"
            )
        return notes

    def _timing_notes(self, cheapest: StaticPoint | None) -> list[str]:
        timing = self.plan.timing
        if timing is None or cheapest is None or cheapest.pessimistic_good is None:
            return []
        low = cheapest.pessimistic_good / cheapest.requests if cheapest.requests else 0.0
        holds = "holds" if cheapest.holds_at_pessimistic else "does not hold"
        return [
            f"with the timing uncertainty of {timing.source} ({timing.family}, "
            f"{len(timing.draws)} draws), the recommendation's goodput at the pessimistic "
            f"draw is {low:.2%}: it {holds} the {self.plan.target:.1%} target there"
        ]

    def _start_notes(self, variant: Variant, cheapest: StaticPoint | None) -> list[str]:
        budget = self.plan.max_gpu_budget
        mode = variant.layout.mode
        if self.plan.planner_start == "static":
            counts = self.jobs.static_starts.get(variant.label)
            if counts is not None:
                return [
                    f"the planner policies start at the cheapest static deployment, "
                    f"{counts_label(mode, counts)} workers (--planner-start static)"
                ]
            return [
                "no static deployment meets the target: the planner policies start at the "
                "deployment's counts (--planner-start static)"
            ]
        start = variant.policy_start(budget)
        notes = []
        if start != variant.counts:
            notes.append(
                f"the deployment's {counts_label(mode, variant.counts)} workers exceed "
                f"--max-gpu-budget {budget} GPUs: the planner policies start at "
                f"{counts_label(mode, start)}"
            )
        if (
            cheapest is not None
            and cheapest.variant == variant.label
            and any(s < c for s, c in zip(start, cheapest.counts))
        ):
            # Fewer workers than the traffic needs: the first intervals measure a cold start.
            notes.append(
                f"the planner policies start at {counts_label(mode, start)} workers, fewer "
                f"than the cheapest static deployment's {counts_label(mode, cheapest.counts)}: "
                "their first intervals are a cold start under the trace's load "
                "(--planner-start static starts them there)"
            )
        return notes

    def _points(
        self,
        statics: Sequence[StaticSearch],
        seeds: Mapping[tuple[str, Counts], list[FullReplay]],
        results: Mapping[str, Any],
    ) -> pd.DataFrame:
        plan = self.plan
        keys = [d.key for d in plan.dimensions]
        rows: list[dict[str, Any]] = []

        def full_row(
            kind: str,
            variant: Variant,
            counts: Counts,
            replay: FullReplay,
            seed: int,
            policy: str = "",
        ) -> dict[str, Any]:
            requests = int(replay.summary["num_requests"])
            good = sum(replay.segment_good)
            return {
                **self._identity(kind, variant, counts, seed, -1, policy),
                "requests": requests,
                "good_requests": good,
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
        for (label, counts), replays in (results.get("timing") or {}).items():
            for k, replay in enumerate(replays):
                rows.append(
                    {
                        **full_row("timing", by_label[label], counts, replay, base_seed),
                        "timing_draw": k,
                    }
                )
        outcome: BoundOutcome = results["bound"]
        for k, final in enumerate(outcome.values.final):
            n_k = int(self.segments.requests[k])
            for counts, good in sorted(final.items()):
                rows.append(
                    {
                        **self._identity("segment", outcome.variant, counts, base_seed, k, ""),
                        "requests": n_k,
                        "good_requests": good,
                        "goodput_ratio": good / n_k if n_k else 0.0,
                        "meets_target": good >= required_good(plan.target, n_k),
                        "within_budget": True,
                        "gpu_hours": np.nan,
                        "cost": np.nan,
                        **dict.fromkeys(LATENCY_COLUMNS, np.nan),
                        "scaling_events": 0,
                    }
                )
        if results["schedule"] is not None:
            first = outcome.schedule.counts[0]
            rows.append(
                full_row("schedule", outcome.variant, first, results["schedule"], base_seed)
            )
        for k, policy in enumerate(plan.policies):
            variant, replays = results[f"policy {k}"]
            start = self.jobs.policy_start(variant, policy)
            for seed, replay in zip((base_seed, *self.extra_seeds), replays):
                rows.append(full_row("policy", variant, start, replay, seed, policy.name))
        tune: TuneOutcome | None = results.get("tune")
        if tune is not None:
            for t in tune.trials:
                policy = tune.policies[t.setting]
                rows.append(
                    full_row(
                        "tune",
                        tune.variant,
                        self.jobs.policy_start(tune.variant, policy),
                        t.replay,
                        base_seed,
                        policy.name,
                    )
                )
            if tune.policy is not None:
                start = self.jobs.policy_start(tune.variant, tune.policy)
                for seed, replay in zip((base_seed, *self.extra_seeds), tune.replays):
                    rows.append(
                        full_row("policy", tune.variant, start, replay, seed, tune.policy.name)
                    )
        frame = pd.DataFrame(rows)
        for column in ("num_workers", "num_prefill_workers", "num_decode_workers"):
            frame[column] = frame[column].astype("Int64")
        for key in keys:
            values = frame[key].tolist()
            if len({type(v) for v in values}) > 1:
                frame[key] = [str(v) for v in values]
        return frame

    def _identity(
        self, kind: str, variant: Variant, counts: Counts, seed: int, segment: int, policy: str
    ) -> dict[str, Any]:
        mode = variant.layout.mode
        dims = {d.key: dict(variant.overrides)[d.key] for d in self.plan.dimensions}
        return {
            "kind": kind,
            "variant": variant.label,
            **dims,
            "mode": mode,
            **dict.fromkeys(POOL_COUNT_FIELDS.values(), pd.NA),
            **dict(zip(variant.layout.count_keys, counts)),
            "gpus": variant.layout.gpus(counts),
            "seed": seed,
            "segment": segment,
            "policy": policy,
        }
