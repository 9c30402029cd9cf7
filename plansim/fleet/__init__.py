"""fleet: several models, several GPU types with prices, one inventory; the cheapest fleet
that holds every model's SLA.

Public API (imported on first use, so that a worker importing ``plansim.fleet.tasks`` stays
light): ``load_fleet(path) -> FleetSpec`` (``fleet.yaml``), ``prepare(spec) -> FleetPlan``
(everything checked without the traces), ``run(plan, workloads, executor=...) -> FleetResult``
(the searches, the joint choice, the autoscaled fleet), ``solve`` (the joint choice over given
candidates).
"""

from plansim.lazy import lazy_getattr

_EXPORTS = {
    "FleetSpec": "plansim.fleet.config",
    "load_fleet": "plansim.fleet.config",
    "FleetPlan": "plansim.fleet.plan",
    "prepare": "plansim.fleet.plan",
    "FleetResult": "plansim.fleet.result",
    "run": "plansim.fleet.search",
    "solve": "plansim.fleet.assign",
}
__getattr__ = lazy_getattr(globals(), _EXPORTS)
__all__ = list(_EXPORTS)
