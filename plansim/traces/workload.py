"""The columnar ``Workload``: every trace format loads into this one shape.

Contract (all arrays have one entry per request, sorted by arrival, stable for ties):

- ``arrival_ms``: float64, arrival time as recorded in the source (not normalised).
- ``isl_tokens`` / ``osl_tokens``: int64 input and output lengths in tokens.
- ``request_id``: numpy array of ``str``, unique; indexing gives ``str``. The loaders use numpy's
  ``StringDType`` (compact: short ids live inside the array); object arrays of ``str`` also work.
- ``hash_offsets`` (int64, n + 1) and ``hash_ids`` (integer): block hashes in CSR form; request i
  owns ``hash_ids[hash_offsets[i]:hash_offsets[i + 1]]``, one id per ``trace_block_size`` tokens
  (``ceil(isl / trace_block_size)`` ids). Ids are compact prefix-chain ids: the id of block t
  identifies the whole prefix through block t, so equal ids mean equal prefixes. The loaders
  store ids as int32 when there are fewer than 2**31 blocks (else int64): widen to int64 before
  arithmetic that can exceed 2**31 (e.g. ``id * trace_block_size``).
- ``recorded_ttft_ms`` / ``recorded_total_ms``: float64 with NaN where the source has no value,
  or ``None`` when the format never records them.
- ``graph``: the closed-loop structure (sessions, dependencies, release bounds; see
  ``plansim.traces.graph``) in the same row order, or ``None`` for an open-loop trace. For a
  request released by its dependencies, ``arrival_ms`` is its recorded arrival where the trace
  has one, else its release if every request took no time (the open-loop estimate).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields, replace

import numpy as np

from plansim.traces.graph import RequestGraph


@dataclass(frozen=True, slots=True)
class Workload:
    arrival_ms: np.ndarray
    isl_tokens: np.ndarray
    osl_tokens: np.ndarray
    request_id: np.ndarray
    hash_offsets: np.ndarray
    hash_ids: np.ndarray
    trace_block_size: int
    recorded_ttft_ms: np.ndarray | None = None
    recorded_total_ms: np.ndarray | None = None
    sources: tuple[str, ...] = ()
    skipped: dict[str, int] = field(default_factory=dict)
    graph: RequestGraph | None = None

    def __len__(self) -> int:
        return int(self.arrival_ms.shape[0])

    def rows(self, start: int, stop: int) -> Workload:
        """Requests ``start`` to ``stop - 1`` (a contiguous run in arrival order) as a workload of
        their own, hashes included; recorded latencies and sources carried over. Open-loop
        workloads only: a run of a closed-loop one would cut its sessions."""
        if self.graph is not None:
            raise ValueError("rows() of a closed-loop workload; take open_loop() first")
        lo, hi = int(self.hash_offsets[start]), int(self.hash_offsets[stop])

        def part(arr: np.ndarray | None) -> np.ndarray | None:
            return None if arr is None else arr[start:stop]

        return Workload(
            arrival_ms=self.arrival_ms[start:stop],
            isl_tokens=self.isl_tokens[start:stop],
            osl_tokens=self.osl_tokens[start:stop],
            request_id=self.request_id[start:stop],
            hash_offsets=self.hash_offsets[start : stop + 1] - lo,
            hash_ids=self.hash_ids[lo:hi],
            trace_block_size=self.trace_block_size,
            recorded_ttft_ms=part(self.recorded_ttft_ms),
            recorded_total_ms=part(self.recorded_total_ms),
            sources=self.sources,
        )

    def hashes(self, i: int) -> np.ndarray:
        """Prefix-chain block ids of request ``i``."""
        return self.hash_ids[self.hash_offsets[i] : self.hash_offsets[i + 1]]

    def content_digest(self) -> str:
        """SHA-256 of what a replay of this workload reads (every column, the block size, the
        closed-loop graph), not of where it came from: equal requests give an equal digest
        whatever their files (a resumed search checks it is replaying the same trace)."""
        digest = hashlib.sha256(str(self.trace_block_size).encode())
        columns = [
            self.arrival_ms,
            self.isl_tokens,
            self.osl_tokens,
            self.hash_offsets,
            np.asarray(self.hash_ids, dtype=np.int64),
            self.recorded_ttft_ms,
            self.recorded_total_ms,
        ]
        if self.graph is not None:
            columns += [getattr(self.graph, f.name) for f in fields(self.graph)]
        for column in columns:
            digest.update(b"-" if column is None else _column_bytes(column))
        digest.update("\0".join(str(r) for r in self.request_id.tolist()).encode())
        return digest.hexdigest()

    def open_loop(self) -> Workload:
        """This workload without its closed-loop structure: every request arrives at
        ``arrival_ms``."""
        return replace(self, graph=None)


def _column_bytes(column: np.ndarray) -> bytes:
    """A column's dtype, length and values as bytes (strings joined by NUL)."""
    head = f"{column.dtype.str}:{column.size}:".encode()
    if column.dtype.kind in "OTU":
        return head + "\0".join(str(v) for v in column.tolist()).encode()
    return head + np.ascontiguousarray(column).tobytes()
