"""``azure``: Azure LLM inference CSV traces (reader ``plansim.traces.azure``); no hashes, so
the block size only shapes each request's unshared blocks."""

from __future__ import annotations

from typing import Any

from plansim.traces.formats.base import TraceFormat


def sniff(line: bytes, record: Any) -> bool:
    """A CSV header naming ``TIMESTAMP`` and ``ContextTokens``."""
    if record is not None:
        return False
    header = line.decode("utf-8", errors="replace")
    return "TIMESTAMP" in header and "ContextTokens" in header


FORMAT = TraceFormat(
    about="Azure LLM inference CSV",
    first_line="an Azure CSV header (TIMESTAMP,ContextTokens,GeneratedTokens)",
    sniff=sniff,
    reader="plansim.traces.azure:read_azure",
    block_size=512,
)
