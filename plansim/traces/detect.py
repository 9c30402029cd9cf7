"""Trace format detection by content (the first non-blank line), never by file name."""

from __future__ import annotations

from pathlib import Path

import orjson

from plansim.errors import TraceError
from plansim.traces.sources import read_head

FORMATS = ("dynamo", "mooncake", "azure")
_MOONCAKE_KEYS = ("timestamp", "created_time", "hash_ids", "input_length", "output_length")


def detect_format(path: Path) -> str:
    """``dynamo``, ``mooncake`` or ``azure`` for the file's first non-blank line.

    Dynamo: a ``schema`` member (top level or under ``event``). Mooncake: ``timestamp`` or
    ``created_time`` with ``hash_ids`` or a length. Azure: a CSV header naming ``TIMESTAMP`` and
    ``ContextTokens``. Raises ``TraceError`` for an empty file or anything else.
    """
    head = read_head(path, 1 << 20)
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
            inner = rec.get("event")
            if "schema" in rec or (isinstance(inner, dict) and "schema" in inner):
                return "dynamo"
            if any(k in rec for k in _MOONCAKE_KEYS[:2]) and any(k in rec for k in _MOONCAKE_KEYS[2:]):
                return "mooncake"
    else:
        header = first.decode("utf-8", errors="replace")
        if "TIMESTAMP" in header and "ContextTokens" in header:
            return "azure"
    raise TraceError(
        "unknown trace format: expected a dynamo.request.trace.v1 row, a Mooncake row "
        "(timestamp, input_length, output_length, hash_ids) or an Azure CSV header "
        "(TIMESTAMP,ContextTokens,GeneratedTokens); use --format to say which",
        source=str(path),
        line=line_no,
    )
