"""Mooncake JSONL reader: fields, aliases, the hash capacity and request bounds, block size,
bad values."""

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


def test_an_input_length_past_the_hash_capacity_is_refused_not_cut(tmp_path):
    # The reference: "trace line 1 input_length 5000 exceeds hash_ids capacity 512".
    path = write_jsonl(
        tmp_path / "m.jsonl", [mooncake_row(0, 1_024, 1, [1, 2]), mooncake_row(1, 1_025, 1, [1, 2])]
    )
    with pytest.raises(TraceError) as err:
        load_workload(path)
    assert str(err.value) == (
        f"{path}:2: input_length 1025 exceeds hash_ids capacity 1024 "
        "(2 hash ids of 512 tokens); the prompt would be cut"
    )


def test_a_prompt_or_output_past_the_request_bound_is_refused(tmp_path):
    # 10^7 tokens per request (plansim.limits): 20,000 blocks of 512 hold 10,240,000.
    for row, fld, text in (
        (
            mooncake_row(0, 10_000_001, 1, list(range(20_000))),
            "input_length",
            "input_length 10,000,001 tokens is over plansim's bound of 10,000,000",
        ),
        (
            mooncake_row(0, None, 1, list(range(20_000))),
            "hash_ids",
            "20,000 hash ids of 512 tokens make a prompt of 10,240,000 tokens, over",
        ),
        (
            mooncake_row(0, 10, 10**12, [1]),
            "output_length",
            "output_length 1,000,000,000,000 tokens is over plansim's bound",
        ),
    ):
        path = write_jsonl(tmp_path / "m.jsonl", [mooncake_row(0, 10, 1, [5]), row])
        with pytest.raises(TraceError) as err:
            load_workload(path)
        assert (err.value.line, err.value.field) == (2, fld)
        assert text in str(err.value)


def test_hash_ids_beyond_the_prompt_are_dropped(tmp_path):
    # As in the reference, whose own test traces have them: they hold no token of the prompt.
    path = write_jsonl(
        tmp_path / "m.jsonl",
        [mooncake_row(0, 600, 1, [1, 2, 3, 4]), mooncake_row(1, 10, 1, [1, 2])],
    )
    w = load_workload(path)
    assert w.hash_offsets.tolist() == [0, 2, 3]  # ceil(600 / 512) = 2, ceil(10 / 512) = 1


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
        (
            {"timestamp": 0, "input_length": 1.5, "output_length": 1, "hash_ids": [1]},
            "input_length",
        ),
        (
            {"timestamp": 0, "input_length": 2**63, "output_length": 1, "hash_ids": [1]},
            "input_length",
        ),
        ({"timestamp": 0, "input_length": 1, "hash_ids": [1]}, "output_length"),
        (
            {"timestamp": 0, "input_length": 1, "output_length": "7", "hash_ids": [1]},
            "output_length",
        ),
        (
            {"timestamp": 0, "input_length": 1, "output_length": 2**64 - 1, "hash_ids": [1]},
            "output_length",
        ),
        ({"timestamp": 0, "input_length": 1, "output_length": 1}, "hash_ids"),
        ({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [-1]}, "hash_ids"),
    ],
)
def test_bad_values_name_line_and_field(tmp_path, row, field):
    p = write_jsonl(tmp_path / "m.jsonl", [mooncake_row(0, 1, 1, [0]), row])
    with pytest.raises(TraceError) as info:
        load_workload(p, format="mooncake")
    assert (info.value.line, info.value.field) == (2, field)
