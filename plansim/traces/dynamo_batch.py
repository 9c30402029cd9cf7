"""What both paths of the Dynamo trace reader share (``plansim.traces.dynamo`` row by row,
``plansim.traces.dynamo_arrow`` in bulk): the format's names, the block of parsed rows they
produce (``Batch``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plansim.traces.dynamo_agents import ToolLink

SCHEMA = "dynamo.request.trace.v1"
REQUEST_END = "request_end"
SKIPPED_EVENT_TYPES = frozenset(
    {"tool_start", "tool_end", "tool_error", "request_payload", "router_selection"}
)
TOOL_END = frozenset({"tool_end", "tool_error"})


@dataclass(slots=True)
class Batch:
    line: np.ndarray
    request_id: Any  # a pyarrow string array (bulk path) or a list of str
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
    # Closed-loop fields (strict reads only): None when no row of the block has agent_context.
    session: np.ndarray | None = None
    parent: np.ndarray | None = None
    model: np.ndarray | None = None
    tools: list[ToolLink] = field(default_factory=list)


def event_of(rec: dict) -> dict:
    return rec["event"] if isinstance(rec.get("event"), dict) else rec
