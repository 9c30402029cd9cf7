"""Plotly HTML reports built from result tables (never from live objects).

``render_dir(out_dir)`` writes every report an output folder's tables support, with plotly.js
written once beside them (``plotly.min.js``; ``self_contained=True`` embeds it in each page
instead). The per-report functions take tables and return one HTML document (str; plotly.js
embedded unless ``plotly_src`` names the shared file): ``render_replay``, ``render_planner``,
``render_retune``, ``render_predictor``, ``render_windows``, ``render_capacity``,
``render_fleet``. ``write_planner_reports`` cuts planner reports every
``report_interval_hours`` of planner time, each with its tick log (``.log.jsonl.gz``), like the
reference DiagnosticsRecorder.

Every report has the same shape, built with ``page.Page``:

1. ``page.headline([Card(name, label, value, detail, tone), ...])``: what the run answers, with
   units and the bound or SLA each figure is judged against (``headline`` builds the replay's);
2. ``page.part("Charts")`` and ``panels.draw_panels(page, PANELS, data)``: the report's
   ``PANELS`` tuple of ``panels.Panel(name, title, how, columns, draw)`` records; adding a chart
   is one draw function and one entry;
3. ``page.part("Details")``: tables (``page.table``), grouped figures (``page.grouped``) and
   the run's inputs (``page.nested``), every value through ``format`` (units, no Python reprs).

A new report is a module with its ``render_*`` function, its ``PANELS`` and its
``FOLDER_REPORT`` (``folder_tables.FolderReport``: the tables that trigger it, named in
``plansim.schema``, what it reads and writes), and one line in ``folder.FOLDER_REPORTS``.
"""

from plansim.reports.capacity import render_capacity
from plansim.reports.fleet import render_fleet
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
from plansim.reports.windows import render_windows

__all__ = [
    "planner_report_periods",
    "render_capacity",
    "render_dir",
    "render_fleet",
    "render_planner",
    "render_predictor",
    "render_replay",
    "render_retune",
    "render_windows",
    "tick_log_bytes",
    "write_planner_report",
    "write_planner_reports",
]
