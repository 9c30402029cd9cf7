"""Planner-in-the-loop replays: the scaling behaviour the issue asks for, end to end on the sim."""

import itertools

import pytest
from planner_fakes import capabilities_for, poisson_workload

from plansim.planner_core import PlannerEngine, parse_planner_config
from plansim.sim.bootstrap import planner_for_deployment
from plansim.sim.deployment import Deployment
from plansim.sim.host import replay

STARTUP_S = 30.0
LOAD_ONLY = {
    "mode": "agg",
    "optimization_target": "sla",
    "enable_load_scaling": True,
    "enable_throughput_scaling": False,
    "ttft_ms": 500,
    "itl_ms": 30,
    "max_gpu_budget": 16,
}


def _deployment(num_workers=1):
    return Deployment.model_validate(
        {
            "mode": "agg",
            "num_workers": num_workers,
            "engine": {"startup_time": STARTUP_S},
            "router": {"mode": "round_robin"},
        }
    )


def _run(workload, raw, num_workers=1):
    dep = _deployment(num_workers)
    engine = PlannerEngine(parse_planner_config(raw), capabilities_for(dep))
    return replay(workload, dep, planner=engine)


@pytest.fixture(scope="module")
def step_run():
    # 1 req/s for 5 min, then 16 req/s for 10 min: about 2.5x what one polynomial-timing worker
    # serves within the ITL target.
    return _run(poisson_workload([1, 16, 16], 300, seed=1), LOAD_ONLY)


def test_step_up_scales_up_within_expected_ticks(step_run):
    ups = [e for e in step_run.scaling_events if e["to_count"] > e["from_count"]]
    assert ups, "the step in load must trigger a scale-up"
    # At 2.5x capacity the running batch (and ITL) grows within seconds of the step; the
    # first load tick that sees every engine over the SLA comes within 12 load ticks (60 s).
    assert 300.0 <= ups[0]["at_s"] <= 360.0


def test_load_scaling_moves_one_replica_per_load_tick(step_run):
    events = step_run.scaling_events
    assert all(abs(e["to_count"] - e["from_count"]) == 1 for e in events)
    times = [e["at_s"] for e in events]
    assert len(times) == len(set(times))


def test_decision_waits_while_scaling_is_in_progress(step_run):
    # After a scale-up the new worker needs STARTUP_S seconds: no decision in between.
    events = step_run.scaling_events
    for first, second in itertools.pairwise(events):
        if first["to_count"] > first["from_count"]:
            assert second["at_s"] - first["at_s"] >= STARTUP_S
    ticks = step_run.ticks
    starting = ticks[ticks["starting_decode"] > 0]
    assert (starting["load_decision_reason"] == "scaling_in_progress").all()
    assert starting["scale_to_decode"].isna().all()


def test_idle_traffic_scales_down_to_min_endpoint():
    result = _run(
        poisson_workload([0.05] * 4, 150, seed=2), {**LOAD_ONLY, "min_endpoint": 1}, num_workers=4
    )
    ts = result.timeseries
    assert ts["ready"].iloc[-1] == 1
    assert ts["ready"].min() >= 1
    downs = [e for e in result.scaling_events if e["to_count"] < e["from_count"]]
    assert [e["to_count"] for e in downs] == [3, 2, 1]


def test_load_scaling_never_below_throughput_lower_bound():
    raw = {
        **LOAD_ONLY,
        "enable_throughput_scaling": True,
        "throughput_adjustment_interval_seconds": 60,
        "load_predictor": "constant",
    }
    result = _run(poisson_workload([8, 8, 1, 1], 150, seed=3), raw, num_workers=3)
    ticks = result.ticks
    bounded = ticks.dropna(subset=["scale_to_decode"])
    assert len(bounded) > 0
    assert (bounded["scale_to_decode"] >= bounded["throughput_lower_bound_decode"]).all()


def test_gpu_budget_never_exceeded():
    result = _run(poisson_workload([12, 12], 150, seed=4), {**LOAD_ONLY, "max_gpu_budget": 3})
    ts = result.timeseries
    assert (ts["ready"] + ts["starting"]).max() <= 3
    assert max(e["to_count"] for e in result.scaling_events) == 3
    assert (result.ticks["scale_to_decode"].dropna() <= 3).all()


def test_advisory_changes_no_replica_count():
    result = _run(
        poisson_workload([1, 8], 150, seed=5), {**LOAD_ONLY, "advisory": True}, num_workers=1
    )
    ts = result.timeseries
    assert (ts["ready"] == 1).all() and (ts["starting"] == 0).all()
    assert result.scaling_events, "advisory mode still records recommendations"
    assert not any(e["applied"] for e in result.scaling_events)


def test_planner_for_deployment_bootstraps_from_worker_self_benchmark(tmp_path):
    dep = _deployment(2)
    engine = planner_for_deployment(
        parse_planner_config({**LOAD_ONLY, "profile_results_dir": str(tmp_path)}), dep
    )
    assert engine.state.bootstrap_source == "benchmark"
    assert engine.state.perf_models["decode"].ready
