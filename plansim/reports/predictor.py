"""The predictor report (``predictor_report.html``): forecasts against actual traffic per series
and predictor, the forecast error over time, and the loss table.

``predictions`` has one row per scored bucket, predictor and series: ``bucket`` (int, position in
the bucket table), ``predictor`` (label), ``series``, ``forecast``, ``actual``, and optionally
``time_s`` (bucket start, seconds since the first arrival). ``ranking`` is the
per-predictor summary (best first) when the run wrote one; otherwise the losses are computed here
from the predictions (mean |log1p(forecast) - log1p(actual)| per series).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from plansim.reports.page import Page, plain
from plansim.reports.sampling import TimeUnit, bin_series, time_unit
from plansim.reports.style import ACTUAL_COLOUR, base_layout, palette_map
from plansim.reports.tables import floats, has

MAX_PREDICTORS = 8  # predictors drawn per chart (the best ranked); the table lists all
ERROR_SMOOTHING_BUCKETS = 10
_SERIES_LABELS = {
    "request_count": "Requests per bucket",
    "num_req": "Requests per bucket",
    "avg_isl": "Average ISL (tokens)",
    "isl": "Average ISL (tokens)",
    "avg_osl": "Average OSL (tokens)",
    "osl": "Average OSL (tokens)",
}
_SUMMARY_ORDER = (
    "rank",
    "predictor",
    "loss",
    "mape_request_count_pct",
    "rmse_request_count",
    "under_forecast_share",
    "fit_time_mean_s",
    "fit_time_max_s",
    "failed_forecasts",
    "wall_time_s",
)


def ranking_rows(summary: Any) -> list[dict[str, Any]]:
    """The per-predictor rows of a predictor run's ``summary.json``: a list of rows, or a dict
    holding one under ``ranking``/``predictors``/``summary``/``candidates``."""
    rows = summary
    if isinstance(summary, Mapping):
        rows = next(
            (
                summary[k]
                for k in ("ranking", "predictors", "summary", "candidates")
                if isinstance(summary.get(k), list)
            ),
            [],
        )
    return [dict(r) for r in rows if isinstance(r, Mapping)] if isinstance(rows, list) else []


def render_predictor(
    predictions: pd.DataFrame,
    ranking: Sequence[Mapping[str, Any]] | None = None,
    *,
    interval_s: float | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> str:
    """The predictor comparison report (HTML str). ``interval_s`` (bucket length) turns bucket
    positions into time on the axes."""
    page = Page(
        "plansim predictor report",
        "Each predictor forecasts every bucket one step ahead, then observes it. "
        "Lower loss is better.",
    )
    rows: list[tuple[str, Any]] = []
    for key in ("command", "traces", "trace_files", "interval_s", "warmup_buckets", "predictors"):
        if inputs and key in inputs:
            rows.append((key, inputs[key]))
    if interval_s and not any(k == "interval_s" for k, _ in rows):
        rows.append(("interval_s", interval_s))
    if rows:
        page.key_values("Comparison inputs", rows)
    if not has(predictions, "bucket", "predictor", "series", "forecast", "actual"):
        page.note(
            "Forecasts vs actual",
            "Not shown: predictions.parquet lacks bucket, predictor, series, forecast or actual.",
        )
        return page.render()
    frame = predictions.assign(
        predictor=predictions["predictor"].astype(str), series=predictions["series"].astype(str)
    )
    table = [dict(r) for r in ranking or []] or _computed_ranking(frame)
    order = [str(r.get("predictor")) for r in table if r.get("predictor") is not None]
    order += sorted(set(frame["predictor"]) - set(order))
    shown = order[:MAX_PREDICTORS]
    colours = palette_map(shown)
    series = list(dict.fromkeys(frame["series"]))
    # x: the bucket start in seconds (time_s column, else bucket x interval), else the position.
    if "time_s" in frame.columns and frame["time_s"].notna().all():
        frame = frame.assign(_x=floats(frame, "time_s"))
    elif interval_s:
        frame = frame.assign(_x=floats(frame, "bucket") * interval_s)
    else:
        frame = frame.assign(_x=floats(frame, "bucket"))
    timed = "time_s" in frame.columns or bool(interval_s)
    unit = time_unit(float(frame["_x"].max())) if timed else None
    _loss_table(page, table)
    _loss_chart(page, table, colours)
    _forecast_chart(page, frame, series, shown, colours, unit, len(order))
    _error_chart(page, frame, series, shown, colours, unit)
    return page.render()


def _computed_ranking(frame: pd.DataFrame) -> list[dict[str, Any]]:
    err = np.abs(
        np.log1p(np.maximum(floats(frame, "forecast"), 0))
        - np.log1p(np.maximum(floats(frame, "actual"), 0))
    )
    losses = (
        frame.assign(_err=err).groupby(["predictor", "series"], sort=True)["_err"].mean().unstack()
    )
    rows = [
        {
            "predictor": p,
            **{f"mean_log1p_error_{s}": float(losses.loc[p, s]) for s in losses.columns},
        }
        for p in losses.index
    ]
    return sorted(
        rows, key=lambda r: float(np.nanmean([v for k, v in r.items() if k != "predictor"]))
    )


def _axis_x(x: np.ndarray, unit: TimeUnit | None) -> np.ndarray:
    return x / unit.seconds if unit else x


def _x_title(unit: TimeUnit | None) -> str:
    return unit.axis_title("Bucket start") if unit else "Bucket (index)"


def _loss_table(page: Page, table: list[dict[str, Any]]) -> None:
    columns = [c for c in _SUMMARY_ORDER if any(c in r for r in table)]
    columns += [c for r in table for c in r if c not in columns and c not in ("name", "params")]
    columns = list(dict.fromkeys(columns))
    page.table(
        "Loss table (best first)",
        columns,
        [[r.get(c, "") for c in columns] for r in table],
        "loss: retune pre-sweep loss (0.4 x input-token + 0.4 x output-token + 0.1 x ISL + 0.1 x "
        "OSL error, log1p scale); MAPE and RMSE on the request count; under_forecast_share: "
        "buckets forecast below 80% of the actual count (risk of under-provisioning); fit times in "
        "seconds per forecast.",
    )


def _loss_chart(page: Page, table: list[dict[str, Any]], colours: dict[str, str]) -> None:
    rows = [r for r in table if isinstance(r.get("loss"), (int, float)) and np.isfinite(r["loss"])]
    if not rows:
        return
    fig = go.Figure(
        go.Bar(
            x=[plain(r["predictor"]) for r in rows],
            y=[float(r["loss"]) for r in rows],
            marker={"color": [colours.get(str(r["predictor"]), "#8c8c8c") for r in rows]},
            hovertemplate="%{x}: loss %{y:.4f}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="Predictor (best first)", type="category")
    fig.update_yaxes(title_text="Pre-sweep loss (lower is better)", rangemode="tozero")
    layout = base_layout(fig, height=340)
    layout.update_layout(hovermode="closest", showlegend=False)
    page.chart(
        "predictor_loss", "Loss per predictor", "One bar per predictor; lower is better.", layout
    )


def _forecast_chart(
    page: Page,
    frame: pd.DataFrame,
    series: list[str],
    shown: list[str],
    colours: dict[str, str],
    unit: TimeUnit | None,
    total: int,
) -> None:
    how = (
        "Black: what the traffic was; coloured: each predictor's one-step-ahead forecast of the "
        "same bucket. A forecast that trails the actual by one bucket is no better than 'same as "
        "last'."
    )
    if total > len(shown):
        how += f" The {len(shown)} best of {total} predictors are drawn."
    fig = _series_subplots(series)
    for row, name in enumerate(series, start=1):
        part = frame[frame["series"] == name]
        actual = part.drop_duplicates("bucket").sort_values("bucket")
        t, ys = bin_series(floats(actual, "_x"), {"y": floats(actual, "actual")})
        _add_line(fig, row, _axis_x(t, unit), ys["y"], "actual",
                  {"color": ACTUAL_COLOUR, "width": 2.5})
        for predictor in shown:
            one = part[part["predictor"] == predictor].sort_values("bucket")
            t, ys = bin_series(floats(one, "_x"), {"y": floats(one, "forecast")})
            _add_line(fig, row, _axis_x(t, unit), ys["y"], plain(predictor),
                      {"color": colours[predictor], "width": 1.3})
        fig.update_yaxes(
            title_text=plain(_SERIES_LABELS.get(name, name)), rangemode="tozero", row=row, col=1
        )
    fig.update_xaxes(title_text=_x_title(unit), row=len(series), col=1)
    page.chart(
        "predictor_forecasts",
        "Forecast vs actual per series",
        how,
        base_layout(fig, height=260 * len(series) + 160, legend_below=True),
    )


def _error_chart(
    page: Page,
    frame: pd.DataFrame,
    series: list[str],
    shown: list[str],
    colours: dict[str, str],
    unit: TimeUnit | None,
) -> None:
    how = (
        "Absolute error on a log1p scale, |log1p(forecast) - log1p(actual)|, smoothed over "
        f"{ERROR_SMOOTHING_BUCKETS} buckets: 0.1 is about a 10% miss. Spikes show where a "
        "predictor was caught out by a change in traffic."
    )
    fig = _series_subplots(series)
    for row, name in enumerate(series, start=1):
        part = frame[frame["series"] == name]
        for predictor in shown:
            one = part[part["predictor"] == predictor].sort_values("bucket")
            err = np.abs(
                np.log1p(np.maximum(floats(one, "forecast"), 0))
                - np.log1p(np.maximum(floats(one, "actual"), 0))
            )
            smooth = (
                pd.Series(err).rolling(ERROR_SMOOTHING_BUCKETS, min_periods=1).mean().to_numpy()
            )
            t, ys = bin_series(floats(one, "_x"), {"y": smooth})
            _add_line(fig, row, _axis_x(t, unit), ys["y"], plain(predictor),
                      {"color": colours[predictor]})
        fig.update_yaxes(title_text="log1p error", rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title_text=_x_title(unit), row=len(series), col=1)
    page.chart(
        "predictor_errors",
        "Forecast error over time",
        how,
        base_layout(fig, height=220 * len(series) + 160, legend_below=True),
    )


def _series_subplots(series: list[str]) -> go.Figure:
    """One row per series, sharing the time axis."""
    return make_subplots(
        rows=len(series),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=[plain(_SERIES_LABELS.get(s, s)) for s in series],
    )


def _add_line(fig: go.Figure, row: int, x: Any, y: Any, name: str, line: dict[str, Any]) -> None:
    """A line in subplot ``row``; its legend entry is shown once (on the first row)."""
    fig.add_trace(
        go.Scatter(x=x, y=y, mode="lines", name=name, legendgroup=name, showlegend=row == 1,
                   line=line),
        row=row,
        col=1,
    )
