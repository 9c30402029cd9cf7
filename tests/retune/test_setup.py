"""The retune block parsed and checked once against the deployment (seed: Retune): what fails
the setup, which grid points it keeps, and that controllers built from it check nothing again."""

from __future__ import annotations

import logging

import pytest
from retune_fakes import agg_setup

from plansim.errors import ConfigError
from plansim.planner_core.config import parse_planner_config
from plansim.retune.controller import RetuneController, RetuneInputs
from plansim.retune.setup import retune_setup
from plansim.sim.deployment import build_deployment

# min_endpoint 3 needs 3 GPUs: with a 2-GPU budget it does not fit (1 of the 4 points).
MIN_ENDPOINT_BY_BUDGET = {
    "min_endpoint": {"choices": [1, 3]},
    "max_gpu_budget": {"choices": [2, 4]},
}


def test_a_grid_larger_than_max_candidates_fails_the_setup():
    with pytest.raises(ConfigError) as err:
        agg_setup({"max_candidates": 2})  # 3 overlap weights
    assert err.value.field == "retune.max_candidates"


def test_a_router_knob_a_patch_cannot_change_is_rejected():
    with pytest.raises(ConfigError) as err:
        agg_setup({"router": {"router_track_active_blocks": False}})
    assert err.value.field == "retune.router.router_track_active_blocks"


def test_planner_points_that_do_not_fit_are_dropped_with_one_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="plansim.retune"):
        setup = agg_setup({"router": {}, "planner": MIN_ENDPOINT_BY_BUDGET})
    assert len(setup.grid) == 3
    assert {"min_endpoint": 3, "max_gpu_budget": 2} not in [p.planner_map for p in setup.grid]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "dropped 1 of 4" in warnings[0].getMessage()


def test_controllers_built_from_a_setup_check_nothing_again(caplog):
    with caplog.at_level(logging.WARNING, logger="plansim.retune"):
        setup = agg_setup({"router": {}, "planner": MIN_ENDPOINT_BY_BUDGET})
        for _ in range(2):
            RetuneController(setup, RetuneInputs(("trace.jsonl.gz",), 0.0)).close()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_a_planner_value_that_fits_no_point_fails_the_setup():
    planner = {"min_endpoint": {"choices": [1, 5]}, "max_gpu_budget": {"choices": [2, 4]}}
    with pytest.raises(ConfigError) as err:
        agg_setup({"router": {}, "planner": planner})
    assert err.value.field == "retune.planner.min_endpoint"


def test_a_searched_predictor_needs_the_sla_target_with_throughput_scaling():
    with pytest.raises(ConfigError) as err:
        agg_setup({"planner": {"load_predictor": {"choices": ["kalman", "constant"]}}})
    assert err.value.field == "retune.planner.load_predictor"


def test_the_startup_point_and_router_map_are_the_deployments():
    # overlap_score_weight is the deprecated spelling of prefill_load_scale: the deployment keeps
    # the value under the new name, the searched knob starts from it.
    setup = agg_setup(deployment={"router": {"mode": "kv_router", "overlap_score_weight": 0.5}})
    assert setup.startup_point.router_map == {"overlap_score_weight": 0.5}
    assert set(setup.router_parameters) == {"decode"}  # the one agg pool, as WorkerCounts names it
    assert setup.router_parameters["decode"]["prefill_load_scale"] == 0.5
    assert "overlap_score_weight" not in setup.router_parameters["decode"]


def test_errors_name_the_planner_file_and_the_field():
    config = parse_planner_config(
        {
            "mode": "agg",
            "enable_load_scaling": False,
            "enable_throughput_scaling": False,
            "retune": {"router": {"foo": {"choices": [1, 2]}}},
        }
    )
    deployment = build_deployment(
        {"mode": "agg", "num_workers": 1, "router": {"mode": "kv_router"}}
    )
    with pytest.raises(ConfigError) as err:
        retune_setup(config, deployment, source="planner.yaml")
    assert (err.value.source, err.value.field) == ("planner.yaml", "retune.router.foo")
    assert "not a router parameter a tick can patch" in err.value.message


def test_a_config_without_a_retune_block_has_no_retune_setup():
    config = parse_planner_config(
        {"mode": "agg", "enable_load_scaling": False, "enable_throughput_scaling": True}
    )
    deployment = build_deployment({"mode": "agg", "num_workers": 1})
    with pytest.raises(ConfigError) as err:
        retune_setup(config, deployment, source="planner.yaml")
    assert err.value.field == "retune"
