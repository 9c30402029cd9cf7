"""``SimConnector``: the planner connector of a replay. It applies replica targets to the
simulated cluster (new workers become ready after the engine's ``startup_time``; removed workers
drain, newest first) and router parameters to the pool routers. Agg mode has one component,
``agg``, which the planner sees as decode.
"""

from __future__ import annotations

from typing import Any

from plansim.planner_core.observations import ScalingDecision, WorkerCounts


class SimConnector:
    """Implements ``plansim.connectors.PlannerConnector`` over a ``ReplayHost``."""

    def __init__(self, host: Any) -> None:
        self.host = host

    # ---------------------------------------------------------------- PlannerConnector

    def validate_deployment(self, mode: str) -> None:
        if mode != self.host.deployment.mode:
            raise ValueError(f"planner mode {mode!r} does not match the deployment's "
                             f"{self.host.deployment.mode!r}")

    def wait_for_deployment_ready(self) -> None:
        return None

    def get_model_name(self) -> str | None:
        return None

    def get_gpu_counts(self) -> tuple[int, int]:
        d = self.host.deployment
        if d.mode == "agg":
            return 0, d.engine.gpus_per_worker
        return d.prefill_args.gpus_per_worker, d.decode_args.gpus_per_worker

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

    def targets(self, decision: ScalingDecision) -> dict[str, int | None]:
        """Targets per pool name."""
        if self.host.deployment.mode == "agg":
            return {"agg": decision.num_decode}
        return {"prefill": decision.num_prefill, "decode": decision.num_decode}

    def current(self, component: str) -> int:
        """Serving workers (ready + starting) of a pool."""
        return self.host.pools[component].active_count()

    def apply(self, component: str, target: int) -> None:
        """Scale a pool; a pool keeps at least one worker so queued requests can finish."""
        self.host.scale_pool(component, max(int(target), 1))

    def set_router_parameters(self, worker_type: str, params: dict[str, Any]) -> dict[str, Any]:
        """Apply router parameters of worker type ``prefill``/``decode`` (agg uses ``decode``);
        returns what changed."""
        pool = worker_type
        if self.host.deployment.mode == "agg":
            if worker_type != "decode":
                return {}
            pool = "agg"
        router = self.host.routers.get(pool)
        return router.set_parameters(params) if router is not None else {}
