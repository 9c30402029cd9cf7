"""Trace format detection by content (the first non-blank line), never by file name."""

from __future__ import annotations

from pathlib import Path

import orjson

from plansim.errors import TraceError
from plansim.traces.formats import TRACE_FORMATS, detection_hint
from plansim.traces.sources import read_head

_MAX_FIRST_LINE = 256 << 20


def detect_format(path: Path) -> str:
    """The name of the first format in ``TRACE_FORMATS`` whose ``sniff`` takes the file's first
    non-blank line (parsed as JSON when it starts with ``{`` or ``[``).

    A first line longer than the head read (a ``request_payload`` row holds whole prompts) is
    read to its end. Raises ``TraceError`` for an empty file, a line that is not the JSON it
    starts as, or a line no format takes.
    """
    head = read_head(path, 1 << 20)
    if b"\n" not in head.lstrip(b"\r\n\t "):
        head = read_head(path, _MAX_FIRST_LINE)
    line_no = 0
    first = b""
    for line_no, raw in enumerate(head.split(b"\n"), start=1):  # noqa: B007 (read after it)
        if raw.strip():
            first = raw.strip()
            break
    if not first:
        raise TraceError("empty file", source=str(path))
    record = None
    if first.startswith((b"{", b"[")):
        try:
            record = orjson.loads(first)
        except orjson.JSONDecodeError as exc:
            raise TraceError(
                f"not JSON: {exc.msg} at column {exc.colno}", source=str(path), line=line_no
            ) from None
    for name, fmt in TRACE_FORMATS.items():
        if fmt.sniff(first, record):
            return name
    raise TraceError(
        f"unknown trace format: expected {detection_hint()}; use --format to say which",
        source=str(path),
        line=line_no,
    )
