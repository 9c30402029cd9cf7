"""sim: the virtual-clock replay of a ``Workload`` against simulated serving engines.

Public API: ``replay(workload, deployment, planner=None, *, progress=None) -> ReplayResult``,
``load_deployment``, ``Deployment``, ``EngineArgs``, ``benchmark_fpms``,
``worker_capabilities``, ``planner_for_deployment`` (imported on first use).
"""

from plansim.lazy import lazy_getattr

_EXPORTS = {
    "benchmark_fpms": "plansim.sim.bootstrap",
    "planner_for_deployment": "plansim.sim.bootstrap",
    "worker_capabilities": "plansim.sim.bootstrap",
    "Deployment": "plansim.sim.deployment",
    "EngineArgs": "plansim.sim.deployment",
    "load_deployment": "plansim.sim.deployment",
    "replay": "plansim.sim.host",
}
__getattr__ = lazy_getattr(globals(), _EXPORTS)
__all__ = list(_EXPORTS)
