"""The replay report (``report.html``): what ran, the summary, and how the run behaved over time.

Input tables follow the schemas of ``plansim.sim.result``; every chart needs only some columns
and is replaced by a note when they are absent. Long runs stay small on screen: rates and
percentiles are binned in time, CDFs are read off a fixed set of quantiles, and every trace has
at most ``sampling.MAX_POINTS`` points.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from plansim.reports.page import Page, plain
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

_HEADER_ORDER = (
    "command",
    "traces",
    "trace_files",
    "requests",
    "request_count",
    "num_requests",
    "deployment",
    "planner",
    "sla",
    "seed",
)
_REQUEST_COUNT_KEYS = ("requests", "request_count", "num_requests")
NO_COMPLETED = "Not shown: no request completed with a first token."
_STAT_ORDER = ("mean", "min", "median", "p75", "p90", "p95", "p99", "max", "std")
_STAT_KEY = re.compile(r"^(mean|min|max|median|p75|p90|p95|p99|std)_(.+)$")
_POOL_ORDER = ("agg", "prefill", "decode")


def render_replay(
    requests: pd.DataFrame | None,
    timeseries: pd.DataFrame | None = None,
    workers: pd.DataFrame | None = None,
    summary: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    scaling_events: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """The replay report as one self-contained HTML document (str)."""
    summary = dict(summary or {})
    inputs = dict(inputs or {})
    sla = find_sla(inputs, summary)
    unit = time_unit(_span_s(requests, timeseries))
    page = Page(
        "plansim replay report",
        "A replay of a request trace on simulated engines. "
        "Times are virtual, from the first arrival.",
    )
    _header(page, inputs, requests)
    _summary_tables(page, summary)
    _traffic_chart(page, requests, timeseries, unit)
    done = _completed(requests) if requests is not None else None
    _latency_cdfs(page, requests, done, sla)
    _latency_over_time(page, requests, done, sla, unit)
    _pool_load(page, timeseries, unit)
    _workers_chart(page, timeseries, scaling_events or [], unit)
    _prefix_reuse(page, requests, timeseries, summary, unit)
    _load_balance(page, workers)
    _request_tables(page, requests)
    return page.render()


def _span_s(requests: pd.DataFrame | None, timeseries: pd.DataFrame | None) -> float:
    spans = [0.0]
    if has(timeseries, "time_s"):
        spans.append(float(np.nanmax(floats(timeseries, "time_s"))))
    column = first_column(requests, ("last_token_ms", "arrival_ms"))
    if column is not None:
        spans.append(float(np.nanmax(floats(requests, column))) / 1000.0)
    return max(spans)


# ---------------------------------------------------------------- header and summary


def _header(page: Page, inputs: dict[str, Any], requests: pd.DataFrame | None) -> None:
    # Unset values (None, empty blocks) say nothing; one request count is enough.
    shown = {k: v for k, v in inputs.items() if v is not None and v != {} and v != []}
    counts = [k for k in _REQUEST_COUNT_KEYS if k in shown]
    for duplicate in counts[1:]:
        del shown[duplicate]
    keys = [k for k in _HEADER_ORDER if k in shown] + sorted(
        (k for k in shown if k not in _HEADER_ORDER), key=str
    )
    rows: list[tuple[str, Any]] = [(k, shown[k]) for k in keys]
    if requests is not None and not counts:
        rows.insert(0, ("requests", len(requests)))
    if rows:
        page.key_values("Run inputs", rows)
    else:
        page.note("Run inputs", "Not shown: inputs.json is absent or empty.")


def _summary_tables(page: Page, summary: dict[str, Any]) -> None:
    if not summary:
        page.note("Summary", "Not shown: summary.json is absent or empty.")
        return
    stats: dict[str, dict[str, Any]] = {}
    scalars: list[tuple[str, Any]] = []
    for key, value in summary.items():
        match = _STAT_KEY.match(str(key))
        if match and isinstance(value, (int, float)) and not isinstance(value, bool):
            stats.setdefault(match.group(2), {})[match.group(1)] = value
        elif not isinstance(value, (dict, list)):
            scalars.append((str(key), value))
    page.key_values("Summary", scalars)
    if stats:
        page.table(
            "Latency and per-user throughput distributions",
            ["metric", *_STAT_ORDER],
            [
                [name, *(row.get(s, float("nan")) for s in _STAT_ORDER)]
                for name, row in stats.items()
            ],
            "One row per metric of completed requests; the unit is in the metric name "
            "(_ms: milliseconds; output_token_throughput_per_user: tokens/s per request).",
        )


# ---------------------------------------------------------------- traffic


def _traffic_chart(
    page: Page, requests: pd.DataFrame | None, timeseries: pd.DataFrame | None, unit: TimeUnit
) -> None:
    title = "Request rate and output tokens/s over time"
    how = (
        "Top: requests arriving per second; bottom: output tokens generated per second, both "
        "averaged over the bin width in the axis title. Peaks in the top panel that the bottom "
        "panel does not follow mean the deployment fell behind."
    )
    has_rate = has(requests, "arrival_ms")
    has_tok = has(timeseries, "time_s", "output_tok_s")
    if not has_rate and not has_tok:
        page.note(title, missing(requests, "requests.parquet", "arrival_ms"))
        return
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
    page.chart("traffic", title, how, base_layout(fig, height=520, legend_below=True))


# ---------------------------------------------------------------- latency


_LATENCIES = (
    ("TTFT", ("ttft_ms",), "ttft_ms", "time to first token"),
    ("ITL", ("tpot_ms", "itl_ms"), "itl_ms", "mean inter-token latency per request (TPOT)"),
    ("E2E", ("e2e_latency_ms", "e2e_ms"), "e2e_ms", "end-to-end latency"),
)


def _completed(requests: pd.DataFrame) -> pd.DataFrame:
    """The completed rows (all rows of a table without ``status``); the latency charts share it."""
    if "status" in requests.columns:
        return requests[requests["status"].astype(str) == "completed"]
    return requests


def _latency_cdfs(
    page: Page, requests: pd.DataFrame | None, done: pd.DataFrame | None, sla: dict[str, float]
) -> None:
    title = "Latency distributions (CDF) with SLA targets"
    how = (
        "Each curve gives the share of completed requests (y) at or below a latency (x, log "
        "scale). The red dashed line is the SLA target; where a curve crosses it is the share "
        "of requests that met it (also in the legend)."
    )
    if not has(requests, "ttft_ms"):
        page.note(title, missing(requests, "requests.parquet", "ttft_ms"))
        return
    if first_column(done, ("ttft_ms",)) is None:
        page.note(title, NO_COMPLETED)
        return
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
    page.chart("latency_cdf", title, how, layout)


def _latency_over_time(
    page: Page,
    requests: pd.DataFrame | None,
    done: pd.DataFrame | None,
    sla: dict[str, float],
    unit: TimeUnit,
) -> None:
    title = "TTFT and ITL percentiles over time"
    if not has(requests, "arrival_ms", "ttft_ms"):
        page.note(title, missing(requests, "requests.parquet", "arrival_ms", "ttft_ms"))
        return
    if first_column(done, ("ttft_ms",)) is None:
        page.note(title, NO_COMPLETED)
        return
    arrival_s = floats(done, "arrival_ms") / 1000.0
    span = float(np.nanmax(arrival_s))
    width = bin_width_s(span, minimum_s=60.0)
    how = (
        f"Requests grouped by arrival into {width:g}-second bins; each line is one percentile "
        "of the bin's completed requests. A rising p99 with a flat p50 means a tail problem "
        "(queueing), both rising means the deployment is saturated."
    )
    panels = [(name, first_column(done, cols), key) for name, cols, key, _ in _LATENCIES[:2]]
    panels = [p for p in panels if p[1] is not None]
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.08)
    for row, (name, column, sla_key) in enumerate(panels, start=1):
        starts, q = binned_percentiles(arrival_s, floats(done, column), width, (50.0, 90.0, 99.0))
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
    page.chart("latency_percentiles", title, how, base_layout(fig, height=560, legend_below=True))


# ---------------------------------------------------------------- pools and workers


def _pools(timeseries: pd.DataFrame) -> list[str]:
    found = [str(p) for p in pd.unique(timeseries["pool"].astype(str))]
    return sorted(found, key=lambda p: (_POOL_ORDER.index(p) if p in _POOL_ORDER else 9, p))


def _pool_load(page: Page, timeseries: pd.DataFrame | None, unit: TimeUnit) -> None:
    title = "Running and waiting requests and KV cache usage per pool"
    how = (
        "Per pool, summed over its workers (KV usage: mean over ready workers). Waiting requests "
        "that stay above zero, or KV usage near 100%, mean the pool is the bottleneck. Long runs "
        "show the maximum of each time bin so spikes stay visible."
    )
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
        page.note(
            title,
            missing(
                timeseries, "timeseries.parquet", "time_s", "pool", "running", "waiting", "kv_usage"
            ),
        )
        return
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
    page.chart(
        "pool_load", title, how, base_layout(fig, height=220 * len(panels) + 120, legend_below=True)
    )


def _workers_chart(
    page: Page, timeseries: pd.DataFrame | None, events: Sequence[Mapping[str, Any]], unit: TimeUnit
) -> None:
    title = "Workers over time, with scaling events"
    how = (
        "Lines: ready (solid), starting (dotted) and draining (dashed) workers per pool. "
        "Triangles mark scaling decisions at their target count (up or down); hollow triangles "
        "are advisory recommendations that were not applied."
    )
    states = [s for s in ("ready", "starting", "draining") if has(timeseries, "time_s", "pool", s)]
    if not states:
        page.note(title, missing(timeseries, "timeseries.parquet", "time_s", "pool", "ready"))
        return
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
    page.chart("workers", title, how, base_layout(fig, height=440, legend_below=True))


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


def _prefix_reuse(
    page: Page,
    requests: pd.DataFrame | None,
    timeseries: pd.DataFrame | None,
    summary: dict[str, Any],
    unit: TimeUnit,
) -> None:
    title = "Prefix-cache reuse over time"
    by_request = has(requests, "reused_input_tokens", "input_length") and first_column(
        requests, ("first_admit_ms", "arrival_ms")
    )
    if by_request:
        how = (
            "Share of input tokens found in the prefix cache, over the requests admitted in each "
            "time bin (token-weighted). The dotted line is the whole run's reuse from the summary."
        )
    else:
        how = (
            "Share of admitted input tokens found in the prefix cache, per pool (averaged per "
            "time bin on long runs). The dotted line is the whole run's reuse from the summary."
        )
    if not by_request and not has(timeseries, "time_s", "pool", "prefix_reuse"):
        page.note(
            title, missing(timeseries, "timeseries.parquet", "time_s", "pool", "prefix_reuse")
        )
        return
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
    page.chart("prefix_reuse", title, how, base_layout(fig, height=380))


def _reuse_by_admission(requests: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, float]:
    """(bin start s, reused / input tokens of the requests admitted in the bin, bin width s),
    over bins with input tokens."""
    column = first_column(requests, ("first_admit_ms", "arrival_ms"))
    admit_s = floats(requests, column) / 1000.0
    keep = np.isfinite(admit_s)
    width = bin_width_s(float(admit_s[keep].max()) if keep.any() else 0.0, max_bins=300)
    bins = np.floor(admit_s[keep] / width).astype(np.int64)
    reused = np.bincount(bins, weights=np.nan_to_num(floats(requests, "reused_input_tokens")[keep]))
    total = np.bincount(bins, weights=np.nan_to_num(floats(requests, "input_length")[keep]))
    busy = np.flatnonzero(total > 0)
    return busy * width, reused[busy] / total[busy], width


def _load_balance(page: Page, workers: pd.DataFrame | None) -> None:
    title = "Per-worker load balance"
    how = (
        "One bar per worker (pool:id), coloured by pool: requests served, then input and output "
        "tokens processed. "
        "Even bars within a pool mean the router spread load well; workers provisioned late by "
        "the planner naturally serve less."
    )
    if not has(workers, "worker_id", "requests"):
        page.note(title, missing(workers, "workers.parquet", "worker_id", "requests"))
        return
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
    page.chart("worker_balance", title, how, layout)


# ---------------------------------------------------------------- tables


def _request_tables(page: Page, requests: pd.DataFrame | None) -> None:
    if requests is None or len(requests) == 0:
        return
    if "status" in requests.columns:
        reason = requests["reason"].astype(str) if "reason" in requests.columns else ""
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
            "incomplete ones were still running when the replay ended.",
        )
    column = first_column(requests, ("e2e_latency_ms", "e2e_ms"))
    if column is None:
        return
    slowest = requests.assign(_e2e=floats(requests, column)).nlargest(10, "_e2e")
    shown = [
        c
        for c in ("request_id", "arrival_ms", "ttft_ms", "tpot_ms", "input_length", "output_length")
        if c in slowest
    ]
    page.table(
        "Slowest requests (end-to-end)",
        [*shown, column],
        [[_cell_value(row[c]) for c in [*shown, column]] for _, row in slowest.iterrows()],
        "The ten completed requests with the longest end-to-end latency, with their shape, "
        "to look up in the trace.",
    )


def _cell_value(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value
