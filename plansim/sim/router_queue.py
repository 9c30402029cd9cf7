"""The router's queue (reference ``KvRouterConfig.router_queue_threshold`` /
``router_queue_policy``): requests wait at the router while every candidate rank is
prefill-busy, and are released in the policy's order when prefill capacity frees.

A rank is prefill-busy when the prompt tokens the router has sent it and not yet seen prefilled
exceed ``threshold`` x its ``max_num_batched_tokens``. A request arriving while every rank is
busy, or while others already wait (no overtaking the queue), waits. Each time a rank finishes a
prompt or a request leaves it, the router releases waiting requests, best first, while some
rank is not busy (each release is routed at once and adds its prompt to that rank's load).

Order, best first (ties: the earlier to queue):

- ``fcfs``: the earliest arrival;
- ``lcfs``: the latest arrival;
- ``wspt`` (Smith's rule): the shortest uncached prompt, ``isl - cached`` tokens (at least 1),
  with ``cached`` the most prompt tokens any rank counted as cached when the request arrived
  (its device blocks plus its host blocks weighted by ``host_cache_hit_weight``).
"""

from __future__ import annotations

import heapq
from typing import Literal

QueuePolicy = Literal["fcfs", "lcfs", "wspt"]
QUEUE_POLICIES: tuple[str, ...] = ("fcfs", "lcfs", "wspt")


class RouterQueue:
    """Waiting requests of one pool's router, as request ids in release order."""

    __slots__ = ("_heap", "_seq", "policy", "threshold")

    def __init__(self, policy: QueuePolicy = "fcfs", threshold: float | None = None) -> None:
        """``threshold``: the busy fraction of a rank's ``max_num_batched_tokens``; ``None``
        turns queueing off."""
        self.policy = policy
        self.threshold = threshold
        # (order key, queue sequence, request id, arrival ms, uncached tokens)
        self._heap: list[tuple[float, int, int, float, int]] = []
        self._seq = 0

    @property
    def enabled(self) -> bool:
        return self.threshold is not None

    def __len__(self) -> int:
        return len(self._heap)

    def busy(self, prefill_tokens: int, max_batched_tokens: int) -> bool:
        """A rank with ``prefill_tokens`` queued prompt tokens is prefill-busy."""
        return self.threshold is not None and prefill_tokens > self.threshold * max_batched_tokens

    def _key(self, arrival_ms: float, uncached_tokens: int) -> float:
        if self.policy == "fcfs":
            return arrival_ms
        if self.policy == "lcfs":
            return -arrival_ms
        return float(max(uncached_tokens, 1))

    def push(self, rid: int, arrival_ms: float, uncached_tokens: int) -> None:
        """Queue request ``rid`` (``uncached_tokens``: its prompt minus the best cached prefix)."""
        heapq.heappush(
            self._heap,
            (self._key(arrival_ms, uncached_tokens), self._seq, rid, arrival_ms, uncached_tokens),
        )
        self._seq += 1

    def pop(self) -> int:
        """The best waiting request (the queue must not be empty)."""
        return heapq.heappop(self._heap)[2]

    def configure(self, policy: QueuePolicy, threshold: float | None) -> None:
        """Change the order and the threshold mid-replay; waiting requests are re-ordered (ties
        keep their queueing order)."""
        self.threshold = threshold
        if policy != self.policy:
            self.policy = policy
            self._heap = [
                (self._key(arrival, uncached), seq, rid, arrival, uncached)
                for _, seq, rid, arrival, uncached in self._heap
            ]
            heapq.heapify(self._heap)
