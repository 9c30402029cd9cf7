"""End to end in a real browser: every report of an output folder opens in headless Chromium
(loading the folder's shared plotly.min.js), shows its headline cards, draws every expected
chart with data, logs no JavaScript error, shows no Python repr, and shows input text as text.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them when missing).
Full-page screenshots are saved in the test's temporary folder, or in
``$PLANSIM_SCREENSHOTS`` when set.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from reports_browser import Browser, find_chromium
from reports_synthetic import (
    XSS,
    write_capacity_folder,
    write_predict_folder,
    write_replay_folder,
    write_windows_folder,
)

from plansim.reports import render_dir
from plansim.reports.planner import PANELS

pytestmark = pytest.mark.slow

EXPECTED = {
    "report.html": [
        "traffic",
        "latency_cdf",
        "latency_percentiles",
        "pool_load",
        "workers",
        "prefix_reuse",
        "worker_balance",
    ],
    "planner_report.html": [panel.name for panel in PANELS],
    "retune_report.html": [
        "retune_scores",
        "retune_outcomes",
        "retune_parameters",
        "retune_presweep",
    ],
    "predictor_report.html": ["predictor_loss", "predictor_forecasts", "predictor_errors"],
    "retune_windows_report.html": ["windows_scores", "windows_wins", "windows_spread"],
    "capacity_report.html": ["capacity_pareto", "capacity_segments"],
}

CARDS = {
    "report.html": ["goodput", "gpu_hours", "p90_ttft", "p90_tpot", "peak_workers", "mean_workers"],
    "planner_report.html": ["goodput", "gpu_hours", "p90_ttft", "p90_tpot", "scaling_events"],
    "retune_report.html": ["decisions", "applied", "best_gain", "objective"],
    "predictor_report.html": ["best_loss", "skill", "error", "buckets"],
    "retune_windows_report.html": ["windows", "winner", "current", "best_gain"],
    "capacity_report.html": ["recommended", "goodput", "cost", "lower_bound", "best_policy",
                             "replays"],
}
# What Python prints for None, booleans and dicts; none of it may reach a reader.
PYTHON_REPR = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\{'|\[\]|\{\}|nan\b")
_CARDS = """
return Array.from(document.querySelectorAll('[data-card]')).map(function (card) {
  return {name: card.dataset.card, value: card.querySelector('.value').textContent,
          visible: card.getBoundingClientRect().top < window.innerHeight};
});
"""

_RENDERED = (
    "var s = window.__plansim;"
    "return (s && s.expected > 0 && (s.errors.length > 0 || s.rendered >= s.expected)) ? s : null;"
)
_CHARTS = """
return Array.from(document.querySelectorAll('div.chart')).map(function (div) {
  var lengths = (div._fullData || []).map(function (t) {
    if (t._length != null) { return t._length; }
    return (t.x && t.x.length) || (t.y && t.y.length) || 0;
  });
  return {name: div.dataset.chart, traces: lengths.length,
          points: lengths.reduce(function (a, b) { return a + b; }, 0),
          svg: div.querySelector('svg.main-svg') !== null};
});
"""


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    replay = tmp_path_factory.mktemp("replay")
    write_replay_folder(replay, planner=True, retune=True, model=XSS, trace=XSS, request_id=XSS)
    predict = tmp_path_factory.mktemp("predict")
    write_predict_folder(predict, predictors=("constant", "kalman", XSS))
    windows = tmp_path_factory.mktemp("windows")
    write_windows_folder(windows, label=XSS)
    capacity = write_capacity_folder(tmp_path_factory.mktemp("capacity"), policy_name=XSS)
    folders = (replay, predict, windows, capacity)
    written = render_dir(replay) + render_dir(predict) + render_dir(windows) + render_dir(capacity)
    return {p.name: p for p in written if p.suffix == ".html" and p.parent in folders}


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    if find_chromium() is None:
        pytest.fail(
            "the browser check needs Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver)"
        )
    home = tmp_path_factory.mktemp("chromium")
    b = Browser(home / "profile", home / "chromedriver.log")
    yield b
    b.close()


@pytest.mark.parametrize("report", sorted(EXPECTED))
def test_report_renders_every_chart_without_errors(
    report: str, folders: dict[str, Path], browser: Browser, tmp_path: Path
) -> None:
    browser.open(folders[report])
    state = browser.wait_for(_RENDERED, timeout_s=90)
    assert state, "charts did not finish rendering"
    assert state["errors"] == []
    assert browser.console_errors() == []
    assert browser.alert_text() is None
    charts = browser.run(_CHARTS)
    assert [c["name"] for c in charts] == EXPECTED[report]
    for chart in charts:
        assert chart["svg"] and chart["traces"] > 0 and chart["points"] > 0, chart
    cards = browser.run(_CARDS)
    names = [c["name"] for c in cards]
    assert set(CARDS[report]) <= set(names), names
    # the headline is the first thing a reader sees
    assert all(c["visible"] and c["value"].strip() for c in cards), cards
    text = browser.run("return document.body.innerText;")
    assert PYTHON_REPR.findall(text) == []
    folder = Path(os.environ.get("PLANSIM_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    shot = folder / report.replace(".html", ".png")
    browser.screenshot(shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_input_text_shows_as_text_in_the_browser(
    folders: dict[str, Path], browser: Browser
) -> None:
    for report in ("report.html", "predictor_report.html"):
        browser.open(folders[report])
        assert browser.wait_for(_RENDERED, timeout_s=90)
        assert browser.alert_text() is None
        # only the page's own scripts: the bootstrap, plotly.js and the plotting loop
        assert (
            browser.run(
                "return document.querySelectorAll("
                "'script:not([type=\"application/json\"])').length;"
            )
            == 3
        )
        assert XSS in browser.run("return document.body.innerText;")
    # Plotly draws the escaped predictor name as the literal text
    legend = browser.run(
        "return Array.from(document.querySelectorAll('.legendtext')).map(e => e.textContent);"
    )
    assert XSS in legend
