"""``kv_router``: the reference KV router's cost (``selector.rs``).

For each candidate rank,
``logit = overlap_score_weight * potential_prefill_blocks + potential_decode_blocks`` where
``potential_prefill_blocks = (prefill tokens queued on the rank + isl - overlap_blocks *
block_size) / block_size`` and ``potential_decode_blocks`` counts the full blocks of the requests
the router has sent there and not seen finish, plus this request's full blocks not already among
them (a partial last block is not counted). A disaggregated prefill pool's cost is the prefill
term alone; a decode pool's is the decode term alone, counted without block identities.
The prefix overlap is read from the rank's current cache contents. Lower is better; at
temperature 0 the minimum wins with ties broken by the seeded generator, otherwise the rank is
sampled from a softmax over the negated, range-normalised logits at ``router_temperature``.

Both knobs can be patched mid-replay; a patch changes scores only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add, sub
from typing import Any

import numpy as np

from plansim.params import param
from plansim.sim.engine_protocol import PrefixView
from plansim.sim.routing.base import Policy, RankLoad, Route


@dataclass(frozen=True, slots=True)
class KvRouterKnobs:
    overlap_score_weight: float = param(
        1.0, ge=0, help="weight of the prefill blocks (queued plus uncached prompt) in the cost")
    router_temperature: float = param(
        0.0, ge=0, help="softmax temperature over the costs; 0 picks the cheapest")


class Sent:
    """A request the router sent and has not seen finish: the rank's load record, the block
    keys it counts there, blocks counted beyond them, and its prompt tokens still queued."""

    __slots__ = ("load", "keys", "extra_blocks", "queued_tokens")

    def __init__(self, load: RankLoad, keys: Sequence[int], extra_blocks: int,
                 queued_tokens: int) -> None:
        self.load = load
        self.keys = keys
        self.extra_blocks = extra_blocks
        self.queued_tokens = queued_tokens


class KvRouter(Policy):
    """The reference KV router; see the module docstring."""

    Knobs = KvRouterKnobs
    overlap_score_weight: float
    router_temperature: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.decode_pool = self.pool.receives_handoff
        self.prefill_pool = self.pool.hands_off
        self._sent: dict[int, Sent] = {}

    def choose(self, isl: int, keys: list[int], views: Sequence[PrefixView],
               loads: Sequence[RankLoad]) -> Route:
        n = len(views)
        bs = self.block_size
        weight = 0.0 if self.decode_pool else self.overlap_score_weight
        n_keys = len(keys)
        logits = np.empty(n)
        overlaps = [0] * n
        for c, (view, load) in enumerate(zip(views, loads)):
            # Decode routing is load-only: no cache overlap, no shared active blocks.
            overlap = decode_blocks = 0
            if not self.decode_pool:
                overlap = view.overlap(keys)
            if not self.prefill_pool:
                shared = 0
                active = load.blocks
                for k in keys:
                    if k not in active:
                        break
                    shared += 1
                decode_blocks = load.n_blocks + n_keys - shared
            overlaps[c] = overlap
            prefill_blocks = (load.prefill_tokens + isl - overlap * bs) / bs
            logits[c] = weight * prefill_blocks + decode_blocks
        i = self._pick(logits)
        return Route(i, overlaps[i])

    def _pick(self, logits: np.ndarray) -> int:
        if self.router_temperature <= 0.0:
            best = np.flatnonzero(logits == logits.min())
            return int(best[0]) if best.size == 1 else int(best[self.rng.integers(best.size)])
        p = softmax_probabilities(logits, self.router_temperature)
        u = self.rng.random()
        i = int(np.searchsorted(np.cumsum(p), u, side="left"))
        return min(i, logits.size - 1)

    def sent(self, rid: int, isl: int, keys: list[int], route: Route, load: RankLoad) -> None:
        if self.decode_pool:
            # Decode routing is load-only: block counts, no block identities.
            load.n_blocks += len(keys)
            self._sent[rid] = Sent(load, (), len(keys), 0)
            return
        queued = max(isl - route.overlap_blocks * self.block_size, 0)
        load.prefill_tokens += queued
        if self.prefill_pool:
            # A prefill pool's cost has no active-block term: nothing to track but tokens.
            self._sent[rid] = Sent(load, (), 0, queued)
            return
        blocks = load.blocks
        present = sum(map(blocks.__contains__, keys))
        # Reference counts per block, updated with C-level map/zip (keys are unique per request).
        blocks.update(zip(keys, map(add, map(blocks.get, keys, repeat(0)), repeat(1))))
        load.n_blocks += len(keys) - present
        self._sent[rid] = Sent(load, keys, 0, queued)

    def prefill_done(self, rid: int) -> None:
        entry = self._sent.get(rid)
        if entry is not None and entry.queued_tokens:
            entry.load.prefill_tokens -= entry.queued_tokens
            entry.queued_tokens = 0

    def finished(self, rid: int) -> None:
        entry = self._sent.pop(rid, None)
        if entry is None:
            return
        load, keys = entry.load, entry.keys
        load.prefill_tokens -= entry.queued_tokens
        blocks = load.blocks
        counts = list(map(sub, map(blocks.__getitem__, keys), repeat(1)))
        blocks.update(zip(keys, counts))
        gone = [k for k, c in zip(keys, counts) if not c]
        deque(map(blocks.pop, gone), 0)
        load.n_blocks -= entry.extra_blocks + len(gone)


def softmax_probabilities(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Selection probabilities at ``temperature`` > 0 (exposed for tests)."""
    lo, hi = float(logits.min()), float(logits.max())
    if lo == hi:
        return np.full(logits.size, 1.0 / logits.size)
    scale = -1.0 / ((hi - lo) * temperature)
    p = np.exp(logits * scale - lo * scale)
    return p / p.sum()
