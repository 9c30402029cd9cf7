"""Reader for ``dynamo.request.trace.v1`` request traces (bare records or the
``{"timestamp", "event"}`` envelope; plain or multi-member gzip JSONL).

Only ``request_end`` rows become requests; ``tool_*``, ``request_payload`` and ``router_selection``
rows are skipped and counted by event type. Any other event type is an error.

Speed: each batch of lines is parsed with orjson and pulled into lists by a tight loop that
assumes a well-formed row; the lists are then checked in bulk with numpy. Only when that fast
path sees anything unusual does the batch go through ``_validate_row``, the per-row validator
that names the exact line and field. Both paths apply the same rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from plansim.errors import TraceError
from plansim.traces.columns import TraceColumns
from plansim.traces.sources import line_batches

SCHEMA = "dynamo.request.trace.v1"
REQUEST_END = "request_end"
SKIPPED_EVENT_TYPES = frozenset(
    {"tool_start", "tool_end", "tool_error", "request_payload", "router_selection"}
)
_U64_MAX = (1 << 64) - 1


class _Anomaly(Exception):
    """The fast path saw something unusual; re-read the batch with the per-row validator."""


@dataclass(slots=True)
class _Lists:
    index: list[int] = field(default_factory=list)
    request_id: list = field(default_factory=list)
    received: list = field(default_factory=list)
    output_tokens: list = field(default_factory=list)
    block_size: list = field(default_factory=list)
    input_length: list = field(default_factory=list)
    counts: list = field(default_factory=list)
    hashes: list = field(default_factory=list)
    ttft: list = field(default_factory=list)
    total: list = field(default_factory=list)
    event_time: list = field(default_factory=list)
    agent: list = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Batch:
    line: np.ndarray
    request_id: list
    received: np.ndarray
    output_tokens: np.ndarray
    block_size: np.ndarray
    input_length: np.ndarray
    counts: np.ndarray
    hashes: np.ndarray
    ttft: np.ndarray
    total: np.ndarray
    event_time: np.ndarray
    agent: np.ndarray
    skipped: dict[str, int]


def read_dynamo(
    path: Path,
    *,
    trace_block_size: int | None = None,
    strict: bool = True,
) -> TraceColumns:
    """Read one Dynamo trace file.

    ``strict`` (``load_workload``): every ``request_end`` row needs ``request_received_ms`` and
    ``output_tokens``. Not strict (the retune window reader): those may be missing and come back
    as NaN / -1 for the caller's own rules. ``trace_block_size``, when given, must match the
    trace's block size.
    """
    source = str(path)
    batches: list[_Batch] = []
    skipped: dict[str, int] = {}
    block_size = trace_block_size
    block_size_line: int | None = None
    any_row = False
    for first_line, lines in line_batches(path):
        try:
            records = [orjson.loads(ln) if ln else None for ln in lines]
        except orjson.JSONDecodeError:
            records = _parse_each(lines, source, first_line)
        if not any_row:
            any_row = any(r is not None for r in records)
        try:
            lists = _fast_extract(records)
            batch = _to_batch(lists, first_line, strict)
        except _Anomaly:
            lists = _slow_extract(records, source, first_line, strict, block_size)
            try:
                batch = _to_batch(lists, first_line, strict)
            except _Anomaly:
                raise TraceError("rows could not be validated", source=source) from None
        if batch.block_size.size:
            if block_size is None:
                block_size = int(batch.block_size[0])
                block_size_line = int(batch.line[0])
            bad = np.flatnonzero(batch.block_size != block_size)
            if bad.size:
                row = int(bad[0])
                where = (
                    f"used from line {block_size_line}"
                    if block_size_line is not None
                    else "given by --trace-block-size"
                )
                raise TraceError(
                    f"replay.trace_block_size {int(batch.block_size[row])} differs from "
                    f"{block_size} {where}; one block size per trace",
                    source=source,
                    line=int(batch.line[row]),
                    field="replay.trace_block_size",
                )
        for k, v in batch.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
        batches.append(batch)
    if not any_row:
        raise TraceError("empty file", source=source)
    return _columns(source, batches, block_size, skipped)


def _parse_each(lines: list[bytes], source: str, first_line: int) -> list:
    records = []
    for i, ln in enumerate(lines):
        if not ln.strip():
            records.append(None)
            continue
        try:
            records.append(orjson.loads(ln))
        except orjson.JSONDecodeError as exc:
            raise TraceError(f"not JSON: {exc}", source=source, line=first_line + i) from None
    return records


def _fast_extract(records: list) -> _Lists:
    out = _Lists()
    index, rid, recv, osl = out.index, out.request_id, out.received, out.output_tokens
    bsz, isl, cnt, hashes = out.block_size, out.input_length, out.counts, out.hashes
    ttft, total, evt, agent = out.ttft, out.total, out.event_time, out.agent
    skipped = out.skipped
    try:
        for i, rec in enumerate(records):
            if rec is None:
                continue
            ev = rec.get("event")
            if ev is not None:
                rec = ev
            if rec.get("schema") != SCHEMA:
                raise _Anomaly
            et = rec.get("event_type")
            if et != REQUEST_END:
                if et in SKIPPED_EVENT_TYPES:
                    skipped[et] = skipped.get(et, 0) + 1
                    continue
                raise _Anomaly
            req = rec["request"]
            rp = req["replay"]
            hs = rp["input_sequence_hashes"]
            if type(hs) is not list:
                raise _Anomaly
            index.append(i)
            rid.append(req["request_id"])
            recv.append(req.get("request_received_ms"))
            osl.append(req.get("output_tokens"))
            bsz.append(rp["trace_block_size"])
            isl.append(rp["input_length"])
            cnt.append(len(hs))
            hashes.extend(hs)
            ttft.append(req.get("ttft_ms"))
            total.append(req.get("total_time_ms"))
            evt.append(rec.get("event_time_unix_ms"))
            agent.append("agent_context" in rec)
    except (AttributeError, KeyError, TypeError):
        raise _Anomaly from None
    return out


def _ints(values: list) -> np.ndarray:
    arr = np.array(values)
    if arr.dtype.kind not in "iu" and arr.size:
        raise _Anomaly
    return arr.astype(np.int64, copy=False) if arr.size else np.zeros(0, dtype=np.int64)


def _floats(values: list, *, required: bool) -> np.ndarray:
    """Numbers (None allowed unless required) as float64 with NaN for None; >= 0."""
    present = [v for v in values if v is not None]
    if len(present) != len(values) and required:
        raise _Anomaly
    if present:
        try:
            total = sum(present)
        except TypeError:
            raise _Anomaly from None
        if not isinstance(total, (int, float)):
            raise _Anomaly
    arr = np.array(values, dtype=np.float64) if values else np.zeros(0, dtype=np.float64)
    if not np.all(np.isnan(arr) | ((arr >= 0) & np.isfinite(arr))):
        raise _Anomaly
    return arr


def _to_batch(lists: _Lists, first_line: int, strict: bool) -> _Batch:
    try:
        "".join(lists.request_id)
    except TypeError:
        raise _Anomaly from None
    isl = _ints(lists.input_length)
    bsz = _ints(lists.block_size)
    cnt = np.array(lists.counts, dtype=np.int64)
    if strict:
        osl = _ints(lists.output_tokens)
    else:
        osl = _ints([-1 if v is None else v for v in lists.output_tokens])
        if np.any(osl < -1):
            raise _Anomaly
    if np.any(isl < 0) or np.any(bsz <= 0) or (strict and np.any(osl < 0)):
        raise _Anomaly
    if not np.array_equal(cnt, -(-isl // np.maximum(bsz, 1))):
        raise _Anomaly
    if lists.hashes:
        try:
            if type(sum(lists.hashes)) is not int:
                raise _Anomaly
            hashes = np.array(lists.hashes, dtype=np.uint64)
        except (TypeError, OverflowError, ValueError):
            raise _Anomaly from None
    else:
        hashes = np.zeros(0, dtype=np.uint64)
    return _Batch(
        line=first_line + np.array(lists.index, dtype=np.int64),
        request_id=lists.request_id,
        received=_floats(lists.received, required=strict),
        output_tokens=osl,
        block_size=bsz,
        input_length=isl,
        counts=cnt,
        hashes=hashes,
        ttft=_floats(lists.ttft, required=False),
        total=_floats(lists.total, required=False),
        event_time=_floats(lists.event_time, required=False),
        agent=np.array(lists.agent, dtype=bool),
        skipped=lists.skipped,
    )


def _slow_extract(
    records: list, source: str, first_line: int, strict: bool, block_size: int | None
) -> _Lists:
    out = _Lists()
    for i, rec in enumerate(records):
        if rec is None:
            continue
        row = _validate_row(rec, source, first_line + i, strict, block_size)
        if isinstance(row, str):
            out.skipped[row] = out.skipped.get(row, 0) + 1
            continue
        req, rp, rec_top, ev = row
        out.index.append(i)
        out.request_id.append(req["request_id"])
        out.received.append(req.get("request_received_ms"))
        out.output_tokens.append(req.get("output_tokens"))
        out.block_size.append(rp["trace_block_size"])
        out.input_length.append(rp["input_length"])
        out.counts.append(len(rp["input_sequence_hashes"]))
        out.hashes.extend(rp["input_sequence_hashes"])
        out.ttft.append(req.get("ttft_ms"))
        out.total.append(req.get("total_time_ms"))
        out.event_time.append(ev.get("event_time_unix_ms"))
        out.agent.append("agent_context" in ev)
        if block_size is None:
            block_size = rp["trace_block_size"]
    return out


def _is_uint(v: object) -> bool:
    return type(v) is int and 0 <= v <= _U64_MAX


def _is_number(v: object) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _validate_row(rec: object, source: str, line: int, strict: bool, block_size: int | None):
    """Check one parsed row; returns the skipped event type, or (request, replay, row, event)."""

    def fail(message: str, fld: str | None = None) -> TraceError:
        return TraceError(message, source=source, line=line, field=fld)

    if not isinstance(rec, dict):
        raise fail(f"expected a JSON object, got {type(rec).__name__}")
    ev = rec
    if "event" in rec:
        ev = rec["event"]
        if not isinstance(ev, dict):
            raise fail("event must be an object", "event")
    if "schema" not in ev:
        raise fail("schema is missing (not a dynamo.request.trace.v1 row)", "schema")
    if ev["schema"] != SCHEMA:
        raise fail(f"schema is {ev['schema']!r}, expected {SCHEMA!r}", "schema")
    et = ev.get("event_type")
    if et is None:
        raise fail("event_type is missing", "event_type")
    if et != REQUEST_END:
        if et in SKIPPED_EVENT_TYPES:
            return et
        raise fail(f"event_type {et!r} is unknown", "event_type")
    req = ev.get("request")
    if not isinstance(req, dict):
        raise fail("request is missing or not an object", "request")
    if type(req.get("request_id")) is not str:
        raise fail("request_id is missing or not a string", "request_id")
    for name, required in (("request_received_ms", strict), ("output_tokens", strict)):
        if name not in req or req[name] is None:
            if required:
                raise fail(f"{name} is missing", name)
            continue
        v = req[name]
        ok = _is_uint(v) if name == "output_tokens" else (_is_number(v) and v >= 0)
        if not ok:
            kind = "a non-negative integer" if name == "output_tokens" else "a non-negative number"
            raise fail(f"{name} must be {kind}, got {v!r}", name)
    for name in ("ttft_ms", "total_time_ms"):
        v = req.get(name)
        if v is not None and not (_is_number(v) and v >= 0):
            raise fail(f"{name} must be a non-negative number, got {v!r}", name)
    v = ev.get("event_time_unix_ms")
    if v is not None and not (_is_number(v) and v >= 0):
        raise fail(f"event_time_unix_ms must be a non-negative number, got {v!r}", "event_time_unix_ms")
    rp = req.get("replay")
    if not isinstance(rp, dict):
        raise fail("replay is missing or not an object", "replay")
    bs = rp.get("trace_block_size")
    if not (_is_uint(bs) and bs > 0):
        raise fail(f"replay.trace_block_size must be an integer > 0, got {bs!r}", "replay.trace_block_size")
    if block_size is not None and bs != block_size:
        raise fail(
            f"replay.trace_block_size {bs} differs from {block_size} used earlier; "
            "one block size per trace",
            "replay.trace_block_size",
        )
    isl = rp.get("input_length")
    if not _is_uint(isl):
        raise fail(f"replay.input_length must be a non-negative integer, got {isl!r}", "replay.input_length")
    hs = rp.get("input_sequence_hashes")
    if not isinstance(hs, list):
        raise fail("replay.input_sequence_hashes is missing or not a list", "replay.input_sequence_hashes")
    for h in hs:
        if not _is_uint(h):
            raise fail(
                f"replay.input_sequence_hashes holds {h!r}, not an unsigned 64-bit integer",
                "replay.input_sequence_hashes",
            )
    expected = -(-isl // bs)
    if len(hs) != expected:
        raise fail(
            f"replay.input_sequence_hashes has {len(hs)} entries, expected {expected} for "
            f"input_length {isl} and trace_block_size {bs}",
            "replay.input_sequence_hashes",
        )
    return req, rp, rec, ev


def _columns(
    source: str, batches: list[_Batch], block_size: int | None, skipped: dict[str, int]
) -> TraceColumns:
    def cat(name: str, dtype) -> np.ndarray:
        parts = [getattr(b, name) for b in batches]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    rid = np.empty(sum(len(b.request_id) for b in batches), dtype=object)
    pos = 0
    for b in batches:
        rid[pos : pos + len(b.request_id)] = b.request_id
        pos += len(b.request_id)
    return TraceColumns(
        source=source,
        line=cat("line", np.int64),
        arrival_ms=cat("received", np.float64),
        isl_tokens=cat("input_length", np.int64),
        osl_tokens=cat("output_tokens", np.int64),
        request_id=rid,
        hash_counts=cat("counts", np.int64),
        raw_hashes=cat("hashes", np.uint64),
        trace_block_size=int(block_size) if block_size is not None else 0,
        recorded_ttft_ms=cat("ttft", np.float64),
        recorded_total_ms=cat("total", np.float64),
        event_time_ms=cat("event_time", np.float64),
        has_agent_context=cat("agent", bool),
        skipped=skipped,
    )
