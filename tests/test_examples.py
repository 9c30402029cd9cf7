"""The bundled examples agree with themselves: a planner sizes for, and retune scores on, the SLA
goodput is scored on (the example's own comments say so; a mismatch teaches users the wrong
setting)."""

from __future__ import annotations

from pathlib import Path

from plansim.configfile import read_config
from plansim.planner_core.config import parse_planner_config
from plansim.retune_runs.runner import load_retune_run
from plansim.sim.deployment import load_deployment

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_retune_example_scores_candidates_on_its_deployments_sla():
    run = load_retune_run(EXAMPLES / "retune.yaml")
    scoring = run.retune.sla
    assert (scoring.ttft_ms, scoring.itl_ms) == (run.deployment.sla.ttft_ms, run.deployment.sla.itl_ms)


def test_the_retune_examples_planner_targets_are_its_deployments_sla():
    run = load_retune_run(EXAMPLES / "retune.yaml")
    sla = run.deployment.sla
    assert (run.planner_config.ttft_ms, run.planner_config.itl_ms) == (sla.ttft_ms, sla.itl_ms)


def test_the_dynamo_planner_example_sizes_for_deploy_yamls_sla():
    sla = load_deployment(EXAMPLES / "deploy.yaml").sla
    planner = parse_planner_config(read_config(EXAMPLES / "planner.yaml", what="planner config"))
    assert planner.scaling_policy == "dynamo"
    assert (planner.ttft_ms, planner.itl_ms) == (sla.ttft_ms, sla.itl_ms)
