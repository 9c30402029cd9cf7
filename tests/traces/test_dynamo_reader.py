"""Dynamo request trace reader: forms, shards, skipped rows and one test per validation rule."""

from __future__ import annotations

import gzip

import numpy as np
import orjson
import pytest
from trace_files import dynamo_reading_path, dynamo_row, envelope, tool_row, write_gz, write_jsonl

from plansim.errors import TraceError
from plansim.traces import dynamo, load_workload

pytestmark = pytest.mark.usefixtures(dynamo_reading_path.__name__)


def _err(path, **kw) -> TraceError:
    with pytest.raises(TraceError) as info:
        load_workload(path, **kw)
    return info.value


def test_bare_rows_give_lengths_arrivals_and_latencies(tmp_path):
    rows = [
        dynamo_row("a", received_ms=2_000, isl=1_600, osl=7, total_ms=120.5, ttft_ms=20.0),
        dynamo_row("b", received_ms=1_000, isl=100, osl=3),
    ]
    w = load_workload(write_jsonl(tmp_path / "t.jsonl", rows))
    assert w.request_id.tolist() == ["b", "a"]  # sorted by arrival
    assert w.arrival_ms.tolist() == [1_000.0, 2_000.0]
    assert w.isl_tokens.tolist() == [100, 1_600]
    assert w.osl_tokens.tolist() == [3, 7]
    assert w.trace_block_size == 512
    assert np.isnan(w.recorded_total_ms[0]) and w.recorded_total_ms[1] == 120.5
    assert np.isnan(w.recorded_ttft_ms[0]) and w.recorded_ttft_ms[1] == 20.0
    assert w.hash_offsets.tolist() == [0, 1, 5]  # ceil(100/512)=1, ceil(1600/512)=4


def test_envelope_rows_read_like_bare_rows(tmp_path):
    rows = [dynamo_row(f"r{i}", received_ms=1_000 + i) for i in range(3)]
    bare = load_workload(write_jsonl(tmp_path / "bare.jsonl", rows))
    wrapped = load_workload(write_jsonl(tmp_path / "env.jsonl", [envelope(r) for r in rows]))
    assert wrapped.request_id.tolist() == bare.request_id.tolist()
    assert wrapped.hash_ids.tolist() == bare.hash_ids.tolist()


def test_multi_member_gzip_reads_every_member(tmp_path):
    rows = [dynamo_row(f"r{i}", received_ms=i) for i in range(50)]
    w = load_workload(write_gz(tmp_path / "t.jsonl.gz", rows, members=7))
    assert len(w) == 50


def test_tool_and_payload_rows_are_skipped_and_counted(tmp_path):
    payload = {
        "schema": "dynamo.request.trace.v1",
        "event_type": "request_payload",
        "event_time_unix_ms": 1,
        "payload": {"request_id": "x", "endpoint": "e"},
    }
    rows = [
        tool_row("tool_start"),
        dynamo_row("a"),
        tool_row("tool_end"),
        tool_row("tool_end"),
        payload,
    ]
    w = load_workload(write_jsonl(tmp_path / "t.jsonl", rows))
    assert len(w) == 1
    assert w.skipped == {"tool_start": 1, "tool_end": 2, "request_payload": 1}


def test_blank_lines_are_skipped_and_line_numbers_still_count_them(tmp_path):
    p = tmp_path / "t.jsonl"
    good = orjson.dumps(dynamo_row("a"))
    bad = orjson.dumps(dynamo_row("b", hashes=[1]))
    p.write_bytes(good + b"\n\n   \n" + bad + b"\n")
    assert _err(p).line == 4


def test_shards_in_a_folder_and_a_glob(tmp_path):
    (tmp_path / "d").mkdir()
    write_jsonl(tmp_path / "d" / "a.jsonl", [dynamo_row("a", received_ms=5)])
    write_gz(tmp_path / "d" / "b.jsonl.gz", [dynamo_row("b", received_ms=1)])
    assert load_workload(tmp_path / "d").request_id.tolist() == ["b", "a"]
    assert len(load_workload(str(tmp_path / "d" / "*.jsonl*"))) == 2


def test_plain_and_gzip_copy_of_one_shard_is_rejected(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [dynamo_row("a")])
    write_gz(tmp_path / "a.jsonl.gz", [dynamo_row("a")])
    assert "use one copy" in str(_err(tmp_path))


def test_hash_count_mismatch_names_line_field_and_counts(tmp_path):
    rows = [dynamo_row("a"), dynamo_row("b"), dynamo_row("c", isl=1_600, hashes=[1, 2, 3])]
    e = _err(write_gz(tmp_path / "trace.jsonl.gz", rows))
    assert (e.line, e.field) == (3, "replay.input_sequence_hashes")
    assert str(e).endswith(
        "trace.jsonl.gz:3: replay.input_sequence_hashes has 3 entries, expected 4 for "
        "input_length 1600 and trace_block_size 512"
    )


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.pop("schema"), "schema"),
        (lambda r: r.update(schema="dynamo.request.trace.v2"), "schema"),
        (lambda r: r.update(event_type="request_start"), "event_type"),
        (lambda r: r.update(event_type={"name": "request_end"}), "event_type"),
        (lambda r: r.pop("request"), "request"),
        (lambda r: r["request"].pop("request_id"), "request_id"),
        (lambda r: r["request"].pop("request_received_ms"), "request_received_ms"),
        (lambda r: r["request"].pop("output_tokens"), "output_tokens"),
        (lambda r: r["request"].update(output_tokens=-1), "output_tokens"),
        (lambda r: r["request"].update(output_tokens="12"), "output_tokens"),
        (lambda r: r["request"].update(output_tokens=2.5), "output_tokens"),
        (lambda r: r["request"].update(request_received_ms="soon"), "request_received_ms"),
        (lambda r: r["request"].update(total_time_ms=-4.0), "total_time_ms"),
        (lambda r: r["request"].pop("replay"), "replay"),
        (lambda r: r["request"]["replay"].update(trace_block_size=0), "replay.trace_block_size"),
        (lambda r: r["request"]["replay"].update(input_length=-5), "replay.input_length"),
        (lambda r: r["request"]["replay"].update(input_length="1000"), "replay.input_length"),
        (
            lambda r: r["request"]["replay"].update(input_sequence_hashes=[1, "x"]),
            "replay.input_sequence_hashes",
        ),
        (
            lambda r: r["request"]["replay"].update(input_sequence_hashes=[1, -2]),
            "replay.input_sequence_hashes",
        ),
    ],
)
def test_each_bad_field_is_named_with_its_line(tmp_path, mutate, field):
    bad = dynamo_row("b")
    mutate(bad)
    e = _err(write_jsonl(tmp_path / "t.jsonl", [dynamo_row("a"), bad]))
    assert (e.line, e.field) == (2, field)


@pytest.mark.parametrize(
    ("isl", "osl", "block", "field", "text"),
    [
        (
            10**7 + 1,
            1,
            2**20,
            "replay.input_length",
            "replay.input_length 10,000,001 tokens is over plansim's bound of 10,000,000 tokens",
        ),
        (10, 10**7 + 1, 512, "output_tokens", "output_tokens 10,000,001 tokens is over"),
        (10, 1, 10**7 + 1, "replay.trace_block_size", "must be an integer in [1, 10,000,000]"),
    ],
)
def test_sizes_past_the_request_bound_are_refused(tmp_path, isl, osl, block, field, text):
    rows = [
        dynamo_row("a"),
        dynamo_row("b", isl=isl, osl=osl, block=block),
        dynamo_row("c", isl=isl, osl=osl, block=block),
    ]
    if field != "replay.trace_block_size":  # one block size per trace
        rows = [dynamo_row("a", block=block), *rows[1:]]
    e = _err(write_jsonl(tmp_path / "t.jsonl", rows))
    assert (e.line, e.field) == (2, field)
    assert text in str(e)


def test_not_json_names_the_line(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(orjson.dumps(dynamo_row("a")) + b'\n{"schema": \n')
    e = _err(p)
    assert e.line == 2 and "not JSON" in e.message


def test_mixed_block_sizes_in_one_file(tmp_path):
    rows = [dynamo_row("a", block=512), dynamo_row("b", block=256)]
    e = _err(write_jsonl(tmp_path / "t.jsonl", rows))
    assert (e.line, e.field) == (2, "replay.trace_block_size")


def test_mixed_block_sizes_across_shards(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [dynamo_row("a", block=512)])
    write_jsonl(tmp_path / "b.jsonl", [dynamo_row("b", block=64)])
    e = _err(tmp_path)
    assert e.source.endswith("b.jsonl") and e.field == "replay.trace_block_size"


def test_explicit_block_size_must_match_the_trace(tmp_path):
    p = write_jsonl(tmp_path / "t.jsonl", [dynamo_row("a", block=512)])
    assert _err(p, trace_block_size=256).field == "replay.trace_block_size"
    assert load_workload(p, trace_block_size=512).trace_block_size == 512


def test_duplicate_request_ids_across_shards(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [dynamo_row("x"), dynamo_row("y")])
    write_jsonl(tmp_path / "b.jsonl", [dynamo_row("z"), dynamo_row("x")])
    e = _err(tmp_path)
    assert e.source.endswith("b.jsonl") and e.line == 2 and e.field == "request_id"
    assert "a.jsonl:1" in e.message


def test_truncated_gzip(tmp_path):
    p = write_gz(tmp_path / "t.jsonl.gz", [dynamo_row(f"r{i}") for i in range(200)])
    data = p.read_bytes()
    p.write_bytes(data[: len(data) - 40])
    assert "truncated or corrupt gzip" in _err(p).message


def test_corrupt_gzip_member(tmp_path):
    good = gzip.compress(orjson.dumps(dynamo_row("a")) + b"\n")
    second = bytearray(gzip.compress(orjson.dumps(dynamo_row("b")) + b"\n"))
    second[12:20] = b"\xff" * 8
    p = tmp_path / "t.jsonl.gz"
    p.write_bytes(good + bytes(second))
    assert "gzip" in _err(p).message


def test_empty_file_and_file_without_request_end_rows(tmp_path):
    (tmp_path / "e.jsonl").write_bytes(b"")
    assert "empty file" in _err(tmp_path / "e.jsonl").message
    p = write_jsonl(tmp_path / "tools.jsonl", [tool_row()])
    assert "no request_end rows" in _err(p).message


def test_missing_path_and_folder_without_shards(tmp_path):
    assert "no such file" in _err(tmp_path / "missing.jsonl").message
    (tmp_path / "empty_dir").mkdir()
    assert "no .jsonl" in _err(tmp_path / "empty_dir").message


def test_unreadable_file_is_one_trace_error(tmp_path, monkeypatch):
    from plansim.traces import sources

    p = write_jsonl(tmp_path / "t.jsonl", [dynamo_row("a")])

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(sources, "open", denied, raising=False)
    e = _err(p)
    assert e.source == str(p) and "Permission denied" in e.message


def test_large_block_of_rows_matches_row_by_row_reading(tmp_path, monkeypatch):
    """The bulk path and the per-row path (forced by a blank line) give the same workload."""
    monkeypatch.setattr(dynamo, "ROW_BY_ROW_BYTES", 0)
    rng = np.random.default_rng(3)
    rows = [
        dynamo_row(
            f"r{i}",
            received_ms=int(rng.integers(0, 10_000)),
            isl=int(rng.integers(1, 3_000)),
            osl=int(rng.integers(0, 50)),
            total_ms=float(rng.integers(1, 900)),
        )
        for i in range(3_000)
    ]
    fast = load_workload(write_jsonl(tmp_path / "a.jsonl", rows))
    p = tmp_path / "b.jsonl"
    p.write_bytes(b"\n" + (tmp_path / "a.jsonl").read_bytes())
    slow = load_workload(p)
    for name in (
        "arrival_ms",
        "isl_tokens",
        "osl_tokens",
        "request_id",
        "hash_offsets",
        "hash_ids",
        "recorded_total_ms",
    ):
        assert np.array_equal(
            getattr(fast, name), getattr(slow, name), equal_nan=name == "recorded_total_ms"
        )
