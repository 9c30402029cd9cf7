"""The same capacity answer on every executor: in this process, a spawn pool of one or two
workers, and Ray (capacity.json byte for byte apart from host-speed figures, and the points
table)."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from capacity_workloads import agg_deployment, workload_at

from plansim.capacity import prepare, run
from plansim.workers.executor import InProcessExecutor
from plansim.workers.pool import SpawnPool

pytestmark = pytest.mark.slow


def _answer(executor):
    rng = np.random.default_rng(2)
    workload = workload_at(np.sort(rng.uniform(0, 30_000, 900)))
    plan = prepare(
        agg_deployment(router="kv_router", startup_s=2.0),
        0.9,
        segment_s=10.0,
        seeds=2,
        search={"engine.max_num_seqs": [1, 2]},
    )
    result = run(plan, workload, executor=executor)
    report = result.to_json()
    del report["host"]
    return orjson.dumps(report, option=orjson.OPT_SORT_KEYS), result.points


@pytest.fixture(scope="module")
def reference():
    return _answer(InProcessExecutor())


@pytest.mark.parametrize("workers", [1, 2])
def test_spawn_pool_gives_the_same_answer_for_any_worker_count(reference, workers):
    with SpawnPool(workers) as pool:
        report, points = _answer(pool)
    assert report == reference[0]
    assert points.equals(reference[1])


def test_ray_gives_the_same_answer(reference):
    from plansim.workers.ray_executor import RayExecutor, import_ray

    ray = import_ray(local=True)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        with RayExecutor(max_parallel=2) as executor:
            report, points = _answer(executor)
    finally:
        ray.shutdown()
    assert report == reference[0]
    assert points.equals(reference[1])


def test_the_compared_answer_has_every_kind_of_replay(reference):
    replays = orjson.loads(reference[0])["replays"]
    assert {"static", "segment", "policy", "seed", "schedule"} <= set(replays)
