"""Candidate replay tasks: common random numbers, ordinal ids, inner planner, history buckets."""

from __future__ import annotations

import numpy as np
import pytest
from retune_workloads import grouped_workload

from plansim.planner_core.config import parse_planner_config
from plansim.planner_core.observations import WorkerCounts
from plansim.retune.tasks import (
    CandidateConfig,
    ReplaySpec,
    aligned_buckets,
    candidate_deployment,
    inner_planner_config,
    load_window,
    replay_candidate_task,
    save_window,
)
from plansim.sim.deployment import build_deployment
from plansim.workers.executor import InProcessExecutor, Task, TaskContext
from plansim.workers.pool import SpawnPool


def spec_for(num_workers: int, temperature: float = 0.0, **kw) -> ReplaySpec:
    dep = build_deployment(
        {
            "mode": "agg",
            "num_workers": 4,
            "engine": {"num_gpu_blocks": 256, "block_size": 64, "max_num_seqs": 8},
            "router": {"mode": "kv_router", "router_temperature": temperature},
        }
    )
    return ReplaySpec(
        deployment=dep,
        ready_counts=WorkerCounts(0, num_workers),
        seed=3,
        sla={"ttft_ms": 200.0, "itl_ms": 30.0, "e2e_ms": None},
        **kw,
    )


@pytest.fixture
def window_file(tmp_path):
    path = str(tmp_path / "window-0.npz")
    save_window(path, grouped_workload())
    return path


def test_the_window_file_replays_with_ordinal_request_ids(window_file):
    workload = load_window(window_file)
    assert list(workload.request_id[:3]) == ["0", "1", "2"]
    original = grouped_workload()
    assert np.array_equal(workload.hash_ids, original.hash_ids)
    assert workload.trace_block_size == 64


def test_a_candidate_replay_starts_from_the_recorded_counts_with_the_canonical_seed():
    spec = spec_for(num_workers=2)
    dep = candidate_deployment(spec, CandidateConfig(router=(("overlap_score_weight", 0.5),)))
    assert (dep.num_workers, dep.seed, dep.router.overlap_score_weight) == (2, 3, 0.5)
    assert dep.router.router_temperature == 0.0 and dep.sla.ttft_ms == 200.0


def test_a_candidate_that_changes_no_routing_decision_scores_exactly_the_current_point(window_file):
    # One worker: every weight routes every request to it, so nothing can differ.
    spec = spec_for(num_workers=1)
    ctx = TaskContext(".")
    current = replay_candidate_task(
        ctx, spec, CandidateConfig((("overlap_score_weight", 1.0),)), window_file, ()
    )
    other = replay_candidate_task(
        ctx, spec, CandidateConfig((("overlap_score_weight", 4.0),)), window_file, ()
    )
    assert current == other
    assert current["completed_requests"] == 48


SLA_PLANNER = {
    "mode": "agg",
    "optimization_target": "sla",
    "enable_load_scaling": True,
    "enable_throughput_scaling": True,
    "throughput_adjustment_interval_seconds": 4,
    "load_adjustment_interval_seconds": 2,
    "load_predictor": "kalman",
    "ttft_ms": 200,
    "itl_ms": 30,
    "max_gpu_budget": 4,
    "retune": {
        "interval_seconds": 12,
        "planner": {"load_scaling_down_sensitivity": {"choices": [70, 90]}},
    },
}
WARMUP = ((8.0, 400.0, 30.0), (12.0, 380.0, 35.0), (9.0, 420.0, 33.0))


@pytest.mark.slow
@pytest.mark.parametrize("inner_planner", [False, True])
def test_results_do_not_depend_on_the_worker_or_max_parallel(window_file, tmp_path, inner_planner):
    # A softmax router at temperature 0.7 draws random numbers: common random numbers must make
    # the draws the same wherever the replay runs; so must an inner planner's decisions.
    planner = parse_planner_config(SLA_PLANNER) if inner_planner else None
    spec = spec_for(
        num_workers=3,
        temperature=0.7,
        planner_config=planner,
        throughput_interval_s=4.0 if inner_planner else None,
    )
    configs = [
        CandidateConfig(
            (("overlap_score_weight", w),),
            (("load_scaling_down_sensitivity", 70),) if inner_planner else (),
        )
        for w in (0.0, 0.5, 1.0, 2.0)
    ]
    warmup = WARMUP if inner_planner else ()
    tasks = [
        Task(f"c{i}", replay_candidate_task, (spec, c, window_file, warmup))
        for i, c in enumerate(configs)
    ]
    ctx = TaskContext(str(tmp_path))
    serial = [r.value for r in InProcessExecutor().run(tasks, ctx).results]
    for max_parallel in (1, 2):
        with SpawnPool(max_parallel) as pool:
            out = pool.run(tasks, ctx)
        assert [r.value for r in out.results] == serial
    reversed_order = [r.value for r in InProcessExecutor().run(tasks[::-1], ctx).results]
    assert reversed_order[::-1] == serial


def test_the_inner_planner_has_retune_report_and_advisory_off():
    config = parse_planner_config(
        {
            "optimization_target": "sla",
            "enable_load_scaling": False,
            "advisory": True,
            "throughput_adjustment_interval_seconds": 60,
            "retune": {"interval_seconds": 120, "planner": {"max_gpu_budget": {"choices": [4, 8]}}},
        }
    )
    spec = spec_for(num_workers=2, planner_config=config)
    inner = inner_planner_config(spec, CandidateConfig(planner=(("max_gpu_budget", 4),)))
    assert inner.retune is None and inner.advisory is False
    assert inner.report_interval_hours is None and inner.max_gpu_budget == 4


def test_buckets_end_at_the_given_time_and_keep_empty_buckets():
    # Buckets of 10 ms ending at 100: [60,70) [70,80) [80,90) [90,100); 95 and 99 share one.
    arrival = np.array([62.0, 65.0, 95.0, 99.0, 100.0])
    isl = np.array([10, 30, 100, 200, 999])
    osl = np.array([1, 3, 5, 7, 999])
    assert aligned_buckets(arrival, isl, osl, 100.0, 10.0) == (
        (2.0, 20.0, 2.0),
        (0.0, 0.0, 0.0),
        (0.0, 0.0, 0.0),
        (2.0, 150.0, 6.0),
    )
    assert aligned_buckets(arrival, isl, osl, 50.0, 10.0) == ()


def test_an_arrival_on_a_bucket_edge_belongs_to_the_later_bucket():
    # Buckets are half-open [end-(i+1)I, end-iI): 90 opens [90,100); 89.5 is in [80,90).
    arrival = np.array([89.5, 90.0, 99.9])
    isl = np.array([10, 20, 40])
    osl = np.array([1, 2, 4])
    assert aligned_buckets(arrival, isl, osl, 100.0, 10.0) == ((1.0, 10.0, 1.0), (2.0, 30.0, 3.0))
