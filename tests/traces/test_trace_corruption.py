"""Property: a randomly corrupted trace either loads or raises TraceError, nothing else."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_files import dynamo_row, envelope, lines_of, mooncake_row, tool_row

from plansim.errors import TraceError
from plansim.traces import load_workload
from plansim.traces.windows import read_window

DYNAMO = lines_of(
    [
        dynamo_row(f"r{i}", received_ms=1_000 + 37 * i, isl=200 + 300 * i, osl=i, total_ms=50.0 + i)
        for i in range(6)
    ]
    + [tool_row()]
    + [envelope(dynamo_row("e", received_ms=5_000, isl=700))]
)
MOONCAKE = lines_of([mooncake_row(10 * i, 100 * i + 1, i, [0, i]) for i in range(6)])
AZURE = (
    b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
    b"2023-11-16 18:17:03.9799600,4808,10\n"
    b"2023-11-16 18:17:04.0319600,3180,8\n"
    b"2023-11-16 18:17:05.0000000,110,27"
)

edits = st.lists(
    st.tuples(
        st.sampled_from(["flip", "delete", "insert", "truncate", "duplicate"]),
        st.integers(0, 10_000),
        st.integers(1, 40),
        st.binary(min_size=1, max_size=6),
    ),
    min_size=1,
    max_size=4,
)


def _corrupt(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for op, pos, size, blob in ops:
        if not buf:
            break
        pos %= len(buf)
        if op == "flip":
            buf[pos] ^= blob[0] or 1
        elif op == "delete":
            del buf[pos : pos + size]
        elif op == "insert":
            buf[pos:pos] = blob
        elif op == "truncate":
            del buf[pos:]
        else:
            buf[pos:pos] = buf[pos : pos + size]
    return bytes(buf)


def _loads_or_trace_error(data: bytes, name: str, **kw) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            w = load_workload(path, **kw)
        except TraceError:
            return
        assert len(w) > 0
        assert w.hash_offsets[-1] == w.hash_ids.size


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(edits)
def test_corrupted_dynamo_jsonl(ops):
    _loads_or_trace_error(_corrupt(DYNAMO, ops), "t.jsonl")


@SETTINGS
@given(edits, st.booleans())
def test_corrupted_dynamo_gzip(ops, corrupt_plain_text):
    data = (
        gzip.compress(_corrupt(DYNAMO, ops))
        if corrupt_plain_text
        else _corrupt(gzip.compress(DYNAMO), ops)
    )
    _loads_or_trace_error(data, "t.jsonl.gz")


@SETTINGS
@given(edits)
def test_corrupted_mooncake(ops):
    _loads_or_trace_error(_corrupt(MOONCAKE, ops), "m.jsonl")


@SETTINGS
@given(edits)
def test_corrupted_azure(ops):
    _loads_or_trace_error(_corrupt(AZURE, ops), "a.csv")


@SETTINGS
@given(edits, st.sampled_from(["auto", "dynamo", "mooncake", "azure"]))
def test_any_file_forced_to_any_format(ops, fmt):
    _loads_or_trace_error(_corrupt(DYNAMO + MOONCAKE, ops), "x.jsonl", format=fmt)


@settings(max_examples=80, deadline=None)
@given(edits)
def test_corrupted_window_read(ops):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        path.write_bytes(_corrupt(DYNAMO, ops))
        try:
            read_window(path, start_ms=0, end_ms=3_000, cutoff_ms=4_000, with_history=True)
        except TraceError:
            pass
