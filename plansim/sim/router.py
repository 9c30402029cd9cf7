"""Routing requests to engine ranks: ``round_robin``, ``random`` (seeded) and ``kv_router``.

KV router (reference ``selector.rs``): for each candidate rank,
``logit = overlap_score_weight * potential_prefill_blocks + potential_decode_blocks`` where
``potential_prefill_blocks = (prefill tokens queued on the rank + isl - overlap_blocks *
block_size) / block_size`` and ``potential_decode_blocks`` counts the full blocks of the requests
the router has sent there and not seen finish, plus this request's full blocks not already among
them (a partial last block is not counted). A disaggregated prefill pool's cost is the prefill
term alone; a decode pool's is the decode term alone, counted without block identities.
The prefix overlap is read from the rank's current cache contents. Lower is better; at
temperature 0 the minimum wins with ties broken by the seeded generator, otherwise the rank is
sampled from a softmax over the negated, range-normalised logits at ``router_temperature``.

Parameters can be replaced mid-replay (``set_parameters``); that changes scores only.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat
from operator import add, sub
from typing import Any

import numpy as np

from plansim.roles import Role
from plansim.sim.engine_protocol import PrefixView


class RankLoad:
    """What the router tracks for one rank: queued prefill tokens and active blocks."""

    __slots__ = ("prefill_tokens", "blocks", "n_blocks")

    def __init__(self) -> None:
        self.prefill_tokens = 0
        self.blocks: dict[int, int] = {}
        self.n_blocks = 0


class Router:
    """One pool's router. ``choose`` returns an index into the candidate list."""

    def __init__(self, mode: str, params: dict[str, Any], block_size: int,
                 rng: np.random.Generator, *, pool: Role | str = Role.AGG) -> None:
        """``pool``: the pool's role, ``agg``, ``prefill`` or ``decode`` (the cost terms differ,
        see the module docstring)."""
        self.mode = mode
        self.block_size = block_size
        self.rng = rng
        role = Role(pool)
        self.decode_pool = role.receives_handoff
        self.prefill_pool = role.hands_off
        self.overlap_score_weight = float(params.get("overlap_score_weight", 1.0))
        self.temperature = float(params.get("router_temperature", 0.0))
        self._next = 0
        # Per request: (load, keys counted, blocks beyond them, prefill tokens still queued).
        self._sent: dict[int, tuple[RankLoad, list[int], int, int]] = {}

    def set_parameters(self, params: dict[str, Any]) -> dict[str, Any]:
        """Replace router parameters; returns the ones that changed (name -> new value)."""
        changed: dict[str, Any] = {}
        if "overlap_score_weight" in params:
            value = float(params["overlap_score_weight"])
            if value != self.overlap_score_weight:
                self.overlap_score_weight = value
                changed["overlap_score_weight"] = value
        if "router_temperature" in params:
            value = float(params["router_temperature"])
            if value != self.temperature:
                self.temperature = value
                changed["router_temperature"] = value
        return changed

    def parameters(self) -> dict[str, Any]:
        return {"overlap_score_weight": self.overlap_score_weight,
                "router_temperature": self.temperature}

    def choose(self, isl: int, keys: list[int], views: list[PrefixView],
               loads: list[RankLoad]) -> tuple[int, int]:
        """Pick a candidate rank for a request of ``isl`` tokens whose prompt blocks are
        ``keys``, from the candidates' prefix-cache views and load records (index for index);
        returns (index, overlap blocks on it)."""
        n = len(views)
        if self.mode == "round_robin":
            i = self._next % n
            self._next += 1
            return i, 0
        if self.mode == "random":
            return int(self.rng.integers(n)), 0
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
        return i, overlaps[i]

    def _pick(self, logits: np.ndarray) -> int:
        if self.temperature <= 0.0:
            best = np.flatnonzero(logits == logits.min())
            return int(best[0]) if best.size == 1 else int(best[self.rng.integers(best.size)])
        p = softmax_probabilities(logits, self.temperature)
        u = self.rng.random()
        i = int(np.searchsorted(np.cumsum(p), u, side="left"))
        return min(i, logits.size - 1)

    def sent(self, rid: int, isl: int, keys: list[int], overlap: int, load: RankLoad) -> None:
        """Record that request ``rid`` went to the rank with ``load``."""
        if self.mode != "kv_router":
            return
        if self.decode_pool:
            # Decode routing is load-only: block counts, no block identities.
            load.n_blocks += len(keys)
            self._sent[rid] = (load, (), len(keys), 0)
            return
        queued = max(isl - overlap * self.block_size, 0)
        load.prefill_tokens += queued
        if self.prefill_pool:
            # A prefill pool's cost has no active-block term: nothing to track but tokens.
            self._sent[rid] = (load, (), 0, queued)
            return
        blocks = load.blocks
        present = sum(map(blocks.__contains__, keys))
        # Reference counts per block, updated with C-level map/zip (keys are unique per request).
        blocks.update(zip(keys, map(add, map(blocks.get, keys, repeat(0)), repeat(1))))
        load.n_blocks += len(keys) - present
        self._sent[rid] = (load, keys, 0, queued)

    def prefill_done(self, rid: int) -> None:
        """The request's prompt is computed: its tokens leave the rank's prefill queue."""
        entry = self._sent.get(rid)
        if entry is not None and entry[3]:
            load, keys, extra_blocks, queued = entry
            load.prefill_tokens -= queued
            self._sent[rid] = (load, keys, extra_blocks, 0)

    def finished(self, rid: int) -> None:
        """The request left the rank (completed, rejected or handed off)."""
        entry = self._sent.pop(rid, None)
        if entry is None:
            return
        load, keys, extra_blocks, queued = entry
        load.prefill_tokens -= queued
        blocks = load.blocks
        counts = list(map(sub, map(blocks.__getitem__, keys), repeat(1)))
        blocks.update(zip(keys, counts))
        gone = [k for k, c in zip(keys, counts) if not c]
        deque(map(blocks.pop, gone), 0)
        load.n_blocks -= extra_blocks + len(gone)


def softmax_probabilities(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Selection probabilities at ``temperature`` > 0 (exposed for tests)."""
    lo, hi = float(logits.min()), float(logits.max())
    if lo == hi:
        return np.full(logits.size, 1.0 / logits.size)
    scale = -1.0 / ((hi - lo) * temperature)
    p = np.exp(logits * scale - lo * scale)
    return p / p.sum()

