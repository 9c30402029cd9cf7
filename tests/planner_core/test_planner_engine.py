"""PlannerEngine: cadence, projection invariants, in-progress guard, advisory, plugins, the
retune hook."""

import pytest
from planner_fakes import FakeRetune, SetPlugin, agg_caps, disagg_caps, fpm

from plansim.errors import ConfigError
from plansim.planner_core import PlannerEngine, parse_planner_config
from plansim.planner_core.diagnostics import TICK_COLUMNS
from plansim.planner_core.observations import TickInput, TrafficObservation, WorkerCounts
from plansim.planner_core.predictors.factory import PREDICTORS

SLA_AGG = {
    "mode": "agg",
    "optimization_target": "sla",
    "enable_load_scaling": True,
    "load_predictor": "constant",
    "throughput_adjustment_interval_seconds": 60,
    "ttft_ms": 100,
    "itl_ms": 20,
    "max_gpu_budget": 8,
}


def _engine(raw, caps=None, **kw):
    return PlannerEngine(parse_planner_config(raw), caps or agg_caps(), **kw)


def _busy(n):
    # every engine far over the ITL SLA: 400k KV tokens -> 45 ms + 1 ms per pass
    return {"decode": tuple(fpm(w, 0, 0.05, n_decode=400, decode_kv=400_000) for w in range(n))}


def _tick(engine, t, ready, starting=0, fpms=None, traffic=None):
    return engine.tick(
        TickInput(
            t,
            WorkerCounts(0, ready, starting_decode=starting),
            traffic,
            fpms if fpms is not None else _busy(ready),
        )
    )


def test_cadence_follows_plugin_intervals():
    engine = _engine(SLA_AGG)
    first = engine.initial_tick(0.0).next_tick
    assert first.at_s == 5.0 and first.run_load_scaling and first.need_worker_fpm
    assert not first.need_traffic_metrics
    nxt = first
    for _ in range(11):
        nxt = _tick(engine, nxt.at_s, 1).next_tick
    assert nxt.at_s == 60.0
    assert nxt.run_throughput_scaling and nxt.need_traffic_metrics
    assert nxt.traffic_metrics_duration_s == 60.0


def test_tick_before_initial_tick_is_an_error():
    with pytest.raises(RuntimeError):
        _tick(_engine(SLA_AGG), 5.0, 1)


def test_load_scale_up_then_waits_while_in_progress():
    engine = _engine({**SLA_AGG, "enable_throughput_scaling": False})
    engine.initial_tick(0.0)
    up = _tick(engine, 5.0, 2)
    assert up.scale_to.num_decode == 3 and up.scale_to.num_prefill is None
    held = _tick(engine, 10.0, 2, starting=1)
    assert held.scale_to is None
    assert held.diagnostics["load_decision_reason"] == "scaling_in_progress"
    # the host has not started the worker yet (expected 3 != ready 2): still in progress
    assert _tick(engine, 15.0, 2).diagnostics["load_decision_reason"] == "scaling_in_progress"
    # the new worker is ready: the reference decides again on the next load tick
    assert _tick(engine, 20.0, 3).scale_to.num_decode == 4


def test_before_the_first_throughput_floor_the_floor_is_one():
    # The reference's throughput lower bounds start at 1: load scaling may scale down at once.
    engine = _engine(SLA_AGG)
    engine.initial_tick(0.0)
    idle = {"decode": tuple(fpm(w, 0, 0.006, n_decode=1, decode_kv=1000) for w in range(3))}
    out = _tick(engine, 5.0, 3, fpms=idle)
    assert out.scale_to.num_decode == 2
    assert out.diagnostics["load_decision_reason"] == "scale_down"


def test_pending_decision_times_out():
    engine = _engine({**SLA_AGG, "enable_throughput_scaling": False}, scaling_timeout_s=10.0)
    engine.initial_tick(0.0)
    _tick(engine, 5.0, 2)
    assert _tick(engine, 10.0, 2).diagnostics["load_decision_reason"] == "scaling_in_progress"
    assert _tick(engine, 15.0, 2).scale_to.num_decode == 3  # 10 s after the decision


def test_advisory_recommends_but_never_waits():
    engine = _engine({**SLA_AGG, "enable_throughput_scaling": False, "advisory": True})
    assert engine.advisory
    engine.initial_tick(0.0)
    assert _tick(engine, 5.0, 2).scale_to.num_decode == 3
    again = _tick(engine, 10.0, 2)
    assert again.scale_to.num_decode == 3
    assert again.diagnostics["advisory"] is True


def test_min_endpoint_is_enforced():
    engine = _engine({"mode": "agg", "min_endpoint": 2})
    engine.initial_tick(0.0)
    out = _tick(engine, 5.0, 1, fpms={"decode": (fpm(0, 0, decode_kv=10),)})
    assert out.scale_to.num_decode == 2


def test_gpu_budget_is_enforced_on_user_proposals():
    engine = _engine({"mode": "agg", "max_gpu_budget": 4}, plugins=[SetPlugin(20)])
    engine.initial_tick(0.0)
    assert _tick(engine, 5.0, 2, fpms={}).scale_to.num_decode == 4


def test_user_plugin_set_overrides_builtin_by_priority():
    engine = _engine(
        {**SLA_AGG, "enable_throughput_scaling": False}, plugins=[SetPlugin(5, priority=5)]
    )
    engine.initial_tick(0.0)
    out = _tick(engine, 5.0, 2)
    assert out.scale_to.num_decode == 5
    assert '"user_set"' in out.diagnostics["plugin_overrides"]


def test_user_plugin_by_import_path():
    raw = {
        **SLA_AGG,
        "enable_throughput_scaling": False,
        "plugins": [{"import_path": "planner_fakes:CapPlugin", "params": {"cap": 2}}],
    }
    engine = _engine(raw)
    engine.initial_tick(0.0)
    assert _tick(engine, 5.0, 2).scale_to is None  # scale-up to 3 capped back to 2
    assert (
        _tick(engine, 10.0, 2).diagnostics["reconcile_reasons"]
        == '{"decode":"reconcile_clamped_to_ceiling"}'
    )


def test_bad_plugin_path_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        _engine({**SLA_AGG, "plugins": [{"import_path": "no_such_module:Thing"}]})
    assert err.value.field == "plugins"


def test_retune_hook_outputs_are_passed_through():
    retune = FakeRetune()
    engine = _engine(SLA_AGG, retune=retune)
    engine.initial_tick(0.0)
    out = _tick(engine, 5.0, 1)
    assert retune.calls == [("initial", 0.0), ("tick", 5.0, 1)]
    assert out.router_parameters == {"decode": {"overlap_score_weight": 2.0}}
    assert out.retune_decisions == ({"outcome": "no_improvement", "at_s": 5.0},)


def test_retune_only_mode_never_scales():
    raw = {
        "mode": "agg",
        "retune": {},
        "enable_load_scaling": False,
        "enable_throughput_scaling": False,
        "min_endpoint": 3,
    }
    engine = _engine(raw, retune=FakeRetune(), plugins=[SetPlugin(6)])
    first = engine.initial_tick(0.0).next_tick
    assert first.at_s == 5.0
    out = _tick(engine, 5.0, 1)
    assert out.scale_to is None and out.next_tick.at_s == 10.0
    assert out.router_parameters


def test_without_retune_router_parameters_stay_empty():
    engine = _engine(SLA_AGG)
    engine.initial_tick(0.0)
    out = _tick(engine, 5.0, 1)
    assert out.router_parameters == {} and out.retune_decisions == ()


def test_throughput_tick_sets_lower_bound_from_prediction():
    engine = _engine(SLA_AGG)
    nxt = engine.initial_tick(0.0).next_tick
    idle = {"decode": (fpm(0, 0, 0.006, n_decode=1, decode_kv=1000),)}
    while nxt.at_s < 60.0:
        nxt = _tick(engine, nxt.at_s, 1, fpms=idle).next_tick
    out = _tick(engine, 60.0, 1, fpms=idle, traffic=TrafficObservation(60.0, 6000, 1000, 200))
    d = out.diagnostics
    assert d["throughput_decision_reason"] == "set_lower_bound"
    assert d["predicted_num_req"] == 6000 and d["predicted_rps"] == 100.0
    rps = d["engine_rps_decode"]
    assert d["throughput_lower_bound_decode"] == -(-100.0 // rps)
    # the floor lifts the load loop's "scale down / no change" to the bound at once
    assert out.scale_to.num_decode == d["throughput_lower_bound_decode"]


def test_diagnostics_row_has_every_column():
    engine = _engine(SLA_AGG)
    engine.initial_tick(0.0)
    row = _tick(engine, 5.0, 1).diagnostics
    assert tuple(row) == TICK_COLUMNS
    assert row["dynamo_planner_estimated_itl_ms"] == row["estimated_itl_ms"]
    assert row["dynamo_planner_load_scaling_decision"] == 7  # scale_up in the reference state list


def test_apply_planner_changes_revalidates():
    engine = _engine(SLA_AGG)
    engine.apply_planner_changes({"ttft_ms": 250})
    assert engine.config.ttft_ms == 250
    with pytest.raises(ConfigError):
        engine.apply_planner_changes({"ttft_ms": -1})
    assert engine.config.ttft_ms == 250


def test_config_must_fit_the_deployment():
    with pytest.raises(ConfigError) as err:
        _engine({"mode": "disagg"}, agg_caps())
    assert err.value.field == "mode"
    with pytest.raises(ConfigError) as err:
        _engine({"mode": "disagg", "min_endpoint": 3, "max_gpu_budget": 4}, disagg_caps())
    assert err.value.field == "max_gpu_budget"


def test_bootstrap_prefers_benchmark_then_profile():
    profile = {"decode": (fpm(wall_time_s=0.01, n_decode=1, decode_kv=100),)}
    assert _engine(SLA_AGG, profile_fpms=profile).state.bootstrap_source == "benchmark"
    assert (
        _engine(SLA_AGG, agg_caps(benchmark=False), profile_fpms=profile).state.bootstrap_source
        == "profile"
    )
    assert _engine(SLA_AGG, agg_caps(benchmark=False)).state.bootstrap_source == "live"


def test_predictor_swap_is_warmed_from_the_decision():
    engine = _engine(SLA_AGG)
    engine.apply_planner_changes(
        {"load_predictor": "kalman"}, predictor_warmup=[(120.0, 1000.0, 200.0)] * 6
    )
    forecaster = engine._predict.forecaster
    assert type(forecaster.num_req) is PREDICTORS.get("kalman")
    assert forecaster.predict().num_req == pytest.approx(120.0)
