"""sim: the virtual-clock replay of a ``Workload`` against simulated serving engines.

Public API: ``replay(workload, deployment, planner=None) -> ReplayResult``,
``load_deployment``, ``Deployment``, ``EngineArgs``, ``benchmark_fpms``,
``worker_capabilities``.
"""

from plansim.sim.deployment import Deployment, EngineArgs, load_deployment

__all__ = ["Deployment", "EngineArgs", "load_deployment", "replay", "benchmark_fpms",
           "worker_capabilities"]


def __getattr__(name: str):
    # Lazy so that importing the config models does not pull in SimPy and the engine.
    if name == "replay":
        from plansim.sim.replay import replay

        return replay
    if name in ("benchmark_fpms", "worker_capabilities"):
        from plansim.sim import bootstrap

        return getattr(bootstrap, name)
    raise AttributeError(name)
