"""End to end in a real browser: every report of an output folder opens in headless Chromium
(loading the folder's shared plotly.min.js), shows its headline cards, draws every expected
chart with data, logs no JavaScript error, shows no Python repr, and shows input text as text.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them when missing).
Full-page screenshots are saved in the test's temporary folder, or in
``$PLANSIM_SCREENSHOTS`` when set.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from reports_browser import Browser, find_chromium
from reports_synthetic import (
    XSS,
    write_capacity_folder,
    write_compare_run,
    write_predict_folder,
    write_replay_folder,
    write_windows_folder,
)

from plansim.io import atomic_write_json
from plansim.reports import render_dir
from plansim.reports.compare import comparison, read_runs
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
    "compare_report.html": ["compare_pareto", "compare_latency_cdf"],
}

CARDS = {
    "report.html": ["goodput", "gpu_hours", "p90_ttft", "p90_tpot", "peak_workers", "mean_workers"],
    "planner_report.html": ["goodput", "gpu_hours", "p90_ttft", "p90_tpot", "scaling_events"],
    "retune_report.html": ["decisions", "applied", "best_gain", "objective"],
    "predictor_report.html": ["best_loss", "skill", "error", "buckets"],
    "retune_windows_report.html": ["windows", "winner", "current", "best_gain"],
    "capacity_report.html": [
        "recommended",
        "goodput",
        "cost",
        "lower_bound",
        "best_policy",
        "replays",
    ],
    "compare_report.html": ["runs", "pareto", "best_goodput", "fewest_gpu_hours"],
}
# What Python prints for None, booleans and dicts; none of it may reach a reader.
PYTHON_REPR = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\{'|\[\]|\{\}|nan\b")
_CARDS = """
return Array.from(document.querySelectorAll('[data-card]')).map(function (card) {
  var box = card.getBoundingClientRect();
  return {name: card.dataset.card, value: card.querySelector('.value').textContent,
          text: card.innerText, top: box.top, left: box.left, right: box.right,
          visible: box.top < window.innerHeight};
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
    # The planner run scored goodput and was replayed static too (baseline.json).
    summary = json.loads((replay / "summary.json").read_text())
    atomic_write_json(replay / "summary.json", {**summary, "goodput_completed_requests": 1200})
    atomic_write_json(
        replay / "baseline.json",
        {
            "label": "static 6 workers",
            "summary": {**summary, "goodput_completed_requests": 1600, "gpu_hours": 9.0},
        },
    )
    capacity = write_capacity_folder(tmp_path_factory.mktemp("capacity"), policy_name=XSS)
    runs = tmp_path_factory.mktemp("runs")
    compared = [
        write_compare_run(runs / name, *spec)
        for name, spec in {"c1": (90, 1.0, 1), "c2": (95, 2.0, 2), "c4": (85, 1.5, 4)}.items()
    ]
    compare = tmp_path_factory.mktemp("compare")
    atomic_write_json(compare / "compare.json", comparison(read_runs(compared)))
    folders = (replay, predict, windows, capacity, compare)
    written = [p for folder in folders for p in render_dir(folder)]
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


def test_a_saving_stands_beside_the_goodput_it_cost(
    folders: dict[str, Path], browser: Browser
) -> None:
    # The rule of the planner headline: a GPU-hour saving is never shown without the goodput
    # of both runs, and it stands next to the goodput card, on its row.
    browser.open(folders["planner_report.html"])
    assert browser.wait_for(_RENDERED, timeout_s=90)
    cards = browser.run(_CARDS)
    names = [c["name"] for c in cards]
    savings = [i for i, c in enumerate(cards) if c["name"] == "gpu_hours_gap"]
    assert len(savings) == 1, names
    saving, goodput = cards[savings[0]], cards[names.index("goodput")]
    assert savings[0] == names.index("goodput") + 1
    assert saving["top"] == goodput["top"] and saving["left"] >= goodput["right"]
    # 1,200 of 2,000 good (60.0%) on 6.5 GPU-hours against 1,600 (80.0%) on 9: -27.8%
    assert saving["value"] == "-27.8%"
    assert "goodput 60.0% against 80.0%" in saving["text"]
    assert "goodput 20.0 points lower" in saving["text"]


def test_the_compare_page_draws_the_front_across_runs(
    folders: dict[str, Path], browser: Browser
) -> None:
    browser.open(folders["compare_report.html"])
    assert browser.wait_for(_RENDERED, timeout_s=90)
    front = browser.run(
        "var d = document.querySelector('div[data-chart=compare_pareto]')._fullData;"
        "return d.filter(function (t) { return t.name === 'Pareto front'; })"
        ".map(function (t) { return t.text; });"
    )
    assert front == [["c1", "c2"]]  # c4 (85% for 1.5 GPU-hours) is beaten by c1 (90% for 1)
    cards = {c["name"]: c for c in browser.run(_CARDS)}
    assert cards["pareto"]["value"] == "2" and "c1; c2" in cards["pareto"]["text"]
    rows = browser.run(
        "return Array.from(document.querySelectorAll('tbody tr'))"
        ".map(function (r) { return r.innerText; });"
    )
    assert len(rows) == 3 and all(("yes" in r) == (r.split()[0] in ("c1", "c2")) for r in rows)
