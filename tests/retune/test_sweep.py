"""A whole sweep on the spawn pool: the timeout kills every worker and leaves no sweep folder."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from proctable import wait_dead
from test_retune_cli import write_trace

from plansim.planner_core.observations import WorkerCounts
from plansim.retune.domains import Point
from plansim.retune.sweep import SweepPlan, run_sweep
from plansim.retune.tasks import ReplaySpec, WindowSpec
from plansim.sim.deployment import build_deployment
from plansim.workers.executor import BatchOutcome
from plansim.workers.pool import SpawnPool


@pytest.mark.slow
def test_a_sweep_timeout_kills_every_worker_and_removes_the_sweep_folder(tmp_path):
    trace = write_trace(tmp_path / "trace.jsonl.gz", seconds=300, rate=40)  # 12,000 requests
    window = WindowSpec(
        index=0,
        start_s=0.0,
        end_s=300.0,
        cutoff_s=400.0,
        trace_paths=(str(trace),),
        origin_ms=float(1_764_000_000_000),
    )
    dep = build_deployment(
        {
            "mode": "agg",
            "num_workers": 1,
            "router": {"mode": "kv_router"},
            "engine": {"max_num_seqs": 4},
        }
    )
    plan = SweepPlan(
        window=window,
        replay=ReplaySpec(deployment=dep, ready_counts=WorkerCounts(0, 1)),
        current=Point.of({"overlap_score_weight": 1.0}),
        startup=Point.of({"overlap_score_weight": 1.0}),
        grid=tuple(Point.of({"overlap_score_weight": w}) for w in (0.0, 2.0, 3.0)),
        objective="Throughput",
        # Far below the sweep's length (4 replays of 12,000 requests, 2 at a time, took ~3 s
        # on a 2-core host, so 4.0 no longer timed out).
        timeout_s=1.0,
    )
    sweep_root = tmp_path / "sweeps"
    sweep_root.mkdir()
    seen: set[int] = set()
    with SpawnPool(2) as pool:
        stop = threading.Event()

        def watch() -> None:  # remember every worker that ever ran
            while not stop.is_set():
                seen.update(pool.worker_pids())
                stop.wait(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        report = run_sweep(plan, pool, sweep_root=str(sweep_root))
        stop.set()
        watcher.join()
        assert pool.worker_pids() == []
    assert report.outcome == "timeout"
    assert all(c.status == "timeout" for c in report.candidates)
    assert seen and wait_dead(seen)
    assert list(Path(sweep_root).iterdir()) == []


class _Cancelled:
    """An executor whose every batch comes back cancelled (Ctrl-C, the controller closing)."""

    max_parallel = 1

    def run(self, tasks, context, timeout_s=None):
        return BatchOutcome((), cancelled=True)

    def cancel(self):
        pass

    def close(self):
        pass


@pytest.mark.parametrize("timeout_s", [None, 30.0])
def test_a_cancelled_sweep_ends_as_cancelled_with_or_without_a_timeout(tmp_path, timeout_s):
    window = WindowSpec(
        index=0,
        start_s=0.0,
        end_s=60.0,
        cutoff_s=70.0,
        trace_paths=("unused.jsonl",),
        origin_ms=0.0,
    )
    plan = SweepPlan(
        window=window,
        replay=ReplaySpec(deployment=build_deployment({}), ready_counts=WorkerCounts(0, 1)),
        current=Point.of({"overlap_score_weight": 1.0}),
        startup=Point.of({"overlap_score_weight": 1.0}),
        grid=(),
        timeout_s=timeout_s,
    )
    report = run_sweep(plan, _Cancelled(), sweep_root=str(tmp_path))
    assert (report.outcome, report.reason) == ("timeout", "sweep cancelled")
    assert list(tmp_path.iterdir()) == []
