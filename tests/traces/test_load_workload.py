"""load_workload: arrival order (stable), hash rows move with their requests, ordinal ids."""

from __future__ import annotations

import numpy as np
import pytest
from trace_files import dynamo_row, mooncake_row, write_jsonl

from plansim.errors import TraceError
from plansim.traces import load, load_workload


def test_unsorted_rows_are_sorted_stably_with_their_hashes(tmp_path, monkeypatch):
    monkeypatch.setattr(load, "_REORDER_ROWS", 2)  # several gather steps
    rows = [
        dynamo_row("late", 3_000, isl=1_024, hashes=[7, 8]),
        dynamo_row("tie_a", 1_000, isl=512, hashes=[7]),
        dynamo_row("early", 500, isl=1_536, hashes=[9, 10, 11]),
        dynamo_row("tie_b", 1_000, isl=1_024, hashes=[7, 12]),
        dynamo_row("last", 4_000, isl=0, hashes=[]),
    ]
    w = load_workload(write_jsonl(tmp_path / "t.jsonl", rows))
    assert w.request_id.tolist() == ["early", "tie_a", "tie_b", "late", "last"]
    assert w.hash_offsets.tolist() == [0, 3, 4, 6, 8, 8]
    h = {rid: w.hashes(i).tolist() for i, rid in enumerate(w.request_id)}
    assert len(set(h["early"])) == 3 and not set(h["early"]) & set(h["late"])
    assert h["tie_a"][0] == h["tie_b"][0] == h["late"][0]  # raw hash 7 at block 0
    assert h["tie_b"][1] != h["late"][1]  # 12 vs 8 after the shared block
    assert h["last"] == []


def test_ids_are_ordinals_in_load_order_when_the_format_has_none(tmp_path):
    rows = [
        mooncake_row(50, 10, 1, [1]),
        mooncake_row(10, 10, 1, [2]),
        mooncake_row(30, 10, 1, [3]),
    ]
    w = load_workload(write_jsonl(tmp_path / "m.jsonl", rows))
    assert w.request_id.tolist() == ["1", "2", "0"]
    assert w.arrival_ms.tolist() == [10.0, 30.0, 50.0]


def test_recorded_request_ids_are_kept(tmp_path):
    rows = [
        mooncake_row(0, 10, 1, [1], request_id="x"),
        mooncake_row(1, 10, 1, [1], request_id="y"),
    ]
    w = load_workload(write_jsonl(tmp_path / "m.jsonl", rows))
    assert w.request_id.tolist() == ["x", "y"]
    assert w.sources == (str(tmp_path / "m.jsonl"),)
    assert np.array_equal(w.hashes(0), w.hashes(1))


def test_request_ids_are_compact_strings_and_hash_ids_int32(tmp_path):
    rows = [
        dynamo_row("b", 2_000, isl=1_024, hashes=[1, 2]),
        dynamo_row("a", 1_000, isl=512, hashes=[1]),
    ]
    w = load_workload(write_jsonl(tmp_path / "t.jsonl", rows))
    assert w.request_id.dtype == np.dtypes.StringDType() and isinstance(w.request_id[0], str)
    assert w.request_id.tolist() == ["a", "b"] and len(w.request_id) == 2
    assert w.hash_ids.dtype == np.int32
    assert w.hashes(0).tolist() == w.hashes(1)[:1].tolist()


def _mooncake(tmp_path, stamps):
    path = tmp_path / "t.jsonl"
    path.write_text(
        "".join(
            f'{{"timestamp": {t}, "input_length": 10, "output_length": 1, "hash_ids": [{i}]}}\n'
            for i, t in enumerate(stamps)
        )
    )
    return path


def test_span_over_the_limit_names_the_row_that_makes_it(tmp_path):
    # 1e12 ms after the first arrival: 1e9 s = 31.7 years (a seconds/ms slip)
    path = _mooncake(tmp_path, [0, 5, 1_000_000_000_000, 7])
    with pytest.raises(TraceError) as err:
        load_workload(path)
    assert str(err.value) == (
        f"{path}:3: the trace (first arrival to this row) spans 31.7 years; "
        "plansim handles at most 31.0 days (check the timestamps' unit: ms)"
    )


def test_arrival_past_what_a_float_clock_resolves_is_refused(tmp_path):
    path = _mooncake(tmp_path, [1e308])
    with pytest.raises(TraceError, match=r"t.jsonl:1: arrival 1e\+308 ms is past the year 2286"):
        load_workload(path)
