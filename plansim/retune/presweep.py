"""The load-predictor pre-sweep and the predictor preparation of a swap (seed: Load-Predictor
Pre-Sweep, Predictor Swap).

Traffic is a sequence of buckets ``(num_req, avg_isl, avg_osl)`` at the inner planner's
throughput interval. A candidate (predictor fields of a PlannerConfig: ``load_predictor`` and its
parameters) observes the history buckets, then forecasts each window bucket one step ahead and
observes it. Its loss is the mean over window buckets of ``0.4 err(input tokens) + 0.4 err(output
tokens) + 0.1 err(avg ISL) + 0.1 err(avg OSL)``, ``err = |log1p(forecast) - log1p(actual)|``.
The lowest loss wins, the earliest candidate on ties; a candidate whose forecast fails cannot win.

Both task functions are module-level and pure (picklable by reference, for any executor).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plansim.planner_core.predictors import TrafficForecaster, make_predictor, presweep_loss
from plansim.workers.executor import TaskContext

Bucket = tuple[float, float, float]  # (num_req, avg_isl, avg_osl)


class PredictorError(RuntimeError):
    """A predictor candidate that cannot be scored or prepared (a failed forecast, too little
    warm-up traffic)."""


def build_forecaster(fields: Mapping[str, Any], interval_s: float) -> TrafficForecaster:
    """The three predictors (count, ISL, OSL) a planner with these predictor fields would run."""
    name = fields["load_predictor"]
    params = {k: v for k, v in fields.items() if k != "load_predictor"}
    params["throughput_adjustment_interval_seconds"] = interval_s
    make_predictor(name, **params)  # validates once, raising ConfigError naming the field
    return TrafficForecaster(lambda: make_predictor(name, **params))


def presweep_task(
    context: TaskContext,
    fields: Mapping[str, Any],
    history: Sequence[Bucket],
    window: Sequence[Bucket],
    interval_s: float,
) -> float:
    """The pre-sweep loss of one predictor candidate; raises PredictorError if a forecast
    fails (so the candidate cannot win)."""
    del context  # no files
    forecaster = build_forecaster(fields, interval_s)
    for num_req, isl, osl in history:
        forecaster.observe(num_req, _avg(num_req, isl), _avg(num_req, osl))
    forecasts, actuals = [], []
    for num_req, isl, osl in window:
        forecast = forecaster.predict()
        if forecast.failed:
            series = ", ".join(forecast.failed)
            raise PredictorError(f"forecast of {series} failed")
        forecasts.append((forecast.num_req, forecast.isl, forecast.osl))
        actuals.append((num_req, isl, osl))
        forecaster.observe(num_req, _avg(num_req, isl), _avg(num_req, osl))
    if not forecasts:
        raise PredictorError("no window bucket to forecast")
    return presweep_loss(list(zip(*forecasts)), list(zip(*actuals)))


def prepare_predictor_task(
    context: TaskContext,
    fields: Mapping[str, Any],
    warmup: Sequence[Bucket],
    interval_s: float,
) -> dict[str, Any]:
    """Prepare the swapped-in predictor on the swap's warm-up buckets, as the host will, and
    check that it has enough traffic: every series needs its predictor's minimum number of
    points and a forecast that does not fail. Returns the first forecast and the point counts."""
    del context
    forecaster = build_forecaster(fields, interval_s)
    forecaster.warm((n, _avg(n, isl), _avg(n, osl)) for n, isl, osl in warmup)
    points = {s: p.num_points for s, p in forecaster.predictors.items()}
    short = [
        f"{s} has {p.num_points} of {p.minimum_data_points} points"
        for s, p in forecaster.predictors.items()
        if p.num_points < p.minimum_data_points
    ]
    if short:
        raise PredictorError("; ".join(short))
    forecast = forecaster.predict()
    if forecast.failed:
        raise PredictorError(f"forecast of {', '.join(forecast.failed)} failed after warm-up")
    return {"points": points, "forecast": [forecast.num_req, forecast.isl, forecast.osl]}


def _avg(num_req: float, value: float) -> float | None:
    """An empty bucket has no average length (the forecaster then repeats the last one)."""
    return float(value) if num_req > 0 and math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class PresweepResult:
    """Losses per candidate (``None`` = failed, with its error), and the winner's index."""

    candidates: tuple[dict[str, Any], ...]
    losses: tuple[float | None, ...]
    errors: tuple[str | None, ...]
    winner: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "candidates": [dict(c) for c in self.candidates],
            "losses": list(self.losses),
            "errors": list(self.errors),
            "winner": self.winner,
            "winner_fields": None if self.winner is None else dict(self.candidates[self.winner]),
        }


def pick_winner(losses: Sequence[float | None]) -> int | None:
    """Lowest finite loss, earliest on ties; None when every candidate failed."""
    best: int | None = None
    for i, loss in enumerate(losses):
        if loss is None or not math.isfinite(loss):
            continue
        if best is None or loss < losses[best]:  # type: ignore[operator]
            best = i
    return best
