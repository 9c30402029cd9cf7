"""The planner policies a capacity run compares: one per scaling policy by default, one per
planner config file, each checked against the deployment."""

from __future__ import annotations

import pytest
from capacity_workloads import agg_deployment

from plansim.capacity.policies import default_policies, file_policies
from plansim.errors import ConfigError
from plansim.planner_core.scaling_policies import SCALING_POLICIES
from plansim.sim.deployment import build_deployment


def test_defaults_are_every_scaling_policy_sized_for_the_sla_and_budget():
    deployment = build_deployment({"sla": {"ttft_ms": 400, "itl_ms": 25}})
    policies, notes = default_policies(deployment, 24)
    assert [p.name for p in policies] == list(SCALING_POLICIES.names()) and notes == []
    for policy in policies:
        config = policy.config
        assert config.scaling_policy == policy.name and config.mode == "agg"
        assert (config.ttft_ms, config.itl_ms, config.max_gpu_budget) == (400, 25, 24)
        assert config.enable_throughput_scaling and config.enable_load_scaling


def test_the_deployment_planner_block_is_the_defaults_base():
    block = {"mode": "agg", "optimization_target": "sla", "load_predictor": "constant"}
    deployment = build_deployment({"sla": {"ttft_ms": 400}, "planner": block})
    policies, notes = default_policies(deployment, 24)
    assert [p.name for p in policies] == list(SCALING_POLICIES.names()) and notes == []
    for policy in policies:
        assert policy.config.load_predictor == "constant"
        assert policy.source == "deployment planner block"


def test_a_policy_the_planner_block_cannot_run_is_left_out_with_a_note():
    deployment = build_deployment(
        {"sla": {"ttft_ms": 400}, "planner": {"mode": "agg", "optimization_target": "throughput"}}
    )
    policies, notes = default_policies(deployment, 24)
    assert [p.name for p in policies] == ["dynamo"]
    assert len(notes) == 1 and "scaling policy sla_goodput not compared" in notes[0]


def test_files_are_named_after_themselves_once(tmp_path):
    a = tmp_path / "tuned.yaml"
    a.write_text("mode: agg\nload_predictor: constant\n")
    b = tmp_path / "again" / "tuned.yaml"
    b.parent.mkdir()
    b.write_text("mode: agg\n")
    policies = file_policies([a, b], agg_deployment(), taken=["dynamo"])
    assert [p.name for p in policies] == ["tuned", "tuned-2"]
    assert policies[0].source == str(a)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mode: disagg\n", "planner mode disagg does not fit the agg deployment"),
        ("mode: agg\nretune: {interval_seconds: 60}\n", "compares scaling policies"),
    ],
)
def test_a_config_that_cannot_run_here_names_its_file(tmp_path, text, message):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        file_policies([path], agg_deployment())
    assert str(path) in str(info.value)
