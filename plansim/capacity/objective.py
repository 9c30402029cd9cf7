"""What a capacity search minimises: the ranking objective, one seam.

An objective prices one worker-hour of each pool of a variant (``worker_rates``): the search
orders untried counts by ``rate`` (cost per hour of a deployment), the hindsight bound charges
segments and start-ups with it, and ``measured`` turns a replay summary's provisioned
worker-seconds into the run's cost. GPU-hours (the default) prices a worker-hour at its GPU
count; a price per GPU type is another ``Objective`` with other rates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from plansim.capacity.variants import PoolLayout


class Objective(Protocol):
    """``name`` and ``unit`` label outputs; ``worker_rates(layout)`` is the cost of one
    worker-hour per pool, in ``unit`` per hour."""

    name: str
    unit: str

    def worker_rates(self, layout: PoolLayout) -> tuple[float, ...]: ...


@dataclass(frozen=True, slots=True)
class GpuHours:
    """Cost = GPU-hours: a worker-hour costs its GPUs (tensor x data parallel)."""

    name: str = "gpu_hours"
    unit: str = "GPU-h"

    def worker_rates(self, layout: PoolLayout) -> tuple[float, ...]:
        return tuple(float(g) for g in layout.gpus_per_worker)


def rate(objective: Objective, layout: PoolLayout, counts: Sequence[int]) -> float:
    """Cost per hour of running ``counts`` workers per pool."""
    return sum(n * r for n, r in zip(counts, objective.worker_rates(layout)))


def measured(objective: Objective, layout: PoolLayout, summary: Mapping[str, Any]) -> float:
    """The cost of a replay from its provisioned worker-seconds (an aggregated replay reports
    its workers as decode); for ``GpuHours`` this is the summary's ``gpu_hours``."""
    rates = objective.worker_rates(layout)
    if layout.mode == "agg":
        seconds: tuple[float, ...] = (float(summary["decode_worker_seconds"]),)
    else:
        seconds = (float(summary["prefill_worker_seconds"]),
                   float(summary["decode_worker_seconds"]))
    return sum(s * r for s, r in zip(seconds, rates)) / 3600.0
