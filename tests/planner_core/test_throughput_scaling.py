"""Throughput scaling (reference 3.1) on linear fake workers, values by hand."""

import pytest
from planner_fakes import decode_wall, disagg_caps, prefill_wall

from plansim.planner_core.config import parse_planner_config
from plansim.planner_core.state import PlannerScalingState
from plansim.planner_core.throughput_scaling import (
    Predictions,
    advance_throughput,
    delta_capped,
    replicas_for,
)

SLA = {"optimization_target": "sla", "ttft_ms": 500, "itl_ms": 50, "max_gpu_budget": 16}


def _state(raw, caps=None, ready=(1, 1)):
    caps = caps or disagg_caps()
    state = PlannerScalingState.create(parse_planner_config(raw), caps)
    state.install_bootstrap(caps.benchmark_fpms, "benchmark")
    state.ready_prefill, state.ready_decode = ready
    return state


def test_replica_formula():
    assert replicas_for(10.0, 3.0, 1) == 4
    assert replicas_for(0.0, 3.0, 1) == 1
    assert replicas_for(9.0, 3.0, 1) == 3


def test_delta_cap_and_endpoint_recovery():
    assert delta_capped(20, 2, 8, 1) == 10
    assert delta_capped(0, 12, 8, 1) == 4
    assert delta_capped(0, 3, 8, 2) == 2
    assert delta_capped(0, 0, 8, 2) == 2  # endpoint recovery beyond the cap's range


# Demand 18000 requests / 180 s = 100 req/s, isl 1000, osl 200.
# Prefill: B = 8192 // 1000 = 8, ttft(8) = 10 ms + 80 ms = 90 ms <= 500 -> 8 / 0.09 = 88.9 req/s ->
# 2.
# Decode: ctx 1100, itl(b) = 5 ms + 0.11 ms b <= 50 ms -> b <= 409; largest candidate of
# 1 + i*511//127 is 407 -> itl 49.77 ms, 407 / (200 * 0.04977) = 40.9 req/s -> ceil(100/40.9) = 3.
PRED = Predictions(num_req=18000, isl=1000, osl=200)


def test_throughput_only_scales_to_demand():
    state = _state({**SLA, "enable_load_scaling": False})
    assert advance_throughput(state, PRED, 180.0) == {"prefill": 2, "decode": 3}
    assert state.diag.throughput_decision_reason == "scale"
    assert state.diag.engine_rps_prefill == pytest.approx(8 / prefill_wall(8000))
    assert state.diag.engine_rps_decode == pytest.approx(407 / (200 * decode_wall(407 * 1100)))


def test_with_load_scaling_sets_lower_bounds_only():
    state = _state({**SLA, "enable_load_scaling": True})
    assert advance_throughput(state, PRED, 180.0) is None
    assert (state.lower_bound_prefill, state.lower_bound_decode) == (2, 3)
    assert state.diag.throughput_decision_reason == "set_lower_bound"


def test_step_cap():
    state = _state({**SLA, "enable_load_scaling": False, "max_throughput_scaling_replicas": 1})
    assert advance_throughput(state, PRED, 180.0) == {"prefill": 2, "decode": 2}


def test_gpu_ceiling_bounds_the_lower_bound():
    # desired (2, 3) = 5 GPUs under a 4 GPU ceiling -> directional fit from (1, 1)
    state = _state({**SLA, "enable_load_scaling": True, "max_gpu_budget": 4})
    advance_throughput(state, PRED, 180.0)
    assert state.lower_bound_prefill + state.lower_bound_decode == 4


def test_unready_side_holds_both():
    caps = disagg_caps()
    state = PlannerScalingState.create(
        parse_planner_config({**SLA, "enable_load_scaling": False}), caps
    )
    state.install_bootstrap({"decode": caps.benchmark_fpms["decode"]}, "benchmark")
    state.ready_prefill, state.ready_decode = 1, 1
    assert advance_throughput(state, PRED, 180.0) is None
    assert state.diag.throughput_decision_reason_prefill == "model_not_ready"
    assert state.diag.throughput_decision_reason_decode == "partner_not_ready"


def test_zero_duration_is_no_traffic_data():
    state = _state({**SLA, "enable_load_scaling": False})
    assert advance_throughput(state, PRED, 0.0) is None
    assert state.diag.throughput_decision_reason == "no_traffic_data"


def test_kv_hit_rate_lowers_prefill_demand():
    # h = 0.5 -> isl_eff 500: B = 16, ttft(16) = 10 + 80 = 90 ms -> 177.8 req/s -> 1 prefill
    state = _state({**SLA, "enable_load_scaling": False})
    state.last_kv_hit_rate = 0.5
    assert advance_throughput(state, PRED, 180.0)["prefill"] == 1
