"""PlannerConfig: reference defaults, aliases, the GCD cadence, easy mode and validation errors."""

import json
import logging

import pytest

from plansim.errors import ConfigError
from plansim.planner_core.config import gcd_seconds, parse_planner_config, with_changes
from plansim.planner_io import read_planner_config

SLA = {"optimization_target": "sla", "enable_load_scaling": True}


def test_reference_defaults():
    c = parse_planner_config({"optimization_target": "sla"})
    assert c.mode == "disagg"
    assert c.throughput_adjustment_interval_seconds == 180
    assert c.load_adjustment_interval_seconds == 5
    assert (c.ttft_ms, c.itl_ms) == (500.0, 50.0)
    assert (c.max_gpu_budget, c.min_gpu_budget, c.min_endpoint) == (8, -1, 1)
    assert c.load_predictor == "arima"
    assert (c.max_num_fpm_samples, c.fpm_sample_bucket_size, c.load_min_observations) == (64, 16, 5)
    assert c.load_scaling_down_sensitivity == 80
    assert c.max_throughput_scaling_replicas == 8
    assert (c.kalman_q_level, c.kalman_q_trend, c.kalman_r, c.kalman_min_points) == (
        1.0,
        0.1,
        10.0,
        5,
    )


def test_gcd_of_defaults_is_five_seconds():
    assert parse_planner_config(SLA).scale_interval_s == 5.0


def test_gcd_of_seven_and_sixty_is_one_second():
    c = parse_planner_config(
        {**SLA, "load_adjustment_interval_seconds": 7, "throughput_adjustment_interval_seconds": 60}
    )
    assert c.scale_interval_s == 1.0


def test_gcd_at_millisecond_resolution():
    assert gcd_seconds([0.5, 1.25]) == 0.25
    assert gcd_seconds([2.5]) == 2.5


def test_throughput_interval_ignored_in_gcd_outside_sla():
    c = parse_planner_config(
        {"load_adjustment_interval_seconds": 6, "throughput_adjustment_interval_seconds": 9}
    )
    assert c.scale_interval_s == 6.0


def test_throughput_interval_ignored_in_gcd_when_flag_is_false_string():
    c = parse_planner_config(
        {**SLA, "enable_throughput_scaling": "off", "load_adjustment_interval_seconds": 6}
    )
    assert c.scale_interval_s == 6.0


def test_aliases_accepted():
    c = parse_planner_config(
        {
            **SLA,
            "ttft": 200,
            "itl": 20,
            "load_adjustment_interval": 10,
            "throughput_adjustment_interval": 60,
        }
    )
    assert (c.ttft_ms, c.itl_ms) == (200, 20)
    assert (c.load_adjustment_interval_seconds, c.throughput_adjustment_interval_seconds) == (
        10,
        60,
    )
    assert c.scale_interval_s == 10.0


def test_easy_mode_forces_load_only():
    c = parse_planner_config(
        {
            "optimization_target": "latency",
            "enable_throughput_scaling": True,
            "enable_load_scaling": False,
        }
    )
    assert c.enable_load_scaling and not c.enable_throughput_scaling


def test_explicit_scale_interval_must_divide_enabled_intervals():
    with pytest.raises(ConfigError) as err:
        parse_planner_config({**SLA, "scheduling": {"scale_interval_seconds": 4}})
    assert err.value.field == "load_adjustment_interval_seconds"


def test_load_interval_must_be_shorter_than_throughput_interval():
    with pytest.raises(ConfigError) as err:
        parse_planner_config(
            {
                **SLA,
                "load_adjustment_interval_seconds": 60,
                "throughput_adjustment_interval_seconds": 60,
            }
        )
    assert err.value.field == "load_adjustment_interval_seconds"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"ttft_ms": 0}, "ttft_ms"),
        ({"fpm_sample_bucket_size": 12}, "fpm_sample_bucket_size"),
        ({"mode": "agg", "prefill_min_endpoint": 1}, "prefill_min_endpoint"),
        ({"mode": "prefill", "decode_min_endpoint": 1}, "decode_min_endpoint"),
        ({"min_endpoint": -1}, "min_endpoint"),
        ({"load_predictor": "lstm"}, "load_predictor"),
        ({"report_interval_hours": 0}, "report_interval_hours"),
        ({"load_scaling_down_sensitivity": 101}, "load_scaling_down_sensitivity"),
        (
            {
                "optimization_target": "load",
                "decode_scale_up_kv_rate": 50,
                "decode_scale_down_kv_rate": 60,
                "prefill_scale_up_queue_tokens": 10,
                "prefill_scale_down_queue_tokens": 1,
            },
            "decode_scale_up_kv_rate",
        ),
        (
            {
                "optimization_target": "load",
                "decode_scale_up_kv_rate": 80,
                "decode_scale_down_kv_rate": 20,
            },
            "prefill_scale_up_queue_tokens",
        ),
        ({"no_such_field": 1}, "no_such_field"),
        ({"scheduling": {"scale_interval_seconds": -1}}, "scheduling.scale_interval_seconds"),
        ({"load_adjustment_interval": "soon"}, "load_adjustment_interval_seconds"),
        (
            {
                "optimization_target": "sla",
                "enable_load_scaling": False,
                "enable_throughput_scaling": False,
            },
            "enable_load_scaling",
        ),
    ],
)
def test_invalid_values_name_the_field(raw, field):
    with pytest.raises(ConfigError) as err:
        parse_planner_config(raw, source="planner.yaml")
    assert err.value.field == field
    assert str(err.value).startswith(f"planner.yaml: {field}: ")


def test_live_only_fields_ignored_with_one_warning(caplog):
    raw = {
        **SLA,
        "environment": "kubernetes",
        "backend": "vllm",
        "metric_pulling_prometheus_endpoint": "http://prom:9090",
        "live_dashboard_port": 8080,
        "scheduling": {"tick_max_duration_seconds": 30, "gateway": {"enabled": False}},
    }
    with caplog.at_level(logging.WARNING, logger="plansim.planner"):
        c = parse_planner_config(raw)
    warnings = [r for r in caplog.records if "live-only" in r.getMessage()]
    assert len(warnings) == 1
    msg = warnings[0].getMessage()
    for name in (
        "environment",
        "backend",
        "metric_pulling_prometheus_endpoint",
        "live_dashboard_port",
        "scheduling.gateway",
    ):
        assert name in msg
    assert c.scale_interval_s == 5.0


def test_retune_only_mode_keeps_both_loops_off():
    c = parse_planner_config(
        {"retune": {}, "enable_load_scaling": False, "enable_throughput_scaling": False}
    )
    assert c.retune_only
    assert not c.enable_load_scaling and not c.enable_throughput_scaling


def test_min_endpoint_resolution():
    c = parse_planner_config({"min_endpoint": 2, "decode_min_endpoint": 3})
    assert c.active_min_endpoints() == (2, 3)
    agg = parse_planner_config({"mode": "agg", "min_endpoint": 2})
    assert agg.active_min_endpoints() == (None, 2)


def test_with_changes_revalidates():
    c = parse_planner_config(SLA)
    assert with_changes(c, {"ttft_ms": 250}).ttft_ms == 250
    with pytest.raises(ConfigError) as err:
        with_changes(c, {"ttft_ms": -5})
    assert err.value.field == "ttft_ms"


def test_dynamo_json_and_yaml_files_load(tmp_path):
    raw = {**SLA, "environment": "virtual", "ttft": 300, "decode_engine_num_gpu": 2}
    (tmp_path / "p.json").write_text(json.dumps(raw))
    (tmp_path / "p.yaml").write_text(
        "planner:\n  optimization_target: sla\n  enable_load_scaling: true\n  ttft: 300\n"
    )
    assert read_planner_config(tmp_path / "p.json").ttft_ms == 300
    assert read_planner_config(tmp_path / "p.yaml").ttft_ms == 300


def test_bad_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("mode: agg\nttft: [1,\n")
    with pytest.raises(ConfigError) as err:
        read_planner_config(path)
    assert err.value.source == str(path)
    assert err.value.line is not None


def test_with_changes_recomputes_a_defaulted_cadence():
    c = parse_planner_config(SLA)  # GCD(5, 180) = 5
    assert (
        with_changes(
            c, {"load_adjustment_interval_seconds": 7, "throughput_adjustment_interval_seconds": 63}
        ).scale_interval_s
        == 7.0
    )
    explicit = parse_planner_config({**SLA, "scheduling": {"scale_interval_seconds": 5}})
    with pytest.raises(ConfigError):
        with_changes(explicit, {"load_adjustment_interval_seconds": 7})


def test_scaling_policy_defaults_to_dynamo_without_parameters():
    c = parse_planner_config(SLA)
    assert c.scaling_policy == "dynamo"
    assert c.policy_params.model_dump() == {}


def test_sla_goodput_parameters_take_their_declared_defaults():
    c = parse_planner_config(
        {
            **SLA,
            "scaling_policy": "sla_goodput",
            "scaling_policy_params": {"max_violation_fraction": 0.02},
        }
    )
    assert c.policy_params.max_violation_fraction == 0.02
    assert c.policy_params.scale_down_stabilization_s == 300.0
    assert c.policy_params.routing == "balanced"


@pytest.mark.parametrize(
    ("raw", "field", "fragment"),
    [
        ({"scaling_policy": "greedy"}, "scaling_policy", "unknown scaling policy 'greedy'"),
        (
            {"scaling_policy": "sla_goodput", "optimization_target": "throughput"},
            "scaling_policy",
            "needs optimization_target sla",
        ),
        (
            {
                "scaling_policy": "sla_goodput",
                "scaling_policy_params": {"max_violation_fraction": 1.5},
            },
            "scaling_policy_params.max_violation_fraction",
            "less than 1",
        ),
        (
            {
                "scaling_policy": "sla_goodput",
                "scaling_policy_params": {"max_violation_fraction": float("nan")},
            },
            "scaling_policy_params.max_violation_fraction",
            "",
        ),
        (
            {"scaling_policy": "sla_goodput", "scaling_policy_params": {"routing": "sticky"}},
            "scaling_policy_params.routing",
            "balanced",
        ),
        (
            {"scaling_policy": "sla_goodput", "scaling_policy_params": {"target": 0.9}},
            "scaling_policy_params.target",
            "not a parameter of scaling policy sla_goodput",
        ),
        (
            {"scaling_policy_params": {"max_violation_fraction": 0.1}},
            "scaling_policy_params.max_violation_fraction",
            "not a parameter of scaling policy dynamo",
        ),
    ],
)
def test_scaling_policy_errors_name_the_field(raw, field, fragment):
    with pytest.raises(ConfigError) as err:
        parse_planner_config({**SLA, **raw}, source="planner.yaml")
    assert err.value.field == field
    message = str(err.value)
    assert message.startswith(f"planner.yaml: {field}: ") and "\n" not in message
    assert fragment in message


def test_a_policy_change_revalidates_its_parameters():
    c = parse_planner_config(
        {**SLA, "scaling_policy": "sla_goodput", "scaling_policy_params": {"knee_gain": 0.05}}
    )
    with pytest.raises(ConfigError) as err:
        with_changes(c, {"scaling_policy": "dynamo"})
    assert err.value.field == "scaling_policy_params.knee_gain"
