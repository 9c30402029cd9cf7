"""The planner host's view of a replay: counts and targets per planner role (an aggregated pool
is decode), router patches per worker type, scaling."""

from __future__ import annotations

from simkit import workload

from plansim.planner_core.observations import ScalingDecision
from plansim.roles import Role
from plansim.sim.cluster_view import ClusterView
from plansim.sim.deployment import build_deployment
from plansim.sim.host import ReplayHost


def _view(**deployment) -> tuple[ReplayHost, ClusterView]:
    host = ReplayHost(workload([(0.0, 100, 2, [1])]), build_deployment(deployment))
    view = ClusterView(
        host.clock,
        host.mode,
        host.pools,
        host.routers,
        scale=host.scale_pool,
        patch_router=host.patch_router,
        arrived_by=host.source.arrived_by,
        done=host.done,
    )
    return host, view


def test_an_aggregated_pool_is_counted_and_targeted_as_decode():
    _, view = _view(num_workers=3)
    counts = view.worker_counts()
    assert (counts.ready_prefill, counts.ready_decode) == (0, 3)
    assert view.targets(ScalingDecision(num_prefill=5, num_decode=2)) == {Role.AGG: 2}


def test_disaggregated_pools_are_targeted_by_their_roles():
    _, view = _view(mode="disagg", num_prefill_workers=2, num_decode_workers=1)
    assert view.targets(ScalingDecision(num_prefill=4, num_decode=None)) == {
        Role.PREFILL: 4,
        Role.DECODE: None,
    }
    assert view.serving(Role.PREFILL) == 2


def test_router_patches_go_to_the_pool_a_worker_type_stands_for():
    _host, view = _view(num_workers=2, router={"mode": "kv_router"})
    assert view.set_router_parameters("prefill", {"router_temperature": 0.5}) == {}
    assert view.set_router_parameters("decode", {"router_temperature": 0.5}) == {
        "router_temperature": 0.5
    }
    assert view.router_parameters()[Role.AGG]["router_temperature"] == 0.5


def test_scaling_down_drains_the_newest_worker():
    host, view = _view(num_workers=3)
    view.scale(Role.AGG, 2)
    assert view.serving(Role.AGG) == 2
    assert [w.state for w in host.pools[Role.AGG].workers] == ["ready", "ready", "removed"]
