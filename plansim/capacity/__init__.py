"""capacity: the cheapest deployment that holds the SLA for a trace, and how far any planner is
from the best possible.

Public API: ``search(workload, deployment, target=0.95, ...) -> CapacityResult`` (see
``plansim.capacity.search``), ``prepare`` / ``run`` (validate first, replay later),
``CapacityResult`` and its records, ``GpuHours`` (the default objective), ``GpuCost`` (a
price per GPU-hour of each GPU system) and ``parse_gpu_costs``.
"""

from plansim.capacity.objective import GpuCost, GpuHours, Objective, parse_gpu_costs
from plansim.capacity.plan import Plan, prepare
from plansim.capacity.result import (
    Bound,
    CapacityResult,
    PolicyResult,
    StaticPoint,
    VariantResult,
)
from plansim.capacity.search import run, search

__all__ = [
    "Bound",
    "CapacityResult",
    "GpuCost",
    "GpuHours",
    "Objective",
    "Plan",
    "PolicyResult",
    "StaticPoint",
    "VariantResult",
    "parse_gpu_costs",
    "prepare",
    "run",
    "search",
]
