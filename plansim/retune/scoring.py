"""Scoring candidates and deciding a window (seed: Scoring and Outcomes; retune.md 4.1).

Scores are in the objective's own units. The Goodput objectives are rescaled to the fixed window
length (SLA-good tokens per window second), the others are not::

    Goodput, GoodputPerGPU:  score = objective_value(summary) * duration_ms / (window_s * 1000)
    other objectives:        score = objective_value(summary)

with ``avg_gpu = gpu_hours / (duration_ms / 3.6e6)`` for the per-GPU objectives. A score fails
closed: a summary that lacks an input of the objective raises ``ScoreError`` (the candidate
fails) rather than scoring 0 or infinity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plansim.schema import MINIMIZED_OBJECTIVES

MINIMIZED = MINIMIZED_OBJECTIVES
GOODPUT = frozenset({"Goodput", "GoodputPerGPU"})
PER_GPU = frozenset({"GoodputPerGPU", "ThroughputPerGPU"})

# Summary key each objective reads (the replay summary's reference key names).
METRIC = {
    "Goodput": "goodput_output_throughput_tok_s",
    "GoodputPerGPU": "goodput_output_throughput_tok_s",
    "Throughput": "output_throughput_tok_s",
    "ThroughputPerGPU": "output_throughput_tok_s",
    "ThroughputPerUser": "mean_output_token_throughput_per_user",
    "TTFT": "mean_ttft_ms",
    "E2ELatency": "mean_e2e_latency_ms",
}


class ScoreError(ValueError):
    """A summary that cannot be scored on the objective (a missing or invalid input)."""


def score(summary: Mapping[str, Any], objective: str, window_s: float) -> float:
    """The candidate's score on ``objective`` for a window of ``window_s`` seconds."""
    if objective not in METRIC:
        raise ValueError(f"unknown objective {objective!r}")
    value = _finite(summary, METRIC[objective])
    if objective in MINIMIZED and _finite(summary, "completed_requests") <= 0:
        raise ScoreError(f"{METRIC[objective]} has no samples (no completed request)")
    if objective in PER_GPU or objective in GOODPUT:
        duration_ms = _finite(summary, "duration_ms")
        if duration_ms <= 0:
            raise ScoreError(f"duration_ms is {duration_ms:g}, not positive")
    if objective in PER_GPU:
        gpu_hours = _finite(summary, "gpu_hours")
        if gpu_hours <= 0:
            raise ScoreError(f"gpu_hours is {gpu_hours:g}, not positive")
        value = value / (gpu_hours / (duration_ms / 3_600_000.0))
    if objective in GOODPUT:
        value = value * duration_ms / (window_s * 1000.0)
    return value


def _finite(summary: Mapping[str, Any], key: str) -> float:
    if key not in summary or summary[key] is None:
        raise ScoreError(f"the replay summary has no {key}")
    try:
        value = float(summary[key])
    except (TypeError, ValueError):
        raise ScoreError(f"{key} is not a number: {summary[key]!r}") from None
    if not math.isfinite(value):
        raise ScoreError(f"{key} is not finite: {value}")
    return value


@dataclass(frozen=True, slots=True)
class Scored:
    """One candidate's score (``None`` when it failed) and its canonical position."""

    index: int
    score: float | None
    is_current: bool
    changes_something: bool


def rank(candidates: Sequence[Scored], maximize: bool) -> list[Scored]:
    """Scored candidates best first; ties go to the current point, then to canonical order.
    Failed candidates (score None) are left out."""
    ok = [c for c in candidates if c.score is not None]
    sign = -1.0 if maximize else 1.0
    return sorted(ok, key=lambda c: (sign * c.score, not c.is_current, c.index))


def beats(best: float, current: float, min_improvement_percentage: float, maximize: bool) -> bool:
    """Strictly better than ``current`` by more than the threshold: ``best - current >
    pct/100 * current`` (maximized) or ``current - best > pct/100 * current`` (minimized). A zero
    current score needs any strict gain when maximized and is never beaten when minimized."""
    margin = min_improvement_percentage / 100.0 * current
    if maximize:
        return best - current > margin
    return current - best > margin


def improvement_percentage(best: float, current: float, maximize: bool) -> float | None:
    """Relative gain of ``best`` over ``current`` in percent (positive = better); None when the
    current score is 0."""
    if current == 0:
        return None
    gain = (best - current) if maximize else (current - best)
    return gain / abs(current) * 100.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """The scoring part of a decision: outcome ``apply``/``no_improvement``/``failed``, the
    winning candidate's index (or None), the scores and the improvement in percent."""

    outcome: str
    winner: int | None
    current_score: float | None
    best_score: float | None
    improvement_percentage: float | None
    reason: str | None = None


def decide(
    candidates: Sequence[Scored], *, maximize: bool, min_improvement_percentage: float
) -> Verdict:
    """Rank the candidates and decide: apply the best only when it beats the current score by
    more than the threshold and changes something; a failed current point fails the decision."""
    current = next((c for c in candidates if c.is_current), None)
    if current is None or current.score is None:
        return Verdict("failed", None, None, None, None, reason="current point failed")
    ranked = rank(candidates, maximize)
    best = ranked[0]
    assert best.score is not None
    pct = improvement_percentage(best.score, current.score, maximize)
    if (
        best.is_current
        or not best.changes_something
        or not beats(best.score, current.score, min_improvement_percentage, maximize)
    ):
        return Verdict("no_improvement", None, current.score, best.score, pct)
    return Verdict("apply", best.index, current.score, best.score, pct)
