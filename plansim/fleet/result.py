"""What ``plansim.fleet.run`` returns: the records of the jobs, ``fleet.json`` (``report``) and
the table of every replay (``points``), assembled from the job graph's results.

``fleet.json`` keys: ``feasible``; ``objective``; ``solver`` (which solver proved the choice
optimal); ``inventory`` (per system: count, prices, GPUs the fleet uses on each tier);
``budget_per_hour``; ``cost_per_hour``, ``cost`` (over the traces) and ``gpu_hours`` of the
fleet; ``independent`` (the models' cheapest answers on their own: their cost per hour, and
whether together they fit); ``bindings`` (when the fleet does not fit: each constraint it
breaks and the model that binds it); ``breakdown`` (cost per hour by model, GPU system and
tier); ``models`` (per model: its choice, its cheapest answer alone, whether the fleet moved
it, its front, each variant's search); ``autoscaled`` (with planners: the fleet on one clock,
per model and in all); ``replays``; ``notes``; ``host`` (wall time: the only machine-dependent
figure).

Columns of ``points`` (one row per replay): ``model``, ``kind`` (``static``: capacity's static
search, ``spot``: the spot search, ``fleet``: a model in the autoscaled fleet, ``alone``: the
same model autoscaled on its own), ``variant``, ``mode``, ``num_workers`` /
``num_prefill_workers`` / ``num_decode_workers`` (the starting counts of autoscaled rows),
``tier``, ``systems``, ``gpus``, ``requests``, ``good_requests``, ``goodput_ratio``,
``meets_target``, ``within_budget``, ``cost_per_hour`` (NaN for autoscaled rows), ``cost``,
``gpu_hours``, latency percentiles, ``scaling_events``, ``preemptions``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from plansim.capacity.objective import GpuCost, measured
from plansim.capacity.result import counts_json
from plansim.capacity.static_search import required_good
from plansim.fleet.candidates import Candidate
from plansim.fleet.jobs import Autoscaled, Chosen, FleetJobs
from plansim.fleet.plan import SPOT, FleetPlan
from plansim.roles import POOL_COUNT_FIELDS

LATENCY_COLUMNS = ("median_ttft_ms", "p90_ttft_ms", "p90_itl_ms", "p90_e2e_latency_ms")


@dataclass(frozen=True, slots=True)
class FleetResult:
    """A fleet run: the plan, the choice, the autoscaled fleet (None without planners),
    ``report`` (``fleet.json`` without ``host``), ``points`` and the wall time."""

    plan: FleetPlan
    chosen: Chosen
    autoscaled: Autoscaled | None
    report: dict[str, Any] = field(repr=False)
    points: pd.DataFrame = field(repr=False)
    wall_s: float = 0.0

    @property
    def feasible(self) -> bool:
        return self.chosen.feasible

    @property
    def picks(self) -> tuple[Candidate, ...]:
        """Per model, the candidate the fleet runs (of the best infeasible fleet when none
        fits)."""
        return self.chosen.picks

    def to_json(self) -> dict[str, Any]:
        return {**self.report, "host": {"wall_s": self.wall_s}}


def assemble(
    jobs: FleetJobs, results: dict[str, Any], stats: Any, notes: list[str], wall_s: float
) -> FleetResult:
    plan = jobs.plan
    chosen: Chosen = results["choice"]
    autoscaled: Autoscaled | None = results["autoscaled"]
    inventory = plan.inventory
    picks = chosen.picks
    notes = list(notes)
    if autoscaled is not None:
        notes += autoscaled.notes
    elif any(m.planner is not None for m in plan.models):
        notes.append(
            "the planners were not replayed together: no fleet fits the inventory"
            + (" and the budget" if inventory.budget_per_hour is not None else "")
        )
    independent = [o.cheapest for o in chosen.models]
    report = {
        "feasible": chosen.feasible,
        "objective": {"name": "cost_per_hour", "then": "cost over the traces", "unit": "per hour"},
        "solver": chosen.choice.solver.to_json(),
        "inventory": _inventory(plan, picks),
        "budget_per_hour": inventory.budget_per_hour,
        "cost_per_hour": sum(p.cost_per_hour for p in picks),
        "cost": sum(p.cost for p in picks),
        "gpu_hours": sum(p.gpu_hours for p in picks),
        "independent": _independent(plan, independent),
        "bindings": [b.to_json() for b in chosen.bindings],
        "breakdown": _breakdown(jobs, picks),
        "models": [_model(jobs, k, chosen, autoscaled) for k in range(len(plan.models))],
        "autoscaled": _autoscaled(jobs, autoscaled),
        "replays": {
            **dict(sorted(stats.replays.items())),
            "total": stats.total,
            "rounds": stats.rounds,
        },
        "notes": notes + [f"binds: {b.sentence()}" for b in chosen.bindings],
    }
    return FleetResult(plan, chosen, autoscaled, report, _points(jobs, chosen, autoscaled), wall_s)


def _inventory(plan: FleetPlan, picks: tuple[Candidate, ...]) -> dict[str, Any]:
    out = {}
    for system, count in plan.inventory.counts.items():
        on_demand, spot = plan.inventory.on_demand(system), plan.inventory.spot(system)
        used = {
            tier: sum(p.uses(system) for p in picks if p.tier == tier)
            for tier in ("on_demand", SPOT)
        }
        out[system] = {
            "count": count,
            "price_per_gpu_hour": on_demand.price_per_gpu_hour,
            "spot": None
            if spot is None
            else {
                "price_per_gpu_hour": spot.price_per_gpu_hour,
                "preemptions_per_hour": spot.preemptions_per_gpu_hour,
            },
            "used": used["on_demand"] + used[SPOT],
            "used_spot": used[SPOT],
        }
    return out


def _independent(plan: FleetPlan, cheapest: list[Candidate | None]) -> dict[str, Any]:
    """The models' cheapest answers on their own, and whether the inventory holds them all."""
    if any(c is None for c in cheapest):
        return {"cost_per_hour": None, "fits": False}
    inventory = plan.inventory
    over = {}
    for system, count in inventory.counts.items():
        used = sum(c.uses(system) for c in cheapest)
        if used > count:
            over[f"inventory.{system}"] = used - count
    rate = sum(c.cost_per_hour for c in cheapest)
    if inventory.budget_per_hour is not None and rate > inventory.budget_per_hour * (1 + 1e-9):
        over["budget_per_hour"] = rate - inventory.budget_per_hour
    return {"cost_per_hour": rate, "fits": not over, "over": over}


def _breakdown(jobs: FleetJobs, picks: tuple[Candidate, ...]) -> list[dict[str, Any]]:
    rows = []
    for p in picks:
        prices = jobs.spot_prices if p.tier == SPOT else jobs.prices
        for system, gpus in p.usage:
            rows.append(
                {
                    "model": p.model,
                    "system": system,
                    "tier": p.tier,
                    "gpus": gpus,
                    "cost_per_hour": gpus * prices[system],
                }
            )
    return rows


def _model(
    jobs: FleetJobs, k: int, chosen: Chosen, autoscaled: Autoscaled | None
) -> dict[str, Any]:
    m = jobs.plan.models[k]
    outcome = chosen.models[k]
    pick = chosen.picks[k]
    alone = outcome.cheapest
    variants = []
    for i, static in enumerate(outcome.statics):
        entry = {
            "variant": static.variant.label,
            "mode": static.variant.layout.mode.value,
            "max_gpus": m.budgets[i],
            "answer": None
            if static.answer is None
            else counts_json(static.variant.layout.mode, static.answer),
            "replayed": [list(e.counts) for e in static.evaluated],
            "search_complete": static.complete,
        }
        spot = outcome.spots[i]
        if spot is not None:
            entry["spot"] = {
                "replayed": [list(e.counts) for e, _ in spot.evaluated],
                "answer": None
                if spot.answer is None
                else counts_json(spot.variant.layout.mode, spot.answer),
            }
        variants.append(entry)
    return {
        "name": m.name,
        "target": m.target,
        "requests": pick.requests,
        "traces": list(m.traces),
        "deployment_file": m.source,
        "choice": {
            **pick.to_json(),
            "meets_target": pick.meets_target,
            "moved": alone is not None and pick != alone,
            "extra_cost_per_hour": None
            if alone is None
            else pick.cost_per_hour - alone.cost_per_hour,
        },
        "cheapest_alone": alone.to_json() if alone is not None else None,
        "front": [c.to_json() for c in outcome.front],
        "variants": variants,
    }


def _autoscaled(jobs: FleetJobs, autoscaled: Autoscaled | None) -> dict[str, Any] | None:
    if autoscaled is None:
        return None
    plan = jobs.plan
    models = []
    for _k, (m, member, shared, alone) in enumerate(
        zip(plan.models, autoscaled.members, autoscaled.shared, autoscaled.alone)
    ):
        figures = _member_figures(jobs, member, shared, m.target)
        entry = {
            "name": m.name,
            "planner": member.planner is not None,
            **figures,
            "refused_scale_ups": len(shared.refusals),
            "refusals": [r.to_json() for r in shared.refusals],
            "preemptions": shared.preemptions,
            "migrated_requests": shared.migrated,
            "gpus": [list(row) for row in shared.gpu_series],
        }
        if alone is not None:
            own = _member_figures(jobs, member, alone, m.target)
            entry["alone"] = own
            entry["sla_cost"] = {
                "good_requests": own["good_requests"] - figures["good_requests"],
                "goodput_ratio": own["goodput_ratio"] - figures["goodput_ratio"],
            }
        models.append(entry)
    return {
        "gpu_hours": sum(e["gpu_hours"] for e in models),
        "cost": sum(e["cost"] for e in models),
        "refused_scale_ups": sum(e["refused_scale_ups"] for e in models),
        "sla_cost_good_requests": sum(
            e.get("sla_cost", {}).get("good_requests", 0) for e in models
        ),
        "models": models,
    }


def _member_figures(jobs: FleetJobs, member: Any, replay: Any, target: float) -> dict[str, Any]:
    summary = replay.full.summary
    requests = int(summary["num_requests"])
    good = sum(replay.full.segment_good)
    return {
        "requests": requests,
        "good_requests": good,
        "goodput_ratio": good / requests if requests else 0.0,
        "meets_target": good >= required_good(target, requests),
        "gpu_hours": float(summary["gpu_hours"]),
        "cost": _cost(jobs, member, summary),
        "scaling_events": replay.full.scaling_events,
    }


def _cost(jobs: FleetJobs, member: Any, summary: dict[str, Any]) -> float:
    from plansim.capacity.variants import layout_of

    layout = layout_of(member.deployment)
    prices = {s.system: s.tier.price_per_gpu_hour for _, s in member.pools}
    return measured(GpuCost(prices), layout, summary)


def _points(jobs: FleetJobs, chosen: Chosen, autoscaled: Autoscaled | None) -> pd.DataFrame:
    plan = jobs.plan
    rows: list[dict[str, Any]] = []

    def row(
        kind: str,
        m: Any,
        variant: Any,
        counts: tuple[int, ...],
        tier: str,
        summary: dict[str, Any],
        good: int,
        cost_per_hour: float,
        cost: float,
        within: bool,
        events: int,
        preemptions: int,
    ) -> dict[str, Any]:
        layout = variant.layout
        requests = int(summary["num_requests"])
        return {
            "model": m.name,
            "kind": kind,
            "variant": variant.label,
            "mode": layout.mode.value,
            **dict.fromkeys(POOL_COUNT_FIELDS.values(), pd.NA),
            **dict(zip(layout.count_keys, counts)),
            "tier": tier,
            "systems": "+".join(dict.fromkeys(m.systems(variant))),
            "gpus": layout.gpus(counts),
            "requests": requests,
            "good_requests": good,
            "goodput_ratio": good / requests if requests else 0.0,
            "meets_target": good >= required_good(m.target, requests),
            "within_budget": within,
            "cost_per_hour": cost_per_hour,
            "cost": cost,
            "gpu_hours": float(summary["gpu_hours"]),
            **{c: float(summary.get(c, np.nan)) for c in LATENCY_COLUMNS},
            "scaling_events": events,
            "preemptions": preemptions,
        }

    for m, outcome in zip(plan.models, chosen.models):
        by_point = {(c.variant, c.counts, c.tier): c for c in outcome.candidates}
        for static in outcome.statics:
            for e in static.evaluated:
                c = by_point.get((static.variant.label, e.counts, "on_demand"))
                rows.append(
                    row(
                        "static",
                        m,
                        static.variant,
                        e.counts,
                        "on_demand",
                        e.replay.summary,
                        e.good,
                        c.cost_per_hour if c else np.nan,
                        e.cost,
                        e.within_budget,
                        0,
                        0,
                    )
                )
        for spot in outcome.spots:
            for e, n in spot.evaluated if spot is not None else ():
                c = by_point.get((spot.variant.label, e.counts, SPOT))
                rows.append(
                    row(
                        "spot",
                        m,
                        spot.variant,
                        e.counts,
                        SPOT,
                        e.replay.summary,
                        e.good,
                        c.cost_per_hour if c else np.nan,
                        e.cost,
                        e.within_budget,
                        0,
                        n,
                    )
                )
    if autoscaled is not None:
        for kind, replays in (("fleet", autoscaled.shared), ("alone", autoscaled.alone)):
            for m, member, pick, replay in zip(
                plan.models, autoscaled.members, chosen.picks, replays
            ):
                if replay is None:
                    continue
                variant = next(v for v in m.variants if v.label == pick.variant)
                rows.append(
                    row(
                        kind,
                        m,
                        variant,
                        pick.counts,
                        pick.tier,
                        replay.full.summary,
                        sum(replay.full.segment_good),
                        np.nan,
                        _cost(jobs, member, replay.full.summary),
                        True,
                        replay.full.scaling_events,
                        replay.preemptions,
                    )
                )
    frame = pd.DataFrame(rows)
    for column in POOL_COUNT_FIELDS.values():
        frame[column] = frame[column].astype("Int64")
    return frame
