"""The trace cut into segments of replay time, for the hindsight bound and the bootstrap.

Replay time is the simulator's: milliseconds from the first arrival, gaps divided by
``arrival_speedup_ratio``. Segment k covers ``[k L, (k + 1) L)`` for segment length L; the last
segment ends at the last arrival and takes every request from its start on. A last segment
shorter than half of L is merged into the one before, so no segment is a sliver of traffic.

A segment replay (``SegmentWindow``) replays the segment's own requests preceded by a lead-in:
the requests of the ``lead_in_s`` (at most half a segment) before the segment start, served by
a well-provisioned
deployment that scales to the segment's counts at the edge, so that the segment starts with the
requests still in flight and the KV caches the traffic before it left, but with no queue an
under-provisioned previous segment would have built. Only the segment's own requests are
scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_SEGMENT_S = 600.0
DEFAULT_LEAD_IN_S = 120.0


@dataclass(frozen=True, slots=True)
class Segments:
    """``edges_ms``: S + 1 segment edges in replay ms (``edges_ms[-1]`` = the last arrival);
    ``first_row``: S + 1 row indices, segment k owning rows ``first_row[k]:first_row[k + 1]``
    (requests are sorted by arrival); ``arrival_ms``: every request's replay time."""

    edges_ms: np.ndarray
    first_row: np.ndarray
    arrival_ms: np.ndarray

    def __len__(self) -> int:
        return int(self.edges_ms.shape[0] - 1)

    @property
    def requests(self) -> np.ndarray:
        """Requests per segment."""
        return np.diff(self.first_row)

    @property
    def length_s(self) -> np.ndarray:
        """Seconds of replay time per segment (the last one ends at the last arrival)."""
        return np.diff(self.edges_ms) / 1000.0

    def of_rows(self) -> np.ndarray:
        """The segment of every request."""
        return np.repeat(np.arange(len(self)), self.requests)

    def count(self, mask: np.ndarray) -> np.ndarray:
        """Per segment, how many requests ``mask`` (one bool per request) marks."""
        return np.bincount(
            self.of_rows(), weights=mask.astype(np.float64), minlength=len(self)
        ).astype(np.int64)


def replay_arrivals_ms(arrival_ms: np.ndarray, arrival_speedup_ratio: float) -> np.ndarray:
    """Arrival times as the replay sees them (first at 0, gaps divided by the speed-up)."""
    arrivals = np.asarray(arrival_ms, dtype=np.float64)
    if arrivals.size == 0:
        return arrivals
    return (arrivals - arrivals.min()) / arrival_speedup_ratio


def cut(arrival_ms: np.ndarray, segment_s: float) -> Segments:
    """Segments of ``segment_s`` over sorted replay arrival times ``arrival_ms``."""
    length_ms = segment_s * 1000.0
    last = float(arrival_ms[-1]) if arrival_ms.size else 0.0
    n = max(int(np.ceil(last / length_ms)), 1) if last > 0 else 1
    edges = [k * length_ms for k in range(n)] + [last]
    if n > 1 and last - edges[-2] < length_ms / 2:
        del edges[-2]
    edges_ms = np.asarray(edges, dtype=np.float64)
    first = np.searchsorted(arrival_ms, edges_ms[:-1], side="left")
    first_row = np.append(first, arrival_ms.size).astype(np.int64)
    return Segments(edges_ms, first_row, arrival_ms)


@dataclass(frozen=True, slots=True)
class SegmentWindow:
    """What a segment replay replays: rows ``lead_row:stop_row``, of which
    ``start_row:stop_row`` are the segment's own; ``offset_ms`` is the replay time of row
    ``lead_row`` (the sub-replay's time 0) and ``edge_ms`` the segment start, both in the whole
    trace's replay time."""

    index: int
    lead_row: int
    start_row: int
    stop_row: int
    offset_ms: float
    edge_ms: float

    @property
    def has_lead_in(self) -> bool:
        return self.lead_row < self.start_row


def windows(segments: Segments, lead_in_s: float) -> list[SegmentWindow]:
    """One window per segment; the lead-in is ``lead_in_s``, at most half the segment before."""
    out = []
    arrival = segments.arrival_ms
    for k in range(len(segments)):
        start, stop = int(segments.first_row[k]), int(segments.first_row[k + 1])
        lead_s = min(lead_in_s, segments.length_s[k - 1] / 2.0) if k else 0.0
        lead_from = segments.edges_ms[k] - lead_s * 1000.0
        lead = int(np.searchsorted(arrival, lead_from, side="left")) if k else start
        lead = min(lead, start)
        offset = float(arrival[lead]) if lead < arrival.size else 0.0
        out.append(SegmentWindow(k, lead, start, stop, offset, float(segments.edges_ms[k])))
    return out


def per_minute_arrivals(arrival_ms: np.ndarray, interval_s: float = 60.0) -> list[int]:
    """Arrivals per ``interval_s`` of replay time, from time 0 (for the report's rate line)."""
    if arrival_ms.size == 0:
        return []
    slots = (arrival_ms // (interval_s * 1000.0)).astype(np.int64)
    return np.bincount(slots).astype(int).tolist()


def segment_table(segments: Segments) -> list[dict[str, float | int]]:
    """One row per segment: bounds in replay seconds and the request count."""
    requests: Sequence[int] = segments.requests.tolist()
    return [
        {
            "segment": k,
            "start_s": float(segments.edges_ms[k] / 1000.0),
            "end_s": float(segments.edges_ms[k + 1] / 1000.0),
            "requests": int(requests[k]),
        }
        for k in range(len(segments))
    ]
