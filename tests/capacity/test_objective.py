"""Ranking objectives: GPU-hours, and with ``--gpu-cost`` money per GPU system (the pools' aic
timing models name the system)."""

from __future__ import annotations

import pytest
from capacity_workloads import agg_deployment, workload_at

from plansim.capacity import GpuCost, GpuHours, parse_gpu_costs, search
from plansim.capacity.objective import measured, rate
from plansim.capacity.variants import PoolLayout, layout_of
from plansim.errors import InputError
from plansim.sim.deployment import build_deployment
from plansim.workers.executor import InProcessExecutor

DISAGG = PoolLayout(
    mode="disagg",
    names=("prefill", "decode"),
    gpus_per_worker=(2, 4),
    startup_s=(0.0, 0.0),
    gpu_systems=("h200_sxm", "b200_sxm"),
)


def test_gpu_hours_price_a_worker_hour_at_its_gpus():
    assert GpuHours().worker_rates(DISAGG) == (2.0, 4.0)
    assert rate(GpuHours(), DISAGG, (3, 1)) == 3 * 2 + 1 * 4


def test_gpu_cost_prices_each_pool_at_its_systems_price_per_gpu():
    cost = GpuCost({"h200_sxm": 3.5, "b200_sxm": 6.0})
    assert cost.worker_rates(DISAGG) == (2 * 3.5, 4 * 6.0)
    summary = {"prefill_worker_seconds": 7200.0, "decode_worker_seconds": 1800.0}
    assert measured(cost, DISAGG, summary) == pytest.approx(2 * 2 * 3.5 + 0.5 * 4 * 6.0)


def test_prices_parse_from_one_or_several_options():
    assert parse_gpu_costs(["h200_sxm=3.5,b200_sxm=6", "gb200=9.25"]) == {
        "h200_sxm": 3.5,
        "b200_sxm": 6.0,
        "gb200": 9.25,
    }


@pytest.mark.parametrize(
    "values, message",
    [
        (["h200_sxm"], "expected SYSTEM=PRICE_PER_GPU_HOUR, got 'h200_sxm'"),
        (["h200_sxm=cheap"], "h200_sxm: expected a price per GPU-hour, got 'cheap'"),
        (["h200_sxm=0"], "h200_sxm: the price must be a positive number, got 0"),
        (["h200_sxm=nan"], "h200_sxm: the price must be a positive number, got nan"),
        (["h200_sxm=1", "h200_sxm=2"], "h200_sxm priced twice"),
    ],
)
def test_bad_prices_are_one_line_naming_the_option(values, message):
    with pytest.raises(InputError) as err:
        parse_gpu_costs(values)
    assert (err.value.field, err.value.message) == ("--gpu-cost", message)


def test_a_pool_without_an_aic_model_has_no_price():
    with pytest.raises(InputError, match="the agg pool of base has no aic timing model"):
        search(
            workload_at([0.0]),
            agg_deployment(),
            objective=GpuCost({"h200_sxm": 1.0}),
            executor=InProcessExecutor(),
            default_policies=False,
        )


def test_a_searched_system_without_a_price_is_refused_before_any_replay():
    deployment = build_deployment(
        {
            "engine": {
                "timing_model": {"type": "aic", "model": "Qwen/Qwen3-32B", "system": "h200_sxm"}
            },
            "router": {"mode": "kv_router"},
            "sla": {"ttft_ms": 1000},
        }
    )
    assert layout_of(deployment).gpu_systems == ("h200_sxm",)
    with pytest.raises(
        InputError,
        match=r"no price for b200_sxm \(the agg pool of "
        r"engine.timing_model.system=b200_sxm\); priced: h200_sxm",
    ):
        search(
            workload_at([0.0]),
            deployment,
            objective=GpuCost({"h200_sxm": 1.0}),
            search={"engine.timing_model.system": ["h200_sxm", "b200_sxm"]},
            executor=InProcessExecutor(),
            default_policies=False,
        )


def test_priced_gpus_can_reorder_the_answer():
    """Qwen3-32B on H200 and on B200: by GPU-hours, and with B200 GPU-hours priced 20 times
    H200's. Each ranking's winner is the feasible variant of least cost, and a variant's cost
    is its GPU-hours times its price."""
    workload = workload_at([i * 250.0 for i in range(120)], isl=2000, osl=40)
    deployment = build_deployment(
        {
            "engine": {
                "timing_model": {"type": "aic", "model": "Qwen/Qwen3-32B", "system": "h200_sxm"}
            },
            "router": {"mode": "kv_router"},
            "sla": {"ttft_ms": 400.0},
        }
    )
    options = {
        "search": {"engine.timing_model.system": ["h200_sxm", "b200_sxm"]},
        "executor": InProcessExecutor(),
        "default_policies": False,
        "max_gpu_budget": 16,
    }
    prices = {"h200_sxm": 1.0, "b200_sxm": 20.0}
    by_hours = search(workload, deployment, 0.9, **options)
    by_cost = search(workload, deployment, 0.9, objective=GpuCost(prices), **options)
    for result, price_of in ((by_hours, lambda v: 1.0), (by_cost, lambda v: prices[v[-8:]])):
        feasible = [v.point for v in result.variants if v.point is not None and v.point.feasible]
        assert len(feasible) == 2
        for point in feasible:
            assert point.cost == pytest.approx(point.gpu_hours * price_of(point.variant))
        assert result.cheapest.cost == min(p.cost for p in feasible)
    assert by_hours.cheapest.variant != by_cost.cheapest.variant
