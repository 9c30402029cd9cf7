"""sim: the virtual-clock replay of a ``Workload`` against simulated serving engines.

Public API: ``replay(workload, deployment, planner=None, *, progress=None) -> ReplayResult``,
``load_deployment``, ``Deployment``, ``EngineArgs``, ``benchmark_fpms``,
``worker_capabilities``, ``planner_for_deployment``.
"""

from plansim.sim.bootstrap import benchmark_fpms, planner_for_deployment, worker_capabilities
from plansim.sim.deployment import Deployment, EngineArgs, load_deployment
from plansim.sim.host import replay

__all__ = ["Deployment", "EngineArgs", "load_deployment", "replay", "benchmark_fpms",
           "planner_for_deployment", "worker_capabilities"]
