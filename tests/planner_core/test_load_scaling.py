"""Load scaling rules (reference 4.2) with fake FPMs; expected values by hand."""

import pytest
from planner_fakes import agg_caps, decode_wall, disagg_caps, fpm, prefill_wall

from plansim.planner_core.config import parse_planner_config
from plansim.planner_core.load_scaling import (
    advance_load as _advance_load,
)
from plansim.planner_core.load_scaling import (
    combine_agg,
    consolidation_factor,
    easy_signal,
    reconcile_fpm,
    scale_decision,
    ttft_budget_allows,
)
from plansim.planner_core.state import PlannerScalingState

SLA = {
    "optimization_target": "sla",
    "enable_load_scaling": True,
    "enable_throughput_scaling": False,
    "ttft_ms": 100,
    "itl_ms": 20,
    "max_gpu_budget": 32,
}


def _state(raw, caps, ready=(2, 2)):
    state = PlannerScalingState.create(parse_planner_config(raw), caps)
    state.install_bootstrap(caps.benchmark_fpms, "benchmark")
    state.ready_prefill, state.ready_decode = ready
    state.expected_prefill, state.expected_decode = ready
    return state


def test_scale_decision_rules():
    assert scale_decision([600, 700], 500, 2, 1, True) == (3, "scale_up")
    assert scale_decision([600, 400], 500, 2, 1, True) == (1, "scale_down")
    assert scale_decision([600, 400], 500, 2, 1, False) == (2, "scale_down_refused_consolidation")
    assert scale_decision([500, 500], 500, 1, 1, True) == (1, "no_change")  # strict ">"
    assert scale_decision([100], 500, 3, 3, True) == (3, "no_change")  # at the minimum
    assert scale_decision([], 500, 2, 1, True) == (None, "insufficient_data")


def test_consolidation_factor():
    assert consolidation_factor(4) == pytest.approx(4 / 3)


def test_ttft_budget():
    # SLA 0.5 s, own 0.1 s, s = 0.8: budget 0.32 s of queue growth
    assert ttft_budget_allows(0.1, 0.3, 0.5, 0.8) is True
    assert ttft_budget_allows(0.1, 0.5, 0.5, 0.8) is False
    assert ttft_budget_allows(0.6, 0.6, 0.5, 0.8) is False
    assert ttft_budget_allows(None, 0.1, 0.5, 0.8) is None


def test_reconcile_fpm():
    two_by_two = [fpm(w, r) for w in (1, 2) for r in (0, 1)]
    assert reconcile_fpm(two_by_two, 2) is None
    assert reconcile_fpm(two_by_two, 3) == "worker_count_mismatch"
    assert reconcile_fpm(two_by_two[:3], 2) == "worker_count_mismatch"  # uneven ranks
    assert reconcile_fpm([], 2) == "no_fpm_data"


def test_easy_signal():
    assert easy_signal([0.2, 1.1], 1.0, 0.6, 2, 1, up_inclusive=False, down_inclusive=False) == (
        3,
        "scale_up",
    )
    assert easy_signal([0.2, 0.4], 1.0, 0.6, 2, 1, up_inclusive=False, down_inclusive=False) == (
        1,
        "scale_down",
    )
    assert easy_signal([0.2, 0.7], 1.0, 0.6, 2, 1, up_inclusive=False, down_inclusive=False) == (
        2,
        "no_change",
    )
    assert easy_signal([1.0], 1.0, 0.6, 2, 1, up_inclusive=False, down_inclusive=False) == (
        2,
        "no_change",
    )


def test_agg_combine():
    assert combine_agg((3, "scale_up"), (1, "scale_down"), 2) == (3, "scale_up")
    assert combine_agg((1, "scale_down"), (3, "scale_up"), 2) == (3, "scale_up")
    assert combine_agg((None, "insufficient_data"), (1, "scale_down"), 2) == (1, "scale_down")
    assert combine_agg((1, "scale_down"), (2, "no_change"), 2) == (2, "no_change")
    assert combine_agg((2, "scale_down_refused_consolidation"), (1, "scale_down"), 2) == (
        2,
        "scale_down_refused_consolidation",
    )


def _prefill_fpms(queued):
    # live passes of one 1000-token prefill each (the average ISL the estimates use)
    return tuple(
        fpm(w, 0, prefill_wall(1000), n_prefill=1, prefill_tokens=1000, queued_prefill_tokens=q)
        for w, q in enumerate(queued)
    )


def _decode_fpms(kv):
    # average decode length 1000 KV tokens per request
    return tuple(
        fpm(w, 0, decode_wall(k), n_decode=max(1, k // 1000), decode_kv=k) for w, k in enumerate(kv)
    )


def advance_load(state, fpm_by_role):
    """Feed the live passes to the perf models (as the engine does), then decide."""
    for role, fpms in fpm_by_role.items():
        for f in fpms:
            state.perf_models[role].observe(f)
    return _advance_load(state, fpm_by_role)


def test_prefill_scales_up_when_every_engine_is_over_sla():
    # 20000 queued + 1000 own = 21000 tokens in MBT 8192 chunks: 2 x (10 + 81.92) ms + tail
    # 4616 tokens (10 + 46.16 ms) = 240 ms > 100 ms on both engines
    state = _state(SLA, disagg_caps())
    out = advance_load(
        state, {"prefill": _prefill_fpms([20000, 20000]), "decode": _decode_fpms([10000, 10000])}
    )
    assert out == {"prefill": 3, "decode": 1}
    assert state.diag.load_decision_reason_prefill == "scale_up"
    assert state.diag.estimated_ttft_ms == pytest.approx(240.0)


def test_one_engine_under_sla_blocks_scale_up():
    state = _state(SLA, disagg_caps())
    out = advance_load(
        state, {"prefill": _prefill_fpms([20000, 0]), "decode": _decode_fpms([150000, 150000])}
    )
    assert out is None or out.get("prefill", 2) == 2


def test_prefill_scale_down_refused_by_consolidation():
    # N = 2, c = 2. Own TTFT 20 ms, budget (100 - 20) * 0.8 = 64 ms. Queue 4000 tokens:
    # post = 10 + 10 us * (8000 + 1000) = 100 ms -> growth 80 ms >= 64 ms: refused.
    state = _state(SLA, disagg_caps())
    advance_load(
        state, {"prefill": _prefill_fpms([4000, 4000]), "decode": _decode_fpms([10000, 10000])}
    )
    assert state.diag.load_decision_reason_prefill == "scale_down_refused_consolidation"


def test_decode_scale_down_when_consolidated_itl_fits():
    # kv 10000 each: post ITL = 5 ms + 0.1 us * (20000 + 1000) = 7.1 ms < 20 * 0.8 -> down
    state = _state(SLA, disagg_caps())
    out = advance_load(
        state, {"prefill": _prefill_fpms([0, 0]), "decode": _decode_fpms([10000, 10000])}
    )
    assert out == {"prefill": 1, "decode": 1}
    assert state.diag.load_decision_reason == "scale_down"


def test_decode_scale_down_refused_when_kv_would_not_fit():
    caps = disagg_caps(max_kv=30000)
    state = _state(SLA, caps)
    advance_load(state, {"prefill": _prefill_fpms([0, 0]), "decode": _decode_fpms([16000, 16000])})
    assert state.diag.load_decision_reason_decode == "scale_down_refused_consolidation"


def test_throughput_floor_caps_scale_down():
    state = _state({**SLA, "enable_throughput_scaling": True}, disagg_caps())
    state.lower_bound_prefill, state.lower_bound_decode = 2, 2
    out = advance_load(
        state, {"prefill": _prefill_fpms([0, 0]), "decode": _decode_fpms([10000, 10000])}
    )
    assert out is None
    assert state.diag.load_decision_reason == "scale_down_capped_by_throughput"


def test_scaling_in_progress_blocks_both_roles():
    state = _state(SLA, disagg_caps())
    state.decode_in_progress = True
    assert (
        advance_load(
            state, {"prefill": _prefill_fpms([20000, 20000]), "decode": _decode_fpms([1, 1])}
        )
        is None
    )
    assert state.diag.load_decision_reason_prefill == "scaling_in_progress"


def test_worker_count_mismatch():
    state = _state(SLA, disagg_caps(), ready=(3, 2))
    advance_load(
        state, {"prefill": _prefill_fpms([20000, 20000]), "decode": _decode_fpms([10000, 10000])}
    )
    assert state.diag.load_decision_reason_prefill == "worker_count_mismatch"


def test_easy_mode_decode_kv_usage():
    # throughput target: u = (kv + queued) / max_kv > 1.0 on any engine -> up
    state = _state({"mode": "agg"}, agg_caps(max_kv=100_000), ready=(0, 2))
    out = advance_load(
        state,
        {"decode": (fpm(0, 0, decode_kv=90_000, queued_decode_kv=20_000), fpm(1, 0, decode_kv=10))},
    )
    assert out == {"decode": 3}


def test_easy_mode_load_target_thresholds():
    raw = {
        "mode": "agg",
        "optimization_target": "load",
        "decode_scale_up_kv_rate": 80,
        "decode_scale_down_kv_rate": 20,
    }
    state = _state(raw, agg_caps(max_kv=100_000), ready=(0, 3))
    out = advance_load(state, {"decode": tuple(fpm(w, 0, decode_kv=20_000) for w in range(3))})
    assert out == {"decode": 2}  # all at 0.2 <= 0.2


def test_min_endpoint_holds_scale_down():
    state = _state({**SLA, "min_endpoint": 2}, disagg_caps())
    assert (
        advance_load(
            state, {"prefill": _prefill_fpms([0, 0]), "decode": _decode_fpms([10000, 10000])}
        )
        is None
    )


def test_easy_scale_down_is_refused_when_the_survivors_would_cross_the_up_threshold():
    from plansim.planner_core.load_scaling import easy_signal

    # KV usage 0.5 on 2 engines, down threshold 0.6, up 1.0: all under, but one survivor would
    # carry 0.5 * 2 / 1 = 1.0 >= 1.0 at once: keep both.
    assert easy_signal([0.5, 0.5], 1.0, 0.6, 2, 1, up_inclusive=False, down_inclusive=False)[0] == 2
    # At 0.4 the survivor carries 0.8: the scale-down goes ahead.
    assert easy_signal([0.4, 0.4], 1.0, 0.6, 2, 1, up_inclusive=False, down_inclusive=False)[0] == 1
