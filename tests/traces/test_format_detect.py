"""Format detection by content, the --format override and the option checks."""

from __future__ import annotations

import pytest
from trace_files import dynamo_row, envelope, mooncake_row, write_jsonl

from plansim.errors import InputError, TraceError
from plansim.traces import load_workload
from plansim.traces.detect import detect_format


def test_detects_each_format_by_content_not_name(tmp_path):
    assert detect_format(write_jsonl(tmp_path / "x.csv", [dynamo_row("a")])) == "dynamo"
    assert detect_format(write_jsonl(tmp_path / "y.txt", [envelope(dynamo_row("a"))])) == "dynamo"
    assert detect_format(write_jsonl(tmp_path / "z.gz", [mooncake_row(0, 1, 1, [1])])) == "mooncake"
    p = tmp_path / "a.jsonl"
    p.write_text("\n\nTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.0,1,1\n")
    assert detect_format(p) == "azure"


def test_unknown_format_and_override(tmp_path):
    p = write_jsonl(tmp_path / "t.jsonl", [{"hello": 1}])
    with pytest.raises(TraceError, match="unknown trace format"):
        load_workload(p)
    # Forced to Mooncake, the same row fails on its first missing field instead.
    with pytest.raises(TraceError) as info:
        load_workload(p, format="mooncake")
    assert info.value.field == "timestamp"


def test_mixed_formats_are_rejected(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [dynamo_row("a")])
    write_jsonl(tmp_path / "b.jsonl", [mooncake_row(0, 1, 1, [1])])
    with pytest.raises(TraceError, match="one format per load"):
        load_workload(tmp_path)


def test_bad_options(tmp_path):
    p = write_jsonl(tmp_path / "t.jsonl", [dynamo_row("a")])
    with pytest.raises(InputError) as info:
        load_workload(p, format="parquet")
    assert info.value.field == "--format"
    for size in (0, 10**7 + 1):  # a block holds at most one request's 10^7 tokens
        with pytest.raises(InputError) as info:
            load_workload(p, trace_block_size=size)
        assert info.value.field == "--trace-block-size"


def test_closed_loop_forms_are_detected(tmp_path):
    from trace_files import AGENTIC_HEADER, turn, write_jsonl

    assert detect_format(write_jsonl(tmp_path / "a.jsonl", [AGENTIC_HEADER])) == "agentic_mooncake"
    # A session's first row may come without input_length; session_id marks it as Mooncake.
    assert detect_format(write_jsonl(tmp_path / "m.jsonl", [turn("s", timestamp=0)])) == "mooncake"


def test_a_shard_opening_with_a_long_payload_row_is_dynamo(tmp_path):
    from trace_files import write_jsonl

    payload = {
        "event_type": "request_payload",
        "event_time_unix_ms": 1,
        "payload": {"request": {"messages": [{"content": "x" * (2 << 20)}]}},
    }
    assert detect_format(write_jsonl(tmp_path / "p.jsonl", [payload])) == "dynamo"
