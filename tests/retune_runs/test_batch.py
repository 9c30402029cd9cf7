"""retune_runs.batch tables and summary, on hand-built window reports: the ranking is the sweep's
(best first, ties to the current point, failed last), wins count the best-ranked candidate per
window, and the score distribution is over the windows a candidate was scored on; windows in
flight fill the CPUs; Ctrl-C cancels the windows in flight and starts no other."""

from __future__ import annotations

import _thread
import threading

import pytest

from plansim.retune.domains import Point
from plansim.retune.sweep import CandidateReport, SweepPlan, SweepReport
from plansim.retune.tasks import ReplaySpec, WindowSpec
from plansim.retune_runs.batch import (
    WindowResult,
    ranked_table,
    score_windows,
    summarize,
    windows_in_flight,
)
from plansim.workers.executor import BatchOutcome

CURRENT = Point.of({"overlap_score_weight": 1.0})
LOW = Point.of({"overlap_score_weight": 0.5})
HIGH = Point.of({"overlap_score_weight": 2.0})


def _result(k: int, scores: dict[Point, float | None], objective: str = "GoodputPerGPU"):
    window = WindowSpec(k, 900.0 * k, 900.0 * (k + 1), 900.0 * (k + 1) + 60, ("t.jsonl",), 0.0)
    plan = SweepPlan(
        window, ReplaySpec(deployment=None), CURRENT, CURRENT, (LOW, HIGH), objective=objective
    )
    candidates = [
        CandidateReport(
            p,
            is_current=p == CURRENT,
            config_key=i,
            status="ok" if s is not None else "failed",
            score=s,
            error=None if s is not None else "ScoreError: no samples",
        )
        for i, (p, s) in enumerate(scores.items())
    ]
    current = scores[CURRENT]
    best = max((s for s in scores.values() if s is not None), default=None)
    report = SweepReport(
        "no_improvement", candidates=candidates, current_score=current, best_score=best
    )
    return WindowResult(plan, report)


def test_ranked_table_best_first_ties_to_current_failed_last() -> None:
    table = ranked_table(_result(0, {CURRENT: 10.0, LOW: None, HIGH: 10.0}))
    assert [row["label"] for row in table] == [
        "overlap_score_weight=1",
        "overlap_score_weight=2",
        "overlap_score_weight=0.5",
    ]
    assert [row["rank"] for row in table] == [1, 2, None]
    assert table[1]["vs_current_pct"] == 0.0
    assert table[2]["error"] == "ScoreError: no samples"


def test_minimized_objective_ranks_lowest_first() -> None:
    table = ranked_table(_result(0, {CURRENT: 120.0, LOW: 90.0, HIGH: 150.0}, objective="TTFT"))
    assert [row["score"] for row in table] == [90.0, 120.0, 150.0]
    # 30 ms less than 120 ms: 25 % better.
    assert table[0]["vs_current_pct"] == pytest.approx(25.0)


def test_summary_counts_wins_and_score_distribution() -> None:
    results = [
        _result(0, {CURRENT: 10.0, LOW: 12.0, HIGH: 8.0}),
        _result(1, {CURRENT: 10.0, LOW: 9.0, HIGH: 11.0}),
        _result(2, {CURRENT: 10.0, LOW: 14.0, HIGH: None}),
        _result(3, {CURRENT: None, LOW: None, HIGH: None}),
    ]
    summary = summarize(results)
    by_label = {c["label"]: c for c in summary["candidates"]}
    assert summary["windows"] == 4 and summary["ranked_windows"] == 3
    assert by_label["overlap_score_weight=0.5"]["wins"] == 2
    assert by_label["overlap_score_weight=2"]["wins"] == 1
    assert by_label["overlap_score_weight=1"]["wins"] == 0
    assert by_label["overlap_score_weight=0.5"]["win_share"] == pytest.approx(2 / 3)
    low = by_label["overlap_score_weight=0.5"]["score"]
    # Scores 12, 9, 14: mean 35/3, median 12, quartiles by linear interpolation 10.5 and 13.
    assert (low["n"], low["min"], low["median"], low["max"]) == (3, 9.0, 12.0, 14.0)
    assert (low["p25"], low["p75"]) == (10.5, 13.0)
    assert low["mean"] == pytest.approx(35 / 3)
    assert by_label["overlap_score_weight=2"]["failed"] == 2
    assert by_label["overlap_score_weight=2"]["score"]["n"] == 2


class _Serial:
    max_parallel = 64


class _Concurrent:
    max_parallel = 64
    thread_safe = True


def test_windows_in_flight_fill_the_cpus_plus_one() -> None:
    plans = [_result(k, {CURRENT: 1.0}).plan for k in range(10)]  # 2 grid points + 2 = 4 tasks
    assert windows_in_flight(_Serial(), plans) == 1
    # 64 CPUs / 4 replays per window = 16 windows, plus one; only 10 windows exist.
    assert windows_in_flight(_Concurrent(), plans) == 10
    assert windows_in_flight(_Concurrent(), plans[:1]) == 1


class _Blocking:
    """A thread-safe executor whose batches run until cancelled (like long replays)."""

    max_parallel = 64
    thread_safe = True

    def __init__(self) -> None:
        self.runs = 0
        self.cancels = 0
        self._lock = threading.Lock()
        self._cancelled = threading.Event()

    def run(self, tasks, context, timeout_s=None):
        with self._lock:
            self.runs += 1
        self._cancelled.wait(30)
        return BatchOutcome((), cancelled=True)

    def cancel(self) -> None:
        self.cancels += 1
        self._cancelled.set()

    def close(self) -> None:
        pass


def test_ctrl_c_cancels_the_windows_in_flight_and_starts_no_other() -> None:
    plans = [_result(k, {CURRENT: 1.0}).plan for k in range(40)]
    executor = _Blocking()
    lanes = windows_in_flight(executor, plans)
    assert lanes < len(plans)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        score_windows(plans, executor)
    timer.join()
    # Only the windows in flight ran a batch (their window reads); none started after Ctrl-C.
    assert executor.runs == lanes and executor.cancels >= 1
    assert not [t for t in threading.enumerate() if t.name.startswith("plansim-window")]
