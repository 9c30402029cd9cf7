"""``dynamo``: Dynamo request traces (``dynamo.request.trace.v1`` JSONL, plain or gzip; reader
``plansim.traces.dynamo``), the one format that records latencies."""

from __future__ import annotations

from typing import Any

from plansim.traces.formats.base import TraceFormat, TraceWriter

_EVENT_TYPES = ("request_end", "tool_start", "tool_end", "tool_error", "request_payload")


def sniff(line: bytes, record: Any) -> bool:
    """A ``schema`` member or a Dynamo ``event_type``, at the top level or under ``event``."""
    if not isinstance(record, dict):
        return False
    inner = record.get("event")
    event = inner if isinstance(inner, dict) else record
    return "schema" in event or event.get("event_type") in _EVENT_TYPES


FORMAT = TraceFormat(
    about="dynamo.request.trace.v1 JSONL, plain or gzip",
    first_line="a dynamo.request.trace.v1 row",
    sniff=sniff,
    reader="plansim.traces.dynamo:read_dynamo",
    linker="plansim.traces.dynamo_agents:dynamo_graph",
    records_latencies=True,
    writer=TraceWriter(
        "plansim.traces.writers:write_dynamo", "gzip request_end rows", unix_ms=True, graph=False
    ),
    windows="plansim.traces.dynamo:read_dynamo",
)
