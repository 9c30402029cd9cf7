"""RetuneConfig defaults and validation (issue 5 item 1)."""

import pytest

from plansim.errors import ConfigError
from plansim.retune.config import load_retune_config


def test_defaults_follow_the_issue():
    c = load_retune_config({})
    assert (c.interval_seconds, c.grace_seconds, c.objective) == (900.0, 60.0, "GoodputPerGPU")
    assert (c.min_improvement_percentage, c.max_candidates) == (2.0, 32)
    assert c.timeout_s == 450.0  # T / 2
    assert c.decision_latency_seconds == 0.0 and c.advisory is False
    assert c.max_parallel >= 1


def test_timeout_defaults_to_half_the_interval():
    assert load_retune_config({"interval_seconds": 60}).timeout_s == 30.0


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"interval_seconds": 100, "timeout_seconds": 101}, "retune.timeout_seconds"),
        (
            {"interval_seconds": 100, "decision_latency_seconds": 100.5},
            "retune.decision_latency_seconds",
        ),
        ({"decision_latency_seconds": -1}, "retune.decision_latency_seconds"),
        (
            {"router": {"host_cache_hit_weight": {"choices": [0.5, 1.0]}}},
            "retune.router.host_cache_hit_weight",
        ),
        ({"router": {"disk_cache_hit_weight": 0.1}}, "retune.router.disk_cache_hit_weight"),
        ({"router": {"overlap_score_weight": [1, 2]}}, "retune.router.overlap_score_weight"),
        ({"objective": "Latency"}, "retune.objective"),
        ({"colour": "blue"}, "retune.colour"),
        ({"sla": {"e2e_ms": 1000, "ttft_ms": 200}}, "retune.sla"),
    ],
)
def test_invalid_values_name_the_offending_field(block, field):
    with pytest.raises(ConfigError) as err:
        load_retune_config(block)
    assert err.value.field == field


def test_d_and_timeout_may_equal_the_interval():
    c = load_retune_config(
        {"interval_seconds": 100, "timeout_seconds": 100, "decision_latency_seconds": 100}
    )
    assert c.timeout_s == 100 and c.decision_latency_seconds == 100


def test_measured_decision_latency_is_accepted():
    assert (
        load_retune_config({"decision_latency_seconds": "measured"}).decision_latency_seconds
        == "measured"
    )


def test_scoring_sla_defaults_to_the_planner_targets():
    sla = load_retune_config({}).scoring_sla(500.0, 50.0)
    assert (sla.ttft_ms, sla.tpot_ms, sla.e2e_ms) == (500.0, 50.0, None)
