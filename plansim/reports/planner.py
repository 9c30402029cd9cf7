"""The planner diagnostics report: the 6 x 2 grid of the reference ``DiagnosticsRecorder``
(``spec/reference/planner_core.md`` section 6.2) drawn from the ``ticks`` table, plus advisory
recommendations over the replica counts, and the tick log as a ``.log.jsonl.gz`` sidecar.

``ticks`` has one row per planner tick: ``at_s`` (planner seconds) and the planner's diagnostics
columns. Columns are looked up by the names below (first match wins); a panel whose columns are
all absent shows a "no data" note instead of a chart. Each panel is its own figure (two to a
row, as in the reference grid), so that its legend sits right under it.

Reports can be cut like the reference recorder: ``planner_report_periods`` splits the ticks
every ``report_interval_hours`` of planner time (a report is due when now - last report >=
interval, the first reference being the first tick; the due tick closes its period; the rest
is flushed at the end), and ``write_planner_reports`` writes one report and log per period.
"""

from __future__ import annotations

import gzip
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import plotly.graph_objects as go

from plansim.io import atomic_write_bytes, atomic_write_text
from plansim.reports.page import Page, plain
from plansim.reports.sampling import MAX_POINTS, TimeUnit, bin_series, thin_events, time_unit
from plansim.reports.style import PALETTE, SLA_COLOUR, base_layout, pool_colour
from plansim.reports.tables import first_column, floats, has

SNAPSHOT_CAP = 50_000  # the reference recorder keeps the last 50,000 snapshots per report
MAX_ENGINES = 10  # engine lines per load panel (the busiest)
PANEL_PLOT_PX = 240  # plot area of one panel
PANEL_LEGEND_WIDTH_PX = 400  # Plotly wraps a panel's legend at about 400 px on a 1280 px page

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

# (row, col, chart name) of each panel, in the order of TITLES.
PANELS = tuple(
    (1 + i // 2, 1 + i % 2, name)
    for i, name in enumerate(
        (
            "planner_replicas",
            "planner_request_rate",
            "planner_observed_ttft",
            "planner_observed_itl",
            "planner_estimated_ttft",
            "planner_estimated_itl",
            "planner_prefill_load",
            "planner_decode_load",
            "planner_capacity",
            "planner_sequence_lengths",
            "planner_load_decisions",
            "planner_throughput_decisions",
        )
    )
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
    "scale_down_capped_by_throughput": "purple",  # the reference's "capped"
    "scale_down_refused_consolidation": "slategray",
    "no_change": "gray",
    "disabled": "lightgray",
    "no_fpm_data": "gold",
    "scaling_in_progress": "orange",
    "worker_count_mismatch": "red",
    "insufficient_data": "pink",
    "unset": "#dddddd",
}
THROUGHPUT_COLOURS = {
    "scale": "green",
    "set_lower_bound": "blue",
    "disabled": "lightgray",
    "no_traffic_data": "gold",
    "predict_failed": "red",
    "model_not_ready": "orange",
    "partner_not_ready": "pink",
    "no_change": "gray",
    "unset": "#dddddd",
}
_ROLE_Y = {"prefill": 2, "decode": 1}


def _other_colour(reason: str) -> str:
    """A stable colour for a reason the reference palette does not name."""
    return PALETTE[sum(reason.encode()) % len(PALETTE)]


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
    time_s = floats(timeseries, "time_s") if has(timeseries, "time_s") else None
    written: list[Path] = []
    for k, (start, stop) in enumerate(periods, start=1):
        part = ordered.iloc[start:stop]
        lo, hi = float(part["at_s"].iloc[0]), float(part["at_s"].iloc[-1])
        events = [e for e in scaling_events or [] if lo <= float(e.get("at_s", np.nan)) <= hi]
        span = None if time_s is None else timeseries[(time_s >= lo) & (time_s <= hi)]
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
    panels = _Panels()
    grid = _Grid(panels, ticks, cols, at_s, unit)
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
    page.chart_grid(
        "Planner diagnostics (6 x 2)",
        "Row 1: replicas and demand; rows 2-3: latency against the SLA (red dashed); row 4: "
        "per-engine queues; row 5: what one engine can serve and the traffic shape; row 6: each "
        "tick's decision, coloured by reason (hover for the reason). Hollow circles on the "
        "replica panel are advisory recommendations. Time axes are planner time.",
        panels.cells(unit.axis_title("Planner time")),
    )
    return page.render()


class _Panels:
    """The twelve panels of the grid, addressed by (row, col) like ``make_subplots``; each is
    its own figure so that its legend sits under it."""

    def __init__(self) -> None:
        self.figs = {(row, col): go.Figure() for row, col, _ in PANELS}
        self.notes: dict[tuple[int, int], str] = {}

    def add_trace(self, trace: go.Scatter, *, row: int, col: int) -> None:
        self.figs[row, col].add_trace(trace)

    def update_yaxes(self, *, row: int, col: int, **props: Any) -> None:
        self.figs[row, col].update_yaxes(**props)

    def note(self, row: int, col: int, text: str) -> None:
        self.notes[row, col] = text

    def cells(self, x_title: str) -> list[tuple[str, str, go.Figure | str]]:
        out: list[tuple[str, str, go.Figure | str]] = []
        for (row, col, name), title in zip(PANELS, TITLES, strict=True):
            fig = self.figs[row, col]
            if not fig.data:
                out.append((name, title, self.notes.get((row, col), "No data.")))
                continue
            fig.update_xaxes(title_text=x_title)
            names = [str(t.name) for t in fig.data if t.showlegend is not False]
            # Room under the axis title for the legend's rows, so it never reaches the next row.
            bottom_px = 86 + 22 * _legend_rows(names)
            layout = base_layout(fig, height=PANEL_PLOT_PX + 16 + bottom_px)
            layout.update_layout(
                hovermode="closest",
                margin={"t": 16, "b": bottom_px},
                legend={
                    "orientation": "h",
                    "x": 0,
                    "xanchor": "left",
                    "y": -62 / PANEL_PLOT_PX,
                    "yanchor": "top",
                },
            )
            out.append((name, title, layout))
        return out


def _legend_rows(names: Sequence[str]) -> int:
    """Rows a horizontal legend of ``names`` takes in a panel (greedy packing with a generous
    7 px per character at the 12 px legend font, plus the entry's symbol)."""
    rows, used = 1, 0
    for name in names:
        width = 50 + 7 * len(name)
        if used and used + width > PANEL_LEGEND_WIDTH_PX:
            rows, used = rows + 1, 0
        used += width
    return rows


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
    labels = _role_labels(ticks, cols)
    for role in ("prefill", "decode"):
        column = cols[f"ready_{role}"]
        if column is None:
            continue
        ready = floats(ticks, column)
        known = np.isfinite(ready)
        counts, times = ready[known], at_s[known]
        changed = np.flatnonzero(counts[1:] != counts[:-1]) + 1
        transitions += [
            (float(times[i]), labels[role], int(counts[i - 1]), int(counts[i])) for i in changed
        ]
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


def _role_labels(ticks: pd.DataFrame, cols: dict[str, str | None]) -> dict[str, str]:
    """Role names to show: an aggregated deployment reports its workers as decode and never has
    a prefill worker, so its decode role is shown as "agg"."""
    has_prefill = any(
        c is not None and c in ticks.columns and np.nansum(np.abs(floats(ticks, c))) > 0
        for c in (cols.get("ready_prefill"), "expected_prefill")
    )
    return {"prefill": "prefill", "decode": "decode" if has_prefill else "agg"}


class _Grid:
    """Fills the 6 x 2 subplot grid; each method draws one or two panels."""

    def __init__(
        self,
        fig: _Panels,
        ticks: pd.DataFrame,
        cols: dict[str, str | None],
        at_s: np.ndarray,
        unit: TimeUnit,
    ) -> None:
        self.fig, self.ticks, self.cols, self.at_s, self.unit = fig, ticks, cols, at_s, unit
        self.labels = _role_labels(ticks, cols)

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
    ) -> None:
        # Many quantities exist only on some ticks (throughput ticks): join the ticks with values.
        keep = np.isfinite(y)
        t, ys = bin_series(self.at_s[keep], {"y": y[keep]}, how=how)
        self.fig.add_trace(
            go.Scatter(
                x=t / self.unit.seconds,
                y=ys["y"],
                mode="lines",
                name=plain(name),
                line={"color": colour, "dash": dash, "shape": shape},
            ),
            row=row,
            col=col,
        )

    def _empty(self, row: int, col: int, what: str) -> None:
        self.fig.note(row, col, f"No data: no tick has {what}.")

    def replicas(self, events: Sequence[Mapping[str, Any]]) -> None:
        drawn = False
        roles = ("decode",) if self.labels["decode"] == "agg" else ("prefill", "decode")
        for role in roles:
            label = self.labels[role]
            ready = self._series(f"ready_{role}")
            if ready is not None:
                self._line(
                    1,
                    1,
                    ready,
                    f"{label} replicas",
                    pool_colour(label),
                    how="max",
                    shape="hv",
                )
                drawn = True
            bound = self._series(f"lb_{role}")
            if bound is not None and np.nanmax(bound, initial=0) > 1:
                self._line(
                    1,
                    1,
                    bound,
                    f"{label} TP lower bound",
                    pool_colour(label),
                    "dash",
                    how="max",
                    shape="hv",
                )
            rec = self._series(f"rec_{role}")
            advisory, target = self.cols.get("advisory"), self._series(f"scale_to_{role}")
            if rec is None and advisory is not None and target is not None:
                flags = self.ticks[advisory].astype("boolean").fillna(False).to_numpy(dtype=bool)
                rec = np.where(flags, target, np.nan) if flags.any() else None
            if rec is not None and np.isfinite(rec).any():
                self._markers(1, 1, self.at_s, rec, f"{label} recommended", pool_colour(label))
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
                    f"{label} advisory",
                    pool_colour(label),
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
                self._line(5, 1, y, f"{role} engine req/s", pool_colour(role))
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
                        # one legend entry toggles the reason on both tracks
                        legendgroup=f"{loop}-{reason}",
                        showlegend=role == tracks[0][0],
                        marker={
                            "symbol": symbol,
                            "size": 8,
                            "color": colours.get(str(reason), _other_colour(str(reason))),
                        },
                        hovertemplate=plain(f"{self.labels.get(role, role)}: {reason}")
                        + "<extra></extra>",
                    ),
                    row=row,
                    col=col,
                )
        labels = {_ROLE_Y.get(r, 1): self.labels.get(r, r) for r, _ in tracks}
        self.fig.update_yaxes(
            tickvals=list(labels),
            ticktext=list(labels.values()),
            range=[0.4, 2.6],
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
