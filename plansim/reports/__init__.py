"""Plotly HTML reports built from result tables (never from live objects).

``render_dir(out_dir)`` writes every report an output folder's tables support. The per-report
functions take DataFrames and return one self-contained HTML document (str) for the Python API:
``render_replay``, ``render_planner``, ``render_retune``, ``render_predictor``.
``write_planner_reports`` cuts planner reports every ``report_interval_hours`` of planner time,
each with its tick log (``.log.jsonl.gz``), like the reference DiagnosticsRecorder.
"""

from plansim.reports.folder import render_dir
from plansim.reports.planner import (
    planner_report_periods,
    render_planner,
    tick_log_bytes,
    write_planner_report,
    write_planner_reports,
)
from plansim.reports.predictor import render_predictor
from plansim.reports.replay import render_replay
from plansim.reports.retune import render_retune

__all__ = [
    "planner_report_periods",
    "render_dir",
    "render_planner",
    "render_predictor",
    "render_replay",
    "render_retune",
    "tick_log_bytes",
    "write_planner_report",
    "write_planner_reports",
]
