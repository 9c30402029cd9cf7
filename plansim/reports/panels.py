"""Report panels as records: each chart of a report is one ``Panel`` (name, title, reading
guide, the table columns it reads, and a ``draw`` function), and a report is a tuple of them.

Adding a chart to a report is one draw function (in the report's module or a module of its own)
and one ``Panel`` entry in the report's tuple; the name, title, guide and columns are written
once, in the entry. ``draw(data)`` gets the report's data record and returns a figure, a
``Drawn`` (a figure whose reading guide depends on the data), or a note (str) saying why the
panel cannot be drawn from the tables at hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from plansim.reports.page import Cell, Page


@dataclass(frozen=True, slots=True)
class Drawn:
    """A figure with a reading guide that replaces the panel's (when the data changes it)."""

    figure: go.Figure
    how: str


PanelOutput = go.Figure | Drawn | str


@dataclass(frozen=True, slots=True)
class Panel:
    """One chart of a report. ``name`` is a stable identifier (``[a-z_]+``) that the browser
    check and ``docs`` refer to; ``columns`` names the inputs it reads (``table.column``)."""

    name: str
    title: str
    how: str
    columns: tuple[str, ...]
    draw: Callable[[Any], PanelOutput]


def draw_panels(page: Page, panels: Sequence[Panel], data: Any) -> None:
    """One page section per panel, in order: the chart, or the panel's note."""
    for panel in panels:
        out = panel.draw(data)
        if isinstance(out, str):
            page.note(panel.title, out)
        elif isinstance(out, Drawn):
            page.chart(panel.name, panel.title, out.how, out.figure)
        else:
            page.chart(panel.name, panel.title, panel.how, out)


def panel_cells(panels: Sequence[Panel], data: Any) -> list[Cell]:
    """One grid cell per panel (its figure or its note), for ``Page.chart_grid``."""
    cells = []
    for panel in panels:
        out = panel.draw(data)
        how = out.how if isinstance(out, Drawn) else panel.how
        cells.append(
            Cell(panel.name, panel.title, how, out.figure if isinstance(out, Drawn) else out)
        )
    return cells
