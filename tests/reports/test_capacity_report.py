"""The capacity report: the recommendation as its headline, the Pareto and per-segment charts
with what they should hold, and ``plansim report`` re-rendering it from the folder."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from reports_figures import chart_names, figures, trace, values
from reports_synthetic import XSS, write_capacity_folder

from plansim.errors import InputError
from plansim.reports import render_capacity, render_dir


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_capacity_folder(tmp_path_factory.mktemp("capacity"), policy_name=XSS)


def test_the_report_opens_with_the_recommendation(folder):
    report = json.loads((folder / "capacity.json").read_text())
    best = report["cheapest_static"]
    html = render_capacity(report)
    lede = html.split('<p class="lede">', 1)[1].split("</p>", 1)[0]
    assert lede.startswith(f"Recommended: {best['num_workers']} workers (base)")
    assert "A perfect autoscaler could spend" in lede
    card = html.split('data-card="recommended"', 1)[1]
    assert card.split('<div class="value">', 1)[1].startswith(f"{best['num_workers']} workers")
    saving = 1 - report["oracle"]["cost"] / best["cost"]
    bound = html.split('data-card="lower_bound"', 1)[1].split("</div></div>", 1)[0]
    assert f"{saving * 100:.1f}% below the cheapest static" in bound


def test_without_a_feasible_deployment_the_headline_says_none(folder):
    report = json.loads((folder / "capacity.json").read_text())
    report = {**report, "cheapest_static": None, "recommendation": None}
    html = render_capacity(report)
    assert "No deployment within 16 GPUs meets the 95.0% goodput target." in html
    card = html.split('data-card="recommended"', 1)[1]
    assert card.split('<div class="value">', 1)[1].startswith("none")


def test_the_pareto_chart_has_the_static_points_policies_bound_and_target(folder):
    report = json.loads((folder / "capacity.json").read_text())
    points = pd.read_parquet(folder / "points.parquet")
    html = render_capacity(report, points)
    assert chart_names(html) == ["capacity_pareto", "capacity_segments"]
    fig = figures(html)["capacity_pareto"]
    names = [t.get("name") for t in fig["data"]]
    assert {"base", "Pareto front", "recommended", "lower bound"} <= set(names)
    assert "policy &lt;script&gt;alert(1)&lt;/script&gt;" in names  # escaped for Plotly
    static = points[points["kind"] == "static"]
    assert sorted(values(trace(fig, "base")["x"])) == sorted(static["cost"])
    shapes = fig["layout"]["shapes"]
    assert any(s.get("y0") == report["target"] for s in shapes)  # the target line
    assert any(s.get("x0") == report["oracle"]["cost"] for s in shapes)  # the bound


def test_the_segment_chart_steps_through_the_schedule_against_the_request_rate(folder):
    report = json.loads((folder / "capacity.json").read_text())
    fig = figures(render_capacity(report))["capacity_segments"]
    schedule = values(trace(fig, "hindsight schedule (GPUs)")["y"])
    assert list(schedule) == [s["gpus"] for s in report["oracle"]["segments"] for _ in (0, 1)]
    assert len(set(schedule)) > 1  # the stepped traffic needs more in the middle
    rate = values(trace(fig, "request rate (req/s)")["y"])
    assert sum(rate) * 60 == pytest.approx(report["requests"])


def test_goodput_just_under_the_target_never_reads_as_the_target(folder):
    report = json.loads((folder / "capacity.json").read_text())
    best = {**report["cheapest_static"], "goodput_ratio": 0.95004}
    replayed = {
        **report["oracle"]["schedule_replay"],
        "goodput_ratio": 0.94982,
        "meets_target": False,
    }
    policy = {**report["policies"][0], "goodput_ratio": 0.94996, "meets_target": False}
    html = render_capacity(
        {
            **report,
            "cheapest_static": best,
            "static": [best],
            "oracle": {**report["oracle"], "schedule_replay": replayed},
            "policies": [policy],
        }
    )
    assert "the schedule costs" in html and "at 94.98% goodput (misses the target)" in html
    assert "<td>94.99%</td>" in html.replace('<td class="num">', "<td>")  # the policy row
    assert "95.00% goodput against a 95.0% target" in html
    assert "95.0% goodput" not in html.replace("95.0% goodput target", "")


def test_plansim_report_renders_the_folder(folder):
    written = render_dir(folder)
    assert folder / "capacity_report.html" in written
    assert XSS not in (folder / "capacity_report.html").read_text()


def test_a_foreign_capacity_json_is_one_error(tmp_path):
    (tmp_path / "capacity.json").write_text('{"oops": 1}')
    with pytest.raises(InputError, match="not a plansim capacity result"):
        render_dir(tmp_path)


def test_the_best_policy_card_says_what_it_costs_against_the_static_pick(folder):
    # The static pick costs 1.0 GPU-hour; a policy at 1.2 costs (1.0 - 1.2) / 1.0 = 20% more,
    # one at 0.75 costs 25% less.
    from plansim.reports.capacity import capacity_cards

    report = json.loads((folder / "capacity.json").read_text())
    best = {**report["cheapest_static"], "cost": 1.0}

    def card(cost: float, saving_pct: float) -> tuple[str, str, str]:
        policy = {
            "name": "dynamo",
            "meets_target": True,
            "cost": cost,
            "goodput_ratio": 0.96,
            "saving_vs_static_pct": saving_pct,
            "share_of_hindsight_saving": None,
            "gap_to_oracle_pct": None,
        }
        cards = capacity_cards({**report, "cheapest_static": best, "policies": [policy]})
        top = next(c for c in cards if c.name == "best_policy")
        return top.value, top.detail, top.tone

    value, detail, tone = card(1.2, -20.0)
    assert value == "dynamo" and tone == "bad"
    assert detail == "1.2 GPU-h at 96.0%, 20% more than the recommended static deployment (1 GPU-h)"
    value, detail, tone = card(0.75, 25.0)
    assert tone == "good" and "25% less than the recommended static deployment" in detail
