"""Scoring the candidates of many windows at once: the offline analysis a capacity planner runs
over a day of traffic (``plansim retune windows``).

Each window is one sweep of ``retune.sweep.run_sweep`` from the same point (nothing is applied
between windows): the window reader, the candidate expansion, the pre-sweep and the scoring are
the retune sweep's own. On an executor whose ``run`` is thread-safe (``RayExecutor``) several
windows are swept at once, one thread each, so every (window, candidate) replay is an
independent task on the cluster; enough windows are in flight to keep every CPU busy, and no
more, so that a window's ``timeout_seconds`` (which starts with its sweep) is not spent queueing
behind other windows. On the spawn pool the windows run one after another, each in parallel.

``summarize`` turns the per-window reports into ranked tables and an overall summary: how often
each candidate ranks best, and the distribution of its scores over the windows.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.retune import scoring
from plansim.retune.record import window_bounds
from plansim.retune.sweep import CANCELLED, SweepPlan, SweepReport, run_sweep
from plansim.workers.executor import (
    BatchOutcome,
    Executor,
    ResultCallback,
    Task,
    TaskContext,
)
from plansim.workers.journal import MISSING, Journal, JournaledExecutor

# How often the waiting thread wakes up so that Ctrl-C is seen promptly (s).
_WAKE_S = 0.2


def window_plans(run: Any, workload: Any, windows: Iterable[int]) -> list[SweepPlan]:
    """The sweep plans of ``windows`` of a retune run (``retune_runs.runner.RetuneRun``): each from
    the startup point, with the deployment's starting worker counts and the config's
    ``timeout_seconds``, as ``retune_runs.runner.score_window`` sweeps one window."""
    from plansim.retune_runs.runner import build_controller, starting_counts

    controller = build_controller(run, workload)
    try:
        controller.initial_tick(0.0)
        counts = starting_counts(run.deployment)
        return [controller.build_plan(k, counts) for k in windows]
    finally:
        controller.close()


@dataclass(frozen=True, slots=True)
class WindowResult:
    """One window's sweep: its plan and what the sweep found."""

    plan: SweepPlan
    report: SweepReport

    @property
    def index(self) -> int:
        return self.plan.window.index


def score_windows(
    plans: Iterable[SweepPlan],
    executor: Executor,
    *,
    sweep_root: str | None = None,
    on_window: Callable[[WindowResult], None] | None = None,
    journal: Journal | None = None,
) -> list[WindowResult]:
    """Sweep every plan's window on ``executor``; results in plan order.

    ``on_window`` is called (from the calling thread) as each window finishes, in completion
    order. With a ``journal`` (``workers.journal``), each candidate replay and pre-sweep is
    recorded as it finishes and each window's report when its sweep ends (unless cancelled): a
    window already recorded is not swept again, and a sweep replays only what it lacks. Ctrl-C
    cancels every outstanding task, waits for the sweeps to end and re-raises.
    """
    plans = list(plans)
    results: dict[int, WindowResult] = {}
    todo = []
    for position, plan in enumerate(plans):
        recorded = MISSING if journal is None else journal.get(_window_key(plan))
        if recorded is MISSING:
            todo.append(position)
            continue
        results[position] = WindowResult(plan, recorded)
        if on_window is not None:
            on_window(results[position])
    lanes = windows_in_flight(executor, [plans[i] for i in todo])
    stoppable = _Stoppable(executor)

    def sweep(position: int) -> tuple[int, WindowResult]:
        plan = plans[position]
        report = (
            run_sweep(plan, stoppable, sweep_root=sweep_root)
            if journal is None
            else journaled_sweep(plan, stoppable, journal, sweep_root=sweep_root)
        )
        return position, WindowResult(plan, report)

    pool = ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="plansim-window")
    pending: set[Future[tuple[int, WindowResult]]] = {pool.submit(sweep, i) for i in todo}
    try:
        while pending:
            done, pending = wait(pending, timeout=_WAKE_S, return_when=FIRST_COMPLETED)
            for future in done:
                position, result = future.result()
                results[position] = result
                if on_window is not None:
                    on_window(result)
    except BaseException:
        stoppable.stop()
        for future in pending:
            future.cancel()
        while not all(future.done() for future in pending):
            wait(pending, timeout=_WAKE_S)
            # A batch may have started just before the stop: cancel it too.
            stoppable.cancel()
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    return [results[i] for i in range(len(plans))]


def journaled_sweep(
    plan: SweepPlan, executor: Executor, journal: Journal, *, sweep_root: str | None = None
) -> SweepReport:
    """``run_sweep(plan, executor)`` with ``journal``: the window's recorded report if it has
    one; else a sweep whose pre-sweeps and candidate replays are recorded as each finishes (and
    answered from the journal when recorded), and whose report is recorded when it ends
    (unless cancelled)."""
    prefix = _window_key(plan)
    recorded = journal.get(prefix)
    if recorded is not MISSING:
        return recorded
    # The window read's value names a file of its sweep folder: it always runs.
    runner = JournaledExecutor(
        executor, journal, lambda task: None if task.key == "read" else f"{prefix} {task.key}"
    )
    report = run_sweep(plan, runner, sweep_root=sweep_root)
    if report.reason != CANCELLED:
        journal.record(prefix, report)
    return report


def _window_key(plan: SweepPlan) -> str:
    return f"window {plan.window.index}"


class _Stoppable:
    """The executor as the window sweeps see it, with a stop for Ctrl-C: ``stop()`` cancels
    the running batches, and every later batch comes back cancelled without running, so a sweep
    between two batches cannot start new tasks."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self._stopped = threading.Event()
        self.max_parallel = executor.max_parallel

    def run(
        self,
        tasks: Sequence[Task],
        context: TaskContext,
        timeout_s: float | None = None,
        on_result: ResultCallback | None = None,
    ) -> BatchOutcome:
        if self._stopped.is_set():
            return BatchOutcome((), cancelled=True)
        if on_result is None:  # executors written before on_result need not take it
            return self._executor.run(tasks, context, timeout_s)
        return self._executor.run(tasks, context, timeout_s, on_result=on_result)

    def stop(self) -> None:
        self._stopped.set()
        self._executor.cancel()

    def cancel(self) -> None:
        self._executor.cancel()

    def close(self) -> None:
        self._executor.close()


def windows_in_flight(executor: Executor, plans: Sequence[SweepPlan]) -> int:
    """How many windows to sweep at once: one unless the executor's ``run`` is thread-safe;
    then enough windows for their replays to fill every CPU, plus one to cover the stragglers
    and the window reads between sweeps."""
    if not plans or not getattr(executor, "thread_safe", False):
        return 1
    per_window = max(len(plan.grid) + 2 for plan in plans)
    return min(len(plans), math.ceil(executor.max_parallel / per_window) + 1)


# -- tables and summary ---------------------------------------------------------------------


def candidate_order(report: SweepReport, maximize: bool) -> list[int]:
    """Indices of ``report.candidates``: the scored ones best first (``scoring.rank``: ties to
    the current point, then canonical order), then the failed ones in canonical order."""
    scored = [
        scoring.Scored(i, c.score, c.is_current, False) for i, c in enumerate(report.candidates)
    ]
    order = [s.index for s in scoring.rank(scored, maximize)]
    return order + [i for i, c in enumerate(report.candidates) if c.score is None]


def ranked_table(result: WindowResult) -> list[dict[str, Any]]:
    """The window's candidates best first (the sweep's ranking: ties to the current point, then
    canonical order), then the failed ones in canonical order. ``vs_current_pct``: the gain over
    the current point's score in percent (positive = better), None when that score is 0."""
    report = result.report
    maximize = result.plan.objective not in scoring.MINIMIZED
    current = report.current_score
    rows = []
    for rank_number, i in enumerate(candidate_order(report, maximize), start=1):
        cand = report.candidates[i]
        ok = cand.score is not None
        rows.append(
            {
                "rank": rank_number if ok else None,
                "label": cand.point.label(),
                "point": cand.point.to_json(),
                "is_current": cand.is_current,
                "status": cand.status,
                "score": cand.score,
                "vs_current_pct": (
                    scoring.improvement_percentage(cand.score, current, maximize)
                    if ok and current is not None
                    else None
                ),
                "error": cand.error,
            }
        )
    return rows


def window_record(result: WindowResult) -> dict[str, Any]:
    """The JSON of one window: bounds, outcome, reader counts, scores and the ranked table."""
    report = result.report
    return {
        "window": result.index,
        **window_bounds(result.plan.window),  # named as in retune_events.json
        "objective": result.plan.objective,
        "outcome": report.outcome,
        "reason": report.reason,
        "reader_counts": dict(report.reader_counts),
        "window_requests": report.window_requests,
        "replays": report.replays,
        "current_score": report.current_score,
        "best_score": report.best_score,
        "improvement_percentage": report.improvement_percentage,
        "predictor_presweep": report.presweep.to_json() if report.presweep else None,
        "sweep_wall_s": report.wall_s,
        "ranked": ranked_table(result),
    }


def summarize(results: Sequence[WindowResult]) -> dict[str, Any]:
    """Over all windows: outcome counts, and per candidate (by label, in first-seen order) how
    often it ranks best (``wins``; windows whose every candidate failed count for none), how
    often it failed, and its score distribution over the windows it was scored on."""
    outcomes: dict[str, int] = {}
    per_label: dict[str, dict[str, Any]] = {}
    scores: dict[str, list[float]] = {}
    ranked_windows = 0
    for result in results:
        outcomes[result.report.outcome] = outcomes.get(result.report.outcome, 0) + 1
        table = ranked_table(result)
        if table and table[0]["rank"] == 1:
            ranked_windows += 1
        for row in table:
            entry = per_label.setdefault(
                row["label"],
                {
                    "label": row["label"],
                    "point": row["point"],
                    "is_current": row["is_current"],
                    "windows": 0,
                    "wins": 0,
                    "failed": 0,
                },
            )
            entry["windows"] += 1
            entry["wins"] += int(row["rank"] == 1)
            if row["score"] is None:
                entry["failed"] += 1
            else:
                scores.setdefault(row["label"], []).append(row["score"])
    candidates = []
    for label, entry in per_label.items():
        values = np.asarray(scores.get(label, []), dtype=float)
        entry["win_share"] = entry["wins"] / ranked_windows if ranked_windows else None
        entry["score"] = _distribution(values)
        candidates.append(entry)
    return {
        "windows": len(results),
        "ranked_windows": ranked_windows,
        "outcomes": dict(sorted(outcomes.items())),
        "objective": results[0].plan.objective if results else None,
        "candidates": candidates,
    }


def _distribution(values: np.ndarray) -> dict[str, float | int | None]:
    if values.size == 0:
        return {
            "n": 0,
            "mean": None,
            "min": None,
            "p25": None,
            "median": None,
            "p75": None,
            "max": None,
        }
    p25, median, p75 = np.percentile(values, [25, 50, 75])
    return {
        "n": int(values.size),
        "mean": float(values.mean()),
        "min": float(values.min()),
        "p25": float(p25),
        "median": float(median),
        "p75": float(p75),
        "max": float(values.max()),
    }
