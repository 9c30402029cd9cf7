"""The predictor report: forecasts vs actual, error over time, the loss table."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest
import reports_synthetic as syn
from reports_figures import chart_names, figures, trace, values

from plansim.reports import render_predictor
from plansim.reports.predictor import MAX_PREDICTORS, ranking_rows


def test_every_chart_and_the_loss_table():
    html = render_predictor(
        syn.predictions_table(), ranking_rows(syn.predictor_summary()), interval_s=60.0
    )
    assert chart_names(html) == ["predictor_loss", "predictor_forecasts", "predictor_errors"]
    assert "Ranking by pre-sweep loss (best first)" in html
    assert "Request-count error (lowest first), for reference" in html


def test_bucket_positions_become_time_with_an_interval():
    # 10 buckets of 60 s: the last starts at 540 s, drawn in seconds
    fig = figures(render_predictor(syn.predictions_table(n_buckets=10), interval_s=60.0))[
        "predictor_forecasts"
    ]
    assert list(values(trace(fig, "actual")["x"])) == [60.0 * b for b in range(10)]
    # 30 buckets: the last starts at 1740 s (> 15 min), drawn in minutes
    fig = figures(render_predictor(syn.predictions_table(n_buckets=30), interval_s=60.0))[
        "predictor_forecasts"
    ]
    assert fig["layout"]["xaxis3"]["title"]["text"] == "Bucket start (min)"
    assert list(values(trace(fig, "actual")["x"]))[:3] == [0.0, 1.0, 2.0]


def test_losses_are_computed_when_the_run_wrote_no_ranking():
    frame = pd.DataFrame(
        {
            "bucket": [0, 0],
            "predictor": ["a", "b"],
            "series": ["request_count"] * 2,
            "forecast": [math.e - 1, 0.0],
            "actual": [0.0, 0.0],
        }
    )
    html = render_predictor(frame)
    # a: |log1p(e - 1) - log1p(0)| = 1; b: 0 -> b ranks first
    assert html.index("<td>b</td>") < html.index("<td>a</td>")
    assert '<td class="num">1</td>' in html


def test_only_the_best_predictors_are_drawn():
    names = tuple(f"p{k}" for k in range(MAX_PREDICTORS + 2))
    html = render_predictor(syn.predictions_table(n_buckets=5, predictors=names))
    fig = figures(html)["predictor_forecasts"]
    drawn = {t["name"] for t in fig["data"]} - {"actual"}
    assert len(drawn) == MAX_PREDICTORS
    assert f"The {MAX_PREDICTORS} best of {MAX_PREDICTORS + 2} predictors are drawn." in html


@pytest.mark.parametrize(
    "summary",
    [
        [{"predictor": "x", "loss": 0.1}],
        {"ranking": [{"predictor": "x", "loss": 0.1}]},
        {"predictors": [{"predictor": "x", "loss": 0.1}], "interval_s": 60},
    ],
)
def test_ranking_rows_accepts_a_list_or_a_wrapped_list(summary):
    assert ranking_rows(summary) == [{"predictor": "x", "loss": 0.1}]


def test_predictor_names_are_escaped():
    html = render_predictor(syn.predictions_table(n_buckets=5, predictors=(syn.XSS,)))
    assert syn.XSS not in html
    assert trace(figures(html)["predictor_forecasts"], "&lt;script&gt;alert(1)&lt;/script&gt;")


def test_bucket_start_times_are_used_when_given():
    frame = syn.predictions_table(n_buckets=3).assign(time_s=lambda f: 100.0 + 30.0 * f["bucket"])
    fig = figures(render_predictor(frame))["predictor_forecasts"]
    assert list(values(trace(fig, "actual")["x"])) == [100.0, 130.0, 160.0]


def _cards(html):
    return dict(
        re.findall(r'data-card="(\w+)"><div class="label">.*?<div class="value[^"]*">(.*?)<', html)
    )


def test_one_winner_by_the_loss_with_its_skill_against_the_naive_forecast():
    # constant: loss 0.10, MAPE 8%; kalman: loss 0.15, MAPE 7%; the naive loss 0.125
    summary = syn.predictor_summary()
    html = render_predictor(
        syn.predictions_table(), ranking_rows(summary), interval_s=60.0, naive=summary["naive"]
    )
    cards = _cards(html)
    assert cards["best_loss"] == "constant"
    assert cards["skill"] == "+20%"  # 1 - 0.10 / 0.125
    assert cards["error"] == "MAPE 8%"
    # No second winner: the MAPE order is a reference table, not a headline.
    assert "best_mape" not in cards and "ranking" not in cards
    by_mape = html.split("Request-count error (lowest first)")[1]
    assert by_mape.index("<td>kalman</td>") < by_mape.index("<td>constant</td>")


def test_a_huge_request_count_error_is_warned_about():
    summary = syn.predictor_summary()
    for row in summary["predictors"]:
        row["mape_request_count_pct"] = 178.6  # the Azure code trace at 60 s buckets
    html = render_predictor(syn.predictions_table(), ranking_rows(summary))
    assert _cards(html)["error"] == "MAPE 179%"
    assert "warning: forecasts miss by more than half of a bucket&#x27;s requests" in html


def test_an_empty_bucket_draws_its_average_lengths_as_gaps():
    frame = pd.DataFrame(
        {
            "bucket": [0, 1, 2] * 2,
            "predictor": ["a"] * 6,
            "series": ["request_count"] * 3 + ["avg_isl"] * 3,
            "forecast": [5.0, 5.0, 5.0, 100.0, 100.0, 100.0],
            "actual": [5.0, 0.0, 5.0, 100.0, 0.0, 100.0],  # bucket 1 is empty
        }
    )
    fig = figures(render_predictor(frame, interval_s=60.0))["predictor_forecasts"]
    actual = [t for t in fig["data"] if t["name"] == "actual"]
    counts, isl = (list(values(t["y"])) for t in actual)
    assert counts == [5.0, 0.0, 5.0]  # no request is a real zero
    assert isl[0] == 100.0 and isl[2] == 100.0 and math.isnan(isl[1])
