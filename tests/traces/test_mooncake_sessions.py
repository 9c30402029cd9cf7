"""The Mooncake session form: turns chained on their predecessor's end plus delay, and the
session rules (the reference replay's, observed with peer_replay)."""

from __future__ import annotations

import numpy as np
import pytest
from trace_files import turn, write_jsonl

from plansim.errors import TraceError
from plansim.traces import load_workload
from plansim.traces.graph import TERMINAL


def _load(tmp_path, rows):
    return load_workload(write_jsonl(tmp_path / "s.jsonl", rows))


def _edges(w) -> list[tuple[str, str, float]]:
    g = w.graph
    out = []
    for i in range(len(w)):
        for e in range(g.dep_offsets[i], g.dep_offsets[i + 1]):
            assert g.dep_trigger[e] == TERMINAL
            out.append((w.request_id[g.dep_source[e]], w.request_id[i], float(g.dep_delay_ms[e])))
    return sorted(out)


def test_later_turns_wait_for_the_previous_turn_plus_delay(tmp_path):
    w = _load(
        tmp_path,
        [
            turn("a", request_id="a0", timestamp=1_000),
            turn("a", request_id="a1", delay=250.0),
            turn("a", request_id="a2", delay=0),
        ],
    )
    assert _edges(w) == [("a0", "a1", 250.0), ("a1", "a2", 0.0)]
    assert w.graph.not_before_ms[0] == 1_000 and np.isnan(w.graph.not_before_ms[1:]).all()
    # The open-loop estimate adds the delays to the first turn's arrival.
    assert w.arrival_ms.tolist() == [1_000.0, 1_250.0, 1_250.0]
    assert w.graph.turn_index.tolist() == [0, 1, 2]


def test_without_delay_the_timestamp_gap_to_the_last_timestamped_turn_is_the_delay(tmp_path):
    # a1 has only a delay: a2's gap is measured from a0's timestamp, the latest one before it.
    w = _load(
        tmp_path,
        [
            turn("a", request_id="a0", timestamp=100),
            turn("a", request_id="a1", delay=10),
            turn("a", request_id="a2", timestamp=600),
            turn("a", request_id="a3"),
        ],
    )
    assert _edges(w) == [("a0", "a1", 10.0), ("a1", "a2", 500.0), ("a2", "a3", 0.0)]


def test_a_later_turn_with_timestamp_and_delay_follows_the_delay(tmp_path):
    w = _load(
        tmp_path,
        [
            turn("a", request_id="a0", timestamp=100),
            turn("a", request_id="a1", delay=10, timestamp=9_000),
        ],
    )
    assert _edges(w) == [("a0", "a1", 10.0)]
    assert np.isnan(w.graph.not_before_ms[1])
    assert w.arrival_ms[1] == 9_000.0  # recorded arrival kept as the open-loop one


def test_sessions_interleave_and_mix_with_open_loop_rows(tmp_path):
    w = _load(
        tmp_path,
        [
            turn("b", request_id="b0", timestamp=50),
            turn(None, request_id="x", timestamp=20),
            turn("a", request_id="a0", timestamp=10),
            turn("b", request_id="b1", delay=5),
        ],
    )
    assert _edges(w) == [("b0", "b1", 5.0)]
    g = w.graph
    assert g.session_ids.tolist() == ["b", "a"]  # order of first appearance
    assert dict(zip(w.request_id.tolist(), g.session.tolist(), strict=True)) == {
        "a0": 1,
        "x": -1,
        "b0": 0,
        "b1": 0,
    }
    assert g.origin_ms == 10.0


def test_file_without_sessions_has_no_graph(tmp_path):
    assert _load(tmp_path, [turn(None, timestamp=0)]).graph is None


@pytest.mark.parametrize(
    ("rows", "line", "field", "words"),
    [
        ([turn("a", delay=5)], 1, "delay", "first turn"),
        ([turn("a", timestamp=0, delay=5)], 1, "delay", "first turn"),
        ([turn("a")], 1, "timestamp", "without a first turn"),
        ([turn("a", timestamp=0), turn("a", delay=-1)], 2, "delay", "non-negative"),
        ([turn("a", timestamp=0), turn("a", delay="5")], 2, "delay", "non-negative"),
        ([turn("a", timestamp=0), turn("a", delay=1, delay_ms=2)], 2, "delay_ms", "not both"),
        ([turn("a", timestamp=500), turn("a", timestamp=100)], 2, "timestamp", "before"),
        ([turn(None, timestamp=0), turn(None, delay=5)], 2, "delay", "session_id"),
        ([turn(None, timestamp=0, session_id=7)], 1, "session_id", "string"),
    ],
)
def test_bad_session_rows_name_line_and_field(tmp_path, rows, line, field, words):
    with pytest.raises(TraceError) as info:
        _load(tmp_path, rows)
    err = info.value
    assert (err.line, err.field) == (line, field)
    assert words in err.message
