"""``mooncake``: Mooncake JSONL traces, sessions included (reader ``plansim.traces.mooncake``).
The format does not store its block size."""

from __future__ import annotations

from typing import Any

from plansim.traces.formats.base import TraceFormat, TraceWriter

_TIME_KEYS = ("timestamp", "created_time", "session_id")
_LENGTH_KEYS = ("hash_ids", "input_length", "output_length")


def sniff(line: bytes, record: Any) -> bool:
    """``timestamp``, ``created_time`` or ``session_id`` with ``hash_ids`` or a length."""
    return (
        isinstance(record, dict)
        and any(k in record for k in _TIME_KEYS)
        and any(k in record for k in _LENGTH_KEYS)
    )


FORMAT = TraceFormat(
    about="Mooncake JSONL, sessions included",
    first_line="a Mooncake row (timestamp, input_length, output_length, hash_ids)",
    sniff=sniff,
    reader="plansim.traces.mooncake:read_mooncake",
    linker="plansim.traces.mooncake_sessions:mooncake_graph",
    block_size=512,
    writer=TraceWriter(
        "plansim.traces.writers:write_mooncake", "JSONL; sessions as session_id + delay"
    ),
)
