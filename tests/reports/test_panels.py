"""Report panels as records: a report draws its tuple of panels in order, and one new entry is
all a new chart needs."""

from __future__ import annotations

import importlib
from pathlib import Path

import plotly.graph_objects as go
import pytest
import reports_synthetic as syn
from reports_figures import chart_names

from plansim.reports import panels as panels_module
from plansim.reports import replay
from plansim.reports.folder import FOLDER_REPORTS
from plansim.reports.page import Page
from plansim.reports.panels import Drawn, Panel, draw_panels


def _figure(_data):
    return go.Figure(go.Scatter(x=[0, 1], y=[1, 2]))


def test_a_panel_is_drawn_as_a_chart_a_guided_chart_or_a_note():
    panels = (
        Panel("first", "First", "static guide", ("t.a",), _figure),
        Panel("second", "Second", "unused", ("t.b",), lambda d: Drawn(_figure(d), f"guide {d}")),
        Panel("third", "Third", "g", ("t.c",), lambda d: "Not shown: t has no column c."),
    )
    page = Page("t")
    draw_panels(page, panels, 42)
    html = page.render("plotly.min.js")
    assert chart_names(html) == ["first", "second"]
    assert "static guide" in html and "guide 42" in html and "unused" not in html
    assert "Not shown: t has no column c." in html


# Every report render_dir writes.
REPORT_MODULES = sorted({target.partition(":")[0] for target in FOLDER_REPORTS._targets.values()})


@pytest.mark.parametrize("module", REPORT_MODULES)
def test_every_report_draws_a_tuple_of_panels_with_unique_identifiers(module):
    panels = importlib.import_module(module).PANELS
    assert isinstance(panels, tuple) and all(isinstance(p, Panel) for p in panels)
    names = [p.name for p in panels]
    assert len(set(names)) == len(names)
    assert all(n.replace("_", "").isalpha() and n.islower() for n in names)
    assert all(p.columns for p in panels)


def test_only_panels_put_charts_on_a_page():
    """Every chart is a panel: ``Page.chart`` is called by ``draw_panels`` alone."""
    root = Path(panels_module.__file__).parent
    callers = sorted(
        path.name for path in root.glob("*.py") if ".chart(" in path.read_text(encoding="utf-8")
    )
    assert callers == ["panels.py"]


def test_adding_an_entry_adds_a_chart_to_the_report(monkeypatch):
    extra = Panel("replay_extra", "Extra", "one more", ("requests.arrival_ms",), _figure)
    monkeypatch.setattr(replay, "PANELS", (*replay.PANELS, extra))
    html = replay.render_replay(syn.requests_table(n=50), syn.timeseries_table(600))
    assert chart_names(html)[-1] == "replay_extra"
