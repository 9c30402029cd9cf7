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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from plansim.reports.folder_tables import (
    FolderOutput,
    FolderReport,
    FolderTables,
    positive,
)
from plansim.reports.format import NO_SAMPLES, number, percent, plain_value
from plansim.reports.page import Card, Page, plain
from plansim.reports.panels import Drawn, Panel, PanelOutput, draw_panels
from plansim.reports.sampling import TimeUnit, bin_series, time_unit
from plansim.reports.style import ACTUAL_COLOUR, base_layout, palette_map
from plansim.reports.tables import find_value, finite_number, floats, has
from plansim.schema import (
    BACKTEST_SUMMARY_COLUMNS,
    HIGH_MAPE_PCT,
    PREDICTIONS_TABLE,
    PREDICTOR_REPORT,
    PRESWEEP_LOSS_SENTENCE,
    UNDER_FORECAST_RATIO,
)

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
_COUNT_SERIES = ("request_count", "num_req")
_AVERAGE_SERIES = ("avg_isl", "isl", "avg_osl", "osl")
MAPE_SENTENCE = (
    "Request-count MAPE: the mean of |forecast - actual| / actual over the buckets with "
    "requests, in percent; it scores the request count alone, while the pre-sweep loss also "
    "weighs token volumes and lengths."
)
# Loss-table columns: (summary key, header, how the value is shown).
_TABLE_COLUMNS = (
    ("rank", "rank", "int"),
    ("predictor", "predictor", "text"),
    ("loss", "pre-sweep loss", "num"),
    ("skill_vs_naive", "skill vs naive", "signed"),
    ("mape_request_count_pct", "count MAPE", "pct"),
    ("rmse_request_count", "count RMSE (requests)", "num"),
    ("under_forecast_share", "under-forecast buckets", "share"),
    ("fit_time_mean_s", "fit mean (ms)", "ms"),
    ("fit_time_max_s", "fit max (ms)", "ms"),
    ("failed_forecasts", "failed", "int"),
    ("wall_time_s", "wall (s)", "num"),
)
# The columns of the backtest's summary, and the skill the command adds to each row.
assert {k for k, _, _ in _TABLE_COLUMNS} <= {*BACKTEST_SUMMARY_COLUMNS, "skill_vs_naive"}


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


@dataclass(frozen=True, slots=True)
class PredictorData:
    """What the predictor panels draw from: the prediction rows (``_x`` in seconds or bucket
    positions; averages of empty buckets set to NaN), the ranked table, the predictors drawn
    (the best ``MAX_PREDICTORS``), their colours, the series and the time unit."""

    frame: pd.DataFrame
    table: list[dict[str, Any]]
    order: list[str]
    shown: list[str]
    colours: dict[str, str]
    series: list[str]
    unit: TimeUnit | None


def render_predictor(
    predictions: pd.DataFrame,
    ranking: Sequence[Mapping[str, Any]] | None = None,
    *,
    interval_s: float | None = None,
    inputs: Mapping[str, Any] | None = None,
    naive: Mapping[str, Any] | None = None,
    plotly_src: str | None = None,
) -> str:
    """The predictor comparison report (HTML str). ``interval_s`` (bucket length) turns bucket
    positions into time on the axes; ``naive`` is the naive (last-value) forecast's errors, which
    each row's ``skill_vs_naive`` is measured against; ``plotly_src`` as in ``Page.render``."""
    page = Page(
        "plansim predictor report",
        "Each predictor forecasts every bucket one step ahead, then observes it. "
        "Lower errors are better.",
    )
    if not has(predictions, "bucket", "predictor", "series", "forecast", "actual"):
        page.headline([Card("best_loss", "Best predictor", NO_SAMPLES, "no predictions")])
        page.note(
            "Forecasts vs actual",
            "Not shown: predictions.parquet lacks bucket, predictor, series, forecast or actual.",
        )
        return page.render(plotly_src)
    data = predictor_data(predictions, ranking, interval_s)
    page.headline(
        predictor_cards(data.table, data.frame, interval_s, naive), PRESWEEP_LOSS_SENTENCE
    )
    _loss_table(page, data.table)
    page.part("Charts")
    draw_panels(page, PANELS, data)
    page.part("Details")
    _mape_table(page, data.table)
    rows: list[tuple[str, Any]] = []
    for key in ("command", "traces", "trace_files", "interval_s", "warmup_buckets"):
        if inputs and key in inputs:
            rows.append((key.replace("_", " "), plain_value(inputs[key])))
    if interval_s and not any(k == "interval s" for k, _ in rows):
        rows.append(("interval s", interval_s))
    if rows:
        page.key_values("Comparison inputs", rows)
    return page.render(plotly_src)


def predictor_data(
    predictions: pd.DataFrame,
    ranking: Sequence[Mapping[str, Any]] | None,
    interval_s: float | None,
) -> PredictorData:
    frame = predictions.assign(
        predictor=predictions["predictor"].astype(str), series=predictions["series"].astype(str)
    )
    frame = _empty_buckets_as_gaps(frame)
    table = [dict(r) for r in ranking or []] or _computed_ranking(frame)
    order = [str(r.get("predictor")) for r in table if r.get("predictor") is not None]
    order += sorted(set(frame["predictor"]) - set(order))
    shown = order[:MAX_PREDICTORS]
    # x: the bucket start in seconds (time_s column, else bucket x interval), else the position.
    if "time_s" in frame.columns and frame["time_s"].notna().all():
        frame = frame.assign(_x=floats(frame, "time_s"))
    elif interval_s:
        frame = frame.assign(_x=floats(frame, "bucket") * interval_s)
    else:
        frame = frame.assign(_x=floats(frame, "bucket"))
    timed = "time_s" in frame.columns or bool(interval_s)
    return PredictorData(
        frame=frame,
        table=table,
        order=order,
        shown=shown,
        colours=palette_map(shown),
        series=list(dict.fromkeys(frame["series"])),
        unit=time_unit(float(frame["_x"].max())) if timed else None,
    )


def _empty_buckets_as_gaps(frame: pd.DataFrame) -> pd.DataFrame:
    """An average length of a bucket without requests is undefined (the table says 0): its
    actual value becomes NaN, so it is drawn as a gap and scores no error."""
    counts = frame[frame["series"].isin(_COUNT_SERIES)]
    if counts.empty:
        return frame
    empty = set(counts.loc[floats(counts, "actual") == 0, "bucket"].tolist())
    if not empty:
        return frame
    mask = frame["series"].isin(_AVERAGE_SERIES) & frame["bucket"].isin(empty)
    return frame.assign(actual=frame["actual"].astype(float).mask(mask))


def predictor_cards(
    table: list[dict[str, Any]],
    frame: pd.DataFrame,
    interval_s: float | None,
    naive: Mapping[str, Any] | None = None,
) -> list[Card]:
    """The bottom line: one winner, by the pre-sweep loss (what retune picks with); its skill
    against the naive forecast (repeating the last bucket); its request-count error, with a
    warning when it is huge; its under-forecast risk; the buckets scored."""
    by_loss = [r for r in table if finite_number(r.get("loss")) is not None]
    cards = []
    if by_loss:
        best = by_loss[0]
        cards.append(
            Card(
                "best_loss",
                "Best predictor",
                str(best["predictor"]),
                f"lowest pre-sweep loss, {number(float(best['loss']))}: what retune's "
                "pre-sweep picks",
            )
        )
        cards += _skill_card(best, naive)
        mape = finite_number(best.get("mape_request_count_pct"))
        if mape is not None:
            huge = mape > HIGH_MAPE_PCT
            cards.append(
                Card(
                    "error",
                    "Its request-count error",
                    f"MAPE {mape:.0f}%",
                    (
                        "warning: forecasts miss by more than half of a bucket's requests; "
                        "buckets this short are mostly noise, a longer interval smooths them"
                        if huge
                        else "mean miss of the request count per bucket"
                    ),
                    "bad" if huge else "good",
                )
            )
    under = [
        (str(r["predictor"]), float(r["under_forecast_share"]))
        for r in table
        if finite_number(r.get("under_forecast_share")) is not None
    ]
    if under and by_loss:
        share = dict(under).get(str(by_loss[0]["predictor"]))
        if share is not None:
            cards.append(
                Card(
                    "under_forecast",
                    "Under-forecast risk",
                    percent(share),
                    f"of buckets {by_loss[0]['predictor']} forecast below "
                    f"{UNDER_FORECAST_RATIO:.0%} of the actual count",
                    "bad" if share > 0.1 else "good",
                )
            )
    buckets = frame["bucket"].nunique()
    width = f" of {number(interval_s)} s" if interval_s else ""
    cards.append(Card("buckets", "Buckets scored", f"{buckets:,}", f"one-step forecasts{width}"))
    return cards


def _skill_card(best: Mapping[str, Any], naive: Mapping[str, Any] | None) -> list[Card]:
    """The winner's skill: ``1 - loss / naive loss`` (the summary's ``skill_vs_naive``)."""
    gain = finite_number(best.get("skill_vs_naive"))
    naive_loss = finite_number((naive or {}).get("loss"))
    if gain is None:
        return []
    side = "less" if gain >= 0 else "more"
    against = f" ({number(naive_loss)})" if naive_loss is not None else ""
    return [
        Card(
            "skill",
            "Skill vs naive forecast",
            f"{gain * 100:+.0f}%",
            f"{abs(gain):.0%} {side} loss than repeating the last bucket{against}",
            "good" if gain > 0 else "bad",
        )
    ]


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


def _cell(value: Any, kind: str) -> Any:
    number_value = finite_number(value)
    if kind == "text" or (number_value is None and kind != "int"):
        return plain_value(value) if value is not None else NO_SAMPLES
    if kind == "int":
        return int(number_value) if number_value is not None else NO_SAMPLES
    if kind == "pct":
        return f"{number_value:.1f}%"
    if kind == "share":
        return percent(number_value)
    if kind == "signed":
        return f"{number_value * 100:+.0f}%"
    if kind == "ms":
        return number(number_value * 1000.0, 2)
    return number(number_value, 4)


def _loss_table(page: Page, table: list[dict[str, Any]]) -> None:
    known = [(k, h, kind) for k, h, kind in _TABLE_COLUMNS if any(k in r for r in table)]
    extra = [
        c
        for r in table
        for c in r
        if c not in {k for k, _, _ in _TABLE_COLUMNS} and c not in ("name", "params")
    ]
    extra = list(dict.fromkeys(extra))
    page.table(
        "Ranking by pre-sweep loss (best first)",
        [h for _, h, _ in known] + [c.replace("_", " ") for c in extra],
        [
            [_cell(r.get(k), kind) for k, _, kind in known]
            + [_cell(r.get(c), "num") for c in extra]
            for r in table
        ],
        "Pre-sweep loss as above. Skill vs naive: 1 - loss / the loss of repeating the last "
        "bucket (above 0: better than that naive forecast). Count MAPE: the mean of "
        "|forecast - actual| / actual of the "
        "request count over the buckets with requests. Count RMSE: root mean squared "
        "request-count error. Under-forecast buckets: share of "
        f"buckets forecast below {UNDER_FORECAST_RATIO:.0%} of the actual count (the risk of "
        "under-provisioning). Fit times per forecast; failed forecasts fell back to the last "
        "value.",
        numeric=[kind != "text" for _, _, kind in known] + [True] * len(extra),
    )


def _mape_table(page: Page, table: list[dict[str, Any]]) -> None:
    rows = sorted(
        (r for r in table if finite_number(r.get("mape_request_count_pct")) is not None),
        key=lambda r: float(r["mape_request_count_pct"]),
    )
    if not rows:
        return
    page.table(
        "Request-count error (lowest first), for reference",
        [
            "rank",
            "predictor",
            "count MAPE",
            "count RMSE (requests)",
            "pre-sweep loss",
            "rank by loss",
        ],
        [
            [
                k,
                plain_value(r.get("predictor")),
                _cell(r.get("mape_request_count_pct"), "pct"),
                _cell(r.get("rmse_request_count"), "num"),
                _cell(r.get("loss"), "num"),
                _cell(r.get("rank"), "int"),
            ]
            for k, r in enumerate(rows, start=1)
        ],
        MAPE_SENTENCE + " The best predictor is the loss's, the one retune picks; this order "
        "only shows how the request counts alone compare.",
        numeric=[True, False, True, True, True, True],
    )


def _loss_chart(d: PredictorData) -> PanelOutput:
    rows = [r for r in d.table if finite_number(r.get("loss")) is not None]
    if not rows:
        return "Not shown: the ranking has no finite pre-sweep loss."
    fig = go.Figure(
        go.Bar(
            x=[plain(r["predictor"]) for r in rows],
            y=[float(r["loss"]) for r in rows],
            marker={"color": [d.colours.get(str(r["predictor"]), "#8c8c8c") for r in rows]},
            hovertemplate="%{x}: loss %{y:.4f}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="Predictor (best first)", type="category")
    fig.update_yaxes(title_text="Pre-sweep loss (lower is better)", rangemode="tozero")
    layout = base_layout(fig, height=340)
    layout.update_layout(hovermode="closest", showlegend=False)
    return layout


_FORECAST_HOW = (
    "Black: what the traffic was; coloured: each predictor's one-step-ahead forecast of the "
    "same bucket. A forecast that trails the actual by one bucket is no better than 'same as "
    "last'. Average lengths of a bucket without requests are gaps."
)


def _forecast_chart(d: PredictorData) -> PanelOutput:
    how = _FORECAST_HOW
    if len(d.order) > len(d.shown):
        how += f" The {len(d.shown)} best of {len(d.order)} predictors are drawn."
    frame, unit = d.frame, d.unit
    fig = _series_subplots(d.series)
    for row, name in enumerate(d.series, start=1):
        part = frame[frame["series"] == name]
        actual = part.drop_duplicates("bucket").sort_values("bucket")
        t, ys = bin_series(floats(actual, "_x"), {"y": floats(actual, "actual")})
        _add_line(
            fig, row, _axis_x(t, unit), ys["y"], "actual", {"color": ACTUAL_COLOUR, "width": 2.5}
        )
        for predictor in d.shown:
            one = part[part["predictor"] == predictor].sort_values("bucket")
            t, ys = bin_series(floats(one, "_x"), {"y": floats(one, "forecast")})
            _add_line(
                fig,
                row,
                _axis_x(t, unit),
                ys["y"],
                plain(predictor),
                {"color": d.colours[predictor], "width": 1.3},
            )
        fig.update_yaxes(
            title_text=plain(_SERIES_LABELS.get(name, name)), rangemode="tozero", row=row, col=1
        )
    fig.update_xaxes(title_text=_x_title(unit), row=len(d.series), col=1)
    return Drawn(base_layout(fig, height=260 * len(d.series) + 160, legend_below=True), how)


def _error_chart(d: PredictorData) -> PanelOutput:
    frame, unit = d.frame, d.unit
    fig = _series_subplots(d.series)
    for row, name in enumerate(d.series, start=1):
        part = frame[frame["series"] == name]
        for predictor in d.shown:
            one = part[part["predictor"] == predictor].sort_values("bucket")
            err = np.abs(
                np.log1p(np.maximum(floats(one, "forecast"), 0))
                - np.log1p(np.maximum(floats(one, "actual"), 0))
            )
            smooth = pd.Series(err).rolling(ERROR_SMOOTHING_BUCKETS, min_periods=1).mean()
            # an empty bucket's average has no error: a gap
            smooth = np.where(np.isnan(err), np.nan, smooth.to_numpy())
            t, ys = bin_series(floats(one, "_x"), {"y": smooth})
            _add_line(
                fig,
                row,
                _axis_x(t, unit),
                ys["y"],
                plain(predictor),
                {"color": d.colours[predictor]},
            )
        fig.update_yaxes(title_text="log1p error", rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title_text=_x_title(unit), row=len(d.series), col=1)
    return base_layout(fig, height=220 * len(d.series) + 160, legend_below=True)


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
        go.Scatter(
            x=x, y=y, mode="lines", name=name, legendgroup=name, showlegend=row == 1, line=line
        ),
        row=row,
        col=1,
    )


PANELS: tuple[Panel, ...] = (
    Panel(
        "predictor_loss",
        "Pre-sweep loss per predictor",
        "One bar per predictor, best first; lower is better (the loss is explained at the top).",
        ("summary.predictors.loss",),
        _loss_chart,
    ),
    Panel(
        "predictor_forecasts",
        "Forecast vs actual per series",
        _FORECAST_HOW,
        ("predictions.forecast", "predictions.actual"),
        _forecast_chart,
    ),
    Panel(
        "predictor_errors",
        "Forecast error over time",
        "Absolute error on a log1p scale, |log1p(forecast) - log1p(actual)|, smoothed over "
        f"{ERROR_SMOOTHING_BUCKETS} buckets: 0.1 is about a 10% miss. Spikes show where a "
        "predictor was caught out by a change in traffic.",
        ("predictions.forecast", "predictions.actual"),
        _error_chart,
    ),
)


def _write_folder(tables: FolderTables, out: FolderOutput) -> list[Path]:
    summary, inputs = tables.summary, tables.inputs
    interval = positive(
        (summary.get("interval_s") if isinstance(summary, Mapping) else None)
        or find_value(inputs, "interval_s")
        or find_value(inputs, "interval")
    )
    return [
        out.write_html(
            PREDICTOR_REPORT,
            lambda src: render_predictor(
                tables.parquet(PREDICTIONS_TABLE),
                ranking_rows(summary),
                interval_s=interval,
                inputs=inputs,
                naive=summary.get("naive") if isinstance(summary, Mapping) else None,
                plotly_src=src,
            ),
        )
    ]


def _read_folder(tables: FolderTables) -> bool:
    return tables.parquet(PREDICTIONS_TABLE) is not None


# ``predictor_report.html``: the folder has a predictions table.
FOLDER_REPORT = FolderReport((PREDICTIONS_TABLE,), _read_folder, _write_folder)
