"""Trace format detection by content (the first non-blank line), never by file name."""

from __future__ import annotations

from pathlib import Path

import orjson

from plansim.errors import TraceError
from plansim.traces.sources import read_head

FORMATS = ("dynamo", "mooncake", "azure", "agentic_mooncake")
_DYNAMO_EVENTS = ("request_end", "tool_start", "tool_end", "tool_error", "request_payload")
_MOONCAKE_KEYS = ("timestamp", "created_time", "session_id", "hash_ids", "input_length",
                  "output_length")
AGENTIC_SCHEMA = "dynamo.agentic_mooncake"
_MAX_FIRST_LINE = 256 << 20


def detect_format(path: Path) -> str:
    """``dynamo``, ``mooncake``, ``azure`` or ``agentic_mooncake`` for the file's first
    non-blank line.

    Agentic Mooncake: the ``dynamo.agentic_mooncake`` header. Dynamo: a ``schema`` member, or a
    Dynamo ``event_type`` (top level or under ``event``). Mooncake: ``timestamp``,
    ``created_time`` or ``session_id`` with ``hash_ids`` or a length. Azure: a CSV header
    naming ``TIMESTAMP`` and ``ContextTokens``. A first line longer than the head read (a
    ``request_payload`` row holds whole prompts) is read to its end. Raises ``TraceError`` for
    an empty file or anything else.
    """
    head = read_head(path, 1 << 20)
    if b"\n" not in head.lstrip(b"\r\n\t "):
        head = read_head(path, _MAX_FIRST_LINE)
    line_no = 0
    first = b""
    for line_no, raw in enumerate(head.split(b"\n"), start=1):
        if raw.strip():
            first = raw.strip()
            break
    if not first:
        raise TraceError("empty file", source=str(path))
    if first.startswith((b"{", b"[")):
        try:
            rec = orjson.loads(first)
        except orjson.JSONDecodeError as exc:
            raise TraceError(f"not JSON: {exc.msg} at column {exc.colno}", source=str(path), line=line_no) from None
        if isinstance(rec, dict):
            if rec.get("schema") == AGENTIC_SCHEMA:
                return "agentic_mooncake"
            inner = rec.get("event")
            ev = inner if isinstance(inner, dict) else rec
            if "schema" in ev or ev.get("event_type") in _DYNAMO_EVENTS:
                return "dynamo"
            if any(k in rec for k in _MOONCAKE_KEYS[:3]) and any(k in rec for k in _MOONCAKE_KEYS[3:]):
                return "mooncake"
    else:
        header = first.decode("utf-8", errors="replace")
        if "TIMESTAMP" in header and "ContextTokens" in header:
            return "azure"
    raise TraceError(
        "unknown trace format: expected a dynamo.request.trace.v1 row, a Mooncake row "
        "(timestamp, input_length, output_length, hash_ids), a dynamo.agentic_mooncake header "
        "or an Azure CSV header (TIMESTAMP,ContextTokens,GeneratedTokens); use --format to "
        "say which",
        source=str(path),
        line=line_no,
    )
