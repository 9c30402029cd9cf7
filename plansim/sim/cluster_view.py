"""``ClusterView``: what the planner host may see of a replay's cluster and do to it, and
nothing more.

It reads worker counts and the ready ranks' forward-pass metrics per planner role (an
aggregated pool is decode), the routers' parameters, and the arrival count; it scales pools
(new workers ready after the engine's ``startup_time``, removed ones drain newest first) and
patches router parameters per worker type (``prefill``/``decode``; agg uses ``decode``). The replay
host builds it over its
own pools, routers, arrival source and scaling.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from plansim.planner_core.observations import ForwardPassMetrics, ScalingDecision, WorkerCounts
from plansim.roles import Mode, Role
from plansim.sim.clock import Clock
from plansim.sim.cluster import DRAINING, READY, STARTING, Pool
from plansim.sim.routing import RoutingPolicy


class ClusterView:
    """See the module docstring. ``scale(pool, target)`` sets a pool's serving count;
    ``patch_router(pool, params)`` patches a pool's router and returns what changed (the host
    then releases what a router queue may now let go); ``arrived_by(now_ms)`` counts the
    requests that entered by then; ``done()`` says the replay has nothing left to do."""

    def __init__(
        self,
        clock: Clock,
        mode: Mode,
        pools: Mapping[Role, Pool],
        routers: Mapping[Role, RoutingPolicy],
        *,
        scale: Callable[[Role, int], Any],
        patch_router: Callable[[Role, Mapping[str, Any]], dict[str, Any]],
        arrived_by: Callable[[float], int],
        done: Callable[[], bool],
    ) -> None:
        self.clock = clock
        self.mode = mode
        self._pools = pools
        self._routers = routers
        self._scale = scale
        self._patch_router = patch_router
        self.arrived_by = arrived_by
        self.done = done

    # ---------------------------------------------------------------- observations

    def worker_counts(self) -> WorkerCounts:
        """Ready, starting and draining workers per planner role."""
        p = self._pools.get(self.mode.pool_for(Role.PREFILL))
        d = self._pools.get(self.mode.pool_for(Role.DECODE))

        def c(pool: Pool | None, state: str) -> int:
            return pool.count(state) if pool is not None else 0

        starting_p, starting_d = c(p, STARTING), c(d, STARTING)
        # A scale-up is in progress while its workers are starting; a scale-down completes at
        # once (draining workers no longer count as serving).
        return WorkerCounts(
            ready_prefill=c(p, READY),
            ready_decode=c(d, READY),
            starting_prefill=starting_p,
            starting_decode=starting_d,
            draining_prefill=c(p, DRAINING),
            draining_decode=c(d, DRAINING),
            prefill_in_progress=starting_p > 0,
            decode_in_progress=starting_d > 0,
        )

    def take_fpms(self) -> dict[str, tuple[ForwardPassMetrics, ...]]:
        """Per planner role, each ready rank's per-pass means since the previous read (the
        read starts the ranks' next windows)."""
        now = self.clock.now
        out: dict[str, tuple[ForwardPassMetrics, ...]] = {}
        for name, pool in self._pools.items():
            snaps: list[ForwardPassMetrics] = []
            for w in pool.workers:
                if w.state == READY:
                    snaps.extend(r.take_fpm(now) for r in w.ranks)
            out[name.planner_role.value] = tuple(snaps)
        return out

    def router_parameters(self) -> dict[Role, dict[str, Any]]:
        """Each pool's router knobs in force."""
        return {pool: router.parameters() for pool, router in self._routers.items()}

    def serving(self, pool: Role) -> int:
        """Workers of ``pool`` that are or will be serving: ready + starting."""
        return self._pools[pool].active_count()

    # ---------------------------------------------------------------- effects

    def targets(self, decision: ScalingDecision) -> dict[Role, int | None]:
        """A planner decision as targets per pool (``None``: leave it)."""
        wanted = {Role.PREFILL: decision.num_prefill, Role.DECODE: decision.num_decode}
        return {pool: wanted[pool.planner_role] for pool in self.mode.pools}

    def scale(self, pool: Role, target: int) -> int:
        """Set ``pool``'s serving count to ``target``; returns the count granted (less when
        the replay's worker supply refused workers)."""
        return self._scale(pool, target)[1]

    def set_router_parameters(self, worker_type: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Patch the router of the pool worker type ``prefill``/``decode`` stands for; returns
        what changed."""
        pool = self.mode.pool_for(worker_type)
        return self._patch_router(pool, params) if pool in self._routers else {}
