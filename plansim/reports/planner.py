"""The planner diagnostics report: the 6 x 2 grid of the reference ``DiagnosticsRecorder``
(``spec/reference/planner_core.md`` section 6.2) drawn from the ``ticks`` table, plus advisory
recommendations over the replica counts, and the tick log as a ``.log.jsonl.gz`` sidecar.

``ticks`` has one row per planner tick: ``at_s`` (planner seconds) and the planner's diagnostics
columns. Columns are looked up by the names below (first match wins); a panel whose columns are
all absent shows "no data" instead of failing.

Reports can be cut like the reference recorder: ``planner_report_periods`` splits the ticks
every ``report_interval_hours`` of planner time (a report is due when now - last report >=
interval, the first reference being the first tick; the due tick closes its period; the rest
is flushed at the end), and ``write_planner_reports`` writes one report and log per period.
"""

from __future__ import annotations

import gzip
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from plansim.io import atomic_write_bytes, atomic_write_text
from plansim.reports.page import Page, plain
from plansim.reports.sampling import MAX_POINTS, TimeUnit, bin_series, thin_events, time_unit
from plansim.reports.style import PALETTE, SLA_COLOUR, base_layout, pool_colour
from plansim.reports.tables import first_column, floats, has

SNAPSHOT_CAP = 50_000  # the reference recorder keeps the last 50,000 snapshots per report
MAX_ENGINES = 10  # engine lines per load panel (the busiest)

TITLES = (
    "Replica Counts",
    "Request Rate (Observed vs Predicted)",
    "Observed TTFT vs SLA",
    "Observed ITL vs SLA",
    "Estimated TTFT vs SLA",
    "Estimated ITL vs SLA",
    "Prefill Engine Load (queued prefill tokens)",
    "Decode Engine Load (queued + inflight decode KV tokens)",
    "Engine Capacity (req/s)",
    "Sequence Lengths (Observed vs Predicted)",
    "Load Scaling Decisions",
    "Throughput Scaling Decisions",
)

# Column spellings accepted for each quantity, first match wins.
COLUMNS: dict[str, tuple[str, ...]] = {
    "ready_prefill": ("ready_prefill", "num_prefill_ready", "prefill_replicas"),
    "ready_decode": ("ready_decode", "num_decode_ready", "decode_replicas"),
    "lb_prefill": ("throughput_lower_bound_prefill",),
    "lb_decode": ("throughput_lower_bound_decode",),
    "rec_prefill": ("recommended_prefill", "advisory_prefill"),
    "rec_decode": ("recommended_decode", "advisory_decode"),
    "observed_rps": ("observed_rps", "observed_request_rate"),
    "observed_num_req": ("observed_num_req", "traffic_num_req", "num_req"),
    "traffic_duration_s": ("traffic_duration_s", "observed_duration_s", "duration_s"),
    "predicted_rps": ("predicted_rps", "predicted_request_rate"),
    "predicted_num_req": ("predicted_num_req",),
    "throughput_interval_s": ("throughput_interval_s", "throughput_adjustment_interval"),
    "observed_ttft_ms": ("observed_ttft_ms", "ttft_ms"),
    "observed_itl_ms": ("observed_itl_ms", "itl_ms"),
    "estimated_ttft_ms": ("estimated_ttft_ms",),
    "estimated_itl_ms": ("estimated_itl_ms",),
    "engine_rps_prefill": ("engine_rps_prefill",),
    "engine_rps_decode": ("engine_rps_decode",),
    "observed_isl": ("observed_isl", "isl"),
    "observed_osl": ("observed_osl", "osl"),
    "predicted_isl": ("predicted_isl",),
    "predicted_osl": ("predicted_osl",),
    "gpu_hours": ("gpu_hours", "cumulative_gpu_hours"),
    "kv_capacity": ("max_kv_tokens", "decode_kv_capacity_tokens"),
    "engines": ("engine_queues", "engines"),
    "queued_prefill_total": ("queued_prefill_tokens",),
    "decode_kv_total": ("decode_kv_tokens",),
    "scale_to_prefill": ("scale_to_prefill",),
    "scale_to_decode": ("scale_to_decode",),
    "advisory": ("advisory",),
    "ttft_sla_ms": ("ttft_sla_ms",),
    "itl_sla_ms": ("itl_sla_ms",),
}

LOAD_COLOURS = {
    "scale_up": "green",
    "scale_down": "blue",
    "capped": "purple",
    "no_change": "gray",
    "disabled": "lightgray",
    "no_fpm_data": "gold",
    "scaling_in_progress": "orange",
    "worker_count_mismatch": "red",
    "insufficient_data": "pink",
}
THROUGHPUT_COLOURS = {
    "scale": "green",
    "set_lower_bound": "blue",
    "disabled": "lightgray",
    "no_traffic_data": "gold",
    "predict_failed": "red",
    "model_not_ready": "orange",
    "partner_not_ready": "pink",
}
_ROLE_Y = {"prefill": 2, "decode": 1}


def planner_report_periods(at_s: np.ndarray, interval_s: float) -> list[tuple[int, int]]:
    """Row ranges ``[start, stop)`` of the periodic reports over ticks at ``at_s`` (sorted).

    A report is due at the first tick with ``at_s - last_report >= interval_s`` (the first
    reference point is the first tick) and includes that tick; the ticks left at the end form
    the last report. ``interval_s <= 0`` gives one period with every tick."""
    n = len(at_s)
    if n == 0:
        return []
    if interval_s <= 0:
        return [(0, n)]
    periods: list[tuple[int, int]] = []
    start, last_report = 0, float(at_s[0])
    for i in range(n):
        if float(at_s[i]) - last_report >= interval_s - 1e-9:
            periods.append((start, i + 1))
            start, last_report = i + 1, float(at_s[i])
    if start < n:
        periods.append((start, n))
    return periods


def tick_log_bytes(ticks: pd.DataFrame) -> bytes:
    """The tick log: one JSON object per tick and line, gzip-compressed (no timestamp in the
    gzip header, so equal tables give equal bytes). NaN becomes null."""
    opts = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    lines = b"".join(
        orjson.dumps(_jsonable(row), option=opts) + b"\n" for row in ticks.to_dict("records")
    )
    return gzip.compress(lines, compresslevel=6, mtime=0)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def write_planner_reports(
    ticks: pd.DataFrame,
    out_dir: str | Path,
    report_interval_hours: float,
    *,
    scaling_events: Sequence[Mapping[str, Any]] | None = None,
    sla: Mapping[str, float] | None = None,
    timeseries: pd.DataFrame | None = None,
    prefix: str = "planner_report",
) -> list[Path]:
    """One report per period of ``report_interval_hours`` of planner time (see
    ``planner_report_periods``), as ``<prefix>_<NNN>.html`` with ``<prefix>_<NNN>.log.jsonl.gz``
    beside it, written atomically into ``out_dir``. Returns the paths written; none when the
    interval is not positive (the recorder is off) or there are no ticks."""
    if report_interval_hours is None or report_interval_hours <= 0 or not has(ticks, "at_s"):
        return []
    ordered = ticks.sort_values("at_s", kind="stable")
    periods = planner_report_periods(floats(ordered, "at_s"), report_interval_hours * 3600.0)
    written: list[Path] = []
    for k, (start, stop) in enumerate(periods, start=1):
        part = ordered.iloc[start:stop]
        lo, hi = float(part["at_s"].iloc[0]), float(part["at_s"].iloc[-1])
        events = [e for e in scaling_events or [] if lo <= float(e.get("at_s", np.nan)) <= hi]
        span = None
        if has(timeseries, "time_s"):
            time_s = floats(timeseries, "time_s")
            span = timeseries[(time_s >= lo) & (time_s <= hi)]
        base = Path(out_dir) / f"{prefix}_{k:03d}"
        written += write_planner_report(part, base, scaling_events=events, sla=sla, timeseries=span)
    return written


def write_planner_report(
    ticks: pd.DataFrame,
    base: str | Path,
    *,
    scaling_events: Sequence[Mapping[str, Any]] | None = None,
    sla: Mapping[str, float] | None = None,
    timeseries: pd.DataFrame | None = None,
) -> list[Path]:
    """``<base>.html`` and ``<base>.log.jsonl.gz`` for ``ticks``, written atomically."""
    base = Path(base)
    html_path = atomic_write_text(
        base.with_name(base.name + ".html"),
        render_planner(ticks, scaling_events=scaling_events, sla=sla, timeseries=timeseries),
    )
    log_path = atomic_write_bytes(
        base.with_name(base.name + ".log.jsonl.gz"), tick_log_bytes(ticks)
    )
    return [html_path, log_path]


def render_planner(
    ticks: pd.DataFrame,
    *,
    scaling_events: Sequence[Mapping[str, Any]] | None = None,
    sla: Mapping[str, float] | None = None,
    timeseries: pd.DataFrame | None = None,
) -> str:
    """The planner diagnostics report (HTML str) for ``ticks`` (the last ``SNAPSHOT_CAP`` rows,
    as the reference recorder keeps). ``sla`` holds ``ttft_ms``/``itl_ms`` targets;
    ``timeseries`` (optional) stands in for per-engine load when ticks have no engine list."""
    ticks = ticks.sort_values("at_s", kind="stable").iloc[-SNAPSHOT_CAP:]
    cols = {key: first_column(ticks, names) for key, names in COLUMNS.items()}
    sla = {**_sla_from_ticks(ticks, cols), **dict(sla or {})}
    at_s = floats(ticks, "at_s")
    unit = time_unit(float(at_s[-1] - at_s[0]) if len(at_s) else 0.0)
    page = Page(
        "plansim planner diagnostics",
        "What the planner saw, estimated and decided at each tick. Times are planner seconds "
        "from the start of the replay.",
    )
    _title_block(page, ticks, cols, at_s, sla, scaling_events or [])
    fig = make_subplots(
        rows=6, cols=2, subplot_titles=TITLES, vertical_spacing=0.05, horizontal_spacing=0.08
    )
    grid = _Grid(fig, ticks, cols, at_s, unit)
    grid.replicas(scaling_events or [])
    grid.request_rate()
    grid.against_sla(2, 1, "observed_ttft_ms", sla.get("ttft_ms"), "TTFT (ms)", "observed TTFT")
    grid.against_sla(2, 2, "observed_itl_ms", sla.get("itl_ms"), "ITL (ms)", "observed ITL")
    grid.against_sla(3, 1, "estimated_ttft_ms", sla.get("ttft_ms"), "TTFT (ms)", "estimated TTFT")
    grid.against_sla(3, 2, "estimated_itl_ms", sla.get("itl_ms"), "ITL (ms)", "estimated ITL")
    grid.engine_load(timeseries)
    grid.capacity()
    grid.sequence_lengths()
    grid.decisions(6, 1, "load", LOAD_COLOURS, "square")
    grid.decisions(6, 2, "throughput", THROUGHPUT_COLOURS, "diamond")
    for row in range(1, 7):
        for col in (1, 2):
            fig.update_xaxes(title_text=unit.axis_title("Planner time"), row=row, col=col)
    layout = base_layout(fig, height=2000)
    layout.update_layout(
        hovermode="closest",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.01, "xanchor": "left", "x": 0},
        margin={"t": 110, "b": 50},
    )
    page.chart(
        "planner_grid",
        "Planner diagnostics (6 x 2)",
        "Row 1: replicas and demand; rows 2-3: latency against the SLA (red dashed); row 4: "
        "per-engine queues; row 5: what one engine can serve and the traffic shape; row 6: each "
        "tick's decision, coloured by reason (hover for the reason). Hollow circles on the "
        "replica panel are advisory recommendations.",
        layout,
    )
    return page.render()


def _sla_from_ticks(ticks: pd.DataFrame, cols: dict[str, str | None]) -> dict[str, float]:
    found = {}
    for key in ("ttft_ms", "itl_ms"):
        column = cols.get(f"{key.split('_')[0]}_sla_ms")
        if column is not None:
            values = floats(ticks, column)
            values = values[np.isfinite(values) & (values > 0)]
            if values.size:
                found[key] = float(values[-1])
    return found


def _title_block(
    page: Page,
    ticks: pd.DataFrame,
    cols: dict[str, str | None],
    at_s: np.ndarray,
    sla: dict[str, float],
    events: Sequence[Mapping[str, Any]],
) -> None:
    rows: list[tuple[str, Any]] = [
        (
            "time range (planner s)",
            f"{at_s[0]:,.1f} to {at_s[-1]:,.1f}" if len(at_s) else "no ticks",
        ),
        ("ticks", len(ticks)),
    ]
    if cols["gpu_hours"]:
        rows.append(("GPU hours (last tick)", float(floats(ticks, cols["gpu_hours"])[-1])))
    rows.append(("SLA targets", ", ".join(f"{k} = {v:g}" for k, v in sla.items()) or "not set"))
    advisory = [e for e in events if not bool(e.get("applied", True))]
    if advisory:
        rows.append(("advisory recommendations", len(advisory)))
    page.key_values("Planner run", rows)
    transitions = []
    for role in ("prefill", "decode"):
        column = cols[f"ready_{role}"]
        if column is None:
            continue
        ready = floats(ticks, column)
        changed = np.flatnonzero(np.isfinite(ready[1:]) & (ready[1:] != ready[:-1])) + 1
        transitions += [(float(at_s[i]), role, _int(ready[i - 1]), _int(ready[i])) for i in changed]
    transitions.sort(key=lambda r: r[0])
    if transitions:
        shown = transitions[:200]
        page.table(
            "Replica transitions (ready counts)",
            ["at (planner s)", "role", "from", "to"],
            shown,
            "Actual changes in ready replicas, not decisions"
            + (f"; the first 200 of {len(transitions)}." if len(transitions) > 200 else "."),
        )


def _int(x: float) -> int | float:
    return int(x) if np.isfinite(x) else x


class _Grid:
    """Fills the 6 x 2 subplot grid; each method draws one or two panels."""

    def __init__(
        self,
        fig: go.Figure,
        ticks: pd.DataFrame,
        cols: dict[str, str | None],
        at_s: np.ndarray,
        unit: TimeUnit,
    ) -> None:
        self.fig, self.ticks, self.cols, self.at_s, self.unit = fig, ticks, cols, at_s, unit

    def _series(self, key: str) -> np.ndarray | None:
        column = self.cols.get(key)
        return None if column is None else floats(self.ticks, column)

    def _line(
        self,
        row: int,
        col: int,
        y: np.ndarray,
        name: str,
        colour: str,
        dash: str = "solid",
        how: str = "mean",
        shape: str = "linear",
        group: str | None = None,
    ) -> None:
        t, ys = bin_series(self.at_s, {"y": y}, how=how)
        self.fig.add_trace(
            go.Scatter(
                x=t / self.unit.seconds,
                y=ys["y"],
                mode="lines",
                name=plain(name),
                legendgroup=group,
                line={"color": colour, "dash": dash, "shape": shape},
            ),
            row=row,
            col=col,
        )

    def _empty(self, row: int, col: int, what: str) -> None:
        self.fig.add_annotation(
            text=html.escape(f"no data: {what}"),
            showarrow=False,
            font={"color": "#8a5a00"},
            xref="x domain",
            yref="y domain",
            x=0.5,
            y=0.5,
            row=row,
            col=col,
        )

    def replicas(self, events: Sequence[Mapping[str, Any]]) -> None:
        drawn = False
        for role in ("prefill", "decode"):
            ready = self._series(f"ready_{role}")
            if ready is not None:
                self._line(
                    1,
                    1,
                    ready,
                    f"{role} replicas",
                    pool_colour(role),
                    how="max",
                    shape="hv",
                    group=role,
                )
                drawn = True
            bound = self._series(f"lb_{role}")
            if bound is not None and np.nanmax(bound, initial=0) > 1:
                self._line(
                    1,
                    1,
                    bound,
                    f"{role} TP lower bound",
                    pool_colour(role),
                    "dash",
                    how="max",
                    shape="hv",
                    group=role,
                )
            rec = self._series(f"rec_{role}")
            advisory, target = self.cols.get("advisory"), self._series(f"scale_to_{role}")
            if rec is None and advisory is not None and target is not None:
                flags = self.ticks[advisory].astype("boolean").fillna(False).to_numpy(dtype=bool)
                rec = np.where(flags, target, np.nan) if flags.any() else None
            if rec is not None and np.isfinite(rec).any():
                self._markers(1, 1, self.at_s, rec, f"{role} recommended", pool_colour(role))
                continue
            components = (role, "agg") if role == "decode" else (role,)
            recs = [
                e
                for e in events
                if not bool(e.get("applied", True)) and str(e.get("component")) in components
            ]
            if recs:
                self._markers(
                    1,
                    1,
                    np.array([float(e["at_s"]) for e in recs]),
                    np.array([float(e["to_count"]) for e in recs]),
                    f"{role} advisory",
                    pool_colour(role),
                )
        if not drawn:
            self._empty(1, 1, "ready replica columns")
        self.fig.update_yaxes(title_text="Replicas", rangemode="tozero", row=1, col=1)

    def _markers(
        self, row: int, col: int, t: np.ndarray, y: np.ndarray, name: str, colour: str
    ) -> None:
        keep = np.isfinite(y)
        idx = thin_events(y[keep])
        self.fig.add_trace(
            go.Scatter(
                x=t[keep][idx] / self.unit.seconds,
                y=y[keep][idx],
                mode="markers",
                name=plain(name),
                marker={"symbol": "circle-open", "size": 9, "color": colour, "line": {"width": 2}},
            ),
            row=row,
            col=col,
        )

    def request_rate(self) -> None:
        observed = self._series("observed_rps")
        if observed is None:
            num, dur = self._series("observed_num_req"), self._series("traffic_duration_s")
            if num is not None and dur is not None:
                observed = np.where(dur > 0, num / np.where(dur > 0, dur, 1.0), np.nan)
        predicted = self._series("predicted_rps")
        if predicted is None:
            num, dur = self._series("predicted_num_req"), self._series("throughput_interval_s")
            if num is not None and dur is not None:
                predicted = np.where(dur > 0, num / np.where(dur > 0, dur, 1.0), np.nan)
        if observed is not None:
            self._line(1, 2, observed, "observed req/s", "#222222")
        if predicted is not None:
            self._line(1, 2, predicted, "predicted req/s", "#8172b3", "dot")
        if observed is None and predicted is None:
            self._empty(1, 2, "request rate columns")
        self.fig.update_yaxes(title_text="Requests/s", rangemode="tozero", row=1, col=2)

    def against_sla(
        self, row: int, col: int, key: str, target: float | None, axis: str, name: str
    ) -> None:
        y = self._series(key)
        if y is None:
            self._empty(row, col, key)
        else:
            self._line(row, col, y, name, PALETTE[0] if "TTFT" in axis else PALETTE[2])
            if target is not None and len(self.at_s):
                self.fig.add_trace(
                    go.Scatter(
                        x=[self.at_s[0] / self.unit.seconds, self.at_s[-1] / self.unit.seconds],
                        y=[target, target],
                        mode="lines",
                        name=f"{axis.split()[0]} SLA {target:g} ms",
                        line={"color": SLA_COLOUR, "dash": "dash"},
                        legendgroup="sla",
                        showlegend=(row, col) in ((2, 1), (2, 2)),
                    ),
                    row=row,
                    col=col,
                )
        self.fig.update_yaxes(title_text=axis, rangemode="tozero", row=row, col=col)

    def engine_load(self, timeseries: pd.DataFrame | None) -> None:
        """Row 4: one line per engine (``worker:dpN``) from the per-tick engine list; else the
        per-tick totals; else the pool totals of the replay time series."""
        engines = self.cols.get("engines")
        per_engine = _engine_frame(self.ticks, engines, self.at_s) if engines else None
        specs = (
            (
                4,
                1,
                "prefill",
                ("queued_prefill_tokens",),
                "queued_prefill_total",
                "Queued prefill tokens",
            ),
            (
                4,
                2,
                "decode",
                ("queued_decode_kv_tokens", "inflight_decode_kv_tokens", "sum_decode_kv_tokens"),
                "decode_kv_total",
                "Decode KV tokens",
            ),
        )
        for row, col, role, fields, total_key, axis in specs:
            drawn = self._engine_lines(row, col, role, per_engine, fields)
            total = self._series(total_key)
            if not drawn and total is not None:
                self._line(row, col, total, f"all {role} engines", pool_colour(role), how="max")
                drawn = True
            if (
                not drawn
                and role == "prefill"
                and has(timeseries, "time_s", "pool", "queued_prefill_tokens")
            ):
                pools = timeseries[timeseries["pool"].astype(str).isin(["prefill", "agg"])]
                for name, part in pools.groupby(pools["pool"].astype(str), sort=True):
                    t, ys = bin_series(
                        floats(part, "time_s"),
                        {"y": floats(part, "queued_prefill_tokens")},
                        how="max",
                    )
                    self.fig.add_trace(
                        go.Scatter(
                            x=t / self.unit.seconds,
                            y=ys["y"],
                            mode="lines",
                            name=plain(f"{name} pool total"),
                            line={"color": pool_colour(name)},
                        ),
                        row=row,
                        col=col,
                    )
                    drawn = True
            capacity = self._series("kv_capacity")
            if role == "decode" and drawn and capacity is not None and np.isfinite(capacity).any():
                self._line(row, col, capacity, "KV capacity per engine", SLA_COLOUR, "dash")
            if not drawn:
                self._empty(row, col, "per-engine forward-pass metrics")
            self.fig.update_yaxes(title_text=axis, rangemode="tozero", row=row, col=col)

    def _engine_lines(
        self,
        row: int,
        col: int,
        role: str,
        per_engine: pd.DataFrame | None,
        fields: tuple[str, ...],
    ) -> bool:
        if per_engine is None:
            return False
        part = per_engine
        if "role" in part.columns:
            part = part[part["role"].astype(str).isin([role, "agg"])]
        present = [f for f in fields if f in part.columns]
        if not present or part.empty:
            return False
        load = part.assign(_load=sum(np.nan_to_num(floats(part, f)) for f in present))
        peak = load.groupby("engine", sort=True)["_load"].max()
        # Engines that never carry this load (decode workers in the prefill panel) are left out;
        # the busiest MAX_ENGINES keep the legend readable.
        names = peak[peak > 0].sort_values(ascending=False, kind="stable").index[:MAX_ENGINES]
        for k, name in enumerate(sorted(names, key=str)):
            one = load[load["engine"] == name]
            t, ys = bin_series(floats(one, "at_s"), {"y": floats(one, "_load")}, how="max")
            self.fig.add_trace(
                go.Scatter(
                    x=t / self.unit.seconds,
                    y=ys["y"],
                    mode="lines",
                    name=plain(f"{role} {name}"),
                    legendgroup=f"engines-{role}",
                    line={"color": PALETTE[k % len(PALETTE)]},
                ),
                row=row,
                col=col,
            )
        return len(names) > 0

    def capacity(self) -> None:
        drawn = False
        for role in ("prefill", "decode"):
            y = self._series(f"engine_rps_{role}")
            if y is not None:
                self._line(5, 1, y, f"{role} engine req/s", pool_colour(role), group=role)
                drawn = True
        if not drawn:
            self._empty(5, 1, "engine_rps columns")
        self.fig.update_yaxes(title_text="Req/s per engine", rangemode="tozero", row=5, col=1)

    def sequence_lengths(self) -> None:
        drawn = False
        for key, name, colour, dash in (
            ("observed_isl", "observed ISL", PALETTE[0], "solid"),
            ("predicted_isl", "predicted ISL", PALETTE[0], "dot"),
            ("observed_osl", "observed OSL", PALETTE[1], "solid"),
            ("predicted_osl", "predicted OSL", PALETTE[1], "dot"),
        ):
            y = self._series(key)
            if y is not None:
                self._line(5, 2, y, name, colour, dash)
                drawn = True
        if not drawn:
            self._empty(5, 2, "ISL/OSL columns")
        self.fig.update_yaxes(title_text="Tokens per request", rangemode="tozero", row=5, col=2)

    def decisions(
        self, row: int, col: int, loop: str, colours: dict[str, str], symbol: str
    ) -> None:
        tracks = [
            (role, first_column(self.ticks, (f"{loop}_decision_reason_{role}",)))
            for role in ("prefill", "decode")
        ]
        tracks = [(role, c) for role, c in tracks if c is not None]
        if not tracks:
            aggregate = first_column(self.ticks, (f"{loop}_decision_reason",))
            tracks = [("all", aggregate)] if aggregate else []
        if not tracks:
            self._empty(row, col, f"{loop}_decision_reason columns")
            return
        for role, column in tracks:
            reasons = self.ticks[column].astype("string").fillna("").to_numpy(dtype=object)
            keep = np.flatnonzero(reasons != "")
            idx = keep[thin_events(reasons[keep])]
            y_value = _ROLE_Y.get(role, 1)
            for reason in sorted(set(reasons[idx]), key=str):
                sel = idx[reasons[idx] == reason]
                self.fig.add_trace(
                    go.Scatter(
                        x=self.at_s[sel] / self.unit.seconds,
                        y=np.full(len(sel), y_value),
                        mode="markers",
                        name=plain(f"{loop}: {reason}"),
                        legendgroup=f"{loop}-{reason}",
                        showlegend=role == tracks[0][0],
                        marker={
                            "symbol": symbol,
                            "size": 8,
                            "color": colours.get(str(reason), "black"),
                        },
                        hovertemplate=plain(f"{role}: {reason}") + "<extra></extra>",
                    ),
                    row=row,
                    col=col,
                )
        labels = {y: r for r, y in _ROLE_Y.items()} if tracks[0][0] != "all" else {1: "all"}
        self.fig.update_yaxes(
            tickvals=list(labels),
            ticktext=list(labels.values()),
            range=[0.4, max(labels) + 0.6],
            title_text="Component",
            row=row,
            col=col,
        )


def _engine_frame(ticks: pd.DataFrame, column: str, at_s: np.ndarray) -> pd.DataFrame | None:
    """Long table (at_s, role, engine, metric columns) from a per-tick list of engine dicts
    (``role``, ``worker_id``, ``dp_rank`` plus FPM fields)."""
    rows: list[dict[str, Any]] = []
    step = max(1, len(ticks) // MAX_POINTS)
    for t, entries in zip(at_s[::step], ticks[column].to_numpy(dtype=object)[::step], strict=True):
        if isinstance(entries, (str, bytes)):
            try:
                entries = orjson.loads(entries)
            except orjson.JSONDecodeError:
                continue
        if not isinstance(entries, (list, tuple, np.ndarray)):
            continue
        for entry in entries:
            if not isinstance(entry, Mapping):
                continue
            row = dict(entry)
            row["at_s"] = t
            row["engine"] = f"{entry.get('worker_id', '?')}:dp{entry.get('dp_rank', 0)}"
            rows.append(row)
    return pd.DataFrame(rows) if rows else None
