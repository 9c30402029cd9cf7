"""The decision record: one JSON-ready dict per window (issue 5 item 7).

Keys: ``window`` (index), ``window_start_s``/``window_end_s``/``cutoff_s`` (planner time) and the
trace-time bounds, ``launch_s``, ``ready_s`` (launch + max(D, delta)), ``decision_s`` (the tick it
landed on), ``outcome`` (applied | advisory | no_improvement | failed | timeout) and ``reason``,
``objective``, ``reader_counts`` and ``window_requests``, ``candidates`` (point, label, status,
score, error, which replay it shared), ``replays``, ``current_score``, ``best_score``,
``improvement_percentage``, ``best`` (the best-ranked candidate's point, or None),
``changes`` (router/planner knobs the winner changes; also for advisory), ``router_parameters``
(the desired map after an applied decision, else None), ``planner_changes`` (applied planner
fields, the host applies them after the tick), ``predictor_presweep`` (candidates, losses,
winner; None without a searched predictor), ``predictor_prepared`` (the swap preparation's
result or error), ``predictor_warmup`` (``[num_req, avg_isl, avg_osl]`` per throughput interval,
oldest first, that warm a swapped-in predictor; None without an applied swap), ``sweep_wall_s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plansim.retune.sweep import SweepReport
from plansim.retune.tasks import WindowSpec
from plansim.schema import RETUNE_OUTCOMES

OUTCOMES = RETUNE_OUTCOMES


def decision_record(
    *,
    window: WindowSpec,
    launch_s: float,
    ready_s: float,
    decision_s: float,
    outcome: str,
    reason: str | None,
    report: SweepReport,
    objective: str,
    router_changes: Mapping[str, Any],
    planner_changes: Mapping[str, Any],
    router_parameters: Mapping[str, Mapping[str, Any]] | None,
    predictor_warmup: list[dict[str, Any]] | None,
    advisory: bool,
) -> dict[str, Any]:
    """Build the record; ``planner_changes`` only for an applied decision."""
    assert outcome in OUTCOMES, outcome
    ranked = _best(report)
    would_change = {"router": dict(router_changes), "planner": dict(planner_changes)}
    applied = outcome == "applied"
    return {
        "window": window.index,
        **window_bounds(window),
        "launch_s": launch_s,
        "ready_s": ready_s,
        "decision_s": decision_s,
        "outcome": outcome,
        "reason": reason,
        "objective": objective,
        "advisory_mode": advisory,
        "reader_counts": dict(report.reader_counts),
        "window_requests": report.window_requests,
        "candidates": [c.to_json() for c in report.candidates],
        "replays": report.replays,
        "current_score": report.current_score,
        "best_score": report.best_score,
        "improvement_percentage": report.improvement_percentage,
        "best": ranked,
        "changes": would_change if outcome in ("applied", "advisory") else None,
        "router_parameters": (
            {k: dict(v) for k, v in router_parameters.items()} if router_parameters else None
        ),
        "planner_changes": dict(planner_changes) if applied else {},
        "predictor_presweep": report.presweep.to_json() if report.presweep else None,
        "predictor_prepared": report.prepared_predictor,
        "predictor_warmup": predictor_warmup,
        "sweep_wall_s": report.wall_s,
    }


def window_bounds(window: WindowSpec) -> dict[str, Any]:
    """A window's bounds under the decision record's names (replay seconds, trace ms)."""
    bounds = window.to_json()
    return {
        "window_start_s": bounds["start_s"],
        "window_end_s": bounds["end_s"],
        "cutoff_s": bounds["cutoff_s"],
        "window_start_trace_ms": bounds["start_trace_ms"],
        "window_end_trace_ms": bounds["end_trace_ms"],
        "cutoff_trace_ms": bounds["cutoff_trace_ms"],
    }


def _best(report: SweepReport) -> dict[str, Any] | None:
    """The best-ranked candidate (the winner when one applies)."""
    if report.winner is not None:
        return report.candidates[report.winner].point.to_json()
    scored = [c for c in report.candidates if c.score is not None]
    if not scored or report.best_score is None:
        return None
    for cand in report.candidates:
        if cand.score == report.best_score and cand.is_current:
            return cand.point.to_json()
    for cand in report.candidates:
        if cand.score == report.best_score:
            return cand.point.to_json()
    return None


def what_changed(event: Mapping[str, Any]) -> str:
    """Short text of what a decision changes (or would change, for advisory)."""
    changes = event.get("changes") or {}
    parts = [
        f"{k}={_fmt(v)}"
        for group in ("router", "planner")
        for k, v in sorted((changes.get(group) or {}).items())
    ]
    return ", ".join(parts) if parts else "-"


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
