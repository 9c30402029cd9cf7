"""What a capacity search minimises: the ranking objective, one seam.

An objective prices one worker-hour of each pool of a variant (``worker_rates``): the search
orders untried counts by ``rate`` (cost per hour of a deployment), the hindsight bound charges
segments and start-ups with it, and ``measured`` turns a replay summary's provisioned
worker-seconds into the run's cost. GPU-hours (the default) prices a worker-hour at its GPU
count; ``GpuCost`` (``--gpu-cost h200_sxm=3.5,b200_sxm=6``) at its GPUs times the hourly price of
its GPU system, which the pool's aic timing model names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from plansim.capacity.variants import PoolLayout
from plansim.errors import InputError
from plansim.roles import Mode


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


@dataclass(frozen=True, slots=True)
class GpuCost:
    """Cost = money: a worker-hour costs its GPUs times the hourly price of one GPU of its
    system (``prices``: system -> price per GPU-hour, in ``unit``)."""

    prices: Mapping[str, float]
    name: str = "cost"
    unit: str = "$"

    def worker_rates(self, layout: PoolLayout) -> tuple[float, ...]:
        return tuple(
            float(g) * self.prices[system]  # type: ignore[index]
            for g, system in zip(layout.gpus_per_worker, layout.gpu_systems)
        )

    def check(self, label: str, layout: PoolLayout) -> None:
        """``InputError`` (``--gpu-cost``) unless every pool of ``layout`` has a priced system."""
        for pool, system in zip(layout.names, layout.gpu_systems):
            if system is None:
                raise InputError(
                    f"the {pool} pool of {label} has no aic timing model, so its "
                    "GPU system (and price) is unknown",
                    field="--gpu-cost",
                )
            if system not in self.prices:
                raise InputError(
                    f"no price for {system} (the {pool} pool of {label}); priced: "
                    f"{', '.join(sorted(self.prices))}",
                    field="--gpu-cost",
                )


def parse_gpu_costs(values: Sequence[str]) -> dict[str, float]:
    """``["h200_sxm=3.5,b200_sxm=6", ...]`` -> ``{"h200_sxm": 3.5, "b200_sxm": 6.0}``;
    ``InputError`` (``--gpu-cost``) when malformed, repeated or not a positive finite price."""
    prices: dict[str, float] = {}
    for item in (part.strip() for value in values for part in value.split(",")):
        system, sep, text = item.partition("=")
        system = system.strip()
        if not sep or not system:
            raise InputError(
                f"expected SYSTEM=PRICE_PER_GPU_HOUR, got {item!r}", field="--gpu-cost"
            )
        try:
            price = float(text)
        except ValueError:
            raise InputError(
                f"{system}: expected a price per GPU-hour, got {text.strip()!r}", field="--gpu-cost"
            ) from None
        if not (math.isfinite(price) and price > 0):
            raise InputError(
                f"{system}: the price must be a positive number, got {text.strip()}",
                field="--gpu-cost",
            )
        if system in prices:
            raise InputError(f"{system} priced twice", field="--gpu-cost")
        prices[system] = price
    return prices


def rate(objective: Objective, layout: PoolLayout, counts: Sequence[int]) -> float:
    """Cost per hour of running ``counts`` workers per pool."""
    return sum(n * r for n, r in zip(counts, objective.worker_rates(layout)))


def measured(objective: Objective, layout: PoolLayout, summary: Mapping[str, Any]) -> float:
    """The cost of a replay from its provisioned worker-seconds (an aggregated replay reports
    its workers as decode); for ``GpuHours`` this is the summary's ``gpu_hours``."""
    rates = objective.worker_rates(layout)
    if layout.mode is Mode.AGG:
        seconds: tuple[float, ...] = (float(summary["decode_worker_seconds"]),)
    else:
        seconds = (
            float(summary["prefill_worker_seconds"]),
            float(summary["decode_worker_seconds"]),
        )
    return sum(s * r for s, r in zip(seconds, rates)) / 3600.0
