"""Worker self-benchmark FPMs and capabilities for the planner's bootstrap."""

from __future__ import annotations

import pytest

from plansim.planner_core import parse_planner_config
from plansim.sim.bootstrap import (
    benchmark_fpms,
    planner_for_deployment,
    worker_capabilities,
)
from plansim.sim.deployment import EngineArgs, build_deployment


def test_prefill_sweep_is_batch_one_over_isl_up_to_the_token_budget():
    fpms = benchmark_fpms(EngineArgs(worker_type="prefill"), granularity=3)
    # 3 steps from 100 to 8192: 100, 4146, 8192
    assert [f.sum_prefill_tokens for f in fpms] == [100, 4146, 8192]
    t = 8192.0
    assert fpms[-1].wall_time_s == pytest.approx(
        (4.209989e-7 * t * t + 1.518344e-2 * t + 16.50142) / 1000
    )
    assert all(f.num_prefill_requests == 1 and f.num_decode_requests == 0 for f in fpms)


def test_decode_sweep_stops_once_batch_times_context_exceeds_kv_capacity():
    # 100 blocks x 64 = 6400 KV tokens; batches 1, 2, 3, 4 (granularity 4, max_num_seqs 4).
    args = EngineArgs(worker_type="decode", num_gpu_blocks=100, max_num_seqs=4, speedup_ratio=2.0)
    fpms = benchmark_fpms(args, granularity=4)
    pairs = [(f.num_decode_requests, f.sum_decode_kv_tokens) for f in fpms]
    # ctx 500: 1..4 fit (<= 6400); ctx 2000: 1..3; ctx 4000: 1; ctx 8000: none
    assert pairs == [
        (1, 500),
        (2, 1000),
        (3, 1500),
        (4, 2000),
        (1, 2000),
        (2, 4000),
        (3, 6000),
        (1, 4000),
    ]
    u = 6000 / 6400
    assert fpms[6].wall_time_s == pytest.approx((-25.74 * u * u + 54.01 * u + 5.74) / 2 / 1000)


def test_capabilities_per_role_with_benchmarks():
    agg = worker_capabilities(build_deployment({"engine": {"dp_size": 2, "aic_tp_size": 2}}))
    assert agg.mode == "agg" and agg.prefill is None
    assert agg.decode.num_gpu == 4 and agg.decode.max_kv_tokens == 16384 * 64 * 2
    assert agg.benchmark_fpms["decode"][0].num_prefill_requests == 1  # prefill sweep first
    dis = worker_capabilities(build_deployment({"mode": "disagg"}), benchmark=False)
    assert dis.prefill is not None and dis.benchmark_fpms == {}


def test_a_planner_target_sla_goodput_overrides_is_named_with_the_deployment_s_sla(caplog):
    deployment = build_deployment({"sla": {"ttft_ms": 500, "tpot_ms": 20}})
    config = parse_planner_config(
        {
            "mode": "agg",
            "scaling_policy": "sla_goodput",
            "optimization_target": "sla",
            "ttft_ms": 300,
            "itl_ms": 20,
        }
    )
    with caplog.at_level("WARNING", logger="plansim"):
        planner_for_deployment(config, deployment)
    assert (
        "scaling_policy sla_goodput sizes for the deployment's sla (ttft_ms 500, tpot_ms 20);"
        " ttft_ms 300 not used"
    ) in caplog.text
