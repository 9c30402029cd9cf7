"""The retune window reader: membership, censoring at L_k, first duplicate wins, counts, log."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_files import dynamo_reading_path, dynamo_row, tool_row, write_gz, write_jsonl

from plansim.errors import TraceError
from plansim.traces.windows import read_window

# Window [10_000, 20_000) ms, cutoff L_k = 25_000 ms.
WIN = {"start_ms": 10_000, "end_ms": 20_000, "cutoff_ms": 25_000}

pytestmark = pytest.mark.usefixtures(dynamo_reading_path.__name__)


def _trace(tmp_path, rows, name="t.jsonl"):
    return write_jsonl(tmp_path / name, rows)


def test_membership_is_arrival_in_window_and_completion_by_cutoff(tmp_path):
    rows = [
        dynamo_row("before", 9_999, total_ms=1.0),
        dynamo_row("first", 10_000, total_ms=15_000.0),  # completes at 25_000 = cutoff: kept
        dynamo_row("late", 12_000, total_ms=13_001.0),  # completes at 25_001: censored
        dynamo_row("last", 19_999, total_ms=1.0),
        dynamo_row("after", 20_000, total_ms=1.0),
    ]
    w = read_window(_trace(tmp_path, rows), **WIN)
    assert w.workload.request_id.tolist() == ["first", "last"]
    assert w.counts["requests"] == 2 and w.counts["censored"] == 1
    assert w.counts["history_requests"] == 1


def test_arrival_falls_back_to_event_time_minus_total(tmp_path):
    row = dynamo_row("derived", None, total_ms=500.0, event_ms=10_400)
    w = read_window(_trace(tmp_path, [row]), with_history=True, **WIN)
    assert w.history.arrival_ms.tolist() == [9_900.0]  # before the window
    assert w.counts["history_requests"] == 1 and w.counts["requests"] == 0


def test_completion_is_event_time_without_total(tmp_path):
    rows = [
        dynamo_row("in_time", 11_000, event_ms=25_000),
        dynamo_row("too_late", 11_000, event_ms=25_001),
    ]
    w = read_window(_trace(tmp_path, rows), **WIN)
    assert w.workload.request_id.tolist() == ["in_time"]
    assert w.counts["censored"] == 1
    assert w.counts["censor_unavailable"] == 2  # neither row has total_time_ms


def test_first_row_of_a_repeated_id_wins(tmp_path):
    rows = [
        dynamo_row("x", 11_000, isl=100, total_ms=1.0),
        dynamo_row("x", 12_000, isl=900, total_ms=1.0),
    ]
    w = read_window(_trace(tmp_path, rows), **WIN)
    assert w.workload.isl_tokens.tolist() == [100]
    assert w.counts["duplicate"] == 1


def test_rows_without_output_tokens_are_dropped_and_counted(tmp_path):
    rows = [dynamo_row("a", 11_000, osl=None, total_ms=1.0), dynamo_row("b", 11_000, total_ms=1.0)]
    w = read_window(_trace(tmp_path, rows), **WIN)
    assert w.workload.request_id.tolist() == ["b"]
    assert w.counts["dropped_no_output_tokens"] == 1


def test_agent_context_is_stripped_and_tool_rows_dropped(tmp_path):
    rows = [tool_row(), dynamo_row("a", 11_000, total_ms=1.0, agent=True), tool_row("tool_error")]
    w = read_window(_trace(tmp_path, rows), **WIN)
    assert len(w.workload) == 1
    assert w.counts["agent_context_stripped"] == 1


def test_history_from_trace_and_extra_files(tmp_path):
    trace = _trace(
        tmp_path, [dynamo_row("h1", 5_000, total_ms=1.0), dynamo_row("w", 11_000, total_ms=1.0)]
    )
    extra = write_gz(tmp_path / "warm.jsonl.gz", [dynamo_row("h0", 1_000, total_ms=1.0)])
    w = read_window(trace, history_paths=[extra], with_history=True, **WIN)
    assert w.history.request_id.tolist() == ["h0", "h1"]
    assert w.counts["history_requests"] == 2
    assert len(read_window(trace, **WIN).history) == 0


def test_counts_are_logged_also_for_an_empty_window(tmp_path, caplog):
    rows = [dynamo_row("late", 12_000, total_ms=20_000.0)]
    with caplog.at_level(logging.INFO, logger="plansim.traces.windows"):
        w = read_window(_trace(tmp_path, rows), **WIN)
    assert len(w.workload) == 0
    message = caplog.records[-1].getMessage()
    assert "requests=0" in message and "censored=1" in message and "duplicate=0" in message


def test_non_zero_counts_only_for_a_non_empty_window(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="plansim.traces.windows"):
        read_window(_trace(tmp_path, [dynamo_row("a", 11_000, total_ms=1.0)]), **WIN)
    message = caplog.records[-1].getMessage()
    assert "requests=1" in message and "censored" not in message


def test_a_malformed_line_fails(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(b'{"schema": "dynamo.request.trace.v1", "event_type": "request_end"}\n')
    with pytest.raises(TraceError) as info:
        read_window(p, **WIN)
    assert (info.value.line, info.value.field) == (1, "request")


def test_a_row_without_any_arrival_fails(tmp_path):
    row = dynamo_row("a", None, event_ms=11_000)
    with pytest.raises(TraceError) as info:
        read_window(_trace(tmp_path, [row]), **WIN)
    assert info.value.field == "request_received_ms"


rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d", "e", "f"]),  # request id (repeats happen)
        st.one_of(st.none(), st.integers(5_000, 30_000)),  # request_received_ms
        st.one_of(st.none(), st.integers(0, 20_000)),  # total_time_ms
        st.integers(0, 40_000),  # event_time_unix_ms
        st.booleans(),  # has output_tokens
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=100, deadline=None)
@given(rows_strategy)
def test_window_matches_the_rules_row_by_row(tmp_path_factory, rows):
    """The seed's rules applied one row at a time, against the vectorised reader."""
    trace_rows, expect_kept, seen = [], [], set()
    expect = dict.fromkeys(
        (
            "censored",
            "duplicate",
            "dropped_no_output_tokens",
            "censor_unavailable",
            "history_requests",
        ),
        0,
    )
    for rid, received, total, event, has_osl in rows:
        if received is None and total is None:
            total = 0  # keep every row derivable, the missing-arrival error has its own test
        trace_rows.append(
            dynamo_row(
                rid,
                received,
                osl=5 if has_osl else None,
                total_ms=None if total is None else float(total),
                event_ms=event,
            )
        )
        arrival = received if received is not None else event - total
        completion = received + total if received is not None and total is not None else event
        in_window = WIN["start_ms"] <= arrival < WIN["end_ms"]
        duplicate = rid in seen
        seen.add(rid)
        if duplicate:
            expect["duplicate"] += in_window
            continue
        if not has_osl:
            expect["dropped_no_output_tokens"] += in_window
            continue
        if arrival < WIN["start_ms"]:
            expect["history_requests"] += 1
        if not in_window:
            continue
        expect["censor_unavailable"] += total is None
        if completion > WIN["cutoff_ms"]:
            expect["censored"] += 1
        else:
            expect_kept.append((arrival, rid))
    path = write_jsonl(tmp_path_factory.mktemp("w") / "t.jsonl", trace_rows)
    w = read_window(path, **WIN)
    assert w.workload.request_id.tolist() == [
        rid for _, rid in sorted(expect_kept, key=lambda x: x[0])
    ]
    for key, value in expect.items():
        assert w.counts[key] == value, key
    assert w.counts["requests"] == len(expect_kept)
