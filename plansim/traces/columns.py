"""``TraceColumns``: what a format reader returns for one file, before hashes are remapped.

Readers fill numpy columns in file order; ``plansim.traces.load`` concatenates files, sorts by
arrival and remaps hashes into the ``Workload``. Optional Dynamo fields are NaN (floats) or -1
(output tokens) where a row lacks them. ``arrival_ms`` is NaN for a closed-loop row released
by its dependencies alone; ``links`` holds the format's closed-loop fields (sessions,
dependencies), which the format's graph builder reads. Internal to ``plansim.traces`` and
deliberately mutable:
``workload_from_columns`` moves each column out (setting the field to ``None``) as it uses it,
so that memory is freed early; a consumed ``TraceColumns`` is not used again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plansim.errors import TraceError
from plansim.traces.csr import csr_take

# The largest values the columns hold: raw hashes are uint64, token counts int64 (a reader
# refuses a row past them with its line, before numpy would overflow).
U64_MAX = (1 << 64) - 1
I64_MAX = (1 << 63) - 1


@dataclass(slots=True)
class TraceColumns:
    source: str
    line: np.ndarray  # int64, 1-based line (CSV: physical line) of each row
    arrival_ms: np.ndarray  # float64; NaN where the row has no request_received_ms (windows)
    isl_tokens: np.ndarray  # int64
    osl_tokens: np.ndarray  # int64; -1 where missing (window reader only)
    request_id: np.ndarray  # StringDType; or object (str, None where the format has no id)
    hash_counts: np.ndarray  # int64, raw hashes per row
    raw_hashes: np.ndarray | None  # uint64 raw hashes in row order; None: unshared blocks
    trace_block_size: int
    recorded_ttft_ms: np.ndarray | None = None
    recorded_total_ms: np.ndarray | None = None
    event_time_ms: np.ndarray | None = None
    has_agent_context: np.ndarray | None = None  # bool
    links: Any = None  # the format's closed-loop fields (file order); None for open-loop rows
    skipped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.arrival_ms.shape[0])


def take_rows(cols: TraceColumns, rows: np.ndarray) -> TraceColumns:
    """The rows ``rows`` (indices, in the given order) of ``cols``, hashes included; open-loop
    columns only (``links`` is not carried over)."""
    rows = np.asarray(rows, dtype=np.int64)
    counts = cols.hash_counts[rows]
    raw = None
    if cols.raw_hashes is not None:
        starts = np.zeros(cols.hash_counts.size + 1, dtype=np.int64)
        np.cumsum(cols.hash_counts, out=starts[1:])
        raw = cols.raw_hashes[csr_take(starts, rows)[1]]

    def pick(arr: np.ndarray | None) -> np.ndarray | None:
        return None if arr is None else arr[rows]

    return TraceColumns(
        source=cols.source,
        line=cols.line[rows],
        arrival_ms=cols.arrival_ms[rows],
        isl_tokens=cols.isl_tokens[rows],
        osl_tokens=cols.osl_tokens[rows],
        request_id=cols.request_id[rows],
        hash_counts=counts,
        raw_hashes=raw,
        trace_block_size=cols.trace_block_size,
        recorded_ttft_ms=pick(cols.recorded_ttft_ms),
        recorded_total_ms=pick(cols.recorded_total_ms),
        event_time_ms=pick(cols.event_time_ms),
        has_agent_context=pick(cols.has_agent_context),
        skipped={},
    )


def concat_columns(parts: list[TraceColumns]) -> TraceColumns:
    """All rows of ``parts`` in order, as one ``TraceColumns`` (source: the first part's);
    open-loop columns only (``links`` is not carried over)."""
    if len(parts) == 1:
        return parts[0]

    def cat(name: str) -> np.ndarray | None:
        arrays = [getattr(p, name) for p in parts]
        return None if any(a is None for a in arrays) else np.concatenate(arrays)

    return TraceColumns(
        source=parts[0].source,
        line=cat("line"),
        arrival_ms=cat("arrival_ms"),
        isl_tokens=cat("isl_tokens"),
        osl_tokens=cat("osl_tokens"),
        request_id=cat("request_id"),
        hash_counts=cat("hash_counts"),
        raw_hashes=cat("raw_hashes"),
        trace_block_size=parts[0].trace_block_size,
        recorded_ttft_ms=cat("recorded_ttft_ms"),
        recorded_total_ms=cat("recorded_total_ms"),
        event_time_ms=cat("event_time_ms"),
        has_agent_context=cat("has_agent_context"),
        skipped=merge_skipped(parts),
    )


def merge_skipped(parts: list[TraceColumns]) -> dict[str, int]:
    """Skipped-row counts by reason, summed over ``parts``."""
    skipped: dict[str, int] = {}
    for p in parts:
        for reason, count in p.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + count
    return skipped


def check_block_size(parts: list[TraceColumns], cols: TraceColumns) -> None:
    """One trace block size across shards: ``cols`` must match the first shard read."""
    first = parts[0].trace_block_size if parts else 0
    if first and cols.trace_block_size and cols.trace_block_size != first:
        raise TraceError(
            f"replay.trace_block_size {cols.trace_block_size} differs from {first} in "
            f"{parts[0].source}; one block size per trace",
            source=cols.source,
            line=int(cols.line[0]),
            field="replay.trace_block_size",
        )
