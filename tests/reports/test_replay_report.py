"""The replay report: every chart from full tables, notes for missing ones, escaping, size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import reports_synthetic as syn
from reports_figures import chart_names, figures, trace, values

from plansim.reports import render_replay
from plansim.reports.sampling import MAX_POINTS

ALL_CHARTS = [
    "traffic",
    "latency_cdf",
    "latency_percentiles",
    "pool_load",
    "workers",
    "prefix_reuse",
    "worker_balance",
]


def _full(**overrides):
    tables = {
        "requests": syn.requests_table(),
        "timeseries": syn.timeseries_table(),
        "workers": syn.workers_table(),
        "summary": syn.summary(),
        "inputs": syn.inputs(),
        "scaling_events": syn.scaling_events(),
    }
    tables.update(overrides)
    return render_replay(**tables)


def test_full_tables_give_every_chart():
    # Without sessions or a concurrency cap the closed-loop panel is a note.
    assert chart_names(_full()) == ALL_CHARTS


def test_missing_tables_become_notes():
    html = render_replay(syn.requests_table(), None, None, None, None, None)
    assert chart_names(html) == ["traffic", "latency_cdf", "latency_percentiles", "prefix_reuse"]
    assert "Not shown: timeseries.parquet is absent or empty." in html
    assert "Not shown: workers.parquet is absent or empty." in html
    assert "Not shown: summary.json is absent or empty." in html


def test_a_missing_column_is_named_in_the_note():
    requests = syn.requests_table().drop(columns=["ttft_ms", "reused_input_tokens"])
    html = _full(
        requests=requests, timeseries=syn.timeseries_table().drop(columns=["prefix_reuse"])
    )
    assert "Not shown: requests.parquet has no column ttft_ms." in html
    assert "Not shown: timeseries.parquet has no column prefix_reuse." in html
    assert "latency_cdf" not in chart_names(html)


def test_sla_line_reports_the_share_of_requests_that_met_it():
    requests = syn.requests_table(n=4).assign(
        status="completed", ttft_ms=[100.0, 200.0, 300.0, 400.0]
    )
    fig = figures(_full(requests=requests))["latency_cdf"]
    # SLA 500 ms from inputs: every request met it; 2 of 4 would meet 250 ms.
    sla = trace(fig, "TTFT SLA 500 ms (100.0% met)")
    assert list(values(sla["x"])) == [500.0, 500.0]
    html = _full(requests=requests, inputs={**syn.inputs(), "sla": {"ttft_ms": 250.0}})
    trace(figures(html)["latency_cdf"], "TTFT SLA 250 ms (50.0% met)")


def test_percentiles_are_taken_per_minute_of_arrival():
    # Two minutes: TTFTs 10, 20, 30 in the first and 100 in the second.
    requests = syn.requests_table(n=4).assign(
        status="completed",
        arrival_ms=[0.0, 1000.0, 2000.0, 61_000.0],
        ttft_ms=[10.0, 20.0, 30.0, 100.0],
    )
    fig = figures(_full(requests=requests, timeseries=None))["latency_percentiles"]
    p50 = trace(fig, "TTFT p50")
    assert list(values(p50["y"])) == [20.0, 100.0]


def test_scaling_events_are_marked_and_advisory_ones_hollow():
    fig = figures(_full())["workers"]
    applied = trace(fig, "decode scaling events")
    assert list(values(applied["y"])) == [3.0, 4.0, 3.0]
    assert applied["marker"]["symbol"] == ["triangle-up", "triangle-up", "triangle-down"]
    advisory = trace(fig, "prefill advisory events")
    assert advisory["marker"]["symbol"] == ["triangle-down-open"]


def test_text_from_input_is_escaped():
    requests = syn.requests_table(n=50)
    requests.loc[:, "request_id"] = syn.XSS
    requests.loc[:, "e2e_latency_ms"] = 1.0
    html = _full(requests=requests, inputs=syn.inputs(model=syn.XSS, trace=syn.XSS))
    assert syn.XSS not in html
    assert (
        html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3
    )  # model, trace file, request ids


def test_every_trace_has_at_most_max_points():
    events = [
        {
            "at_s": 8.0 * k,
            "component": "decode",
            "from_count": 2 + k % 2,
            "to_count": 3 - k % 2,
            "reason": "load",
            "applied": True,
        }
        for k in range(10_000)
    ]
    html = _full(
        requests=syn.requests_table(n=20_000, span_s=86_400.0),
        timeseries=syn.timeseries_table(span_s=86_400),
        scaling_events=events,
    )
    for name, fig in figures(html).items():
        for tr in fig["data"]:
            for axis in ("x", "y"):
                assert len(values(tr.get(axis))) <= MAX_POINTS, (name, tr.get("name"), axis)


@pytest.mark.slow
def test_a_million_request_replay_report_stays_under_10_mb():
    requests = syn.requests_table(n=1_000_000, span_s=86_400.0)
    html = render_replay(
        requests,
        syn.timeseries_table(span_s=86_400),
        syn.workers_table(),
        syn.summary(),
        syn.inputs(),
        syn.scaling_events(),
    )
    assert len(html.encode("utf-8")) < 10_000_000
    cdf = trace(figures(html)["latency_cdf"], "E2E CDF")
    assert len(values(cdf["x"])) < 1000  # quantiles, not one point per request


def test_requests_by_outcome_table_counts_each_status():
    requests = syn.requests_table(n=200)  # every 97th request from index 5 is rejected: 5, 102, 199
    html = _full(requests=requests)
    assert '<td>rejected</td><td>never fits</td><td class="num">3</td>' in html
    assert '<td>completed</td><td></td><td class="num">197</td>' in html


def test_empty_requests_table_still_renders():
    empty = syn.requests_table(n=1).iloc[0:0]
    html = render_replay(empty, syn.timeseries_table(span_s=60), pd.DataFrame(), {}, {}, [])
    assert "pool_load" in chart_names(html)
    assert "latency_cdf" not in chart_names(html)
    assert "Not shown: requests.parquet is absent or empty." in html


def test_prefix_reuse_is_token_weighted_per_admission_bin():
    # two requests admitted in the first second: 50 of 400 input tokens reused -> 12.5%;
    # one in second 20 (the run spans 21 s: 1 s bins, axis in seconds): 30 of 60 -> 50%
    requests = syn.requests_table(n=3).assign(
        arrival_ms=[0.0, 800.0, 20_000.0],
        last_token_ms=[1000.0, 2000.0, 21_000.0],
        first_admit_ms=[100.0, 900.0, 20_500.0],
        input_length=[100, 300, 60],
        reused_input_tokens=[50, 0, 30],
    )
    fig = figures(_full(requests=requests, timeseries=None))["prefix_reuse"]
    reuse = trace(fig, "reuse (1 s bins)")
    assert list(values(reuse["x"])) == [float(s) for s in range(21)]
    y = np.asarray(values(reuse["y"]), dtype=float)
    assert (y[0], y[20]) == (12.5, 50.0)
    assert np.isnan(y[1:20]).all()  # nothing admitted in seconds 1-19: a gap, not 0%


def test_header_leaves_out_unset_inputs_and_repeated_request_counts():
    inputs = {
        **syn.inputs(),
        "requests": 2000,
        "num_requests": 2000,
        "planner": None,
        "skipped": {},
    }
    details = _full(inputs=inputs).split("<h2>Run inputs</h2>")[1]
    assert details.count("<code>requests</code>") == 1
    assert "<code>num_requests</code>" not in details
    assert "planner" not in details and "skipped" not in details


def test_no_completed_request_gives_notes_for_the_latency_charts():
    requests = syn.requests_table(n=10).assign(status="rejected", ttft_ms=float("nan"))
    html = _full(requests=requests)
    assert "latency_cdf" not in chart_names(html)
    assert "latency_percentiles" not in chart_names(html)
    assert html.count("Not shown: no request completed with a first token.") == 2


def test_closed_loop_panel_draws_session_totals_and_cap_waits():
    requests = syn.requests_table()
    n = len(requests)
    release = requests["arrival_ms"].to_numpy() - np.where(np.arange(n) % 2, 250.0, 0.0)
    requests = requests.assign(release_ms=release, session_id=[f"s{i % 3}" for i in range(n)])
    sessions = pd.DataFrame(
        {"session_id": ["s0", "s1", "s2"], "total_ms": [1_000.0, 4_000.0, np.nan]}
    )
    html = _full(requests=requests, sessions=sessions)
    assert chart_names(html) == [*ALL_CHARTS[:-1], "closed_loop", ALL_CHARTS[-1]]
    panel = figures(html)["closed_loop"]
    totals, waits = (
        np.asarray(values(trace(panel, name)["x"])) for name in ("Session total", "Wait at the cap")
    )
    assert totals.min() == 1.0 and totals.max() == 4.0  # seconds; the incomplete one is left out
    assert waits.max() == 0.25
    assert "release (ms)" in html  # the slowest-requests table shows the release time


def test_open_loop_replay_explains_the_missing_closed_loop_panel():
    requests = syn.requests_table()
    html = _full(requests=requests.assign(release_ms=requests["arrival_ms"]))
    assert "closed_loop" not in chart_names(html)
    assert "has no sessions or release waits" in html
    assert "release (ms)" not in html
