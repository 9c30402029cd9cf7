"""fleet: several models, several GPU types with prices, one inventory; the cheapest fleet
that holds every model's SLA.

Public API: ``load_fleet(path) -> FleetSpec`` (``fleet.yaml``), ``prepare(spec) ->
FleetPlan`` (everything checked without the traces), ``run(plan, workloads, executor=...) ->
FleetResult`` (the searches, the joint choice, the autoscaled fleet), ``solve`` (the joint
choice over given candidates). Imported on first use, so that a worker importing
``plansim.fleet.tasks`` stays light.
"""

from typing import TYPE_CHECKING, Any

from plansim.lazy import lazy_getattr

if TYPE_CHECKING:
    from plansim.fleet.assign import solve
    from plansim.fleet.config import FleetSpec, load_fleet
    from plansim.fleet.plan import FleetPlan, prepare
    from plansim.fleet.result import FleetResult
    from plansim.fleet.search import run

_EXPORTS = {"load_fleet": "plansim.fleet.config", "FleetSpec": "plansim.fleet.config",
            "prepare": "plansim.fleet.plan", "FleetPlan": "plansim.fleet.plan",
            "run": "plansim.fleet.search", "FleetResult": "plansim.fleet.result",
            "solve": "plansim.fleet.assign"}
__all__ = sorted(_EXPORTS)
__getattr__: Any = lazy_getattr(globals(), _EXPORTS)
