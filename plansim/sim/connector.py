"""``SimConnector``: the planner connector of a replay. It applies replica targets to the
simulated cluster (new workers become ready after the engine's ``startup_time``; removed workers
drain, newest first) and router parameters to the pool routers. Agg mode has one component,
``agg``, which the planner sees as decode.
"""

from __future__ import annotations

from typing import Any

from plansim.planner_core.observations import ScalingDecision, WorkerCounts
from plansim.roles import PLANNER_ROLES, PlannerMode, Role


class SimConnector:
    """Implements ``plansim.connectors.PlannerConnector`` over a ``ReplayHost``."""

    def __init__(self, host: Any) -> None:
        self.host = host

    # ---------------------------------------------------------------- PlannerConnector

    def validate_deployment(self, mode: str) -> None:
        if PlannerMode(mode).deployment_mode != self.host.mode:
            raise ValueError(f"planner mode {mode!r} does not match the deployment's "
                             f"{self.host.deployment.mode!r}")

    def wait_for_deployment_ready(self) -> None:
        return None

    def get_model_name(self) -> str | None:
        return None

    def get_gpu_counts(self) -> tuple[int, int]:
        mode, d = self.host.mode, self.host.deployment
        prefill, decode = (mode.pool_for(role) for role in PLANNER_ROLES)
        return (d.pool_args(prefill).gpus_per_worker if prefill else 0,
                d.pool_args(decode).gpus_per_worker)

    def get_worker_info(self) -> dict[str, Any]:
        return {name: {"ready": pool.count("ready"), "starting": pool.count("starting"),
                       "draining": pool.count("draining")}
                for name, pool in self.host.pools.items()}

    def get_actual_worker_counts(self) -> WorkerCounts:
        return self.host.planner_host.worker_counts()

    def set_component_replicas(self, targets: ScalingDecision, blocking: bool = True) -> None:
        for component, target in self.targets(targets).items():
            if target is not None:
                self.apply(component, target)

    # ---------------------------------------------------------------- host side

    def targets(self, decision: ScalingDecision) -> dict[Role, int | None]:
        """Targets per pool."""
        wanted = {Role.PREFILL: decision.num_prefill, Role.DECODE: decision.num_decode}
        return {pool: wanted[pool.planner_role] for pool in self.host.mode.pools}

    def current(self, component: Role) -> int:
        """Serving workers (ready + starting) of a pool."""
        return self.host.pools[component].active_count()

    def apply(self, component: Role, target: int) -> None:
        """Scale a pool; a pool keeps at least one worker so queued requests can finish."""
        self.host.scale_pool(component, max(int(target), 1))

    def set_router_parameters(self, worker_type: str, params: dict[str, Any]) -> dict[str, Any]:
        """Apply router parameters of worker type ``prefill``/``decode`` (agg uses ``decode``);
        returns what changed."""
        pool = self.host.mode.pool_for(worker_type)
        router = self.host.routers.get(pool) if pool is not None else None
        return router.set_parameters(params) if router is not None else {}
