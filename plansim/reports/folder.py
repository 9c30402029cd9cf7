"""``render_dir``: read the tables of an output folder and write every report that applies.

``FOLDER_REPORTS`` is the table of those reports, each a ``FolderReport`` its module declares
(the files that trigger it, what it reads, what it writes): ``replay`` (``report.html``),
``planner`` (``planner_report.html`` and its tick log, and one pair per period; none for a
planner that only retunes; with ``baseline.json`` its headline compares with the starting counts
replayed static), ``retune`` (with ``baseline.json``, goodput and GPU-hours before and after),
``predictor``, ``windows`` (the retune windows report), ``capacity``, ``fleet``,
``calibration`` and ``compare`` (``compare.json``; the compared folders are read again); each
module's ``FOLDER_REPORT`` says
which tables make it.

plotly.js is written once, as ``plotly.min.js`` at the top of the folder, and every report
loads it from there (reports keep working when the folder is copied whole); with
``self_contained=True`` each report embeds it instead and opens as a single file.

Every file is written atomically, and every table every report uses is read (and checked)
before any report is written, so a damaged table leaves the folder's reports as they were. A
table that cannot be read is a user mistake (``InputError`` naming the file), as is a folder with
nothing to render.

Adding a report: its module declares ``FOLDER_REPORT``, and one line in ``FOLDER_REPORTS``.
"""

from __future__ import annotations

from pathlib import Path

from plansim.errors import InputError
from plansim.registry import Registry
from plansim.reports.assets import write_plotly_js
from plansim.reports.folder_tables import FolderOutput, FolderReport, FolderTables

FOLDER_REPORTS: Registry[FolderReport] = Registry(
    "folder report",
    {
        "replay": "plansim.reports.replay:FOLDER_REPORT",
        "planner": "plansim.reports.planner:FOLDER_REPORT",
        "retune": "plansim.reports.retune:FOLDER_REPORT",
        "predictor": "plansim.reports.predictor:FOLDER_REPORT",
        "windows": "plansim.reports.windows:FOLDER_REPORT",
        "capacity": "plansim.reports.capacity:FOLDER_REPORT",
        "compare": "plansim.reports.compare:FOLDER_REPORT",
        "fleet": "plansim.reports.fleet:FOLDER_REPORT",
        "calibration": "plansim.reports.calibration:FOLDER_REPORT",
    },
)


def render_dir(out_dir: str | Path, *, self_contained: bool = False) -> list[Path]:
    """Write the reports that the tables in ``out_dir`` support; returns the paths written
    (``plotly.min.js`` first, unless ``self_contained``)."""
    folder = Path(out_dir)
    if not folder.is_dir():
        raise InputError("not a folder", source=str(folder))
    reports = [report for _, report in FOLDER_REPORTS.items()]
    triggers = [trigger for report in reports for trigger in report.triggers]
    if not any(path.is_file() for trigger in triggers for path in folder.glob(trigger)):
        raise InputError(
            f"nothing to render: no {', '.join(triggers[:-1])} or {triggers[-1]}",
            source=str(folder),
        )
    tables = FolderTables(folder)
    due = [report for report in reports if report.read(tables)]
    out = FolderOutput(folder, self_contained)
    written = [] if self_contained else [write_plotly_js(folder)]
    for report in due:
        written += report.write(tables, out)
    return written
