"""``agentic_mooncake``: agentic Mooncake traces (the ``dynamo.agentic_mooncake`` header, then
request rows with their dependencies; reader ``plansim.traces.agentic_mooncake``)."""

from __future__ import annotations

from typing import Any

from plansim.traces.agentic_header import SCHEMA
from plansim.traces.formats.base import TraceFormat, TraceWriter


def sniff(line: bytes, record: Any) -> bool:
    """The ``dynamo.agentic_mooncake`` header."""
    return isinstance(record, dict) and record.get("schema") == SCHEMA


FORMAT = TraceFormat(
    about="dynamo.agentic_mooncake",
    first_line="a dynamo.agentic_mooncake header",
    sniff=sniff,
    reader="plansim.traces.agentic_mooncake:read_agentic_mooncake",
    linker="plansim.traces.agentic_mooncake:agentic_graph",
    writer=TraceWriter("plansim.traces.writers:write_agentic_mooncake", "dependencies"),
)
