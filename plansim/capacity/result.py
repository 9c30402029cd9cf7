"""What ``plansim.capacity.search`` returns, and its JSON form (``capacity.json``).

Records are frozen; ``CapacityResult.to_json()`` is the file, ``points`` the table of every
evaluated point (``points.parquet``). Costs are in the objective's unit (GPU-hours by default);
goodput ratios are good requests over all requests of the trace (or the segment).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from plansim.capacity.uncertainty import Interval
from plansim.roles import Mode

Counts = tuple[int, ...]


def counts_json(mode: str, counts: Counts) -> dict[str, int]:
    return dict(zip(Mode(mode).size_keys, counts))


def counts_label(mode: str, counts: Counts) -> str:
    """``5`` (aggregated) or ``2P+3D`` (disaggregated)."""
    return str(counts[0]) if Mode(mode) is Mode.AGG else f"{counts[0]}P+{counts[1]}D"


@dataclass(frozen=True, slots=True)
class StaticPoint:
    """One static deployment that was replayed: a variant at some counts."""

    variant: str
    overrides: tuple[tuple[str, Any], ...]
    mode: str
    counts: Counts
    gpus: int
    requests: int
    good_requests: int
    gpu_hours: float
    cost: float
    meets_target: bool
    within_budget: bool
    summary: dict[str, Any] = field(repr=False)
    interval: Interval | None = None
    # With a calibration: the good requests of its pessimistic timing draw (the fewest), and
    # whether they meet the target.
    pessimistic_good: int | None = None
    holds_at_pessimistic: bool | None = None

    @property
    def goodput_ratio(self) -> float:
        return self.good_requests / self.requests if self.requests else 0.0

    @property
    def feasible(self) -> bool:
        return self.meets_target and self.within_budget

    def deployment(self) -> dict[str, Any]:
        """The dotted deployment keys that make this point: searched keys, mode and counts."""
        return {**dict(self.overrides), "mode": self.mode, **counts_json(self.mode, self.counts)}

    def to_json(self, target: float) -> dict[str, Any]:
        out = {
            "deployment": self.deployment(),
            "variant": self.variant,
            **counts_json(self.mode, self.counts),
            "gpus": self.gpus,
            "goodput_ratio": self.goodput_ratio,
            "good_requests": self.good_requests,
            "requests": self.requests,
            "gpu_hours": self.gpu_hours,
            "cost": self.cost,
            "feasible": self.feasible,
            "p90_ttft_ms": self.summary.get("p90_ttft_ms"),
            "p90_tpot_ms": self.summary.get("p90_tpot_ms"),
            "p90_itl_ms": self.summary.get("p90_itl_ms"),
        }
        if self.interval is not None:
            out["interval"] = {**self.interval.to_json(), "verdict": self.interval.verdict(target)}
        if self.pessimistic_good is not None:
            out["pessimistic_goodput_ratio"] = (
                self.pessimistic_good / self.requests if self.requests else 0.0
            )
            out["holds_at_pessimistic"] = self.holds_at_pessimistic
        return out


@dataclass(frozen=True, slots=True)
class VariantResult:
    """One variant's static search: its cheapest feasible point (``feasible``) or, when none
    within the budget meets the target, its best point; the counts replayed, in order."""

    variant: str
    overrides: tuple[tuple[str, Any], ...]
    mode: str
    point: StaticPoint | None
    feasible: bool
    replayed: tuple[Counts, ...]
    complete: bool

    def to_json(self, target: float) -> dict[str, Any]:
        body: dict[str, Any] = (
            self.point.to_json(target)
            if self.point
            else {"deployment": dict(self.overrides), "variant": self.variant}
        )
        body["feasible"] = self.feasible
        body["replayed"] = [c[0] if Mode(self.mode) is Mode.AGG else list(c) for c in self.replayed]
        body["search_complete"] = self.complete
        return body


@dataclass(frozen=True, slots=True)
class SegmentRow:
    """One segment of the bound: bounds (replay s), requests, the schedule's counts there and
    the good requests it is credited with, and whether that value was replayed."""

    segment: int
    start_s: float
    end_s: float
    requests: int
    counts: Counts
    gpus: int
    good_requests: int
    replayed: bool

    def to_json(self, mode: str) -> dict[str, Any]:
        return {
            "segment": self.segment,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "requests": self.requests,
            **counts_json(mode, self.counts),
            "gpus": self.gpus,
            "good_requests": self.good_requests,
            "goodput_ratio": self.good_requests / self.requests if self.requests else None,
            "replayed": self.replayed,
        }


@dataclass(frozen=True, slots=True)
class ReplayedSchedule:
    """The bound's schedule replayed on the whole trace (start-ups and carry-over as the
    simulator has them): a schedule a policy could follow. When it meets the target, the best
    possible cost lies between the bound and its cost."""

    requests: int
    good_requests: int
    gpu_hours: float
    cost: float
    meets_target: bool
    scaling_events: int
    worker_series: tuple[tuple[float, ...], ...] = field(repr=False)

    @property
    def goodput_ratio(self) -> float:
        return self.good_requests / self.requests if self.requests else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "goodput_ratio": self.goodput_ratio,
            "good_requests": self.good_requests,
            "gpu_hours": self.gpu_hours,
            "cost": self.cost,
            "meets_target": self.meets_target,
            "scaling_events": self.scaling_events,
            "workers": [list(row) for row in self.worker_series],
        }


@dataclass(frozen=True, slots=True)
class Bound:
    """The hindsight lower bound on the recommended variant (``plansim.capacity.bound``).
    ``cost`` None: no schedule within the budget meets the target. ``exact``: the schedule
    uses replayed segment values only. ``capped``: the static cost was lower (the cap)."""

    variant: str
    mode: str
    cost: float | None
    startup_cost: float
    segment_s: float
    lead_in_s: float
    startup_s: tuple[float, ...]
    gpus_per_worker: tuple[int, ...]
    segments: tuple[SegmentRow, ...]
    exact: bool
    rounds: int
    capped: bool
    replayed: ReplayedSchedule | None = None

    @property
    def goodput_ratio(self) -> float | None:
        total = sum(s.requests for s in self.segments)
        return sum(s.good_requests for s in self.segments) / total if total else None

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "cost": self.cost,
            "startup_cost": self.startup_cost,
            "segment_s": self.segment_s,
            "lead_in_s": self.lead_in_s,
            "startup_s": list(self.startup_s),
            "gpus_per_worker": list(self.gpus_per_worker),
            "exact": self.exact,
            "rounds": self.rounds,
            "capped_by_static": self.capped,
            "goodput_ratio": self.goodput_ratio,
            "segments": [s.to_json(self.mode) for s in self.segments],
            "schedule_replay": self.replayed.to_json() if self.replayed else None,
        }


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One planner policy's replay (the canonical seed) and its gap to the bound in percent."""

    name: str
    source: str
    mode: str
    start_counts: Counts
    requests: int
    good_requests: int
    gpu_hours: float
    cost: float
    scaling_events: int
    meets_target: bool
    gap_to_oracle_pct: float | None
    worker_series: tuple[tuple[float, ...], ...] = field(repr=False)
    interval: Interval | None = None
    # Only for a policy that meets the target: (static - cost) / static in percent, and the
    # share of the hindsight saving it takes, (static - cost) / (static - bound).
    saving_pct: float | None = None
    hindsight_share: float | None = None

    @property
    def goodput_ratio(self) -> float:
        return self.good_requests / self.requests if self.requests else 0.0

    def to_json(self, target: float) -> dict[str, Any]:
        out = {
            "name": self.name,
            "source": self.source,
            "goodput_ratio": self.goodput_ratio,
            "good_requests": self.good_requests,
            "gpu_hours": self.gpu_hours,
            "cost": self.cost,
            "scaling_events": self.scaling_events,
            "meets_target": self.meets_target,
            "gap_to_oracle_pct": self.gap_to_oracle_pct,
            "saving_vs_static_pct": self.saving_pct,
            "share_of_hindsight_saving": self.hindsight_share,
            "start": counts_json(self.mode, self.start_counts),
            "workers": [list(row) for row in self.worker_series],
        }
        if self.interval is not None:
            out["interval"] = {**self.interval.to_json(), "verdict": self.interval.verdict(target)}
        return out


def savings(
    cost: float, meets_target: bool, static: float | None, bound: float | None
) -> tuple[float | None, float | None]:
    """(saving against the static cost in percent, share of the hindsight saving) of a policy
    costing ``cost``; both None when it misses the target (a saving bought with missed
    requests is no saving), the share None too when the bound saves nothing."""
    if not meets_target or not static:
        return None, None
    saving = (static - cost) / static * 100.0
    share = None
    if bound is not None and static - bound > 1e-12 * static:
        share = (static - cost) / (static - bound)
    return saving, share


@dataclass(frozen=True, slots=True)
class PlannerTuning:
    """The planner knob search (``planner_search``): the knobs, every setting replayed
    (``trials``: setting, goodput, cost, whether it holds the target), the cheapest that holds
    it (None when none does) and its planner config in Dynamo's key names (``planner``, the
    ``recommended_planner.yaml`` mapping)."""

    variant: str
    knobs: tuple[Any, ...]
    trials: tuple[Any, ...]
    answer: dict[str, Any] | None
    planner: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "knobs": [
                {"key": k.key, "values": list(k.values), "monotone": k.monotone} for k in self.knobs
            ],
            "trials": [
                {
                    "setting": dict(t.setting),
                    "goodput_ratio": t.goodput_ratio,
                    "good_requests": t.good,
                    "requests": t.requests,
                    "cost": t.cost,
                    "meets_target": t.meets_target,
                }
                for t in self.trials
            ],
            "answer": self.answer,
            "planner": self.planner,
        }


@dataclass(frozen=True, slots=True)
class CapacityResult:
    """Everything a capacity run found. ``points`` has one row per replay (see
    ``plansim.capacity.search`` for its columns); ``replays`` counts them by kind; ``wall_s``
    is host time (left out of ``to_json``'s deterministic part)."""

    target: float
    sla: dict[str, float]
    objective: str
    objective_unit: str
    max_gpu_budget: int
    search: dict[str, list[Any]]
    variants: tuple[VariantResult, ...]
    cheapest: StaticPoint | None
    best_infeasible: StaticPoint | None
    bound: Bound | None
    policies: tuple[PolicyResult, ...]
    points: pd.DataFrame = field(repr=False)
    replays: dict[str, int] = field(default_factory=dict)
    rounds: int = 0
    requests: int = 0
    traffic: dict[str, Any] = field(default_factory=dict, repr=False)
    notes: tuple[str, ...] = ()
    wall_s: float = 0.0
    tuning: PlannerTuning | None = None

    @property
    def oracle_cost(self) -> float | None:
        return self.bound.cost if self.bound is not None else None

    def to_json(self) -> dict[str, Any]:
        """``capacity.json``; host-speed figures sit under ``host`` only."""
        t = self.target
        return {
            "target": t,
            "sla": self.sla,
            "objective": {"name": self.objective, "unit": self.objective_unit},
            "max_gpu_budget": self.max_gpu_budget,
            "requests": self.requests,
            "search": self.search,
            "recommendation": self.cheapest.to_json(t) if self.cheapest else None,
            "static": [v.to_json(t) for v in self.variants],
            "cheapest_static": self.cheapest.to_json(t) if self.cheapest else None,
            "best_infeasible": self.best_infeasible.to_json(t) if self.best_infeasible else None,
            "oracle_gpu_hours": self.oracle_cost if self.objective == "gpu_hours" else None,
            "oracle_cost": self.oracle_cost,
            "oracle": self.bound.to_json() if self.bound else None,
            "policies": [p.to_json(t) for p in self.policies],
            "planner_tuning": self.tuning.to_json() if self.tuning else None,
            "replays": {**self.replays, "total": sum(self.replays.values()), "rounds": self.rounds},
            "traffic": self.traffic,
            "notes": list(self.notes),
            "host": {"wall_s": self.wall_s},
        }
