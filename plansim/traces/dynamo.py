"""Reader for ``dynamo.request.trace.v1`` request traces (bare records or the
``{"timestamp", "event"}`` envelope; plain or multi-member gzip JSONL).

Only ``request_end`` rows become requests; ``tool_*``, ``request_payload`` and ``router_selection``
rows are skipped and counted by event type (a ``request_payload`` or ``tool_start`` row is
skipped whatever else it holds, as the reference does). Any other event type is an error.

Closed loop (``load_workload``): the ``agent_context`` of each request (``session_id``,
``parent_session_id``), its ``model`` and recorded end, and the request links of ``tool_end`` /
``tool_error`` rows are collected into ``DynamoLinks``; ``plansim.traces.dynamo_agents`` turns
them into the dependency graph. The retune window reader (``strict=False``) collects none of
it: windows replay open-loop, ``agent_context`` stripped.

Speed: a background thread inflates the file into blocks of whole lines. The blocks of a file's
first ``ROW_BY_ROW_BYTES`` are read row by row by ``_validate_row``; every later block is
parsed by pyarrow's JSON reader against the typed fields replay needs
(``plansim.traces.dynamo_arrow``; a value of the wrong JSON type fails the block) and the value
rules are checked in bulk with numpy. A block in which anything is unusual (a parse failure, a
blank line, a rule broken) is read again row by row, which names the exact line and field. Both
paths apply the same rules, so a valid file reads the same either way; a bad one always fails
in the per-row path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from plansim.errors import TraceError
from plansim.limits import MAX_REQUEST_TOKENS
from plansim.traces.buffers import GrowingArray
from plansim.traces.columns import I64_MAX, U64_MAX, TraceColumns
from plansim.traces.dynamo_agents import DynamoLinks, ToolLink, end_ms, tool_link
from plansim.traces.dynamo_batch import (
    REQUEST_END,
    SCHEMA,
    SKIPPED_EVENT_TYPES,
    TOOL_END,
    Batch,
    event_of,
)
from plansim.traces.lengths import check_lengths
from plansim.traces.request_ids import IdCollector
from plansim.traces.sources import prefetch, text_chunks

# Skipped before any other check: their content is not ours to validate.
_SKIPPED_UNREAD = frozenset({"tool_start", "request_payload"})
# The first this many bytes of a file are read row by row: below a few tens of thousands of
# rows that is quicker than importing and starting pyarrow's JSON reader and compute kernels.
# A module constant so that tests can send every block down either path.
ROW_BY_ROW_BYTES = 8 << 20


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
    session: list = field(default_factory=list)
    parent: list = field(default_factory=list)
    model: list = field(default_factory=list)
    tools: list = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


# Batch column -> (TraceColumns field, dtype); event time and agent context only for windows.
# Hash counts follow from the input lengths and are computed at the end.
_KEPT = {
    "line": ("line", np.int64),
    "received": ("arrival_ms", np.float64),
    "input_length": ("isl_tokens", np.int64),
    "output_tokens": ("osl_tokens", np.int64),
    "hashes": ("raw_hashes", np.uint64),
    "ttft": ("recorded_ttft_ms", np.float64),
    "total": ("recorded_total_ms", np.float64),
}
_WINDOW_ONLY = {"event_time": ("event_time_ms", np.float64), "agent": ("has_agent_context", bool)}


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
    kept = _KEPT if strict else {**_KEPT, **_WINDOW_ONLY}
    columns = {name: GrowingArray(dtype) for name, (_, dtype) in kept.items()}
    request_ids = IdCollector()
    skipped: dict[str, int] = {}
    block_size = trace_block_size
    block_size_line: int | None = None
    any_row = False
    agents = _AgentParts() if strict else None
    arrow_batch = None
    read_bytes = 0
    # One block read ahead: enough to overlap inflating with parsing, and few blocks in flight.
    for first_line, block in prefetch(text_chunks(path), depth=1):
        if not any_row:
            any_row = bool(block.strip())
        read_bytes += len(block)
        batch = None
        if read_bytes > ROW_BY_ROW_BYTES:
            if arrow_batch is None:
                from plansim.traces.dynamo_arrow import arrow_batch
            batch = arrow_batch(block, source, first_line, strict)
        if batch is None:
            batch = _checked_batch(block, source, first_line, strict, block_size)
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
        check_lengths(
            source,
            batch.line,
            batch.input_length,
            batch.output_tokens,
            isl_field="replay.input_length",
            osl_field="output_tokens",
        )
        for k, v in batch.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
        for name, column in columns.items():
            column.extend(getattr(batch, name))
        request_ids.extend(batch.request_id)
        if agents is not None:
            agents.add(batch)
    if not any_row:
        raise TraceError("empty file", source=source)
    fields = {kept[name][0]: column.array() for name, column in columns.items()}
    # Both paths checked that each row has ceil(input_length / block size) hashes, so the
    # counts are not collected while reading.
    fields["hash_counts"] = -(-fields["isl_tokens"] // (block_size or 1))
    return TraceColumns(
        source=source,
        request_id=request_ids.array(),
        trace_block_size=int(block_size) if block_size is not None else 0,
        skipped=skipped,
        links=agents.links() if agents is not None else None,
        **fields,
    )


class _AgentParts:
    """Agent columns block by block: kept only for blocks with agent rows (and their end
    times), so a context-free trace pays for nothing but the check."""

    def __init__(self) -> None:
        self.blocks: list[tuple[int, int, Batch | None]] = []  # (row offset, rows, batch)
        self.rows = 0
        self.any = False
        self.tools: list[ToolLink] = []

    def add(self, b: Batch) -> None:
        n = int(b.line.size)
        keep = b.session is not None
        self.any |= keep
        self.blocks.append((self.rows, n, b if keep else None))
        self.rows += n
        self.tools.extend(b.tools)

    def links(self) -> DynamoLinks | None:
        if not self.any and not self.tools:
            return None
        session = np.full(self.rows, None, dtype=object)
        parent = np.full(self.rows, None, dtype=object)
        model = np.full(self.rows, None, dtype=object)
        end = np.full(self.rows, np.nan)
        for lo, n, b in self.blocks:
            if b is None:
                continue
            session[lo : lo + n] = b.session
            parent[lo : lo + n] = b.parent
            model[lo : lo + n] = b.model
            end[lo : lo + n] = end_ms(b.received, b.total, b.event_time)
        return DynamoLinks(session, parent, model, end, self.tools)


def _checked_batch(
    block: bytes, source: str, first_line: int, strict: bool, block_size: int | None
) -> Batch:
    """The per-row path: exact line and field for the first bad row of the block."""
    lines = block.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    records = _parse_each(lines, source, first_line)
    return _lists_to_batch(
        _slow_extract(records, source, first_line, strict, block_size), first_line
    )


def _parse_each(lines: list[bytes], source: str, first_line: int) -> list:
    records = []
    for i, ln in enumerate(lines):
        if not ln.strip():
            records.append(None)
            continue
        try:
            records.append(orjson.loads(ln))
        except orjson.JSONDecodeError as exc:
            raise TraceError(
                f"not JSON: {exc.msg} at column {exc.colno}", source=source, line=first_line + i
            ) from None
    return records


def _lists_to_batch(lists: _Lists, first_line: int) -> Batch:
    """Arrays from rows that ``_validate_row`` accepted."""

    def floats(values: list) -> np.ndarray:
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)

    return Batch(
        line=first_line + np.array(lists.index, dtype=np.int64),
        request_id=lists.request_id,
        received=floats(lists.received),
        output_tokens=np.array(
            [-1 if v is None else v for v in lists.output_tokens], dtype=np.int64
        ),
        block_size=np.array(lists.block_size, dtype=np.int64),
        input_length=np.array(lists.input_length, dtype=np.int64),
        counts=np.array(lists.counts, dtype=np.int64),
        hashes=np.array(lists.hashes, dtype=np.uint64),
        ttft=floats(lists.ttft),
        total=floats(lists.total),
        event_time=floats(lists.event_time),
        agent=np.array(lists.agent, dtype=bool),
        skipped=lists.skipped,
        session=_objects(lists.session) if any(v is not None for v in lists.session) else None,
        parent=_objects(lists.parent),
        model=_objects(lists.model),
        tools=lists.tools,
    )


def _objects(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


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
            if strict and row in TOOL_END:
                link = tool_link(event_of(rec), source, first_line + i)
                if link is not None:
                    out.tools.append(link)
            continue
        req, rp, _rec_top, ev = row
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
        if strict:
            session, parent, model = _agent_fields(ev, req, source, first_line + i)
            out.session.append(session)
            out.parent.append(parent)
            out.model.append(model)
        if block_size is None:
            block_size = rp["trace_block_size"]
    return out


def _agent_fields(ev: dict, req: dict, source: str, line: int):
    """(session_id, parent_session_id, model) of a request row; ``None`` where absent."""

    def fail(message: str, fld: str) -> TraceError:
        return TraceError(message, source=source, line=line, field=fld)

    model = req.get("model")
    if model is not None and type(model) is not str:
        raise fail(f"model must be a string, got {model!r}", "request.model")
    ctx = ev.get("agent_context")
    if ctx is None:
        return None, None, model
    if not isinstance(ctx, dict):
        raise fail("agent_context must be an object", "agent_context")
    session, parent = ctx.get("session_id"), ctx.get("parent_session_id")
    if type(session) is not str:
        raise fail(
            "agent_context.session_id is missing or not a string", "agent_context.session_id"
        )
    if parent is not None and type(parent) is not str:
        raise fail(
            f"parent_session_id must be a string, got {parent!r}", "agent_context.parent_session_id"
        )
    return session, parent, model


def _is_uint(v: object, limit: int = I64_MAX) -> bool:
    return type(v) is int and 0 <= v <= limit


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
    et = ev.get("event_type", rec.get("event_type"))
    if isinstance(et, str) and et in _SKIPPED_UNREAD:
        return et
    if "schema" not in ev:
        raise fail("schema is missing (not a dynamo.request.trace.v1 row)", "schema")
    if ev["schema"] != SCHEMA:
        raise fail(f"schema is {ev['schema']!r}, expected {SCHEMA!r}", "schema")
    et = ev.get("event_type")
    if et is None:
        raise fail("event_type is missing", "event_type")
    if et != REQUEST_END:
        if isinstance(et, str) and et in SKIPPED_EVENT_TYPES:
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
        raise fail(
            f"event_time_unix_ms must be a non-negative number, got {v!r}", "event_time_unix_ms"
        )
    rp = req.get("replay")
    if not isinstance(rp, dict):
        raise fail("replay is missing or not an object", "replay")
    bs = rp.get("trace_block_size")
    if not (_is_uint(bs) and 0 < bs <= MAX_REQUEST_TOKENS):
        raise fail(
            f"replay.trace_block_size must be an integer in [1, {MAX_REQUEST_TOKENS:,}], "
            f"got {bs!r}",
            "replay.trace_block_size",
        )
    if block_size is not None and bs != block_size:
        raise fail(
            f"replay.trace_block_size {bs} differs from {block_size} used earlier; "
            "one block size per trace",
            "replay.trace_block_size",
        )
    isl = rp.get("input_length")
    if not _is_uint(isl):
        raise fail(
            f"replay.input_length must be a non-negative integer, got {isl!r}",
            "replay.input_length",
        )
    hs = rp.get("input_sequence_hashes")
    if not isinstance(hs, list):
        raise fail(
            "replay.input_sequence_hashes is missing or not a list", "replay.input_sequence_hashes"
        )
    for h in hs:  # _is_uint written out: one call per hash was a third of reading a row
        if not (type(h) is int and 0 <= h <= U64_MAX):
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
