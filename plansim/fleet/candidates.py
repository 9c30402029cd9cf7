"""A model's candidates for the fleet: the deployments its search replayed, priced, and the
front the joint choice picks from.

A ``Candidate`` is one replayed deployment of one model: a variant at some worker counts on one
tier (on demand, or every worker on spot capacity), with the GPUs it holds per system, its cost
per hour (GPUs x the tier's price per GPU-hour: what the budget bounds and the choice
minimises), its cost over the trace (provisioned worker-seconds x the same prices, start-ups of
replaced spot workers included) and its goodput. A model's front keeps the candidates that meet
its target and that no other such candidate beats on GPUs of every system and on cost per hour
at once: whatever the inventory, the best fleet picks from the fronts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plansim.capacity.result import counts_json, counts_label

Counts = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Candidate:
    """See the module docstring; ``usage`` is ``((system, GPUs), ...)`` in system order."""

    model: str
    variant: str
    overrides: tuple[tuple[str, Any], ...]
    mode: str
    counts: Counts
    tier: str
    usage: tuple[tuple[str, int], ...]
    cost_per_hour: float
    cost: float
    gpu_hours: float
    requests: int
    good_requests: int
    meets_target: bool
    preemptions: int = 0
    summary: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def goodput_ratio(self) -> float:
        return self.good_requests / self.requests if self.requests else 0.0

    @property
    def gpus(self) -> int:
        return sum(n for _, n in self.usage)

    def uses(self, system: str) -> int:
        return dict(self.usage).get(system, 0)

    @property
    def label(self) -> str:
        """``h200 agg 4`` style: the variant, the counts and the tier."""
        tier = "" if self.tier == "on_demand" else f" on {self.tier}"
        return f"{self.variant} @ {counts_label(self.mode, self.counts)}{tier}"

    def deployment(self) -> dict[str, Any]:
        """The dotted deployment keys that make this candidate: searched keys, mode, counts."""
        return {**dict(self.overrides), "mode": self.mode, **counts_json(self.mode, self.counts)}

    def to_json(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment(),
            "variant": self.variant,
            "mode": self.mode,
            **counts_json(self.mode, self.counts),
            "tier": self.tier,
            "gpus": dict(self.usage),
            "cost_per_hour": self.cost_per_hour,
            "cost": self.cost,
            "gpu_hours": self.gpu_hours,
            "goodput_ratio": self.goodput_ratio,
            "good_requests": self.good_requests,
            "requests": self.requests,
            "meets_target": self.meets_target,
            "preemptions": self.preemptions,
            "p90_ttft_ms": self.summary.get("p90_ttft_ms"),
            "p90_itl_ms": self.summary.get("p90_itl_ms"),
        }


def usage_of(
    systems: Sequence[str], gpus_per_worker: Sequence[int], counts: Sequence[int]
) -> tuple[tuple[str, int], ...]:
    """GPUs held per system (pools on one system add up), systems sorted."""
    out: dict[str, int] = {}
    for system, g, n in zip(systems, gpus_per_worker, counts):
        out[system] = out.get(system, 0) + g * n
    return tuple(sorted(out.items()))


def rate(usage: Sequence[tuple[str, int]], prices: Mapping[str, float]) -> float:
    """Cost per hour of holding ``usage`` at ``prices`` per GPU-hour of each system."""
    return sum(n * prices[s] for s, n in usage)


def _order(c: Candidate) -> tuple:
    return (c.cost_per_hour, c.cost, c.gpus, c.variant, c.counts, c.tier)


def dominates(a: Candidate, b: Candidate) -> bool:
    """``a`` holds no more GPUs of any system than ``b``, costs no more per hour, and is not
    the same on both."""
    systems = {s for s, _ in a.usage} | {s for s, _ in b.usage}
    no_more = all(a.uses(s) <= b.uses(s) for s in systems) and a.cost_per_hour <= b.cost_per_hour
    same = all(a.uses(s) == b.uses(s) for s in systems) and a.cost_per_hour == b.cost_per_hour
    return no_more and not same


def front(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates meeting the target that none of them dominates, cheapest first; of
    equal ones (same GPUs and cost per hour) the first in that order."""
    good = sorted((c for c in candidates if c.meets_target), key=_order)
    out: list[Candidate] = []
    for c in good:
        if any(
            dominates(k, c) or (k.usage == c.usage and k.cost_per_hour == c.cost_per_hour)
            for k in out
        ):
            continue
        out = [k for k in out if not dominates(c, k)]
        out.append(c)
    return sorted(out, key=_order)


def closest(candidates: Sequence[Candidate]) -> Candidate | None:
    """The candidate with the most good requests (then the lowest cost per hour): a model's
    best point when none meets its target."""
    return min(candidates, key=lambda c: (-c.good_requests, *_order(c)), default=None)


def cheapest(candidates: Sequence[Candidate]) -> Candidate | None:
    """The model's cheapest candidate per hour meeting its target, on its own (no other model
    competing for the inventory)."""
    f = front(candidates)
    return f[0] if f else None
