"""The replay report (``report.html``): the headline cards (goodput against its SLA, GPU-hours,
p90 latencies against their bounds, workers), the charts (``PANELS``, one ``Panel`` record per
chart), then the details: the summary grouped with labels and units, requests by outcome, the
slowest requests and the run's inputs.

Input tables follow the schemas of ``plansim.sim.result``; every chart needs only some columns
and is replaced by a note when they are absent. Long runs stay small on screen: rates and
percentiles are binned in time, CDFs are read off a fixed set of quantiles, and every trace has
at most ``sampling.MAX_POINTS`` points.
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

from plansim.reports.folder_tables import FolderOutput, FolderReport, FolderTables
from plansim.reports.format import column_label, key_value, with_unit
from plansim.reports.headline import all_rejected, goodput_sla, replay_cards
from plansim.reports.page import Page, plain
from plansim.reports.panels import Drawn, Panel, PanelOutput, draw_panels
from plansim.reports.sampling import (
    MAX_POINTS,
    TimeUnit,
    bin_series,
    bin_width_s,
    binned_percentiles,
    fraction_at_most,
    quantile_cdf,
    thin_events,
    time_unit,
    with_gaps,
)
from plansim.reports.style import (
    ACTUAL_COLOUR,
    PERCENTILE_COLOURS,
    SLA_COLOUR,
    STATE_DASH,
    base_layout,
    pool_colour,
)
from plansim.reports.tables import find_sla, first_column, floats, has, missing
from plansim.roles import Mode, Role
from plansim.schema import (
    REPLAY_REPORT,
    REQUESTS_TABLE,
    SESSIONS_TABLE,
    SUMMARY_DISTRIBUTIONS,
    SUMMARY_GROUPS,
    SUMMARY_KEY_BY_NAME,
    SUMMARY_KEYS,
    SUMMARY_STATS,
    TIMESERIES_TABLE,
    WORKERS_TABLE,
)

_REQUEST_COUNT_KEYS = ("requests", "request_count", "num_requests")
NO_COMPLETED = "Not shown: no request completed with a first token."


@dataclass(frozen=True, slots=True)
class ReplayData:
    """What the replay panels draw from: the run's tables (any may be None), its summary and
    inputs, the SLA lines (``sla``), the completed requests (``done``) and the time axis unit."""

    requests: pd.DataFrame | None
    timeseries: pd.DataFrame | None
    workers: pd.DataFrame | None
    summary: dict[str, Any]
    inputs: dict[str, Any]
    events: Sequence[Mapping[str, Any]]
    sla: dict[str, float]
    done: pd.DataFrame | None
    unit: TimeUnit
    sessions: pd.DataFrame | None = None


def render_replay(
    requests: pd.DataFrame | None,
    timeseries: pd.DataFrame | None = None,
    workers: pd.DataFrame | None = None,
    summary: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    scaling_events: Sequence[Mapping[str, Any]] | None = None,
    *,
    sessions: pd.DataFrame | None = None,
    plotly_src: str | None = None,
) -> str:
    """The replay report as one HTML document (str): the headline cards, the ``PANELS`` and
    the details. ``sessions``: the closed-loop sessions table. ``plotly_src`` as in
    ``Page.render`` (None embeds plotly.js)."""
    summary = dict(summary or {})
    inputs = dict(inputs or {})
    data = ReplayData(
        requests=requests,
        timeseries=timeseries,
        workers=workers,
        summary=summary,
        inputs=inputs,
        events=list(scaling_events or []),
        sla=find_sla(inputs, summary),
        done=_completed(requests) if requests is not None else None,
        unit=time_unit(_span_s(requests, timeseries)),
        sessions=sessions,
    )
    page = Page(
        "plansim replay report",
        "A replay of a request trace on simulated engines. "
        "Times are virtual, from the first arrival.",
    )
    page.headline(
        replay_cards(
            data.summary, goodput_sla(data.inputs), timeseries, all_rejected(requests, data.inputs)
        )
    )
    page.part("Charts")
    draw_panels(page, PANELS, data)
    page.part("Details")
    summary_details(page, data.summary)
    _request_tables(page, requests)
    inputs_details(page, data.inputs, requests)
    return page.render(plotly_src)


def _span_s(requests: pd.DataFrame | None, timeseries: pd.DataFrame | None) -> float:
    spans = [0.0]
    if has(timeseries, "time_s"):
        spans.append(float(np.nanmax(floats(timeseries, "time_s"))))
    column = first_column(requests, ("last_token_ms", "arrival_ms"))
    if column is not None:
        spans.append(float(np.nanmax(floats(requests, column))) / 1000.0)
    return max(spans)


# ---------------------------------------------------------------- details


def inputs_details(
    page: Page, inputs: Mapping[str, Any], requests: pd.DataFrame | None = None
) -> None:
    """The run's inputs as nested tables (the command, the traces, the deployment, ...)."""
    # Top-level keys without a value say nothing; one request count is enough.
    shown = {k: v for k, v in inputs.items() if v is not None and v != {} and v != []}
    counts = [k for k in _REQUEST_COUNT_KEYS if k in shown]
    for duplicate in counts[1:]:
        del shown[duplicate]
    deployment = shown.get("deployment")
    if isinstance(deployment, Mapping) and deployment.get("mode") in tuple(Mode):
        # The validated deployment records the other mode's pool keys too; they mean nothing.
        unused = Mode(deployment["mode"]).other.pool_keys
        shown["deployment"] = {k: v for k, v in deployment.items() if k not in unused}
    if requests is not None and not counts:
        shown = {"requests": len(requests), **shown}
    if not shown:
        page.note("Run inputs", "Not shown: inputs.json is absent or empty.")
        return
    page.nested(
        "Run inputs",
        shown,
        "What ran, as recorded in inputs.json: values carry the unit their key names; keys "
        "that were not set are listed under each block.",
    )


def _absent_pool(key: str, summary: Mapping[str, Any]) -> bool:
    """A prefill key of a deployment without prefill workers (an aggregated one)."""
    return key.startswith("prefill_") and not summary.get("prefill_gpus_per_worker")


def summary_details(page: Page, summary: Mapping[str, Any]) -> None:
    """summary.json: the known keys grouped with labels and units, the latency distributions
    as one table, and any other key under "Other"."""
    if not summary:
        page.note("Summary", "Not shown: summary.json is absent or empty.")
        return
    groups: dict[str, list[tuple[str, str]]] = {g: [] for g in SUMMARY_GROUPS}
    for known in SUMMARY_KEYS:
        value = summary.get(known.key)
        if known.key not in summary or _absent_pool(known.key, summary):
            continue
        groups[known.group].append((known.label, with_unit(value, known.unit)))
    stats: dict[str, dict[str, Any]] = {}
    other: list[tuple[str, str]] = []
    for key, value in summary.items():
        if str(key) in SUMMARY_KEY_BY_NAME:
            continue
        metric = next(
            (m for m in SUMMARY_DISTRIBUTIONS for s in SUMMARY_STATS if str(key) == f"{s}_{m}"),
            None,
        )
        if metric is not None and isinstance(value, (int, float)):
            stat = str(key)[: -len(metric) - 1]
            stats.setdefault(metric, {})[stat] = value
        elif not isinstance(value, (dict, list)):
            other.append((str(key), key_value(str(key), value)))
    titled = [(SUMMARY_GROUPS[g], rows) for g, rows in groups.items()]
    if other:
        titled.append(("Other", other))
    page.grouped(
        "Summary",
        titled,
        "The replay's summary.json; goodput counts the requests that met the SLA.",
    )
    if stats:
        page.table(
            "Latency and per-request throughput distributions",
            ["metric", "unit", *SUMMARY_STATS],
            [
                [
                    SUMMARY_DISTRIBUTIONS[m][0],
                    SUMMARY_DISTRIBUTIONS[m][1],
                    *(row.get(s, float("nan")) for s in SUMMARY_STATS),
                ]
                for m, row in stats.items()
            ],
            "Over completed requests (TPOT: each request's mean token gap, what the SLA's TPOT "
            "bound checks; ITL: every token gap, so a request's bursts). n/a: no samples.",
        )


# ---------------------------------------------------------------- traffic


def _traffic_chart(d: ReplayData) -> PanelOutput:
    requests, timeseries, unit = d.requests, d.timeseries, d.unit
    has_rate = has(requests, "arrival_ms")
    has_tok = has(timeseries, "time_s", "output_tok_s")
    if not has_rate and not has_tok:
        return missing(requests, "requests.parquet", "arrival_ms")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    if has_rate:
        arrival_s = floats(requests, "arrival_ms") / 1000.0
        arrival_s = arrival_s[np.isfinite(arrival_s)]
        width = bin_width_s(float(arrival_s.max()) if arrival_s.size else 0.0, max_bins=400)
        counts = np.bincount(np.floor(arrival_s / width).astype(np.int64))
        starts = np.arange(len(counts)) * width
        fig.add_trace(
            go.Scatter(
                x=starts / unit.seconds,
                y=counts / width,
                mode="lines",
                name="arrivals (req/s)",
                line={"color": ACTUAL_COLOUR, "shape": "hv"},
            ),
            row=1,
            col=1,
        )
        fig.update_yaxes(title_text=f"Requests/s ({width:g} s bins)", row=1, col=1)
    if has_tok:
        per_time = (
            pd.DataFrame(
                {"t": floats(timeseries, "time_s"), "v": floats(timeseries, "output_tok_s")}
            )
            .groupby("t", sort=True)["v"]
            .sum()
        )
        t, ys = bin_series(per_time.index.to_numpy(), {"v": per_time.to_numpy()})
        fig.add_trace(
            go.Scatter(
                x=t / unit.seconds,
                y=ys["v"],
                mode="lines",
                name="output tokens/s (all pools)",
                line={"color": "#55a868"},
            ),
            row=2,
            col=1,
        )
        fig.update_yaxes(title_text="Output tokens/s", row=2, col=1)
    fig.update_xaxes(title_text=unit.axis_title(), row=2, col=1)
    return base_layout(fig, height=520, legend_below=True)


# ---------------------------------------------------------------- latency


_LATENCIES = (
    ("TTFT", ("ttft_ms",), "ttft_ms", "time to first token"),
    ("TPOT", ("tpot_ms", "itl_ms"), "tpot_ms", "each request's mean token gap"),
    ("E2E", ("e2e_latency_ms", "e2e_ms"), "e2e_ms", "end-to-end latency"),
)


def _completed(requests: pd.DataFrame) -> pd.DataFrame:
    """The completed rows (all rows of a table without ``status``); the latency charts share it."""
    if "status" in requests.columns:
        return requests[requests["status"].astype(str) == "completed"]
    return requests


def _latency_cdfs(d: ReplayData) -> PanelOutput:
    requests, done, sla = d.requests, d.done, d.sla
    if not has(requests, "ttft_ms"):
        return missing(requests, "requests.parquet", "ttft_ms")
    if first_column(done, ("ttft_ms",)) is None:
        return NO_COMPLETED
    fig = make_subplots(
        rows=1,
        cols=3,
        horizontal_spacing=0.07,
        subplot_titles=[f"{name}: {what}" for name, _, _, what in _LATENCIES],
    )
    for col, (name, columns, sla_key, _) in enumerate(_LATENCIES, start=1):
        column = first_column(done, columns)
        if column is None:
            continue
        values = floats(done, column)
        x, p = quantile_cdf(values)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=p * 100.0,
                mode="lines",
                name=f"{name} CDF",
                showlegend=False,
                line={"color": PERCENTILE_COLOURS[50.0]},
                hovertemplate="%{x:.1f} ms: %{y:.1f}%<extra>" + name + "</extra>",
            ),
            row=1,
            col=col,
        )
        if sla_key in sla:
            limit = sla[sla_key]
            met = fraction_at_most(values, limit) * 100.0
            fig.add_trace(
                go.Scatter(
                    x=[limit, limit],
                    y=[0, 100],
                    mode="lines",
                    name=f"{name} SLA {limit:g} ms ({met:.1f}% met)",
                    line={"color": SLA_COLOUR, "dash": "dash"},
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text=f"{name} (ms, log scale)", type="log", row=1, col=col)
    fig.update_yaxes(title_text="Requests at or below (%)", range=[0, 101], row=1, col=1)
    layout = base_layout(fig, height=460, legend_below=True)
    # room above the panel titles for Plotly's toolbar
    layout.update_layout(hovermode="closest", margin={"t": 70})
    return layout


def _latency_over_time(d: ReplayData) -> PanelOutput:
    requests, done, sla, unit = d.requests, d.done, d.sla, d.unit
    if not has(requests, "arrival_ms", "ttft_ms"):
        return missing(requests, "requests.parquet", "arrival_ms", "ttft_ms")
    if first_column(done, ("ttft_ms",)) is None:
        return NO_COMPLETED
    arrival_s = floats(done, "arrival_ms") / 1000.0
    span = float(np.nanmax(arrival_s))
    width = bin_width_s(span, minimum_s=60.0)
    how = (
        f"Requests grouped by arrival into {width:g}-second bins; each line is one percentile "
        "of the bin's completed requests (a bin without any is a gap). A rising p99 with a flat "
        "p50 means a tail problem (queueing), both rising means the deployment is saturated."
    )
    panels = [(name, first_column(done, cols), key) for name, cols, key, _ in _LATENCIES[:2]]
    panels = [p for p in panels if p[1] is not None]
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.08)
    for row, (name, column, sla_key) in enumerate(panels, start=1):
        starts, q = with_gaps(
            *binned_percentiles(arrival_s, floats(done, column), width, (50.0, 90.0, 99.0)), width
        )
        for pct, values in q.items():
            fig.add_trace(
                go.Scatter(
                    x=starts / unit.seconds,
                    y=values,
                    mode="lines",
                    name=f"{name} p{pct:g}",
                    line={"color": PERCENTILE_COLOURS[pct], "dash": "solid" if row == 1 else "dot"},
                ),
                row=row,
                col=1,
            )
        if sla_key in sla and len(starts):
            fig.add_trace(
                go.Scatter(
                    x=[starts[0] / unit.seconds, starts[-1] / unit.seconds],
                    y=[sla[sla_key]] * 2,
                    mode="lines",
                    name=f"{name} SLA ({sla[sla_key]:g} ms)",
                    line={"color": SLA_COLOUR, "dash": "dash"},
                ),
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text=f"{name} (ms)", row=row, col=1)
    fig.update_xaxes(title_text=unit.axis_title("Arrival time"), row=len(panels), col=1)
    return Drawn(base_layout(fig, height=560, legend_below=True), how)


# ---------------------------------------------------------------- pools and workers


def _pools(timeseries: pd.DataFrame) -> list[str]:
    found = [str(p) for p in pd.unique(timeseries["pool"].astype(str))]
    order = tuple(Role)
    return sorted(found, key=lambda p: (order.index(p) if p in order else 9, p))


def _pool_load(d: ReplayData) -> PanelOutput:
    timeseries, unit = d.timeseries, d.unit
    panels = [
        (c, label)
        for c, label in (
            ("running", "Running requests"),
            ("waiting", "Waiting requests"),
            ("kv_usage", "KV cache usage (%)"),
        )
        if has(timeseries, "time_s", "pool", c)
    ]
    if not panels:
        return missing(
            timeseries, "timeseries.parquet", "time_s", "pool", "running", "waiting", "kv_usage"
        )
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.06)
    for pool in _pools(timeseries):
        part = timeseries[timeseries["pool"].astype(str) == pool]
        cols = {c: floats(part, c) * (100.0 if c == "kv_usage" else 1.0) for c, _ in panels}
        t, ys = bin_series(floats(part, "time_s"), cols, how="max")
        for row, (c, _) in enumerate(panels, start=1):
            fig.add_trace(
                go.Scatter(
                    x=t / unit.seconds,
                    y=ys[c],
                    mode="lines",
                    name=plain(f"{pool} pool"),
                    legendgroup=plain(pool),
                    showlegend=row == 1,
                    line={"color": pool_colour(pool)},
                ),
                row=row,
                col=1,
            )
    for row, (_, label) in enumerate(panels, start=1):
        fig.update_yaxes(title_text=label, row=row, col=1)
    fig.update_xaxes(title_text=unit.axis_title(), row=len(panels), col=1)
    return base_layout(fig, height=220 * len(panels) + 120, legend_below=True)


def _workers_chart(d: ReplayData) -> PanelOutput:
    timeseries, events, unit = d.timeseries, d.events, d.unit
    states = [s for s in ("ready", "starting", "draining") if has(timeseries, "time_s", "pool", s)]
    if not states:
        return missing(timeseries, "timeseries.parquet", "time_s", "pool", "ready")
    fig = go.Figure()
    for pool in _pools(timeseries):
        part = timeseries[timeseries["pool"].astype(str) == pool]
        t, ys = bin_series(floats(part, "time_s"), {s: floats(part, s) for s in states}, how="max")
        for state in states:
            fig.add_trace(
                go.Scatter(
                    x=t / unit.seconds,
                    y=ys[state],
                    mode="lines",
                    name=plain(f"{pool} {state}"),
                    legendgroup=plain(pool),
                    line={"color": pool_colour(pool), "dash": STATE_DASH[state], "shape": "hv"},
                )
            )
    _add_scaling_markers(fig, events, unit)
    fig.update_xaxes(title_text=unit.axis_title())
    fig.update_yaxes(title_text="Workers", rangemode="tozero")
    return base_layout(fig, height=440, legend_below=True)


def _add_scaling_markers(
    fig: go.Figure, events: Sequence[Mapping[str, Any]], unit: TimeUnit
) -> None:
    if not events:
        return
    frame = pd.DataFrame(list(events))
    if not has(frame, "at_s", "to_count"):
        return
    component = (
        frame["component"].astype(str) if "component" in frame else pd.Series(["?"] * len(frame))
    )
    applied = (
        frame["applied"].astype(bool) if "applied" in frame else pd.Series([True] * len(frame))
    )
    reason = frame["reason"].astype(str) if "reason" in frame else pd.Series([""] * len(frame))
    up = floats(frame, "to_count") >= (floats(frame, "from_count") if "from_count" in frame else 0)
    for pool in sorted(set(component)):
        for is_applied in (True, False):
            mask = (component == pool).to_numpy() & (applied == is_applied).to_numpy()
            if not mask.any():
                continue
            # at most MAX_POINTS markers per trace; every change of target count is kept
            rows = np.flatnonzero(mask)
            rows = rows[thin_events(floats(frame, "to_count")[rows])]
            mask = np.zeros(len(frame), dtype=bool)
            mask[rows] = True
            part = frame[mask]
            fig.add_trace(
                go.Scatter(
                    x=floats(part, "at_s") / unit.seconds,
                    y=floats(part, "to_count"),
                    mode="markers",
                    name=plain(f"{pool} {'scaling' if is_applied else 'advisory'} events"),
                    legendgroup=plain(pool),
                    marker={
                        "symbol": [
                            ("triangle-up" if u else "triangle-down")
                            + ("" if is_applied else "-open")
                            for u in up[mask]
                        ],
                        "size": 10,
                        "color": pool_colour(pool),
                        "line": {"width": 1.5, "color": pool_colour(pool)},
                    },
                    text=[plain(r) for r in reason[mask]],
                    hovertemplate="to %{y} workers: %{text}<extra></extra>",
                )
            )


def _prefix_reuse(d: ReplayData) -> PanelOutput:
    requests, timeseries, summary, unit = d.requests, d.timeseries, d.summary, d.unit
    by_request = has(requests, "reused_input_tokens", "input_length") and first_column(
        requests, ("first_admit_ms", "arrival_ms")
    )
    if by_request:
        how = (
            "Share of input tokens found in the prefix cache, over the requests admitted in each "
            "time bin (token-weighted; a bin where nothing was admitted is a gap). The dotted "
            "line is the whole run's reuse from the summary."
        )
    else:
        how = (
            "Share of admitted input tokens found in the prefix cache, per pool (averaged per "
            "time bin on long runs). The dotted line is the whole run's reuse from the summary."
        )
    if not by_request and not has(timeseries, "time_s", "pool", "prefix_reuse"):
        return missing(timeseries, "timeseries.parquet", "time_s", "pool", "prefix_reuse")
    fig = go.Figure()
    if by_request:
        t, reuse, width = _reuse_by_admission(requests)
        fig.add_trace(
            go.Scatter(
                x=t / unit.seconds,
                y=reuse * 100.0,
                mode="lines",
                name=f"reuse ({width:g} s bins)",
                line={"color": ACTUAL_COLOUR, "shape": "hv"},
            )
        )
    else:
        for pool in _pools(timeseries):
            part = timeseries[timeseries["pool"].astype(str) == pool]
            t, ys = bin_series(floats(part, "time_s"), {"r": floats(part, "prefix_reuse") * 100.0})
            fig.add_trace(
                go.Scatter(
                    x=t / unit.seconds,
                    y=ys["r"],
                    mode="lines",
                    name=plain(f"{pool} reuse"),
                    line={"color": pool_colour(pool)},
                )
            )
    overall = summary.get("prefix_cache_reused_ratio")
    if isinstance(overall, (int, float)) and np.isfinite(overall):
        fig.add_hline(
            y=float(overall) * 100.0,
            line={"dash": "dot", "color": SLA_COLOUR},
            annotation_text=f"run overall {float(overall) * 100:.1f}%",
            annotation_position="top left",
        )
    fig.update_xaxes(title_text=unit.axis_title("Admission time"))
    fig.update_yaxes(title_text="Input tokens reused (%)", range=[0, 102])
    return Drawn(base_layout(fig, height=380), how)


def _reuse_by_admission(requests: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, float]:
    """(bin start s, reused / input tokens of the requests admitted in the bin, bin width s);
    NaN (a gap) in a bin without input tokens."""
    column = first_column(requests, ("first_admit_ms", "arrival_ms"))
    admit_s = floats(requests, column) / 1000.0
    keep = np.isfinite(admit_s)
    width = bin_width_s(float(admit_s[keep].max()) if keep.any() else 0.0, max_bins=300)
    bins = np.floor(admit_s[keep] / width).astype(np.int64)
    reused = np.bincount(bins, weights=np.nan_to_num(floats(requests, "reused_input_tokens")[keep]))
    total = np.bincount(bins, weights=np.nan_to_num(floats(requests, "input_length")[keep]))
    share = np.divide(reused, total, out=np.full(len(total), np.nan), where=total > 0)
    return np.arange(len(total)) * width, share, width


_BALANCE_HOW = (
    "One bar per worker (pool:id), coloured by pool: requests served, then input and output "
    "tokens processed. Even bars within a pool mean the router spread load well; workers "
    "provisioned late by the planner naturally serve less."
)


def _load_balance(d: ReplayData) -> PanelOutput:
    workers, how = d.workers, _BALANCE_HOW
    if not has(workers, "worker_id", "requests"):
        return missing(workers, "workers.parquet", "worker_id", "requests")
    frame = workers.copy()
    frame["pool"] = frame["pool"].astype(str) if "pool" in frame else "workers"
    frame = frame.sort_values(["pool", "worker_id"], kind="stable")
    if len(frame) > MAX_POINTS:
        frame = frame.nlargest(MAX_POINTS, "requests").sort_values(
            ["pool", "worker_id"], kind="stable"
        )
        how += f" Only the {MAX_POINTS} busiest of {len(workers)} workers are shown."
    labels = [plain(f"{p}:{w}") for p, w in zip(frame["pool"], frame["worker_id"], strict=True)]
    colours = [pool_colour(p) for p in frame["pool"]]
    panels = [("requests", "Requests")] + [
        (c, label)
        for c, label in (("input_tokens", "Input tokens"), ("output_tokens", "Output tokens"))
        if c in frame.columns
    ]
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.06)
    for row, (column, label) in enumerate(panels, start=1):
        fig.add_trace(
            go.Bar(x=labels, y=floats(frame, column), name=label, marker={"color": colours}),
            row=row,
            col=1,
        )
        fig.update_yaxes(title_text=label, row=row, col=1)
    fig.update_xaxes(title_text="Worker (pool:id)", type="category", row=len(panels), col=1)
    layout = base_layout(fig, height=200 * len(panels) + 120)
    layout.update_layout(hovermode="closest", showlegend=False)
    return Drawn(layout, how)


# ---------------------------------------------------------------- tables


def _request_tables(page: Page, requests: pd.DataFrame | None) -> None:
    if requests is None or len(requests) == 0:
        return
    if "status" in requests.columns:
        reason = (
            requests["reason"].astype("string").fillna("").astype(str)
            if "reason" in requests.columns
            else ""
        )
        counts = (
            pd.DataFrame({"status": requests["status"].astype(str), "reason": reason})
            .value_counts(sort=False)
            .sort_index()
        )
        page.table(
            "Requests by outcome",
            ["status", "reason", "requests"],
            [[s, r, int(n)] for (s, r), n in counts.items()],
            "Completed requests have no reason; rejected ones could never fit a worker; "
            "incomplete ones were still running when the replay ended, or (closed loop) were "
            "never released because they waited on a rejected request.",
        )
    column = first_column(requests, ("e2e_latency_ms", "e2e_ms"))
    if column is None:
        return
    slowest = requests.assign(_e2e=floats(requests, column)).nlargest(10, "_e2e")
    # Shown only when they say something: a session, a release before the arrival.
    telling = {
        "session_id": "session_id" in slowest and bool((slowest["session_id"] != "").any()),
        "release_ms": not _released_on_arrival(requests),
    }
    shown = [
        c
        for c in (
            "request_id",
            "session_id",
            "release_ms",
            "arrival_ms",
            "ttft_ms",
            "tpot_ms",
            "input_length",
            "output_length",
        )
        if c in slowest and telling.get(c, True)
    ]
    page.table(
        "Slowest requests (end-to-end)",
        [column_label(c) for c in [*shown, column]],
        [[_cell_value(row[c]) for c in [*shown, column]] for _, row in slowest.iterrows()],
        "The ten completed requests with the longest end-to-end latency, with their shape, "
        "to look up in the trace.",
    )


def _released_on_arrival(requests: pd.DataFrame) -> bool:
    """True when no request waited between its release and its arrival (no concurrency cap):
    the release column would repeat the arrival column."""
    if not has(requests, "release_ms"):
        return True
    wait = floats(requests, "arrival_ms") - floats(requests, "release_ms")
    return not bool(np.nanmax(np.abs(wait), initial=0.0) > 0)


_SESSION_HOW = (
    "Session total: the share of sessions (y) whose time from the release of their first "
    "turn to the last token of their last is at most x; it includes think and tool times, so "
    "it is what a user of the session waited in all."
)
_CAP_WAIT_HOW = (
    "Wait at the cap (--max-concurrency): how long released requests waited for a free slot "
    "before they entered the cluster; their latencies count from entry."
)


def _closed_loop(d: ReplayData) -> PanelOutput:
    """Session total times (completed sessions) and, under a concurrency cap, each request's
    wait between release and arrival; CDFs."""
    sessions, requests = d.sessions, d.requests
    totals = floats(sessions, "total_ms") if has(sessions, "total_ms") else np.empty(0)
    waits = np.empty(0)
    if requests is not None and not _released_on_arrival(requests):
        waits = floats(requests, "arrival_ms") - floats(requests, "release_ms")
    totals, waits = totals[np.isfinite(totals)], waits[np.isfinite(waits)]
    if totals.size == 0 and waits.size == 0:
        return (
            "Not shown: an open-loop replay without a concurrency cap (every request "
            "entered the cluster at its trace arrival) has no sessions or release waits."
        )
    shown = [
        (name, values, what)
        for name, values, what in (
            ("Session total", totals, "first release to last token, completed sessions"),
            ("Wait at the cap", waits, "release to arrival, per request"),
        )
        if values.size
    ]
    fig = make_subplots(
        rows=1,
        cols=len(shown),
        horizontal_spacing=0.1,
        subplot_titles=[f"{n}: {w}" for n, _, w in shown],
    )
    for col, (name, values, _) in enumerate(shown, start=1):
        x, p = quantile_cdf(values / 1000.0)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=p * 100.0,
                mode="lines",
                name=name,
                showlegend=False,
                line={"color": PERCENTILE_COLOURS[50.0]},
                hovertemplate="%{x:.2f} s: %{y:.1f}%<extra>" + name + "</extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(title_text=f"{name} (s)", row=1, col=col)
    fig.update_yaxes(title_text="At or below (%)", range=[0, 101], row=1, col=1)
    layout = base_layout(fig, height=400)
    layout.update_layout(hovermode="closest", margin={"t": 70})
    guides = {"Session total": _SESSION_HOW, "Wait at the cap": _CAP_WAIT_HOW}
    return Drawn(layout, " ".join(guides[name] for name, _, _ in shown))


def _cell_value(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value


PANELS: tuple[Panel, ...] = (
    Panel(
        "traffic",
        "Request rate and output tokens/s over time",
        "Top: requests arriving per second; bottom: output tokens generated per second, both "
        "averaged over the bin width in the axis title. Peaks in the top panel that the bottom "
        "panel does not follow mean the deployment fell behind.",
        ("requests.arrival_ms", "timeseries.output_tok_s"),
        _traffic_chart,
    ),
    Panel(
        "latency_cdf",
        "Latency distributions (CDF) with SLA targets",
        "Each curve gives the share of completed requests (y) at or below a latency (x, log "
        "scale). The red dashed line is the SLA target; where a curve crosses it is the share "
        "of requests that met it (also in the legend).",
        ("requests.ttft_ms", "requests.tpot_ms", "requests.e2e_latency_ms"),
        _latency_cdfs,
    ),
    Panel(
        "latency_percentiles",
        "TTFT and TPOT percentiles over time",
        "Percentiles of the completed requests per arrival-time bin.",
        ("requests.arrival_ms", "requests.ttft_ms", "requests.tpot_ms"),
        _latency_over_time,
    ),
    Panel(
        "pool_load",
        "Running and waiting requests and KV cache usage per pool",
        "Per pool, summed over its workers (KV usage: mean over ready workers). Waiting requests "
        "that stay above zero, or KV usage near 100%, mean the pool is the bottleneck. Long runs "
        "show the maximum of each time bin so spikes stay visible.",
        ("timeseries.running", "timeseries.waiting", "timeseries.kv_usage"),
        _pool_load,
    ),
    Panel(
        "workers",
        "Workers over time, with scaling events",
        "Lines: ready (solid), starting (dotted) and draining (dashed) workers per pool. "
        "Triangles mark scaling decisions at their target count (up or down); hollow triangles "
        "are advisory recommendations that were not applied.",
        ("timeseries.ready", "timeseries.starting", "timeseries.draining", "scaling_events"),
        _workers_chart,
    ),
    Panel(
        "prefix_reuse",
        "Prefix-cache reuse over time",
        "Share of input tokens found in the prefix cache.",
        ("requests.reused_input_tokens", "requests.input_length", "timeseries.prefix_reuse"),
        _prefix_reuse,
    ),
    Panel(
        "closed_loop",
        "Sessions and release (closed loop, concurrency cap)",
        f"{_SESSION_HOW} {_CAP_WAIT_HOW}",
        ("sessions.total_ms", "requests.release_ms", "requests.arrival_ms"),
        _closed_loop,
    ),
    Panel(
        "worker_balance",
        "Per-worker load balance",
        _BALANCE_HOW,
        ("workers.requests", "workers.input_tokens", "workers.output_tokens"),
        _load_balance,
    ),
)


def _read_folder(tables: FolderTables) -> bool:
    requests, timeseries = tables.parquet(REQUESTS_TABLE), tables.parquet(TIMESERIES_TABLE)
    tables.parquet(WORKERS_TABLE)
    tables.parquet(SESSIONS_TABLE)
    return requests is not None or timeseries is not None


def _write_folder(tables: FolderTables, out: FolderOutput) -> list[Path]:
    summary = tables.summary if isinstance(tables.summary, dict) else {}
    return [
        out.write_html(
            REPLAY_REPORT,
            lambda src: render_replay(
                tables.parquet(REQUESTS_TABLE),
                tables.parquet(TIMESERIES_TABLE),
                tables.parquet(WORKERS_TABLE),
                summary,
                tables.inputs,
                tables.scaling_events,
                sessions=tables.parquet(SESSIONS_TABLE),
                plotly_src=src,
            ),
        )
    ]


# ``report.html``: the folder has a requests or a timeseries table.
FOLDER_REPORT = FolderReport((REQUESTS_TABLE, TIMESERIES_TABLE), _read_folder, _write_folder)
