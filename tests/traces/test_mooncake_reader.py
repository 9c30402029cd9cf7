"""Mooncake JSONL reader: fields, aliases, the input-length cap, block size, bad values."""

from __future__ import annotations

import pytest
from trace_files import mooncake_row, write_jsonl

from plansim.errors import TraceError
from plansim.traces import load_workload


def test_fields_and_ordinal_ids(tmp_path):
    rows = [mooncake_row(0, 1_000, 5, [0, 1]), mooncake_row(250.5, 600, 9, [0, 2])]
    w = load_workload(write_jsonl(tmp_path / "m.jsonl", rows))
    assert w.arrival_ms.tolist() == [0.0, 250.5]
    assert w.isl_tokens.tolist() == [1_000, 600]
    assert w.osl_tokens.tolist() == [5, 9]
    assert w.request_id.tolist() == ["0", "1"]
    assert w.trace_block_size == 512
    assert w.recorded_ttft_ms is None and w.recorded_total_ms is None
    # Block 0 is shared; block 1 differs: same first id, different second ids.
    assert w.hashes(0)[0] == w.hashes(1)[0] and w.hashes(0)[1] != w.hashes(1)[1]


def test_aliases_created_time_input_tokens_output_tokens(tmp_path):
    row = {"created_time": 10, "input_tokens": 100, "output_tokens": 4, "hash_ids": [3]}
    w = load_workload(write_jsonl(tmp_path / "m.jsonl", [row]), format="mooncake")
    assert (w.arrival_ms[0], w.isl_tokens[0], w.osl_tokens[0]) == (10.0, 100, 4)


def test_missing_input_length_defaults_to_hash_capacity(tmp_path):
    w = load_workload(write_jsonl(tmp_path / "m.jsonl", [mooncake_row(0, None, 1, [1, 2, 3])]))
    assert w.isl_tokens[0] == 3 * 512


def test_input_length_is_capped_at_hash_capacity(tmp_path):
    w = load_workload(write_jsonl(tmp_path / "m.jsonl", [mooncake_row(0, 5_000, 1, [1, 2])]))
    assert w.isl_tokens[0] == 1_024


def test_hash_ids_beyond_the_prompt_are_dropped(tmp_path):
    w = load_workload(write_jsonl(tmp_path / "m.jsonl", [mooncake_row(0, 600, 1, [1, 2, 3, 4])]))
    assert w.hash_offsets.tolist() == [0, 2]  # ceil(600 / 512) = 2


def test_trace_block_size_option(tmp_path):
    p = write_jsonl(tmp_path / "m.jsonl", [mooncake_row(0, None, 1, [1, 2])])
    w = load_workload(p, trace_block_size=64)
    assert (w.trace_block_size, w.isl_tokens[0]) == (64, 128)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [1]}, "timestamp"),
        ({"timestamp": "x", "input_length": 1, "output_length": 1, "hash_ids": [1]}, "timestamp"),
        ({"timestamp": 0, "input_length": -3, "output_length": 1, "hash_ids": [1]}, "input_length"),
        ({"timestamp": 0, "input_length": 1.5, "output_length": 1, "hash_ids": [1]}, "input_length"),
        ({"timestamp": 0, "input_length": 2**63, "output_length": 1, "hash_ids": [1]}, "input_length"),
        ({"timestamp": 0, "input_length": 1, "hash_ids": [1]}, "output_length"),
        ({"timestamp": 0, "input_length": 1, "output_length": "7", "hash_ids": [1]}, "output_length"),
        ({"timestamp": 0, "input_length": 1, "output_length": 2**64 - 1, "hash_ids": [1]},
         "output_length"),
        ({"timestamp": 0, "input_length": 1, "output_length": 1}, "hash_ids"),
        ({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [-1]}, "hash_ids"),
    ],
)
def test_bad_values_name_line_and_field(tmp_path, row, field):
    p = write_jsonl(tmp_path / "m.jsonl", [mooncake_row(0, 1, 1, [0]), row])
    with pytest.raises(TraceError) as info:
        load_workload(p, format="mooncake")
    assert (info.value.line, info.value.field) == (2, field)
