"""Real candidate replays on Ray (a local 2-CPU instance on loopback) give exactly what the spawn
pool gives: the same task functions on the same inputs, whichever backend runs them; and whole
window sweeps of the bundled sample agree record for record."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from retune_workloads import grouped_workload

from plansim.commands.retune_windows import load_window_plans
from plansim.planner_core.observations import WorkerCounts
from plansim.retune.tasks import CandidateConfig, ReplaySpec, replay_candidate_task, save_window
from plansim.retune_runs.batch import score_windows, window_record, windows_in_flight
from plansim.sim.deployment import build_deployment
from plansim.workers.executor import Task, TaskContext
from plansim.workers.pool import SpawnPool

pytestmark = pytest.mark.slow


def test_candidate_replays_on_ray_equal_the_spawn_pool(ray_executor, tmp_path) -> None:
    window_path = str(tmp_path / "window-0.npz")
    save_window(window_path, grouped_workload(60))
    # A softmax router (temperature 0.7) draws random numbers: common random numbers must make
    # the draws the same on either backend.
    deployment = build_deployment(
        {
            "mode": "agg",
            "num_workers": 3,
            "engine": {"num_gpu_blocks": 256, "block_size": 64, "max_num_seqs": 8},
            "router": {"mode": "kv_router", "router_temperature": 0.7},
        }
    )
    spec = ReplaySpec(
        deployment=deployment,
        ready_counts=WorkerCounts(0, 3),
        seed=5,
        sla={"ttft_ms": 200.0, "itl_ms": 30.0, "e2e_ms": None},
    )
    tasks = [
        Task(
            f"c{i}",
            replay_candidate_task,
            (spec, CandidateConfig((("overlap_score_weight", w),)), window_path, ()),
        )
        for i, w in enumerate((0.0, 1.0, 3.0))
    ]
    context = TaskContext(str(tmp_path))
    before = ray_executor.objects_put
    on_ray = ray_executor.run(tasks, context)
    # The spec and the window file were each shipped once for the three replays.
    assert ray_executor.objects_put - before == 2
    with SpawnPool(2) as pool:
        on_pool = pool.run(tasks, context)
    assert all(r.ok for r in on_ray.results)
    assert [r.value for r in on_ray.results] == [r.value for r in on_pool.results]
    assert on_ray.results[0].value["completed_requests"] == 60


SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "sample.dynamo.jsonl.gz"


def sample_run_file(tmp_path: Path) -> Path:
    """Two 30 s windows of the bundled sample; three router candidates around a softmax
    router (temperature 0.5), so the replays draw random numbers."""
    run = {
        "trace": str(SAMPLE),
        "deployment": {
            "mode": "agg",
            "num_workers": 3,
            "engine": {"num_gpu_blocks": 2048, "block_size": 64, "max_num_seqs": 16},
            "router": {"mode": "kv_router", "overlap_score_weight": 1.0, "router_temperature": 0.5},
            "sla": {"ttft_ms": 2000, "itl_ms": 50},
            "seed": 42,
        },
        "planner": {
            "mode": "agg",
            "enable_load_scaling": False,
            "enable_throughput_scaling": False,
            "retune": {
                "interval_seconds": 30,
                "grace_seconds": 5,
                "max_parallel": 2,
                "seed": 9,
                "router": {"overlap_score_weight": {"choices": [0.5, 2.0]}},
            },
        },
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(run))
    return path


def test_windows_on_ray_equal_the_spawn_pool_on_the_sample(ray_executor, tmp_path) -> None:
    _, plans = load_window_plans(sample_run_file(tmp_path), first=0, last=1)
    with SpawnPool(2) as pool:
        by_pool = score_windows(plans, pool)
    # Both windows at once on Ray (two lanes), one after the other on the pool.
    assert windows_in_flight(ray_executor, plans) == 2
    by_ray = score_windows(plans, ray_executor)

    def records(results):
        out = []
        for result in results:
            record = window_record(result)
            record.pop("sweep_wall_s")
            out.append(record)
        return out

    on_pool, on_ray = records(by_pool), records(by_ray)
    assert [r["window"] for r in on_ray] == [0, 1]
    assert all(r["window_requests"] > 0 and r["replays"] == 3 for r in on_ray)
    assert all(row["status"] == "ok" for r in on_ray for row in r["ranked"])
    assert on_ray == on_pool
