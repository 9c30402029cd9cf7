"""Dynamo request traces with agent_context: sessions, child sessions and tool rows become the
dependency graph (the reference replay's agentic lowering, observed with its replay)."""

from __future__ import annotations

import numpy as np
import pytest
from trace_files import SCHEMA, dynamo_reading_path, dynamo_row, write_jsonl

from plansim.errors import TraceError
from plansim.traces import load_workload
from plansim.traces.graph import COMPLETION, DISPATCH

pytestmark = pytest.mark.usefixtures(dynamo_reading_path.__name__)


def _req(rid, start, total, session=None, parent=None, model=None, **kw):
    row = dynamo_row(rid, received_ms=start, total_ms=total, **kw)
    if session is not None:
        row["agent_context"] = {"session_id": session}
        if parent is not None:
            row["agent_context"]["parent_session_id"] = parent
    if model is not None:
        row["request"]["model"] = model
    return row


def _tool(session, source, consumer=None, child=None, mode="blocking", nested=True):
    link = {"source_request_id": source, "execution_mode": mode}
    if consumer:
        link["consumer_request_id"] = consumer
    if child:
        link["child_session_id"] = child
    tool = {"tool_call_id": "t1", "tool_class": "agent", "duration_ms": 1.0}
    tool.update({"claude": link} if nested else link)
    return {
        "schema": SCHEMA,
        "event_type": "tool_end",
        "event_time_unix_ms": 5,
        "event_source": "harness",
        "agent_context": {"session_id": session},
        "tool": tool,
    }


def _edges(w):
    g = w.graph
    return sorted(
        (
            w.request_id[g.dep_source[e]],
            w.request_id[i],
            int(g.dep_trigger[e]),
            float(g.dep_delay_ms[e]),
        )
        for i in range(len(w))
        for e in range(g.dep_offsets[i], g.dep_offsets[i + 1])
    )


def test_a_session_chains_on_completion_with_the_recorded_gap(tmp_path):
    w = load_workload(
        write_jsonl(
            tmp_path / "t.jsonl",
            [
                _req("a", 1_000, 100.0, "s"),
                _req("b", 1_300, 100.0, "s"),
                _req("x", 1_050, 10.0, "t"),
            ],
        )
    )
    assert _edges(w) == [("a", "b", COMPLETION, 200.0)]  # 1300 - (1000 + 100)
    g = w.graph
    assert g.origin_ms == 1_000.0 and g.not_before_ms[w.request_id.tolist().index("x")] == 1_050
    assert g.session_ids.tolist() == ["s", "t"]


def test_a_request_started_while_the_previous_ran_follows_its_dispatch(tmp_path):
    w = load_workload(
        write_jsonl(
            tmp_path / "t.jsonl",
            [_req("a", 0, 100.0, "s"), _req("b", 300, 100.0, "s"), _req("c", 350, 100.0, "s")],
        )
    )
    assert _edges(w) == [("a", "b", COMPLETION, 200.0), ("b", "c", DISPATCH, 50.0)]


@pytest.mark.parametrize("with_tool", [True, False])
def test_child_session_spawns_on_dispatch_and_joins_the_consumer(tmp_path, with_tool):
    rows = [
        _req("src", 0, 100.0, "p"),
        _req("k1", 150, 100.0, "k", "p"),
        _req("k2", 300, 100.0, "k", "p"),
        _req("cons", 500, 100.0, "p"),
    ]
    if with_tool:
        rows.insert(1, _tool("p", "src", "cons", "k"))
    w = load_workload(write_jsonl(tmp_path / "t.jsonl", rows))
    assert _edges(w) == [
        ("k1", "k2", COMPLETION, 50.0),  # 300 - 250
        ("k2", "cons", COMPLETION, 100.0),  # join: 500 - 400
        ("src", "cons", COMPLETION, 400.0),  # session: 500 - 100
        ("src", "k1", DISPATCH, 150.0),
    ]  # spawn: 150 - 0
    assert w.skipped == ({"tool_end": 1} if with_tool else {})


def test_tool_row_names_the_source_even_when_a_later_parent_request_started_first(tmp_path):
    # Without the tool row the spawn source would be p1 (the latest parent start before k1).
    rows = [
        _req("p0", 0, 10.0, "p"),
        _req("p1", 20, 10.0, "p"),
        _req("k1", 40, 10.0, "k", "p"),
        _tool("p", "p0", child="k", mode="background", nested=False),
    ]
    w = load_workload(write_jsonl(tmp_path / "t.jsonl", rows))
    assert ("p0", "k1", DISPATCH, 40.0) in _edges(w)
    assert not any(e[0] == "p1" and e[1] == "k1" for e in _edges(w))


def test_requests_without_agent_context_stay_open_loop(tmp_path):
    w = load_workload(
        write_jsonl(tmp_path / "t.jsonl", [_req("a", 0, 1.0, "s"), _req("o", 5, 1.0)])
    )
    assert w.graph.session.tolist() == [0, -1] and w.graph.not_before_ms.tolist() == [0.0, 5.0]


def test_trace_without_agent_context_has_no_graph(tmp_path):
    assert load_workload(write_jsonl(tmp_path / "t.jsonl", [_req("a", 0, 1.0)])).graph is None


def test_a_shard_starting_with_a_request_payload_row_loads(tmp_path):
    payload = {
        "event_type": "request_payload",
        "event_time_unix_ms": 1,
        "payload": {"request_id": "a", "request": {"messages": [{"content": "x" * 100}]}},
    }
    w = load_workload(write_jsonl(tmp_path / "t.jsonl", [payload, _req("a", 0, 1.0, "s")]))
    assert len(w) == 1 and w.skipped == {"request_payload": 1}


@pytest.mark.parametrize(
    ("rows", "line", "field"),
    [
        (
            [_req("a", 0, 1.0, "s", model="m1"), _req("b", 5, 1.0, "s", model="m2")],
            2,
            "request.model",
        ),
        (
            [_req("a", 0, 1.0, "s"), _req("b", 5, 1.0, "k", "nope")],
            2,
            "agent_context.parent_session_id",
        ),
        (
            [
                _req("a", 0, 1.0, "s", "p1"),
                _req("b", 5, 1.0, "s", "p2"),
                _req("c", 0, 1.0, "p1"),
                _req("d", 0, 1.0, "p2"),
            ],
            2,
            "agent_context.parent_session_id",
        ),
        ([_req("a", 0, 1.0, "s"), _tool("s", "zz")], 2, "source_request_id"),
        ([_req("a", 0, 1.0, "s"), _req("b", 0, 1.0, "t"), _tool("s", "b")], 3, "source_request_id"),
        ([_req("a", 0, 1.0, "s"), _tool("s", "a", mode="later")], 2, "tool.claude.execution_mode"),
    ],
)
def test_bad_agent_rows_name_line_and_field(tmp_path, rows, line, field):
    with pytest.raises(TraceError) as info:
        load_workload(write_jsonl(tmp_path / "t.jsonl", rows))
    assert (info.value.line, info.value.field) == (line, field)


def test_windows_still_strip_agent_context(tmp_path):
    from plansim.traces.windows import read_window

    path = write_jsonl(
        tmp_path / "t.jsonl", [_req("a", 11_000, 1.0, "s"), _req("b", 11_500, 1.0, "s")]
    )
    w = read_window(path, start_ms=10_000, end_ms=20_000, cutoff_ms=25_000)
    assert w.workload.graph is None and w.counts["agent_context_stripped"] == 2
    assert np.array_equal(w.workload.arrival_ms, [11_000.0, 11_500.0])
