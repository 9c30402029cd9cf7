"""The retune windows report: win counts, the current point, the gain spread, rankings."""

from __future__ import annotations

import re

import reports_synthetic as syn
from reports_figures import chart_names, figures, values

from plansim.reports import render_dir
from plansim.reports.windows import render_windows


def _cards(html: str) -> dict[str, str]:
    return dict(
        re.findall(r'data-card="(\w+)"><div class="label">.*?<div class="value[^"]*">(.*?)<', html)
    )


def test_a_windows_folder_renders_its_report(tmp_path):
    syn.write_windows_folder(tmp_path)
    written = [p.name for p in render_dir(tmp_path)]
    assert written == ["plotly.min.js", "retune_windows_report.html"]
    html = (tmp_path / "retune_windows_report.html").read_text()
    assert chart_names(html) == ["windows_scores", "windows_wins", "windows_spread"]


def test_headline_names_the_winner_the_current_point_and_the_best_gain(tmp_path):
    syn.write_windows_folder(tmp_path)
    render_dir(tmp_path)
    cards = _cards((tmp_path / "retune_windows_report.html").read_text())
    assert cards["windows"] == "3"
    assert cards["winner"] == "b"  # wins windows 0 and 2
    assert cards["current"] == "1 of 3 wins"
    assert cards["best_gain"] == "+10.0%"


def test_the_score_legend_names_the_unit_and_the_scoring_sla(tmp_path):
    syn.write_windows_folder(tmp_path)
    render_dir(tmp_path)
    html = (tmp_path / "retune_windows_report.html").read_text()
    assert "in SLA-good output tok/s per GPU (higher is better)" in html
    assert "met TTFT ≤ 500 ms and ITL ≤ 20 ms" in html


def test_the_spread_shows_each_candidates_gain_over_the_current_point():
    html = render_windows(
        syn.window_records(3),
        {
            "candidates": [
                {"label": "a", "is_current": True, "wins": 1},
                {"label": "b", "wins": 2},
                {"label": "c", "wins": 0},
            ]
        },
    )
    boxes = {
        t["name"]: [round(v, 6) for v in values(t["x"])]
        for t in figures(html)["windows_spread"]["data"]
    }
    assert set(boxes) == {"b", "c"}  # the current point is the reference, not a box
    assert boxes["b"] == [10.0, -5.0, 10.0]
    assert boxes["c"] == [-20.0, -20.0, -20.0]


def test_every_window_ranking_is_listed():
    html = render_windows(syn.window_records(2))
    table = html.split("Per-window rankings")[1]
    assert table.count("<tr>") == 1 + 2 * 3  # header + 2 windows x 3 candidates
    assert "a (current)" in table
