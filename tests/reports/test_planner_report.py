"""The planner diagnostics report: periods like the reference recorder, the 6 x 2 grid, the
tick log sidecar."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pandas as pd
import reports_synthetic as syn
from reports_figures import figures, trace, values

from plansim.reports import (
    planner_report_periods,
    render_planner,
    tick_log_bytes,
    write_planner_reports,
)
from plansim.reports.planner import LOAD_COLOURS, TITLES


def test_a_report_is_due_when_an_interval_has_passed_since_the_last():
    at = np.array([0.0, 1800.0, 3600.0, 5400.0, 7200.0, 9000.0])
    # due at 3600 (3600 - 0 >= 3600), then at 7200 (7200 - 3600); 9000 is flushed at the end
    assert planner_report_periods(at, 3600.0) == [(0, 3), (3, 5), (5, 6)]


def test_no_interval_gives_one_period_and_no_ticks_none():
    assert planner_report_periods(np.array([0.0, 5.0]), 0.0) == [(0, 2)]
    assert planner_report_periods(np.array([]), 3600.0) == []


def test_periodic_reports_are_written_with_their_tick_logs(tmp_path):
    ticks = syn.ticks_table(n=240, interval_s=30.0)  # 0 .. 7170 s
    paths = write_planner_reports(ticks, tmp_path, 1.0)
    names = sorted(p.name for p in paths)
    assert names == [
        "planner_report_001.html",
        "planner_report_001.log.jsonl.gz",
        "planner_report_002.html",
        "planner_report_002.log.jsonl.gz",
    ]
    # period 1: ticks 0..3600 s (121 ticks); period 2: the remaining 119
    lines = [
        gzip.decompress((tmp_path / f"planner_report_00{k}.log.jsonl.gz").read_bytes()).splitlines()
        for k in (1, 2)
    ]
    assert [len(x) for x in lines] == [121, 119]
    assert json.loads(lines[1][0])["at_s"] == 3630.0


def test_recorder_off_writes_nothing(tmp_path):
    assert write_planner_reports(syn.ticks_table(), tmp_path, 0.0) == []
    assert list(tmp_path.iterdir()) == []


def test_tick_log_is_deterministic_and_nan_becomes_null():
    ticks = pd.DataFrame(
        {"at_s": [0.0, 5.0], "estimated_ttft_ms": [np.nan, 12.5], "reason": ["a", None]}
    )
    data = tick_log_bytes(ticks)
    assert data == tick_log_bytes(ticks)
    rows = [json.loads(line) for line in gzip.decompress(data).splitlines()]
    assert rows == [
        {"at_s": 0.0, "estimated_ttft_ms": None, "reason": "a"},
        {"at_s": 5.0, "estimated_ttft_ms": 12.5, "reason": None},
    ]


def test_the_grid_has_the_reference_panels_and_sla_lines():
    html = render_planner(syn.ticks_table(), sla={"ttft_ms": 500.0, "itl_ms": 40.0})
    headings = re.findall(r'<div class="cell"><h3>(.*?)</h3>', html)
    assert headings == list(TITLES)
    figs = figures(html)
    for name in ("planner_observed_ttft", "planner_estimated_ttft"):
        assert list(values(trace(figs[name], "TTFT target 500 ms")["y"])) == [500.0, 500.0]
    for name in ("planner_observed_itl", "planner_estimated_itl"):
        assert list(values(trace(figs[name], "ITL target 40 ms")["y"])) == [40.0, 40.0]


def test_sla_targets_come_from_the_tick_columns_when_not_given():
    ticks = syn.ticks_table().assign(ttft_sla_ms=700.0, itl_sla_ms=25.0)
    figs = figures(render_planner(ticks))
    trace(figs["planner_observed_ttft"], "TTFT target 700 ms")
    trace(figs["planner_observed_itl"], "ITL target 25 ms")


def test_values_on_some_ticks_only_are_joined():
    ticks = syn.ticks_table(n=4).assign(observed_ttft_ms=[np.nan, 100.0, np.nan, 300.0])
    fig = figures(render_planner(ticks))["planner_observed_ttft"]
    assert list(values(trace(fig, "observed TTFT")["y"])) == [100.0, 300.0]


def test_decisions_are_coloured_by_reason_on_per_component_tracks():
    fig = figures(render_planner(syn.ticks_table()))["planner_load_decisions"]
    scale_up = [t for t in fig["data"] if t["name"] == "load: scale_up"]
    assert {t["marker"]["color"] for t in scale_up} == {LOAD_COLOURS["scale_up"]}
    # prefill track at y=2, decode at y=1
    assert {float(values(t["y"])[0]) for t in scale_up} == {1.0, 2.0}


def test_advisory_recommendations_are_drawn_over_replica_counts():
    ticks = syn.ticks_table(n=4).assign(
        advisory=[False, True, False, True], scale_to_decode=[np.nan, 7.0, np.nan, 2.0]
    )
    fig = figures(render_planner(ticks))["planner_replicas"]
    rec = trace(fig, "decode recommended")
    assert list(values(rec["y"])) == [7.0, 2.0]
    assert list(values(rec["x"])) == [30.0, 90.0]  # a 90 s run is drawn in seconds


def test_engine_queues_give_one_line_per_engine():
    queues = json.dumps(
        [
            {
                "worker_id": 0,
                "dp_rank": 0,
                "queued_prefill_tokens": 100,
                "queued_decode_kv_tokens": 0,
                "inflight_decode_kv_tokens": 0,
            },
            {
                "worker_id": 3,
                "dp_rank": 1,
                "queued_prefill_tokens": 0,
                "queued_decode_kv_tokens": 40,
                "inflight_decode_kv_tokens": 60,
            },
        ]
    )
    ticks = syn.ticks_table(n=3).assign(engine_queues=queues, max_kv_tokens=500.0)
    figs = figures(render_planner(ticks))
    prefill, decode = figs["planner_prefill_load"], figs["planner_decode_load"]
    assert list(values(trace(prefill, "prefill 0:dp0")["y"])) == [100.0] * 3
    # queued 40 + inflight 60 decode KV tokens
    assert list(values(trace(decode, "decode 3:dp1")["y"])) == [100.0] * 3
    assert [t["name"] for t in prefill["data"]] == ["prefill 0:dp0"]
    assert [t["name"] for t in decode["data"]] == ["decode 3:dp1", "KV capacity per engine"]


def test_missing_columns_leave_no_data_notes():
    html = render_planner(pd.DataFrame({"at_s": [0.0, 5.0], "ready_decode": [1, 2]}))
    assert list(figures(html)) == ["planner_replicas"]
    notes = re.findall(r'<p class="note">(No data: .*?)</p>', html)
    assert "No data: no tick has estimated_ttft_ms." in notes
    assert "No data: no tick has load_decision_reason columns." in notes
    assert len(notes) == 11  # every panel but the replica counts


def test_an_aggregated_deployment_shows_one_agg_role():
    ticks = syn.ticks_table(n=3).assign(ready_prefill=0, ready_decode=[2, 3, 3])
    html = render_planner(ticks)
    assert next(t["name"] for t in figures(html)["planner_replicas"]["data"]) == "agg replicas"
    assert "<td>agg</td>" in html and "<td>prefill</td>" not in html


def test_a_periodic_report_says_which_period_it_covers(tmp_path):
    write_planner_reports(syn.ticks_table(n=240, interval_s=30.0), tmp_path, 1.0)
    html = (tmp_path / "planner_report_002.html").read_text()
    # period 2 starts after the tick at 3600 s and ends at the last tick, 7170 s
    assert "Period 2 of 2: planner time 3,630 to 7,170 s." in html


def test_every_scaling_decision_is_listed_with_the_reason_its_tick_recorded():
    ticks = syn.ticks_table(n=240, interval_s=30.0)
    ticks["policy_reason_decode"] = None
    ticks.loc[ticks["at_s"] == 600.0, "policy_reason_decode"] = (
        "goodput_sized: 3 replicas for 4.00 req/s"
    )
    html = render_planner(ticks, scaling_events=syn.scaling_events())
    assert "Scaling decisions" in html
    # sla_goodput's own words where the tick has them, the loops' reason codes elsewhere
    assert "goodput_sized: 3 replicas for 4.00 req/s" in html
    row_1500 = ticks.loc[ticks["at_s"] == 1500.0, "load_decision_reason_decode"].iloc[0]
    assert isinstance(row_1500, str) and row_1500 in html


def test_the_reason_listed_is_the_loop_that_acted():
    from plansim.reports.planner import acting_reason

    # The planner example's tick at 480 s: the load loop refused to scale down, the throughput
    # loop raised its lower bound to 3 over 2 ready replicas; scaling_events.json says scale_up.
    tick = {
        "load_decision_reason_decode": "scale_down_refused_consolidation",
        "throughput_decision_reason_decode": "set_lower_bound",
        "throughput_lower_bound_decode": 3.0,
        "reconcile_reasons": {},
    }
    assert acting_reason(tick, "decode", 2, 3) == (
        "scale_up: the throughput loop's lower bound, 3 replicas, is above 2 (set_lower_bound); "
        "load loop: scale_down_refused_consolidation"
    )
    # The load loop's own step, with the throughput loop's reason after it.
    step = {"load_decision_reason_decode": "scale_down", "throughput_lower_bound_decode": 1.0}
    assert acting_reason(step, "decode", 3, 2) == "scale_down: the load loop's step"
    # sla_goodput's words, opened by the direction scaling_events.json records.
    words = {"policy_reason_decode": "goodput_sized: 3 replicas for 4.00 req/s"}
    assert acting_reason(words, "decode", 2, 3) == (
        "scale_up: goodput_sized: 3 replicas for 4.00 req/s"
    )


def test_a_planner_that_only_retunes_has_no_scaling_to_report():
    from plansim.reports.planner import planner_scaled

    retune_only = pd.DataFrame(
        {
            "at_s": [0.0, 5.0],
            "run_load_scaling": [None, False],
            "run_throughput_scaling": [None, False],
            "load_decision_reason": [None, None],
        }
    )
    assert not planner_scaled(retune_only, [])
    assert planner_scaled(retune_only.assign(run_load_scaling=[None, True]), [])
    assert planner_scaled(retune_only, [{"at_s": 5.0, "from_count": 1, "to_count": 2}])


def test_the_engines_of_an_aggregated_deployment_are_named_agg():
    queues = json.dumps(
        [
            {
                "worker_id": 0,
                "dp_rank": 0,
                "queued_prefill_tokens": 100,
                "queued_decode_kv_tokens": 40,
                "inflight_decode_kv_tokens": 60,
            }
        ]
    )
    ticks = syn.ticks_table(n=3).assign(
        engine_queues=queues, ready_prefill=0, ready_decode=[2, 3, 3]
    )
    figs = figures(render_planner(ticks))
    assert [t["name"] for t in figs["planner_prefill_load"]["data"]] == ["agg 0:dp0"]
    assert figs["planner_decode_load"]["data"][0]["name"] == "agg 0:dp0"
    names = " ".join(
        t["name"]
        for name in ("planner_capacity", "planner_prefill_load", "planner_decode_load")
        for t in figs[name]["data"]
    )
    assert "prefill 0" not in names and "decode 0" not in names
