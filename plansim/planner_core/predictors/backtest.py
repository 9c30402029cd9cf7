"""Backtest of load predictors on a bucketed trace: one-step-ahead forecasts and their errors.

For each candidate a ``TrafficForecaster`` (three predictor instances: request count, average ISL,
average OSL, fed with the planner's live rules) observes the first ``warmup`` buckets, then for
each following bucket forecasts it one step ahead and observes it. Candidates and their three
series are independent, so they run as separate tasks in parallel processes
(``plansim.workers.parallel.parallel_map``: workers that die with plansim), and the results do not
depend on the process count.

Prediction rows (``backtest`` / ``BacktestResult.predictions``), one per scored bucket, candidate
and series:

- ``bucket`` (int): position in the bucket table (the first bucket is 0).
- ``predictor`` (str): candidate label, e.g. ``kalman`` or ``kalman(kalman_q_level=0.1)``.
- ``series`` (str): ``request_count``, ``avg_isl`` or ``avg_osl``.
- ``forecast`` (float): the one-step forecast made before the bucket was observed.
- ``actual`` (float): the bucket table's value (an empty bucket has averages 0, as in the retune
  pre-sweep, so the loss here equals retune's; the predictors themselves are fed the planner's
  way: an empty bucket after traffic repeats the last ISL/OSL).
- ``fit_time_s`` (float): wall time of that ``predict_next`` call (model fitting included).
- ``failed`` (bool): the forecast raised and fell back to the last value.

Summary (``summarize`` / ``BacktestResult.summary``), one row per candidate, best first:

- ``rank`` (1 = best), ``predictor`` (label), ``name`` (predictor name), ``params`` (dict).
- ``loss``: mean retune pre-sweep loss over the scored buckets (``loss.py``; buckets with a
  non-finite value are left out; ``inf`` with none).
- ``mape_request_count_pct``: mean |forecast - actual| / actual x 100 over buckets with requests.
- ``rmse_request_count``: root mean squared request-count error.
- ``under_forecast_share``: share of scored buckets whose request-count forecast is below 80% of
  the actual count (under-provisioning risk).
- ``fit_time_mean_s`` / ``fit_time_max_s``: wall time per forecast (all three series).
- ``failed_forecasts``: number of forecasts that fell back to the last value.
- ``wall_time_s``: wall time of the candidate's backtest (observing and forecasting, summed over
  its three series' tasks, i.e. the time one process would take; the modelling library is
  imported before the clock starts).

Ranking: candidates without failed forecasts first (a failing candidate cannot win, as in the
retune pre-sweep), then by loss, then in the order given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any

import numpy as np
import pandas as pd

from plansim.errors import InputError
from plansim.planner_core.predictors.factory import PredictorSpec
from plansim.planner_core.predictors.loss import presweep_window_losses
from plansim.planner_core.predictors.traffic import BUCKET_COLUMNS, TrafficForecaster
from plansim.schema import (
    BACKTEST_PREDICTION_COLUMNS,
    BACKTEST_SUMMARY_COLUMNS,
    UNDER_FORECAST_RATIO,
)

SERIES = BUCKET_COLUMNS  # series labels in the rows are the bucket-table column names
PREDICTION_COLUMNS = BACKTEST_PREDICTION_COLUMNS
SUMMARY_COLUMNS = BACKTEST_SUMMARY_COLUMNS


@dataclass(frozen=True, slots=True)
class BacktestResult:
    predictions: pd.DataFrame  # PREDICTION_COLUMNS, candidates in the order given
    summary: pd.DataFrame  # SUMMARY_COLUMNS, best first


def backtest(
    buckets: Any,
    predictors: Sequence[PredictorSpec | str],
    warmup: int,
    *,
    interval_s: float | None = None,
    jobs: int = 1,
) -> pd.DataFrame:
    """Prediction rows of every candidate (see the module docstring). ``buckets`` is a table with
    ``request_count``, ``avg_isl``, ``avg_osl`` (``plansim.traces.buckets``); ``interval_s`` is
    the bucket width, used as Prophet's time step."""
    return run_backtest(buckets, predictors, warmup, interval_s=interval_s, jobs=jobs).predictions


def run_backtest(
    buckets: Any,
    predictors: Sequence[PredictorSpec | str],
    warmup: int,
    *,
    interval_s: float | None = None,
    jobs: int = 1,
    on_task: Callable[[int, int], None] | None = None,
) -> BacktestResult:
    """Predictions and ranked summary. Raises ``InputError`` when the table is shorter than
    ``warmup + 2`` buckets or ``warmup < 1``, ``ConfigError`` for a bad candidate.
    ``on_task(done, total)`` is called as each task (one candidate on one series) ends."""
    counts, isl, osl = bucket_arrays(buckets)
    specs = [p if isinstance(p, PredictorSpec) else PredictorSpec.of(p) for p in predictors]
    if not specs:
        raise InputError("no predictor to compare", field="predictors")
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise InputError(f"duplicate predictor candidates: {labels}", field="predictors")
    if warmup < 1:
        raise InputError(f"must be >= 1, got {warmup}", field="warmup_buckets")
    if counts.size < warmup + 2:
        raise InputError(
            f"the trace has {counts.size} buckets; need at least warm-up + 2 = {warmup + 2}",
            field="warmup_buckets",
        )
    extra = {} if interval_s is None else {"throughput_adjustment_interval_seconds": interval_s}
    tasks = [(spec, k, counts, isl, osl, warmup, extra) for spec in specs for k in range(3)]
    done = count(1)

    def ended() -> None:
        if on_task is not None:
            on_task(next(done), len(tasks))

    if jobs > 1:
        from plansim.workers.parallel import parallel_map

        outputs = parallel_map(_run_series, tasks, min(jobs, len(tasks)), on_done=ended)
    else:
        outputs = []
        for task in tasks:
            outputs.append(_run_series(*task))
            ended()
    predictions = pd.concat([frame for frame, _ in outputs], ignore_index=True)
    wall: dict[str, float] = {}
    for (spec, *_), (_, seconds) in zip(tasks, outputs, strict=True):
        wall[spec.label] = wall.get(spec.label, 0.0) + seconds
    return BacktestResult(predictions, summarize(predictions, specs, wall))


def without_last_bucket(buckets: pd.DataFrame) -> pd.DataFrame:
    """A trace's bucket table without its last bucket. The trace ends at its last arrival, inside
    the last interval, so that bucket holds only part of an interval's requests (on the shared
    traces 3-68% of the interval): scoring it would charge every predictor for the truncation."""
    return buckets.iloc[:-1].reset_index(drop=True)


def bucket_arrays(buckets: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(request_count, avg_isl, avg_osl)`` float arrays from a bucket table or mapping."""
    try:
        columns = [np.asarray(buckets[name], dtype=float) for name in SERIES]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise InputError(f"bucket table needs columns {', '.join(SERIES)} ({exc})") from None
    if len({c.shape for c in columns}) != 1 or columns[0].ndim != 1:
        raise InputError("bucket columns must be 1-D and of equal length")
    return columns[0], columns[1], columns[2]


def _run_series(
    spec: PredictorSpec,
    series: int,
    counts: np.ndarray,
    isl: np.ndarray,
    osl: np.ndarray,
    warmup: int,
    extra: Mapping[str, Any],
) -> tuple[pd.DataFrame, float]:
    """Backtest one series (0 request count, 1 ISL, 2 OSL) of one candidate. The whole
    forecaster is fed (the ISL/OSL feeding depends on the request count) but only this series'
    predictor forecasts; the three predictors share no state, so the result is the same as
    forecasting all three in one loop, and a slow model's three series can run in parallel."""
    forecaster = TrafficForecaster(lambda: spec.build(**extra))
    predictor = list(forecaster.predictors.values())[series]
    type(predictor).preload()
    started = time.perf_counter()
    for i in range(warmup):
        forecaster.observe(counts[i], isl[i], osl[i])
    scored = counts.size - warmup
    forecast = np.empty(scored)
    fit_time = np.empty(scored)
    failed = np.zeros(scored, dtype=bool)
    for j, i in enumerate(range(warmup, counts.size)):
        t0 = time.perf_counter()
        forecast[j] = predictor.predict_next()
        fit_time[j] = time.perf_counter() - t0
        failed[j] = predictor.last_forecast_failed
        forecaster.observe(counts[i], isl[i], osl[i])
    wall_s = time.perf_counter() - started
    frame = pd.DataFrame(
        {
            "bucket": np.arange(warmup, counts.size, dtype=np.int64),
            "predictor": spec.label,
            "series": SERIES[series],
            "forecast": forecast,
            "actual": (counts, isl, osl)[series][warmup:],
            "fit_time_s": fit_time,
            "failed": failed,
        }
    )
    return frame, wall_s


def summarize(
    predictions: pd.DataFrame,
    specs: Sequence[PredictorSpec],
    wall_time_s: Mapping[str, float],
) -> pd.DataFrame:
    """One ranked row per candidate from prediction rows (see the module docstring)."""
    rows = []
    for order, spec in enumerate(specs):
        mine = predictions[predictions["predictor"] == spec.label]
        wide = {s: mine[mine["series"] == s].sort_values("bucket", kind="stable") for s in SERIES}
        f = np.vstack([wide[s]["forecast"].to_numpy(float) for s in SERIES])
        a = np.vstack([wide[s]["actual"].to_numpy(float) for s in SERIES])
        window_losses = presweep_window_losses(f, a)
        window_losses = window_losses[np.isfinite(window_losses)]
        n_f, n_a = f[0], a[0]
        busy = n_a > 0
        fit = mine["fit_time_s"].to_numpy(float)
        rows.append(
            {
                "order": order,
                "predictor": spec.label,
                "name": spec.name,
                "params": dict(spec.params),
                "loss": float(window_losses.mean()) if window_losses.size else float("inf"),
                "mape_request_count_pct": (
                    float(np.mean(np.abs(n_f[busy] - n_a[busy]) / n_a[busy]) * 100.0)
                    if busy.any()
                    else float("nan")
                ),
                "rmse_request_count": float(np.sqrt(np.mean((n_f - n_a) ** 2))),
                "under_forecast_share": float(np.mean(n_f < UNDER_FORECAST_RATIO * n_a)),
                "fit_time_mean_s": float(fit.mean()),
                "fit_time_max_s": float(fit.max()),
                "failed_forecasts": int(mine["failed"].sum()),
                "wall_time_s": float(wall_time_s.get(spec.label, float("nan"))),
            }
        )
    summary = pd.DataFrame(rows)
    summary = summary.sort_values(
        ["failed_forecasts", "loss", "order"],
        key=lambda col: col > 0 if col.name == "failed_forecasts" else col,
        kind="stable",
    ).reset_index(drop=True)
    summary.insert(0, "rank", np.arange(1, len(summary) + 1))
    return summary[list(SUMMARY_COLUMNS)]
