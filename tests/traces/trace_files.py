"""Small hand-made trace files for the reader tests."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import orjson
import pytest

SCHEMA = "dynamo.request.trace.v1"


def dynamo_row(
    rid: str,
    received_ms: int | None = 1_000,
    isl: int = 1_000,
    osl: int | None = 10,
    block: int = 512,
    hashes: list[int] | None = None,
    total_ms: float | None = None,
    ttft_ms: float | None = None,
    event_ms: int | None = None,
    agent: bool = False,
) -> dict:
    """A request_end row; hashes default to ceil(isl / block) distinct values from the id."""
    if hashes is None:
        base = abs(hash(rid)) % 10_000 * 1_000
        hashes = [base + t for t in range(-(-isl // block))]
    req: dict = {
        "request_id": rid,
        "replay": {"trace_block_size": block, "input_length": isl, "input_sequence_hashes": hashes},
    }
    if received_ms is not None:
        req["request_received_ms"] = received_ms
    if osl is not None:
        req["output_tokens"] = osl
    if total_ms is not None:
        req["total_time_ms"] = total_ms
    if ttft_ms is not None:
        req["ttft_ms"] = ttft_ms
    row: dict = {"schema": SCHEMA, "event_type": "request_end", "request": req}
    if event_ms is None and received_ms is not None:
        event_ms = received_ms + int(round(total_ms or 0))
    if event_ms is not None:
        row["event_time_unix_ms"] = event_ms
    if agent:
        row["agent_context"] = {"session_id": "s1"}
    return row


def tool_row(kind: str = "tool_end") -> dict:
    return {
        "schema": SCHEMA,
        "event_type": kind,
        "event_time_unix_ms": 5,
        "event_source": "harness",
        "agent_context": {"session_id": "s1"},
        "tool": {"tool_call_id": "c1", "tool_class": "search", "duration_ms": 3.0},
    }


def lines_of(rows: list) -> bytes:
    return b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n" for r in rows)


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_bytes(lines_of(rows))
    return path


def write_gz(path: Path, rows: list, members: int = 1) -> Path:
    """Multi-member gzip: the rows split into ``members`` separately compressed pieces."""
    data = lines_of(rows)
    cut = [len(data) * k // members for k in range(members + 1)]
    path.write_bytes(b"".join(gzip.compress(data[a:b]) for a, b in itertools.pairwise(cut)))
    return path


def envelope(row: dict, timestamp: int = 7) -> dict:
    return {"timestamp": timestamp, "event": row}


def mooncake_row(ts: float, isl: int | None, osl: int, hash_ids: list[int], **extra) -> dict:
    row = {"timestamp": ts, "output_length": osl, "hash_ids": hash_ids, **extra}
    if isl is not None:
        row["input_length"] = isl
    return row


def turn(session: str | None, osl: int = 3, hash_ids: list[int] | None = None, **fields) -> dict:
    """A Mooncake session-form row: ``fields`` holds timestamp / delay / request_id."""
    row = {"output_length": osl, "hash_ids": hash_ids or [1], **fields}
    if session is not None:
        row["session_id"] = session
    return row


AGENTIC_HEADER = {
    "schema": "dynamo.agentic_mooncake",
    "version": 2,
    "block_size": 512,
    "hash_id_scope": "local",
    "source": {"format": "test", "digest": "x"},
}


def agentic_row(rid: str, session: str, not_before_ms: float, deps=(), **extra) -> dict:
    """An agentic Mooncake request row; ``deps`` are (request_id, trigger, delay_ms)."""
    row = {
        "request_id": rid,
        "play_id": "p",
        "session_id": session,
        "model": "m",
        "input_length": 100,
        "output_length": 2,
        "hash_ids": [len(rid)],
        "not_before_ms": not_before_ms,
        **extra,
    }
    if deps:
        row["dependencies"] = [
            {"request_id": d, "trigger": t, "delay_ms": ms, "relation": "sequence"}
            for d, t, ms in deps
        ]
    return row


@pytest.fixture(params=["row-by-row", "bulk"])
def dynamo_reading_path(request, monkeypatch):
    """Read Dynamo files both ways: row by row (a small file's first blocks) and with the bulk
    pyarrow path (a large file's later blocks). Use with ``pytest.mark.usefixtures``."""
    from plansim.traces import dynamo

    if request.param == "bulk":
        monkeypatch.setattr(dynamo, "ROW_BY_ROW_BYTES", 0)
    return request.param
