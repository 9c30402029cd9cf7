"""plotly.js as a shared file of an output folder: written once beside the reports, so that each
report page stays small and every report keeps working offline when the folder is copied whole.
"""

from __future__ import annotations

from pathlib import Path

from plansim.io import atomic_write_text
from plansim.reports.page import plotly_js
from plansim.schema import PLOTLY_JS


def write_plotly_js(folder: str | Path) -> Path:
    """``folder/plotly.min.js``, written (atomically) unless it already holds this bundle."""
    path = Path(folder) / PLOTLY_JS
    text = plotly_js()
    if (
        path.is_file()
        and path.stat().st_size == len(text.encode("utf-8"))
        and path.read_text(encoding="utf-8", errors="replace") == text
    ):
        return path
    return atomic_write_text(path, text)


def plotly_src(page: Path, folder: Path) -> str:
    """The relative URL of ``folder``'s plotly.js from ``page`` (a report inside ``folder``)."""
    depth = len(page.resolve().parent.relative_to(folder.resolve()).parts)
    return "../" * depth + PLOTLY_JS
