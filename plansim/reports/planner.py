"""The planner diagnostics report: headline cards (the replay's, plus scaling events and the gap
to a reference figure), the 6 x 2 grid of the reference ``DiagnosticsRecorder``
(``spec/reference/planner_core.md`` section 6.2) drawn from the ``ticks`` table (``PANELS``, one
``Panel`` record per grid cell, in reading order), plus advisory recommendations over the
replica counts, and the tick log as a ``.log.jsonl.gz`` sidecar.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import plotly.graph_objects as go

from plansim.io import atomic_write_bytes, atomic_write_text
from plansim.reports.folder_tables import (
    FolderOutput,
    FolderReport,
    FolderTables,
    positive,
)
from plansim.reports.format import number
from plansim.reports.headline import (
    Reference,
    baseline_reference,
    goodput_sla,
    replay_cards,
    saving_card,
    scaling_cards,
)
from plansim.reports.page import Page, plain
from plansim.reports.panels import Panel, PanelOutput, panel_cells
from plansim.reports.sampling import (
    MAX_POINTS,
    TimeUnit,
    bin_series,
    thin_events,
    time_unit,
)
from plansim.reports.style import PALETTE, SLA_COLOUR, base_layout, pool_colour
from plansim.reports.tables import (
    find_sla,
    find_value,
    first_column,
    floats,
    has,
    planner_targets,
)
from plansim.roles import PLANNER_ROLES, Role, pools_doing, pools_seen_as
from plansim.schema import (
    BASELINE_JSON,
    PLANNER_PERIOD_REPORTS_DIR,
    PLANNER_REPORT,
    TICKS_TABLE,
    TIMESERIES_TABLE,
    sla_text,
)

SNAPSHOT_CAP = 50_000  # the reference recorder keeps the last 50,000 snapshots per report
MAX_ENGINES = 10  # engine lines per load panel (the busiest)
PANEL_PLOT_PX = 240  # plot area of one panel
PANEL_LEGEND_WIDTH_PX = 400  # Plotly wraps a panel's legend at about 400 px on a 1280 px page

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
_ROLE_Y = {Role.PREFILL: 2, Role.DECODE: 1}


def _other_colour(reason: str) -> str:
    """A stable colour for a reason the reference palette does not name."""
    return PALETTE[sum(reason.encode()) % len(PALETTE)]


# Tick columns that say a scaling loop or policy decided something at the tick.
_DECISION_COLUMNS = ("run_load_scaling", "run_throughput_scaling")
_REASON_PREFIXES = ("load_decision_reason", "throughput_decision_reason", "policy_reason")


def planner_scaled(ticks: pd.DataFrame, scaling_events: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a planner run has scaling to report: a scaling event, a tick where a scaling
    loop ran or a decision reason was recorded. A planner that only retunes (both loops off)
    has none, and its page would be panels without data. Tables written without the loop
    columns count as scaling."""
    if scaling_events:
        return True
    if not any(c in ticks.columns for c in _DECISION_COLUMNS):
        return True
    for column in ticks.columns:
        values = ticks[column]
        if column in _DECISION_COLUMNS and values.astype("boolean").fillna(False).any():
            return True
        if column.startswith(_REASON_PREFIXES) and (values.astype("string").fillna("") != "").any():
            return True
    return False


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
    plotly_src: str | None = None,
) -> list[Path]:
    """One report per period of ``report_interval_hours`` of planner time (see
    ``planner_report_periods``), as ``<prefix>_<NNN>.html`` with ``<prefix>_<NNN>.log.jsonl.gz``
    beside it, written atomically into ``out_dir``. Returns the paths written; none when the
    interval is not positive (the recorder is off) or there are no ticks. A period's headline
    has its scaling events only (the replay's figures are the whole run's)."""
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
        period = (
            f"Period {k} of {len(periods)}: planner time {number(lo)} to {number(hi)} s. The "
            "whole run's goodput, latency and cost are in planner_report.html beside this folder."
        )
        written += write_planner_report(
            part,
            base,
            scaling_events=events,
            sla=sla,
            timeseries=span,
            plotly_src=plotly_src,
            period=period,
        )
    return written


def write_planner_report(
    ticks: pd.DataFrame,
    base: str | Path,
    *,
    scaling_events: Sequence[Mapping[str, Any]] | None = None,
    sla: Mapping[str, float] | None = None,
    timeseries: pd.DataFrame | None = None,
    **options: Any,
) -> list[Path]:
    """``<base>.html`` and ``<base>.log.jsonl.gz`` for ``ticks``, written atomically;
    ``options`` go to ``render_planner`` (summary, inputs, baseline, plotly_src, period)."""
    base = Path(base)
    html_path = atomic_write_text(
        base.with_name(base.name + ".html"),
        render_planner(
            ticks, scaling_events=scaling_events, sla=sla, timeseries=timeseries, **options
        ),
    )
    log_path = atomic_write_bytes(
        base.with_name(base.name + ".log.jsonl.gz"), tick_log_bytes(ticks)
    )
    return [html_path, log_path]


@dataclass(frozen=True, slots=True)
class PlannerData:
    """What the planner panels draw from: the ticks (sorted, at most ``SNAPSHOT_CAP``), the
    resolved column per quantity (``cols``, None when absent), tick times, the time unit, role
    labels, the SLA targets, scaling events and the replay time series (optional)."""

    ticks: pd.DataFrame
    cols: dict[str, str | None]
    at_s: np.ndarray
    unit: TimeUnit
    labels: dict[str, str]
    sla: dict[str, float]
    events: Sequence[Mapping[str, Any]]
    timeseries: pd.DataFrame | None

    def series(self, key: str) -> np.ndarray | None:
        column = self.cols.get(key)
        return None if column is None else floats(self.ticks, column)


def planner_data(
    ticks: pd.DataFrame,
    *,
    scaling_events: Sequence[Mapping[str, Any]] | None = None,
    sla: Mapping[str, float] | None = None,
    timeseries: pd.DataFrame | None = None,
) -> PlannerData:
    ticks = ticks.sort_values("at_s", kind="stable").iloc[-SNAPSHOT_CAP:]
    cols = {key: first_column(ticks, names) for key, names in COLUMNS.items()}
    at_s = floats(ticks, "at_s")
    return PlannerData(
        ticks=ticks,
        cols=cols,
        at_s=at_s,
        unit=time_unit(float(at_s[-1] - at_s[0]) if len(at_s) else 0.0),
        labels=_role_labels(ticks, cols),
        sla={**_sla_from_ticks(ticks, cols), **dict(sla or {})},
        events=list(scaling_events or []),
        timeseries=timeseries,
    )


def render_planner(
    ticks: pd.DataFrame,
    *,
    scaling_events: Sequence[Mapping[str, Any]] | None = None,
    sla: Mapping[str, float] | None = None,
    timeseries: pd.DataFrame | None = None,
    summary: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    baseline: Reference | None = None,
    plotly_src: str | None = None,
    period: str = "",
) -> str:
    """The planner diagnostics report (HTML str) for ``ticks`` (the last ``SNAPSHOT_CAP`` rows,
    as the reference recorder keeps). ``sla`` holds the planner's ``ttft_ms``/``itl_ms``
    targets (default: the ticks' ``ttft_sla_ms``/``itl_sla_ms``); ``timeseries`` (optional)
    stands in for per-engine load when ticks have no engine list. With the replay's
    ``summary`` and ``inputs`` the page opens with the replay's headline cards, plus the
    scaling events and, with a replayed ``baseline`` (the starting counts held static), the
    GPU-hour gap to it next to the goodput card, both goodputs in it. ``period`` says which
    part of the run a periodic report covers."""
    data = planner_data(ticks, scaling_events=scaling_events, sla=sla, timeseries=timeseries)
    page = Page(
        "plansim planner diagnostics",
        "What the planner saw, estimated and decided at each tick. Times are planner seconds "
        "from the start of the replay.",
    )
    cards = replay_cards(summary, goodput_sla(inputs), timeseries) if summary else []
    saving = saving_card(summary, baseline)
    if saving is not None:  # beside the goodput card, the first
        cards.insert(1, saving)
    cards += scaling_cards(data.events)
    page.headline(
        cards, " ".join(t for t in (period, _targets_note(data.sla, goodput_sla(inputs))) if t)
    )
    page.part("Charts")
    page.chart_grid(
        "Planner diagnostics (6 x 2)",
        "Row 1: replicas and demand; rows 2-3: latency against the planner's targets (red "
        "dashed); row 4: per-engine queues; row 5: what one engine can serve and the traffic "
        "shape; row 6: each tick's decision, coloured by reason (hover for the reason). Hollow "
        "circles on the replica panel are advisory recommendations. Time axes are planner time.",
        panel_cells(PANELS, data),
    )
    page.part("Details")
    _title_block(page, data)
    return page.render(plotly_src)


def _targets_note(targets: Mapping[str, float], goodput: Mapping[str, float]) -> str:
    """Says what the planner sizes for, and what goodput was scored against when that differs."""
    sizes = sla_text({k: v for k, v in targets.items() if k in ("ttft_ms", "itl_ms")})
    if not sizes:
        return ""
    text = f"The planner sizes the deployment for {sizes}."
    scored = sla_text(dict(goodput))
    if scored and scored != sizes:
        text += f" Goodput is scored against the deployment's SLA, {scored}."
    return text


def _title_block(page: Page, data: PlannerData) -> None:
    ticks, cols, at_s, sla, events = data.ticks, data.cols, data.at_s, data.sla, data.events
    rows: list[tuple[str, Any]] = [
        (
            "time range",
            f"{number(float(at_s[0]))} to {number(float(at_s[-1]))} s of planner time"
            if len(at_s)
            else "no ticks",
        ),
        ("ticks", len(ticks)),
    ]
    if cols["gpu_hours"]:
        rows.append(("GPU-hours (last tick)", float(floats(ticks, cols["gpu_hours"])[-1])))
    rows.append(("planner targets", sla_text(sla) or "not set"))
    advisory = [e for e in events if not bool(e.get("applied", True))]
    if advisory:
        rows.append(("advisory recommendations", len(advisory)))
    page.key_values("Planner run", rows)
    transitions = []
    for role in PLANNER_ROLES:
        column = cols[f"ready_{role}"]
        if column is None:
            continue
        ready = floats(ticks, column)
        known = np.isfinite(ready)
        counts, times = ready[known], at_s[known]
        changed = np.flatnonzero(counts[1:] != counts[:-1]) + 1
        transitions += [
            (float(times[i]), data.labels[role], int(counts[i - 1]), int(counts[i]))
            for i in changed
        ]
    transitions.sort(key=lambda r: r[0])
    _decision_table(page, data)
    if transitions:
        shown = transitions[:200]
        page.table(
            "Replica transitions (ready counts)",
            ["at (planner s)", "role", "from", "to"],
            shown,
            "Actual changes in ready replicas, not decisions"
            + (f"; the first 200 of {len(transitions)}." if len(transitions) > 200 else "."),
        )


def _decision_table(page: Page, data: PlannerData) -> None:
    """Every scaling decision with the reason that acted (``acting_reason``), opening with the
    direction ``scaling_events.json`` records."""
    ticks, events = data.ticks, data.events
    if not events or "at_s" not in ticks:
        return
    by_time = ticks.drop_duplicates("at_s", keep="last").set_index("at_s")
    rows = []
    for e in events[:200]:
        role = Role(e["component"]).planner_role
        row = by_time.loc[e["at_s"]] if e["at_s"] in by_time.index else None
        before, after = int(e["from_count"]), int(e["to_count"])
        why = (
            acting_reason(row, role, before, after)
            if row is not None
            else _direction(before, after)
        )
        rows.append((float(e["at_s"]), data.labels.get(role, role), before, after, why))
    page.table(
        "Scaling decisions",
        ["at (planner s)", "role", "from", "to", "why"],
        rows,
        "Each decision the planner made and the rule that made it: the sla_goodput policy's "
        "own words, or which of Dynamo's loops acted (the load loop's +/-1 step, or the "
        "throughput loop's lower bound), with the other loop's reason after it"
        + (f"; the first 200 of {len(events)}." if len(events) > 200 else "."),
    )


def _direction(before: int, after: int) -> str:
    return "scale_up" if after > before else "scale_down"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def acting_reason(row: Mapping[str, Any], role: str, before: int, after: int) -> str:
    """Why a tick moved ``role`` from ``before`` to ``after`` replicas, from its recorded
    reasons: ``scale_up``/``scale_down`` (as ``scaling_events.json`` says), then what acted:
    the ``sla_goodput`` policy's reason; else the load loop when its own step points that way;
    else the throughput loop (its lower bound, which a load loop's answer is raised to, or its
    own scaling); the other loop's reason and a GPU-budget clamp follow."""
    direction = _direction(before, after)
    policy = _text(row.get(f"policy_reason_{role}")) or _text(row.get("policy_reason"))
    if policy:
        return policy if policy.startswith(direction) else f"{direction}: {policy}"
    load = _text(row.get(f"load_decision_reason_{role}")) or _text(row.get("load_decision_reason"))
    throughput = _text(row.get(f"throughput_decision_reason_{role}")) or _text(
        row.get("throughput_decision_reason")
    )
    bound = pd.to_numeric(row.get(f"throughput_lower_bound_{role}"), errors="coerce")
    if load == direction:
        why = f"{direction}: the load loop's step"
        other = f"throughput loop: {throughput}" if throughput else ""
    elif throughput and after > before and np.isfinite(bound) and bound >= after:
        why = (
            f"{direction}: the throughput loop's lower bound, {int(bound)} replicas, is above "
            f"{before} ({throughput})"
        )
        other = f"load loop: {load}" if load else ""
    elif throughput:
        why = f"{direction}: the throughput loop ({throughput})"
        other = f"load loop: {load}" if load else ""
    else:
        why, other = (f"{direction}: {load}" if load else direction), ""
    budget = row.get("reconcile_reasons")
    if isinstance(budget, Mapping) and budget:
        other = "; ".join(
            t
            for t in (
                other,
                "budget: " + ", ".join(f"{k} {v}" for k, v in budget.items() if v is not None),
            )
            if t
        )
    return f"{why}; {other}" if other else why


def _aggregated(data: PlannerData) -> bool:
    """Whether the planner scaled an aggregated deployment (its engines prefill and decode)."""
    return data.labels[Role.DECODE] == Role.AGG


def _role_labels(ticks: pd.DataFrame, cols: dict[str, str | None]) -> dict[str, str]:
    """Role names to show: an aggregated deployment reports its workers as decode and never has
    a prefill worker, so its decode role is shown as "agg"."""
    has_prefill = any(
        c is not None and c in ticks.columns and np.nansum(np.abs(floats(ticks, c))) > 0
        for c in (cols.get("ready_prefill"), "expected_prefill")
    )
    return {
        Role.PREFILL: Role.PREFILL.value,
        Role.DECODE: (Role.DECODE if has_prefill else Role.AGG).value,
    }


# ---------------------------------------------------------------- panel drawing


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


def _panel(fig: go.Figure, data: PlannerData) -> go.Figure:
    """A grid panel's layout: planner time on x, the legend under the axis title with room for
    its rows, so that it never reaches the next row."""
    fig.update_xaxes(title_text=data.unit.axis_title("Planner time"))
    names = [str(t.name) for t in fig.data if t.showlegend is not False]
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
    return layout


def _no_data(what: str) -> str:
    return f"No data: no tick has {what}."


def _line(
    fig: go.Figure,
    data: PlannerData,
    y: np.ndarray,
    name: str,
    colour: str,
    dash: str = "solid",
    how: str = "mean",
    shape: str = "linear",
) -> None:
    # Many quantities exist only on some ticks (throughput ticks): join the ticks with values.
    keep = np.isfinite(y)
    t, ys = bin_series(data.at_s[keep], {"y": y[keep]}, how=how)
    fig.add_trace(
        go.Scatter(
            x=t / data.unit.seconds,
            y=ys["y"],
            mode="lines",
            name=plain(name),
            line={"color": colour, "dash": dash, "shape": shape},
        )
    )


def _markers(
    fig: go.Figure, data: PlannerData, t: np.ndarray, y: np.ndarray, name: str, colour: str
) -> None:
    keep = np.isfinite(y)
    idx = thin_events(y[keep])
    fig.add_trace(
        go.Scatter(
            x=t[keep][idx] / data.unit.seconds,
            y=y[keep][idx],
            mode="markers",
            name=plain(name),
            marker={"symbol": "circle-open", "size": 9, "color": colour, "line": {"width": 2}},
        )
    )


def _replicas(data: PlannerData) -> PanelOutput:
    fig = go.Figure()
    drawn = False
    roles = (Role.DECODE,) if data.labels[Role.DECODE] == Role.AGG else PLANNER_ROLES
    for role in roles:
        label = data.labels[role]
        ready = data.series(f"ready_{role}")
        if ready is not None:
            _line(fig, data, ready, f"{label} replicas", pool_colour(label), how="max", shape="hv")
            drawn = True
        bound = data.series(f"lb_{role}")
        if bound is not None and np.nanmax(bound, initial=0) > 1:
            _line(
                fig,
                data,
                bound,
                f"{label} TP lower bound",
                pool_colour(label),
                "dash",
                how="max",
                shape="hv",
            )
        rec = data.series(f"rec_{role}")
        advisory, target = data.cols.get("advisory"), data.series(f"scale_to_{role}")
        if rec is None and advisory is not None and target is not None:
            flags = data.ticks[advisory].astype("boolean").fillna(False).to_numpy(dtype=bool)
            rec = np.where(flags, target, np.nan) if flags.any() else None
        if rec is not None and np.isfinite(rec).any():
            _markers(fig, data, data.at_s, rec, f"{label} recommended", pool_colour(label))
            continue
        components = pools_seen_as(role)
        recs = [
            e
            for e in data.events
            if not bool(e.get("applied", True)) and str(e.get("component")) in components
        ]
        if recs:
            _markers(
                fig,
                data,
                np.array([float(e["at_s"]) for e in recs]),
                np.array([float(e["to_count"]) for e in recs]),
                f"{label} advisory",
                pool_colour(label),
            )
    if not drawn:
        return _no_data("ready replica columns")
    fig.update_yaxes(title_text="Replicas", rangemode="tozero")
    return _panel(fig, data)


def _request_rate(data: PlannerData) -> PanelOutput:
    observed = data.series("observed_rps")
    if observed is None:
        num, dur = data.series("observed_num_req"), data.series("traffic_duration_s")
        if num is not None and dur is not None:
            observed = np.where(dur > 0, num / np.where(dur > 0, dur, 1.0), np.nan)
    predicted = data.series("predicted_rps")
    if predicted is None:
        num, dur = data.series("predicted_num_req"), data.series("throughput_interval_s")
        if num is not None and dur is not None:
            predicted = np.where(dur > 0, num / np.where(dur > 0, dur, 1.0), np.nan)
    if observed is None and predicted is None:
        return _no_data("request rate columns")
    fig = go.Figure()
    if observed is not None:
        _line(fig, data, observed, "observed req/s", "#222222")
    if predicted is not None:
        _line(fig, data, predicted, "predicted req/s", "#8172b3", "dot")
    fig.update_yaxes(title_text="Requests/s", rangemode="tozero")
    return _panel(fig, data)


def _against_sla(key: str, target_key: str, axis: str, name: str) -> Any:
    """A panel drawing ``key`` against the planner's ``target_key`` target."""

    def draw(data: PlannerData) -> PanelOutput:
        y = data.series(key)
        if y is None:
            return _no_data(key)
        fig = go.Figure()
        _line(fig, data, y, name, PALETTE[0] if "TTFT" in axis else PALETTE[2])
        target = data.sla.get(target_key)
        if target is not None and len(data.at_s):
            fig.add_trace(
                go.Scatter(
                    x=[data.at_s[0] / data.unit.seconds, data.at_s[-1] / data.unit.seconds],
                    y=[target, target],
                    mode="lines",
                    name=f"{axis.split()[0]} target {target:g} ms",
                    line={"color": SLA_COLOUR, "dash": "dash"},
                )
            )
        fig.update_yaxes(title_text=axis, rangemode="tozero")
        return _panel(fig, data)

    return draw


_LOAD_SPECS = {
    Role.PREFILL: (("queued_prefill_tokens",), "queued_prefill_total", "Queued prefill tokens"),
    Role.DECODE: (
        ("queued_decode_kv_tokens", "inflight_decode_kv_tokens", "sum_decode_kv_tokens"),
        "decode_kv_total",
        "Decode KV tokens",
    ),
}


def _engine_load(role: str) -> Any:
    """Row 4: one line per engine (``worker:dpN``) from the per-tick engine list; else the
    per-tick totals; else (prefill) the pool totals of the replay time series."""
    fields, total_key, axis = _LOAD_SPECS[role]

    def draw(data: PlannerData) -> PanelOutput:
        engines = data.cols.get("engines")
        per_engine = _engine_frame(data.ticks, engines, data.at_s) if engines else None
        fig = go.Figure()
        drawn = _engine_lines(fig, data, role, per_engine, fields)
        total = data.series(total_key)
        label = Role.AGG.value if _aggregated(data) else role
        if not drawn and total is not None:
            _line(fig, data, total, f"all {label} engines", pool_colour(label), how="max")
            drawn = True
        timeseries = data.timeseries
        if (
            not drawn
            and role == Role.PREFILL
            and has(timeseries, "time_s", "pool", "queued_prefill_tokens")
        ):
            pools = timeseries[timeseries["pool"].astype(str).isin(pools_doing(role))]
            for name, part in pools.groupby(pools["pool"].astype(str), sort=True):
                _max_line(
                    fig,
                    data,
                    floats(part, "time_s"),
                    floats(part, "queued_prefill_tokens"),
                    f"{name} pool total",
                    pool_colour(name),
                )
                drawn = True
        if not drawn:
            return _no_data("per-engine forward-pass metrics")
        capacity = data.series("kv_capacity")
        if role == Role.DECODE and capacity is not None and np.isfinite(capacity).any():
            _line(fig, data, capacity, "KV capacity per engine", SLA_COLOUR, "dash")
        fig.update_yaxes(title_text=axis, rangemode="tozero")
        return _panel(fig, data)

    return draw


def _max_line(
    fig: go.Figure, data: PlannerData, t_s: np.ndarray, y: np.ndarray, name: str, colour: str
) -> None:
    """A load line on its own time axis (s), the maximum of each bin on long runs."""
    t, ys = bin_series(t_s, {"y": y}, how="max")
    fig.add_trace(
        go.Scatter(
            x=t / data.unit.seconds,
            y=ys["y"],
            mode="lines",
            name=plain(name),
            line={"color": colour},
        )
    )


def _engine_lines(
    fig: go.Figure,
    data: PlannerData,
    role: str,
    per_engine: pd.DataFrame | None,
    fields: tuple[str, ...],
) -> bool:
    if per_engine is None:
        return False
    part = per_engine
    if "role" in part.columns:
        part = part[part["role"].astype(str).isin(pools_doing(role))]
    present = [f for f in fields if f in part.columns]
    if not present or part.empty:
        return False
    load = part.assign(_load=sum(np.nan_to_num(floats(part, f)) for f in present))
    peak = load.groupby("engine", sort=True)["_load"].max()
    # Engines that never carry this load (decode workers in the prefill panel) are left out;
    # the busiest MAX_ENGINES keep the legend readable.
    names = peak[peak > 0].sort_values(ascending=False, kind="stable").index[:MAX_ENGINES]
    # An aggregated engine does both jobs: it is named by its pool (agg), not by the panel's.
    label = Role.AGG.value if _aggregated(data) else role
    for k, name in enumerate(sorted(names, key=str)):
        one = load[load["engine"] == name]
        _max_line(
            fig,
            data,
            floats(one, "at_s"),
            floats(one, "_load"),
            f"{label} {name}",
            PALETTE[k % len(PALETTE)],
        )
    return len(names) > 0


def _capacity(data: PlannerData) -> PanelOutput:
    fig = go.Figure()
    for role in PLANNER_ROLES:
        y = data.series(f"engine_rps_{role}")
        if y is not None:
            if _aggregated(data):  # one engine, two limits: its prefill and its decode rate
                _line(
                    fig,
                    data,
                    y,
                    f"agg engine req/s ({role} limit)",
                    PALETTE[0] if role == Role.PREFILL else pool_colour(Role.AGG),
                )
            else:
                _line(fig, data, y, f"{role} engine req/s", pool_colour(role))
    if not fig.data:
        return _no_data("engine_rps columns")
    fig.update_yaxes(title_text="Req/s per engine", rangemode="tozero")
    return _panel(fig, data)


def _sequence_lengths(data: PlannerData) -> PanelOutput:
    fig = go.Figure()
    for key, name, colour, dash in (
        ("observed_isl", "observed ISL", PALETTE[0], "solid"),
        ("predicted_isl", "predicted ISL", PALETTE[0], "dot"),
        ("observed_osl", "observed OSL", PALETTE[1], "solid"),
        ("predicted_osl", "predicted OSL", PALETTE[1], "dot"),
    ):
        y = data.series(key)
        if y is not None:
            _line(fig, data, y, name, colour, dash)
    if not fig.data:
        return _no_data("ISL/OSL columns")
    fig.update_yaxes(title_text="Tokens per request", rangemode="tozero")
    return _panel(fig, data)


def _decisions(loop: str, colours: dict[str, str], symbol: str) -> Any:
    """Row 6: each tick's ``loop`` decision reason on one track per component."""

    def draw(data: PlannerData) -> PanelOutput:
        tracks = [
            (role, first_column(data.ticks, (f"{loop}_decision_reason_{role}",)))
            for role in PLANNER_ROLES
        ]
        tracks = [(role, c) for role, c in tracks if c is not None]
        if not tracks:
            aggregate = first_column(data.ticks, (f"{loop}_decision_reason",))
            tracks = [("all", aggregate)] if aggregate else []
        if not tracks:
            return _no_data(f"{loop}_decision_reason columns")
        fig = go.Figure()
        for role, column in tracks:
            reasons = data.ticks[column].astype("string").fillna("").to_numpy(dtype=object)
            keep = np.flatnonzero(reasons != "")
            idx = keep[thin_events(reasons[keep])]
            y_value = _ROLE_Y.get(role, 1)
            for reason in sorted(set(reasons[idx]), key=str):
                sel = idx[reasons[idx] == reason]
                fig.add_trace(
                    go.Scatter(
                        x=data.at_s[sel] / data.unit.seconds,
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
                        hovertemplate=plain(f"{data.labels.get(role, role)}: {reason}")
                        + "<extra></extra>",
                    )
                )
        labels = {_ROLE_Y.get(r, 1): data.labels.get(r, r) for r, _ in tracks}
        fig.update_yaxes(
            tickvals=list(labels),
            ticktext=list(labels.values()),
            range=[0.4, 2.6],
            title_text="Component",
        )
        return _panel(fig, data)

    return draw


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


# The 6 x 2 grid of the reference recorder, in reading order (two to a row).
PANELS: tuple[Panel, ...] = (
    Panel(
        "planner_replicas",
        "Replica Counts",
        "Ready replicas per role, the throughput "
        "loop's lower bound (dashed) and advisory recommendations (hollow circles).",
        ("ticks.ready_prefill", "ticks.ready_decode", "ticks.throughput_lower_bound_decode"),
        _replicas,
    ),
    Panel(
        "planner_request_rate",
        "Request Rate (Observed vs Predicted)",
        "Requests/s the planner observed over its last interval, and what its predictor expected.",
        ("ticks.observed_rps", "ticks.predicted_rps"),
        _request_rate,
    ),
    Panel(
        "planner_observed_ttft",
        "Observed TTFT vs SLA",
        "Mean TTFT the planner observed.",
        ("ticks.observed_ttft_ms",),
        _against_sla("observed_ttft_ms", "ttft_ms", "TTFT (ms)", "observed TTFT"),
    ),
    Panel(
        "planner_observed_itl",
        "Observed ITL vs SLA",
        "Mean ITL the planner observed.",
        ("ticks.observed_itl_ms",),
        _against_sla("observed_itl_ms", "itl_ms", "ITL (ms)", "observed ITL"),
    ),
    Panel(
        "planner_estimated_ttft",
        "Estimated TTFT vs SLA",
        "TTFT the planner's perf model estimates at the current load.",
        ("ticks.estimated_ttft_ms",),
        _against_sla("estimated_ttft_ms", "ttft_ms", "TTFT (ms)", "estimated TTFT"),
    ),
    Panel(
        "planner_estimated_itl",
        "Estimated ITL vs SLA",
        "ITL the planner's perf model estimates at the current load.",
        ("ticks.estimated_itl_ms",),
        _against_sla("estimated_itl_ms", "itl_ms", "ITL (ms)", "estimated ITL"),
    ),
    Panel(
        "planner_prefill_load",
        "Engine Load: queued prefill tokens",
        "Queued prefill tokens per engine (the prefill engines, or the aggregated engines, "
        "which prefill too).",
        ("ticks.engine_queues", "ticks.queued_prefill_tokens"),
        _engine_load(Role.PREFILL),
    ),
    Panel(
        "planner_decode_load",
        "Engine Load: queued + inflight decode KV tokens",
        "Decode KV tokens per engine (the decode engines, or the aggregated engines) against "
        "one engine's KV capacity.",
        ("ticks.engine_queues", "ticks.decode_kv_tokens", "ticks.max_kv_tokens"),
        _engine_load(Role.DECODE),
    ),
    Panel(
        "planner_capacity",
        "Engine Capacity (req/s)",
        "Requests/s one engine can serve within the targets, per the perf model.",
        ("ticks.engine_rps_prefill", "ticks.engine_rps_decode"),
        _capacity,
    ),
    Panel(
        "planner_sequence_lengths",
        "Sequence Lengths (Observed vs Predicted)",
        "Average input and output lengths, observed and predicted.",
        ("ticks.observed_isl", "ticks.observed_osl", "ticks.predicted_isl", "ticks.predicted_osl"),
        _sequence_lengths,
    ),
    Panel(
        "planner_load_decisions",
        "Load Scaling Decisions",
        "The load loop's decision reason at each tick, per component.",
        ("ticks.load_decision_reason_prefill", "ticks.load_decision_reason_decode"),
        _decisions("load", LOAD_COLOURS, "square"),
    ),
    Panel(
        "planner_throughput_decisions",
        "Throughput Scaling Decisions",
        "The throughput loop's decision reason at each tick, per component.",
        ("ticks.throughput_decision_reason_prefill", "ticks.throughput_decision_reason_decode"),
        _decisions("throughput", THROUGHPUT_COLOURS, "diamond"),
    ),
)
TITLES = tuple(panel.title for panel in PANELS)


def _read_folder(tables: FolderTables) -> bool:
    ticks = tables.parquet(TICKS_TABLE)
    tables.parquet(TIMESERIES_TABLE)
    tables.json(BASELINE_JSON)
    return (
        ticks is not None
        and len(ticks) > 0
        and "at_s" in ticks.columns
        and planner_scaled(ticks, tables.scaling_events)
    )


def _write_folder(tables: FolderTables, out: FolderOutput) -> list[Path]:
    ticks, inputs = tables.parquet(TICKS_TABLE), tables.inputs
    timeseries = tables.parquet(TIMESERIES_TABLE)
    sla = planner_targets(inputs) or find_sla(inputs)
    written = write_planner_report(
        ticks,
        out.folder / PLANNER_REPORT,
        scaling_events=tables.scaling_events,
        sla=sla,
        timeseries=timeseries,
        summary=tables.summary if isinstance(tables.summary, dict) else None,
        inputs=inputs,
        baseline=baseline_reference(tables.json(BASELINE_JSON)),
        plotly_src=out.plotly_src(out.folder / f"{PLANNER_REPORT}.html"),
    )
    interval_h = positive(find_value(inputs, "report_interval_hours"))
    if interval_h is not None:
        periods = out.folder / PLANNER_PERIOD_REPORTS_DIR
        written += write_planner_reports(
            ticks,
            periods,
            interval_h,
            scaling_events=tables.scaling_events,
            sla=sla,
            timeseries=timeseries,
            plotly_src=out.plotly_src(periods / f"{PLANNER_REPORT}.html"),
        )
    return written


# ``planner_report.html`` and its tick log: the ticks table has rows and the planner scaled
# (``planner_scaled``); with ``report_interval_hours`` in the planner inputs, also one pair per
# period; with ``baseline.json``, the headline compares with the starting counts held static.
FOLDER_REPORT = FolderReport((TICKS_TABLE,), _read_folder, _write_folder)
