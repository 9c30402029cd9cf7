"""The retune report: candidates per window with the current point, best and threshold band."""

from __future__ import annotations

import pytest
import reports_synthetic as syn
from reports_figures import chart_names, figures, trace, values

from plansim.reports import render_retune


def test_every_chart_is_drawn_from_decision_records():
    html = render_retune(syn.retune_events(4), min_improvement_percentage=2.0)
    assert chart_names(html) == [
        "retune_scores",
        "retune_outcomes",
        "retune_parameters",
        "retune_presweep",
    ]


def test_current_point_best_candidate_and_threshold_band():
    fig = figures(render_retune(syn.retune_events(1), min_improvement_percentage=2.0))[
        "retune_scores"
    ]
    # window 0: candidate j scores 100 + 3j; the current point is j=1 (103), the best j=5 (115)
    assert list(values(trace(fig, "current point")["y"])) == [103.0]
    assert list(values(trace(fig, "best candidate")["y"])) == [115.0]
    band = [y for y in trace(fig, "threshold band")["y"] if y is not None]
    assert band == pytest.approx([103.0, 103.0, 103.0 * 1.02, 103.0 * 1.02, 103.0])


def test_a_minimised_objective_puts_the_band_below_the_current_score():
    events = [{**e, "objective": "TTFT"} for e in syn.retune_events(1)]
    fig = figures(render_retune(events, min_improvement_percentage=10.0))["retune_scores"]
    band = [y for y in trace(fig, "threshold band")["y"] if y is not None]
    assert min(band) == pytest.approx(103.0 * 0.9)
    # without a recorded best point, the lowest score is the best when lower is better
    events = [{k: v for k, v in e.items() if k != "best"} for e in events]
    fig = figures(render_retune(events))["retune_scores"]
    assert list(values(trace(fig, "best candidate")["y"])) == [100.0]


def test_failed_window_has_no_dots_and_outcomes_are_on_their_rows():
    fig = figures(render_retune(syn.retune_events(4)))["retune_outcomes"]
    failed = trace(fig, "failed")
    assert list(values(failed["x"])) == [(900.0 * 3 + 90.0) / 60.0]  # window 2 decided at 2790 s
    assert "current point failed" in failed["text"][0]


def test_presweep_winner_is_marked():
    fig = figures(render_retune(syn.retune_events(2)))["retune_presweep"]
    winner = trace(fig, "winner")
    assert list(values(winner["y"])) == [0.22, 0.22]
    assert winner["text"] == ["load_predictor=kalman", "load_predictor=kalman"]


def test_parameters_in_force_follow_the_current_point():
    fig = figures(render_retune(syn.retune_events(3)))["retune_parameters"]
    credit = trace(fig, "router.overlap_score_credit")
    assert list(values(credit["y"])) == [0.5, 0.5, 0.5]


def test_no_decisions_gives_a_note():
    html = render_retune([])
    assert chart_names(html) == []
    assert "retune_events.json holds no decision" in html


def test_candidate_labels_are_escaped():
    events = syn.retune_events(1)
    events[0]["candidates"][0]["label"] = syn.XSS
    html = render_retune(events)
    assert syn.XSS not in html


def test_the_headline_gives_goodput_and_gpu_hours_before_and_after():
    import re

    from plansim.reports.headline import Reference

    after = {"num_requests": 2254, "goodput_completed_requests": 1812, "gpu_hours": 0.67}
    before = Reference("without retune", 0.67, 1736 / 2254)
    html = render_retune(syn.retune_events(), summary=after, baseline=before)
    cards = dict(
        re.findall(
            r'data-card="(\w+)"><div class="label">.*?<div class="value[^"]*">'
            r"(.*?)<",
            html,
        )
    )
    # 1,736 of 2,254 (77.0%) without retune, 1,812 (80.4%) with it: +3.4 points
    assert cards["goodput_change"] == "77.0% → 80.4%"
    assert "+3.4 points: without retune, then as run" in html
    assert cards["gpu_hours_change"] == "0.67 → 0.67"
    assert list(cards)[:2] == ["goodput_change", "gpu_hours_change"]  # the bottom line first
    assert "goodput_change" not in render_retune(syn.retune_events())
