"""The same fleet on every executor: in this process, a spawn pool of one or two workers, and
Ray (fleet.json byte for byte apart from host-speed figures, and the points table). The fleet
has every kind of replay: static and spot searches, the autoscaled fleet and a model alone."""

from __future__ import annotations

import orjson
import pytest
from fleet_cases import deployment, on_demand, write_fleet

from plansim import fleet
from plansim.traces import load_workload
from plansim.workers.executor import InProcessExecutor
from plansim.workers.pool import SpawnPool

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fleet")
    # heavy's low target leaves its planner scaling up into an inventory of just the fleet's
    # GPUs (refused); spot capacity is preempted every 6 s a GPU on average.
    path = write_fleet(
        folder,
        on_demand(4, 4, price_per_gpu_hour=0.9, preemptions_per_hour=600.0),
        models=("heavy", "light"),
        planner=True,
        target=0.05,
        deployments={"light": deployment()},
    )
    plan = fleet.prepare(fleet.load_fleet(path), source=str(path))
    return plan, [load_workload(list(m.traces)) for m in plan.models]


def _answer(plan, executor):
    plan, workloads = plan
    result = fleet.run(plan, workloads, executor=executor)
    report = result.to_json()
    del report["host"]
    return orjson.dumps(report, option=orjson.OPT_SORT_KEYS), result.points


@pytest.fixture(scope="module")
def reference(plan):
    return _answer(plan, InProcessExecutor())


def test_the_compared_fleet_has_every_kind_of_replay(reference):
    report = orjson.loads(reference[0])
    assert {"static", "spot", "fleet", "alone"} <= set(report["replays"])
    assert report["autoscaled"]["refused_scale_ups"] > 0
    assert sum(m["preemptions"] for m in report["autoscaled"]["models"]) > 0


@pytest.mark.parametrize("workers", [1, 2])
def test_spawn_pool_gives_the_same_fleet_for_any_worker_count(plan, reference, workers):
    with SpawnPool(workers) as pool:
        report, points = _answer(plan, pool)
    assert report == reference[0]
    assert points.equals(reference[1])


def test_ray_gives_the_same_fleet(plan, reference, ray_executor):
    report, points = _answer(plan, ray_executor)
    assert report == reference[0]
    assert points.equals(reference[1])
