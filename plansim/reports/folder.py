"""``render_dir``: read the tables of an output folder and write every report that applies.

- ``report.html``: the folder has ``requests.parquet`` or ``timeseries.parquet``;
- ``planner_report.html`` and ``planner_report.log.jsonl.gz``: ``ticks.parquet`` has rows; with
  ``report_interval_hours`` in the planner inputs, also one ``planner_reports/planner_report_NNN``
  pair per period;
- ``retune_report.html``: ``retune_events.json``;
- ``predictor_report.html``: ``predictions.parquet``;
- ``retune_windows_report.html``: ``windows.parquet`` or ``windows/<k>.json`` records;
- ``capacity_report.html``: ``capacity.json`` (with ``points.parquet`` when present);
- ``calibration_report.html``: ``calibration.json`` with ``calibration_requests.parquet``.

plotly.js is written once, as ``plotly.min.js`` at the top of the folder, and every report
loads it from there (reports keep working when the folder is copied whole); with
``self_contained=True`` each report embeds it instead and opens as a single file.

Every file is written atomically. A table that cannot be read is a user mistake (``InputError``
naming the file), as is a folder with nothing to render.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from plansim.errors import InputError
from plansim.io import atomic_write_text
from plansim.reports.assets import plotly_src, write_plotly_js
from plansim.reports.calibration import render_calibration
from plansim.reports.capacity import render_capacity
from plansim.reports.planner import write_planner_report, write_planner_reports
from plansim.reports.predictor import ranking_rows, render_predictor
from plansim.reports.replay import render_replay
from plansim.reports.retune import render_retune
from plansim.reports.windows import render_windows
from plansim.reports.tables import find_sla, find_value, finite_number, planner_targets
from plansim.schema import (
    CALIBRATION_JSON,
    CALIBRATION_REPORT,
    CALIBRATION_TABLE,
    CAPACITY_JSON,
    CAPACITY_REPORT,
    DEFAULT_MIN_IMPROVEMENT_PERCENTAGE,
    INPUTS_JSON,
    PLANNER_PERIOD_REPORTS_DIR,
    PLANNER_REPORT,
    POINTS_TABLE,
    PREDICTIONS_TABLE,
    PREDICTOR_REPORT,
    REPLAY_REPORT,
    REQUESTS_TABLE,
    RETUNE_EVENTS_JSON,
    RETUNE_OUTCOMES,
    RETUNE_REPORT,
    SCALING_EVENTS_JSON,
    SESSIONS_TABLE,
    SUMMARY_JSON,
    TICKS_TABLE,
    TIMESERIES_TABLE,
    WINDOW_RECORDS_DIR,
    WINDOWS_REPORT,
    WINDOWS_TABLE,
    WORKERS_TABLE,
)

RENDERABLE = (
    REQUESTS_TABLE,
    TIMESERIES_TABLE,
    TICKS_TABLE,
    RETUNE_EVENTS_JSON,
    PREDICTIONS_TABLE,
    WINDOWS_TABLE,
    CAPACITY_JSON,
    CALIBRATION_JSON,
)


def _read_json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc}", source=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None


def _read_parquet(path: Path) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a damaged or foreign file
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"not a readable Parquet table: {first_line}", source=str(path)) from None


def render_dir(out_dir: str | Path, *, self_contained: bool = False) -> list[Path]:
    """Write the reports that the tables in ``out_dir`` support; returns the paths written
    (``plotly.min.js`` first, unless ``self_contained``)."""
    folder = Path(out_dir)
    if not folder.is_dir():
        raise InputError("not a folder", source=str(folder))
    if not any((folder / name).is_file() for name in RENDERABLE) and not _has_window_records(
        folder / WINDOW_RECORDS_DIR
    ):
        raise InputError(
            "nothing to render: no " + ", ".join(RENDERABLE[:-1]) + " or " + RENDERABLE[-1],
            source=str(folder),
        )
    inputs = _read_json(folder / INPUTS_JSON)
    inputs = inputs if isinstance(inputs, dict) else {}
    summary = _read_json(folder / SUMMARY_JSON)
    scaling_events = _read_json(folder / SCALING_EVENTS_JSON)
    scaling_events = (
        [e for e in scaling_events if isinstance(e, Mapping)]
        if isinstance(scaling_events, list)
        else []
    )
    # Every table is read (and checked) before any report is written, so a damaged table
    # leaves the folder's reports as they were.
    requests = _read_parquet(folder / REQUESTS_TABLE)
    timeseries = _read_parquet(folder / TIMESERIES_TABLE)
    workers = _read_parquet(folder / WORKERS_TABLE)
    sessions = _read_parquet(folder / SESSIONS_TABLE)
    ticks = _read_parquet(folder / TICKS_TABLE)
    events = _read_events(folder / RETUNE_EVENTS_JSON)
    predictions = _read_parquet(folder / PREDICTIONS_TABLE)
    window_records = _read_window_records(folder / WINDOW_RECORDS_DIR)
    capacity = _read_capacity(folder / CAPACITY_JSON)
    points = _read_parquet(folder / POINTS_TABLE) if capacity is not None else None
    calibration = _read_calibration(folder / CALIBRATION_JSON)
    calibrated = _read_parquet(folder / CALIBRATION_TABLE) if calibration is not None else None
    written: list[Path] = []
    if not self_contained:
        written.append(write_plotly_js(folder))

    def src(page: Path) -> str | None:
        return None if self_contained else plotly_src(page, folder)

    if requests is not None or timeseries is not None:
        html = render_replay(
            requests,
            timeseries,
            workers,
            summary if isinstance(summary, dict) else {},
            inputs,
            scaling_events,
            sessions=sessions,
            plotly_src=src(folder / REPLAY_REPORT),
        )
        written.append(atomic_write_text(folder / REPLAY_REPORT, html))

    if ticks is not None and len(ticks) and "at_s" in ticks.columns:
        sla = planner_targets(inputs) or find_sla(inputs)
        written += write_planner_report(
            ticks,
            folder / PLANNER_REPORT,
            scaling_events=scaling_events,
            sla=sla,
            timeseries=timeseries,
            summary=summary if isinstance(summary, dict) else None,
            inputs=inputs,
            plotly_src=src(folder / f"{PLANNER_REPORT}.html"),
        )
        interval_h = _positive(find_value(inputs, "report_interval_hours"))
        if interval_h is not None:
            written += write_planner_reports(
                ticks,
                folder / PLANNER_PERIOD_REPORTS_DIR,
                interval_h,
                scaling_events=scaling_events,
                sla=sla,
                timeseries=timeseries,
                plotly_src=src(folder / PLANNER_PERIOD_REPORTS_DIR / f"{PLANNER_REPORT}.html"),
            )

    if events is not None:
        retune = find_value(inputs, "retune")
        retune = retune if isinstance(retune, Mapping) else {}
        html = render_retune(
            events,
            objective=retune.get("objective"),
            min_improvement_percentage=_threshold(retune.get("min_improvement_percentage")),
            inputs=inputs,
            plotly_src=src(folder / RETUNE_REPORT),
        )
        written.append(atomic_write_text(folder / RETUNE_REPORT, html))

    if predictions is not None:
        interval = _positive(
            (summary.get("interval_s") if isinstance(summary, Mapping) else None)
            or find_value(inputs, "interval_s")
            or find_value(inputs, "interval")
        )
        html = render_predictor(
            predictions,
            ranking_rows(summary),
            interval_s=interval,
            inputs=inputs,
            plotly_src=src(folder / PREDICTOR_REPORT),
        )
        written.append(atomic_write_text(folder / PREDICTOR_REPORT, html))

    if window_records is not None:
        html = render_windows(
            window_records,
            summary if isinstance(summary, Mapping) else {},
            inputs,
            plotly_src=src(folder / WINDOWS_REPORT),
        )
        written.append(atomic_write_text(folder / WINDOWS_REPORT, html))

    if capacity is not None:
        html = render_capacity(capacity, points, inputs, plotly_src=src(folder / CAPACITY_REPORT))
        written.append(atomic_write_text(folder / CAPACITY_REPORT, html))

    if calibration is not None:
        html = render_calibration(calibration, calibrated, inputs,
                                  plotly_src=src(folder / CALIBRATION_REPORT))
        written.append(atomic_write_text(folder / CALIBRATION_REPORT, html))
    return written


def _read_calibration(path: Path) -> Mapping[str, Any] | None:
    """``calibration.json`` as ``plansim calibrate`` writes it; None when absent."""
    report = _read_json(path)
    if report is None:
        return None
    need = ("family", "parameters", "families", "windows", "held_out", "host")
    if not isinstance(report, Mapping) or any(k not in report for k in need):
        raise InputError("not a calibration.json of plansim calibrate", source=str(path))
    if not (path.parent / CALIBRATION_TABLE).is_file():
        raise InputError(f"{CALIBRATION_TABLE} is missing beside it", source=str(path))
    return report


def _read_capacity(path: Path) -> Mapping[str, Any] | None:
    """``capacity.json`` as ``plansim capacity`` writes it; None when absent."""
    report = _read_json(path)
    if report is None:
        return None
    needed = ("target", "objective", "static", "max_gpu_budget")
    if not isinstance(report, Mapping) or any(k not in report for k in needed):
        raise InputError("not a plansim capacity result (needs " + ", ".join(needed) + ")",
                         source=str(path))
    return report


def _has_window_records(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("*.json"))


def _read_window_records(folder: Path) -> list[Mapping[str, Any]] | None:
    """The ``windows/<k>.json`` records of a retune windows run, by window; None without."""
    if not _has_window_records(folder):
        return None
    records = []
    for path in sorted(folder.glob("*.json")):
        record = _read_json(path)
        if not isinstance(record, Mapping) or "window" not in record:
            raise InputError("expected a window record (a dict with a window)", source=str(path))
        records.append(record)
    return records


def _read_events(path: Path) -> list[Mapping[str, Any]] | None:
    """The retune decision records: a JSON list (or a dict holding it under
    ``retune_events``/``events``); None when the file is absent."""
    events = _read_json(path)
    if events is None:
        return None
    if isinstance(events, Mapping):
        events = events.get("retune_events", events.get("events", []))
    if not isinstance(events, list):
        raise InputError("expected a list of decision records", source=str(path))
    for i, event in enumerate(events):
        # The keys every decision record has (retune.record); anything else is not one.
        if not (isinstance(event, Mapping) and isinstance(event.get("window"), int)
                and event.get("outcome") in RETUNE_OUTCOMES):
            raise InputError(f"record {i} is not a retune decision record (it needs an integer "
                             "window and an outcome: " + ", ".join(RETUNE_OUTCOMES) + ")",
                             source=str(path))
    return events


def _threshold(value: Any) -> float:
    """The retune threshold in percent; the retune config's default when not given."""
    if value is None or isinstance(value, bool):
        return DEFAULT_MIN_IMPROVEMENT_PERCENTAGE
    try:
        return max(float(value), 0.0)
    except (TypeError, ValueError):
        return DEFAULT_MIN_IMPROVEMENT_PERCENTAGE


def _positive(value: Any) -> float | None:
    """``value`` as a finite positive float, else None."""
    out = finite_number(value)
    return out if out is not None and out > 0 else None
