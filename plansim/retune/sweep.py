"""One window's sweep: read the window, pre-sweep the predictors, replay the candidates, decide.

``run_sweep(plan, executor)`` runs on the controller's sweep thread and does no trace I/O
itself: every file is read by a task on the executor (``SpawnPool`` by default). Batches:

1. read the window (and, for an inner planner that scales on throughput, the history buckets);
2. one pre-sweep task per load-predictor candidate, when the predictor is searched;
3. the predictor preparation (when the pre-sweep winner changes the predictor) queued ahead of one
   replay per distinct candidate configuration (candidates that resolve to the same
   configuration share one replay).

A temporary sweep folder holds the window file and the workers' temporary files; it is removed
when the sweep ends, whatever happens. ``timeout_s`` bounds the whole sweep in wall-clock
seconds; at the timeout the executor kills its workers and the outcome is ``timeout``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from plansim.planner_core.config import PREDICTOR_FIELDS
from plansim.retune import scoring
from plansim.retune.domains import Point
from plansim.retune.presweep import (
    PresweepResult,
    pick_winner,
    prepare_predictor_task,
    presweep_task,
)
from plansim.retune.tasks import (
    CandidateConfig,
    ReplaySpec,
    WindowSpec,
    read_window_task,
    replay_candidate_task,
)
from plansim.schema import DEFAULT_MIN_IMPROVEMENT_PERCENTAGE
from plansim.workers.executor import BatchOutcome, Executor, Task, TaskContext

log = logging.getLogger("plansim.retune")

# Why a decision failed (the reason strings of the decision record).
EMPTY_WINDOW = "empty window"
NO_COUNTS = "no recorded counts"
WARMUP_TOO_SHORT = "warm-up too short for a swapped predictor"
VALIDATION_FAILED = "validation failed"
READ_FAILED = "window read failed"
CANCELLED = "sweep cancelled"


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """Everything one sweep needs, fixed at launch (picklable)."""

    window: WindowSpec
    replay: ReplaySpec
    current: Point
    startup: Point
    grid: tuple[Point, ...]
    current_predictor: Mapping[str, Any] = field(default_factory=dict)
    predictor_candidates: tuple[Mapping[str, Any], ...] = ()
    objective: str = "GoodputPerGPU"
    min_improvement_percentage: float = DEFAULT_MIN_IMPROVEMENT_PERCENTAGE
    timeout_s: float | None = None


@dataclass(slots=True)
class CandidateReport:
    """One candidate of the decision record."""

    point: Point
    is_current: bool
    config_key: int
    status: str = "pending"  # ok | failed | timeout
    score: float | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "point": self.point.to_json(),
            "label": self.point.label(),
            "is_current": self.is_current,
            "replay": self.config_key,
            "status": self.status,
            "score": self.score,
            "error": self.error,
        }


@dataclass(slots=True)
class SweepReport:
    """What a sweep found; the controller turns it into a decision record."""

    outcome: str  # apply | no_improvement | failed | timeout
    reason: str | None = None
    reader_counts: dict[str, int] = field(default_factory=dict)
    window_requests: int = 0
    candidates: list[CandidateReport] = field(default_factory=list)
    winner: int | None = None
    current_score: float | None = None
    best_score: float | None = None
    improvement_percentage: float | None = None
    presweep: PresweepResult | None = None
    predictor_warmup: list[list[float]] | None = None
    prepared_predictor: dict[str, Any] | None = None
    replays: int = 0
    wall_s: float = 0.0

    @property
    def winner_point(self) -> Point | None:
        return None if self.winner is None else self.candidates[self.winner].point


class _Timeout(Exception):
    """A batch reached the sweep's deadline, or was cancelled (workers already killed)."""

    def __init__(self, *, cancelled: bool = False) -> None:
        super().__init__("cancelled" if cancelled else "timed out")
        self.cancelled = cancelled


def run_sweep(plan: SweepPlan, executor: Executor, *, sweep_root: str | None = None) -> SweepReport:
    """Run one window's sweep on ``executor``; never raises for a failed sweep (the report says
    what failed), only for bugs."""
    started = time.monotonic()
    deadline = None if plan.timeout_s is None else started + plan.timeout_s
    sweep_dir = tempfile.mkdtemp(prefix="plansim-sweep-", dir=sweep_root)
    report = SweepReport(outcome="failed")
    try:
        _sweep(plan, executor, TaskContext(sweep_dir), deadline, report)
    except _Timeout as stop:
        # A cancelled batch (Ctrl-C, the controller closing) ends the sweep as a timeout too;
        # a sweep without a timeout can only have been cancelled.
        report.outcome = "timeout"
        report.reason = (
            CANCELLED
            if stop.cancelled or plan.timeout_s is None
            else f"sweep exceeded {plan.timeout_s:g} s"
        )
        for cand in report.candidates:
            if cand.status == "pending":
                cand.status = "timeout"
    finally:
        shutil.rmtree(sweep_dir, ignore_errors=True)
        report.wall_s = time.monotonic() - started
    return report


def _run(
    executor: Executor, tasks: list[Task], ctx: TaskContext, deadline: float | None
) -> BatchOutcome:
    remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
    outcome = executor.run(tasks, ctx, timeout_s=remaining)
    if outcome.timed_out or outcome.cancelled:
        raise _Timeout(cancelled=outcome.cancelled and not outcome.timed_out)
    return outcome


def _sweep(
    plan: SweepPlan,
    executor: Executor,
    ctx: TaskContext,
    deadline: float | None,
    report: SweepReport,
) -> None:
    # 1. Read the window (and the history buckets).
    read = _run(executor, [Task("read", read_window_task, (plan.window,))], ctx, deadline).results[
        0
    ]
    if not read.ok:
        report.reason = f"{READ_FAILED}: {read.error}"
        return
    window = read.value
    report.reader_counts = dict(window.counts)
    report.window_requests = window.num_requests
    _log_counts(plan.window.index, window.counts, window.num_requests)
    if window.num_requests == 0:
        report.reason = EMPTY_WINDOW
        return
    if plan.replay.ready_counts is None or not plan.replay.has_ready_workers():
        report.reason = NO_COUNTS
        return

    # 2. Pre-sweep the load predictor when it is searched.
    winner_fields = dict(plan.current_predictor)
    if plan.predictor_candidates:
        report.presweep = _presweep(plan, executor, ctx, deadline, window)
        if report.presweep.winner is not None:
            winner_fields = dict(plan.predictor_candidates[report.presweep.winner])

    # 3. Candidates: the current point keeps its predictor; the others use the winner's.
    points = _candidate_points(plan, winner_fields)
    configs: dict[CandidateConfig, int] = {}
    for i, point in enumerate(points):
        key = plan.replay.resolve(point)
        report.candidates.append(
            CandidateReport(
                point, is_current=(i == 0), config_key=configs.setdefault(key, len(configs))
            )
        )
    report.replays = len(configs)
    swap = plan.predictor_candidates and winner_fields != dict(plan.current_predictor)
    tasks: list[Task] = []
    if swap:
        report.predictor_warmup = [list(b) for b in window.swap_warmup]
        tasks.append(
            Task(
                "prepare",
                prepare_predictor_task,
                (winner_fields, window.swap_warmup, plan.replay.throughput_interval_s),
            )
        )
    window_file = window.path
    for key, number in configs.items():
        tasks.append(
            Task(
                f"replay{number}",
                replay_candidate_task,
                (plan.replay, key, window_file, window.inner_warmup),
            )
        )
    results = _run(executor, tasks, ctx, deadline).by_key()

    if swap:
        prepared = results["prepare"]
        if prepared.ok:
            report.prepared_predictor = prepared.value
        else:
            report.prepared_predictor = {"error": prepared.error}
    for cand in report.candidates:
        res = results[f"replay{cand.config_key}"]
        if not res.ok:
            cand.status, cand.error = "failed", res.error
            continue
        try:
            cand.score = scoring.score(res.value, plan.objective, plan.window.window_s)
            cand.status = "ok"
        except scoring.ScoreError as exc:
            cand.status, cand.error = "failed", f"ScoreError: {exc}"

    verdict = scoring.decide(
        [
            scoring.Scored(i, c.score, c.is_current, bool(_changes(c.point, plan.current)))
            for i, c in enumerate(report.candidates)
        ],
        maximize=plan.objective not in scoring.MINIMIZED,
        min_improvement_percentage=plan.min_improvement_percentage,
    )
    report.outcome, report.reason, report.winner = verdict.outcome, verdict.reason, verdict.winner
    report.current_score, report.best_score = verdict.current_score, verdict.best_score
    report.improvement_percentage = verdict.improvement_percentage
    if verdict.outcome == "apply" and swap:
        winner = report.candidates[verdict.winner].point  # type: ignore[index]
        if _predictor_of(winner) != _predictor_of(plan.current) and "error" in (
            report.prepared_predictor or {}
        ):
            report.outcome = "failed"
            detail = str(report.prepared_predictor["error"]).removeprefix("PredictorError: ")
            report.reason = f"{WARMUP_TOO_SHORT} ({detail})"


def _presweep(
    plan: SweepPlan, executor: Executor, ctx: TaskContext, deadline: float | None, window: Any
) -> PresweepResult:
    interval_s = plan.replay.throughput_interval_s
    tasks = [
        Task(
            f"presweep{i}",
            presweep_task,
            (dict(c), window.presweep_history, window.presweep_window, interval_s),
        )
        for i, c in enumerate(plan.predictor_candidates)
    ]
    results = _run(executor, tasks, ctx, deadline).results
    losses = tuple(r.value if r.ok else None for r in results)
    errors = tuple(None if r.ok else r.error for r in results)
    return PresweepResult(
        tuple(dict(c) for c in plan.predictor_candidates), losses, errors, pick_winner(losses)
    )


def _candidate_points(plan: SweepPlan, winner_fields: Mapping[str, Any]) -> list[Point]:
    """Current point first (its own predictor), then the startup point and the grid with the
    winner's predictor fields; duplicates removed, first position kept."""
    searched = [k for k in PREDICTOR_FIELDS if k in dict(plan.current.planner)]
    with_winner = {k: winner_fields[k] for k in searched if k in winner_fields}
    points = [plan.current]
    for point in (plan.startup, *plan.grid):
        planner = {**point.planner_map, **with_winner}
        points.append(Point.of(point.router_map, planner))
    out: list[Point] = []
    for point in points:
        if point not in out:
            out.append(point)
    return out


def _changes(point: Point, current: Point) -> dict[str, Any]:
    diff = point.changes_from(current)
    return {**diff["router"], **diff["planner"]}


def _predictor_of(point: Point) -> dict[str, Any]:
    return {k: v for k, v in point.planner if k in PREDICTOR_FIELDS}


def _log_counts(index: int, counts: Mapping[str, int], requests: int) -> None:
    nonzero = {k: v for k, v in counts.items() if v}
    text = ", ".join(f"{k}={v}" for k, v in sorted(nonzero.items())) or "no dropped rows"
    log.info("retune window %d: %d requests; %s", index, requests, text)
