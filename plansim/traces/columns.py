"""``TraceColumns``: what a format reader returns for one file, before hashes are remapped.

Readers fill numpy columns in file order; ``plansim.traces.load`` concatenates files, sorts by
arrival and remaps hashes into the ``Workload``. Optional Dynamo fields are NaN (floats) or -1
(output tokens) where a row lacks them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class TraceColumns:
    source: str
    line: np.ndarray  # int64, 1-based line (CSV: physical line) of each row
    arrival_ms: np.ndarray  # float64; NaN where the row has no request_received_ms (windows)
    isl_tokens: np.ndarray  # int64
    osl_tokens: np.ndarray  # int64; -1 where missing (window reader only)
    request_id: np.ndarray  # object (str); None where the format has no id
    hash_counts: np.ndarray  # int64, raw hashes per row
    raw_hashes: np.ndarray | None  # uint64 raw hashes in row order; None: unshared blocks
    trace_block_size: int
    recorded_ttft_ms: np.ndarray | None = None
    recorded_total_ms: np.ndarray | None = None
    event_time_ms: np.ndarray | None = None
    has_agent_context: np.ndarray | None = None  # bool
    skipped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.arrival_ms.shape[0])


def empty_hashes() -> np.ndarray:
    return np.zeros(0, dtype=np.uint64)
