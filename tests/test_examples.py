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
    assert (scoring.ttft_ms, scoring.tpot_ms) == (
        run.deployment.sla.ttft_ms,
        run.deployment.sla.tpot_ms,
    )


def test_the_retune_examples_planner_targets_are_its_deployments_sla():
    run = load_retune_run(EXAMPLES / "retune.yaml")
    sla = run.deployment.sla
    assert (run.planner_config.ttft_ms, run.planner_config.itl_ms) == (sla.ttft_ms, sla.tpot_ms)


def test_the_dynamo_planner_example_sizes_for_deploy_yamls_sla():
    sla = load_deployment(EXAMPLES / "deploy.yaml").sla
    planner = parse_planner_config(read_config(EXAMPLES / "planner.yaml", what="planner config"))
    assert planner.scaling_policy == "dynamo"
    assert (planner.ttft_ms, planner.itl_ms) == (sla.ttft_ms, sla.tpot_ms)


def test_the_fleet_example_is_valid_and_its_models_search_both_gpu_types_of_its_inventory():
    from plansim import fleet

    plan = fleet.prepare(
        fleet.load_fleet(EXAMPLES / "fleet.yaml"), source=str(EXAMPLES / "fleet.yaml")
    )
    assert [m.name for m in plan.models] == ["chat", "batch"]
    assert plan.inventory.counts == {"h200_sxm": 16, "h100_sxm": 8}
    for m in plan.models:
        assert [v.label for v in m.variants] == [
            "engine.timing_model.system=h200_sxm",
            "engine.timing_model.system=h100_sxm",
        ]
        assert all(Path(t).is_file() for t in m.traces)
