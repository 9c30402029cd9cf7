"""``kv_router``: the reference KV router's cost (``selector.rs``) and queue.

For each candidate rank (lower is better)::

    credit   = overlap_score_credit x decay x device_overlap_blocks
             + host_cache_hit_weight x host_overlap_blocks
    prefill  = max((prefill tokens queued on the rank + isl) / block_size - credit, 0)
    cost     = prefill_load_scale x prefill + decode_blocks
             + decode_active_request_weight x requests on the rank

``device_overlap_blocks`` is the prompt's leading blocks in the rank's cache,
``host_overlap_blocks`` the next ones in its host offload tier. A request routed to a rank adds
its prompt less its *cached tokens* there, ``(device_overlap_blocks + host_cache_hit_weight x
host_overlap_blocks) x block_size``, to the rank's queued prefill tokens until its prompt is
computed. ``decode_blocks`` counts the full
blocks of the requests the router has sent there and not seen finish, plus this request's full
blocks not already among them (a partial last block is not counted). With
``overlap_score_credit_decay`` d > 0 the device credit is scaled by
``1 / (1 + d x excess / request_blocks)``, ``excess`` being the rank's queued prefill blocks above
the least loaded candidate's. ``overlap_score_weight``, the reference's deprecated spelling,
sets ``prefill_load_scale`` when given (its 0 zeroes the reference's credit too, which a zero
scale makes moot).

A disaggregated prefill pool's cost has no decode-block term; a decode pool's has no prefill
term and no overlap, and counts blocks without block identities. ``router_track_prefill_tokens``
off drops the prefill term, ``router_track_active_blocks`` off the decode-block term,
``router_assume_kv_reuse`` off counts every request's blocks apart (no shared blocks).

At temperature 0 the minimum wins with ties broken by the seeded generator, otherwise the rank
is sampled from a softmax over the negated, range-normalised costs at ``router_temperature``.
A rank's cost only falls as its overlaps and counted blocks grow, so with the usual knobs (no
credit decay, no host tier, both tracking switches on, shared blocks counted once, an aggregated
pool) the router at temperature 0 first bounds every rank's cost from its load alone (every
prompt block cached there, and counted there too unless it does not count the prompt's first
block) and looks at the caches only of the ranks whose bound does not exceed the cheapest cost
found so far, in bound order: the others cannot win, nor tie, so the pick and the generator's
draws are those of scoring every rank. A request released by the router queue is scored with
the overlaps it saw on arrival, on every rank.

Queue (``plansim.sim.router_queue``): with ``router_queue_threshold`` set, a request waits at the
router while every candidate is prefill-busy (or others wait), and is released in
``router_queue_policy`` order as prefill capacity frees; it keeps the cache overlaps seen on
arrival, as the reference does. The queue re-checks at a pass end only once the whole pass is
applied (``ReplayHost._release``), so the requests that pass finished no longer count.

Every knob but the tracking switches and the host credit can be patched mid-replay; a patch
changes scores and the queue's order and threshold only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.params import param
from plansim.sim.engine_protocol import PrefixView
from plansim.sim.kv import leading_run
from plansim.sim.router_queue import QUEUE_POLICIES, RouterQueue
from plansim.sim.routing.base import Policy, RankLoad, Route


@dataclass(frozen=True, slots=True)
class KvRouterKnobs:
    overlap_score_weight: float | None = param(
        None,
        ge=0,
        optional=True,
        alias_of="prefill_load_scale",
        help="deprecated spelling of prefill_load_scale (wins when both are given)",
    )
    prefill_load_scale: float = param(
        1.0, ge=0, help="weight of the prefill blocks (queued plus prompt, less credits)"
    )
    overlap_score_credit: float = param(
        1.0, ge=0, help="credit per prompt block cached on the rank, in blocks"
    )
    overlap_score_credit_decay: float = param(
        0.0, ge=0, help="shrinks the cache credit of ranks with more queued prefill (0: off)"
    )
    decode_active_request_weight: float = param(
        0.0, ge=0, help="cost in blocks of each request active on the rank"
    )
    host_cache_hit_weight: float = param(
        0.75,
        ge=0,
        le=1,
        patchable=False,
        help="credit per prompt block in the rank's host offload tier, in blocks",
    )
    router_temperature: float = param(
        0.0, ge=0, help="softmax temperature over the costs; 0 picks the cheapest"
    )
    router_queue_threshold: float | None = param(
        None,
        ge=0,
        optional=True,
        help="queue requests while every rank's queued prefill tokens exceed this fraction of "
        "its max_num_batched_tokens (null: no queue)",
    )
    router_queue_policy: str = param(
        "fcfs",
        choices=QUEUE_POLICIES,
        help="queue order: fcfs first come, lcfs last come, wspt shortest uncached prompt",
    )
    router_track_active_blocks: bool = param(
        True, patchable=False, help="count the active blocks of each rank (decode term)"
    )
    router_track_prefill_tokens: bool = param(
        True, patchable=False, help="count the queued prefill tokens of each rank"
    )
    router_assume_kv_reuse: bool = param(
        True,
        patchable=False,
        help="count a block shared by requests on a rank once (off: once per request)",
    )


class Sent:
    """A request the router sent and has not seen finish: the rank's load record, the block
    keys it counts there, blocks counted beyond them, and its prompt tokens still queued.

    Where blocks are counted once per rank (``router_assume_kv_reuse``), a rank's counted
    blocks are a tree of prefix chains, and each record owns the blocks its prompt added to
    it: ``keys[depth:end]``. ``RankLoad.blocks`` maps them to it up to ``top``: the blocks
    from there on recur in no other prompt (``Policy.recurring``), so no later prompt can
    share them, and they are only counted. Its prompt's first ``depth`` blocks were
    ``parent``'s (or its ancestors') when it was sent; ``children`` holds the depths at which
    later prompts extend its owned blocks. A finished record keeps the owned blocks its
    children still reach (``keys[depth:max(children)]``) until they finish."""

    __slots__ = (
        "children",
        "depth",
        "end",
        "extra_blocks",
        "keys",
        "live",
        "load",
        "parent",
        "queued_tokens",
        "top",
    )

    def __init__(
        self, load: RankLoad, keys: Sequence[int], extra_blocks: int, queued_tokens: int
    ) -> None:
        self.load = load
        self.keys = keys
        self.extra_blocks = extra_blocks
        self.queued_tokens = queued_tokens
        self.parent: Sent | None = None
        self.depth = 0
        self.end = 0
        self.top = 0
        self.children: list[int] = []
        self.live = True

    def let_go(self) -> None:
        """The request finished: its owned blocks no later prompt reaches leave the rank's
        count, and so, up the tree, do finished ancestors' blocks reached only through it."""
        node = self
        node.live = False
        load = node.load
        blocks = load.blocks
        while True:
            children = node.children
            keep = max(children) if children else node.depth
            if keep < node.end:
                if keep < node.top:
                    for key in node.keys[keep : node.top]:
                        del blocks[key]
                    node.top = keep
                load.n_blocks -= node.end - keep
                node.end = keep
            parent = node.parent
            if children or parent is None:
                return
            parent.children.remove(node.depth)
            if parent.live:
                return
            node = parent


class KvRouter(Policy):
    """The reference KV router; see the module docstring."""

    Knobs = KvRouterKnobs
    aliases = ("kv",)
    prefill_load_scale: float
    overlap_score_credit: float
    overlap_score_credit_decay: float
    decode_active_request_weight: float
    host_cache_hit_weight: float
    router_temperature: float
    router_queue_threshold: float | None
    router_queue_policy: str
    router_track_active_blocks: bool
    router_track_prefill_tokens: bool
    router_assume_kv_reuse: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.decode_pool = self.pool.receives_handoff
        self.prefill_pool = self.pool.hands_off
        # A decode pool is routed by load alone.
        self.reads_prefix_cache = not self.decode_pool
        self.indexes_prompt_blocks = self._shares_blocks()
        self.queue = RouterQueue(self.router_queue_policy, self.router_queue_threshold)
        # Overlaps (device, host) of each queued request, as seen on its arrival.
        self._held: dict[int, tuple[list[int], list[int]]] = {}
        self._sent: dict[int, Sent] = {}

    def set_parameters(self, params: Any) -> dict[str, Any]:
        changed = super().set_parameters(params)
        if "router_queue_policy" in changed or "router_queue_threshold" in changed:
            self.queue.configure(self.router_queue_policy, self.router_queue_threshold)
        return changed

    # ---------------------------------------------------------------- cost

    def _overlaps(
        self, keys: list[int], views: Sequence[PrefixView]
    ) -> tuple[list[int], list[int]]:
        n = len(views)
        if self.decode_pool:
            return [0] * n, [0] * n
        device = [view.overlap(keys) for view in views]
        host = [0] * n
        if self._host_tier(views):
            host = [view.host_overlap(keys, d) for view, d in zip(views, device)]
        return device, host

    def _host_tier(self, views: Sequence[PrefixView]) -> bool:
        """Whether the candidates' host tiers earn credit."""
        return bool(self.host_cache_hit_weight and views and hasattr(views[0], "host_overlap"))

    def choose(
        self,
        isl: int,
        keys: list[int],
        views: Sequence[PrefixView],
        loads: Sequence[RankLoad],
        *,
        overlaps: tuple[list[int], list[int]] | None = None,
    ) -> Route:
        if (
            overlaps is None
            and self.router_temperature <= 0.0
            and self._shares_blocks()
            and self.router_track_prefill_tokens
            and self.overlap_score_credit_decay <= 0
            and not self._host_tier(views)
        ):
            return self._cheapest(isl, keys, views, loads)
        device, host = overlaps if overlaps is not None else self._overlaps(keys, views)
        shared = _shared_runs(keys, loads) if self._shares_blocks() else None
        logits = self._costs(isl, keys, loads, device, host, shared)
        i = self._pick(logits)
        return Route(
            i,
            device[i],
            self._cached_tokens(device[i], host[i]),
            None if shared is None else shared[i],
        )

    def _cheapest(
        self, isl: int, keys: list[int], views: Sequence[PrefixView], loads: Sequence[RankLoad]
    ) -> Route:
        """``choose`` at temperature 0 with the usual knobs (``_costs``' comprehensions): the
        cheapest rank, ties broken by the seeded generator, scoring only the ranks that can
        still win (see the module docstring)."""
        bs = self.block_size
        scale = self.prefill_load_scale
        credit = self.overlap_score_credit
        active_weight = self.decode_active_request_weight
        n_keys = len(keys)
        first = keys[0] if keys else None
        most = credit * n_keys  # the credit of every prompt block cached
        bounds = [
            (scale * prefill if (prefill := (load.prefill_tokens + isl) / bs - most) > 0 else 0.0)
            + (load.n_blocks + (0 if first in load.blocks else n_keys))
            for load in loads
        ]
        if active_weight:
            bounds = [bound + active_weight * load.requests for bound, load in zip(bounds, loads)]
        n = len(loads)
        # The ranks not scored keep an infinite cost: ``_pick`` never takes them.
        logits = [_UNSCORED] * n
        scored: dict[int, tuple[int, int]] = {}  # rank -> (device overlap, counted blocks)
        best = _UNSCORED
        runs: list[int] = []
        for c in sorted(range(n), key=bounds.__getitem__):
            if bounds[c] > best:
                break  # the ranks left cost more than the cheapest already found
            load = loads[c]
            d = views[c].overlap(keys)
            s = _shared_run(keys, load.blocks, runs)
            scored[c] = d, s
            cost = (
                scale * prefill
                if (prefill := (load.prefill_tokens + isl) / bs - credit * d) > 0
                else 0.0
            ) + (load.n_blocks + n_keys - s)
            if active_weight:
                cost = cost + active_weight * load.requests
            logits[c] = cost
            if cost < best:
                best = cost
        i = self._pick(logits)
        d, s = scored[i]
        return Route(i, d, self._cached_tokens(d, 0), s)

    def _shares_blocks(self) -> bool:
        """Whether the decode term discounts the prompt blocks a rank already counts."""
        return (
            self.router_track_active_blocks
            and not self.prefill_pool
            and self.router_assume_kv_reuse
            and not self.decode_pool
        )

    def _cached_tokens(self, device: int, host: int) -> int:
        """The prompt tokens counted as cached on a rank: its device blocks plus its host
        blocks weighted by ``host_cache_hit_weight``, rounded to tokens (half up)."""
        if not host:
            return device * self.block_size
        return int((device + self.host_cache_hit_weight * host) * self.block_size + 0.5)

    def _costs(
        self,
        isl: int,
        keys: list[int],
        loads: Sequence[RankLoad],
        device: list[int],
        host: list[int],
        shared: list[int] | None,
    ) -> list[float]:
        """Each candidate's cost; ``shared``: the prompt blocks each already counts (None: the
        decode term discounts none)."""
        n = len(loads)
        bs = self.block_size
        scale = self.prefill_load_scale
        credit = self.overlap_score_credit
        host_weight = self.host_cache_hit_weight
        active_weight = self.decode_active_request_weight
        track_prefill = self.router_track_prefill_tokens and not self.decode_pool
        track_blocks = self.router_track_active_blocks and not self.prefill_pool
        decay = self.overlap_score_credit_decay if track_prefill else 0.0
        floor = min(load.prefill_tokens for load in loads) if decay > 0 else 0
        request_blocks = -(-isl // bs) or 1
        n_keys = len(keys)
        if shared is None:
            shared = [0] * n
        if track_prefill and decay <= 0 and not any(host):
            # The usual knobs in comprehensions: the loop's float operations, less the host
            # term's ``- 0.0``.
            if track_blocks:
                logits = [
                    (
                        scale * prefill
                        if (prefill := (load.prefill_tokens + isl) / bs - credit * d) > 0
                        else 0.0
                    )
                    + (load.n_blocks + n_keys - s)
                    for load, d, s in zip(loads, device, shared)
                ]
            else:
                logits = [
                    scale * prefill
                    if (prefill := (load.prefill_tokens + isl) / bs - credit * d) > 0
                    else 0.0
                    for load, d in zip(loads, device)
                ]
            if active_weight:
                logits = [cost + active_weight * load.requests for cost, load in zip(logits, loads)]
            return logits
        logits = [0.0] * n
        for c, load in enumerate(loads):
            cost = 0.0
            if track_prefill:
                device_credit = credit * device[c]
                if decay > 0:
                    excess = (load.prefill_tokens - floor) / bs / request_blocks
                    device_credit /= 1.0 + decay * excess
                prefill = (load.prefill_tokens + isl) / bs - device_credit - host_weight * host[c]
                cost = scale * prefill if prefill > 0 else 0.0
            if track_blocks:
                cost += load.n_blocks + n_keys - shared[c]
            if active_weight:
                cost += active_weight * load.requests
            logits[c] = cost
        return logits

    def _pick(self, logits: list[float]) -> int:
        if self.router_temperature <= 0.0:
            # The cheapest, ties broken by the seeded generator (a plain list: a few ranks cost
            # less in Python than in numpy's per-call overhead).
            low = min(logits)
            if logits.count(low) == 1:
                return logits.index(low)
            best = [c for c, cost in enumerate(logits) if cost == low]
            return best[self.rng.integers(len(best))]
        costs = np.array(logits)
        p = softmax_probabilities(costs, self.router_temperature)
        u = self.rng.random()
        i = int(np.searchsorted(np.cumsum(p), u, side="left"))
        return min(i, costs.size - 1)

    # ---------------------------------------------------------------- queue

    def _all_busy(self, loads: Sequence[RankLoad]) -> bool:
        busy = self.queue.busy
        budget = self.max_batched_tokens
        return all(busy(load.prefill_tokens, budget) for load in loads)

    def hold(
        self,
        rid: int,
        isl: int,
        keys: list[int],
        views: Sequence[PrefixView],
        loads: Sequence[RankLoad],
        arrival_ms: float,
    ) -> bool:
        """Queue the request instead of routing it now? (True: it waits for ``release``.)"""
        queue = self.queue
        if not queue.enabled or not loads or (not len(queue) and not self._all_busy(loads)):
            return False
        overlaps = self._overlaps(keys, views)
        cached = max(map(self._cached_tokens, *overlaps))
        queue.push(rid, arrival_ms, isl - cached)
        self._held[rid] = overlaps
        return True

    def release(self, loads: Sequence[RankLoad]) -> tuple[int, tuple[list[int], list[int]]] | None:
        """The next queued request to route now, with its arrival overlaps, while some rank is
        not prefill-busy; None otherwise. Route each before asking for the next."""
        queue = self.queue
        if not len(queue) or not loads or self._all_busy(loads):
            return None
        rid = queue.pop()
        return rid, self._held.pop(rid)

    # ---------------------------------------------------------------- load records

    def sent(self, rid: int, isl: int, keys: list[int], route: Route, load: RankLoad) -> None:
        load.requests += 1
        if self.decode_pool:
            # Decode routing is load-only: block counts, no block identities.
            load.n_blocks += len(keys)
            self._sent[rid] = Sent(load, (), len(keys), 0)
            return
        queued = 0
        if self.router_track_prefill_tokens:
            queued = max(isl - route.cached_tokens, 0)
            load.prefill_tokens += queued
        if self.prefill_pool or not self.router_track_active_blocks:
            # No active-block term: nothing to track but tokens.
            self._sent[rid] = Sent(load, (), 0, queued)
            return
        if not self.router_assume_kv_reuse:
            load.n_blocks += len(keys)
            self._sent[rid] = Sent(load, (), len(keys), queued)
            return
        blocks = load.blocks
        entry = Sent(load, keys, 0, queued)
        # Counted blocks are whole prompts (prefix-closed): the prompt's blocks already here
        # are its first ``present`` (``choose`` found them), and the rest are new (the record
        # owns them). Those no other prompt can share are counted, not indexed: a later
        # prompt's blocks found here are ones it shares with another, so they are all indexed.
        present = route.shared_blocks
        if present is None:
            present = leading_run(keys, blocks)
        if present:
            parent = blocks[keys[present - 1]]
            entry.parent = parent
            entry.depth = present
            parent.children.append(present)
        n = len(keys)
        top = n if self.recurring is None else min(n, self.recurring[rid])
        if top > present:
            for key in keys[present:top]:
                blocks[key] = entry
        else:
            top = present
        entry.end = n
        entry.top = top
        load.n_blocks += n - present
        self._sent[rid] = entry

    def prefill_done(self, rid: int) -> None:
        entry = self._sent.get(rid)
        if entry is not None and entry.queued_tokens:
            entry.load.prefill_tokens -= entry.queued_tokens
            entry.queued_tokens = 0

    def finished(self, rid: int) -> None:
        entry = self._sent.pop(rid, None)
        if entry is None:
            return
        load = entry.load
        load.requests -= 1
        load.prefill_tokens -= entry.queued_tokens
        load.n_blocks -= entry.extra_blocks
        if entry.keys:
            entry.let_go()


# The cost of a rank ``KvRouter._cheapest`` did not score (above every real cost).
_UNSCORED = float("inf")


def _shared_runs(keys: list[int], loads: Sequence[RankLoad]) -> list[int]:
    """``leading_run(keys, load.blocks)`` of every candidate (``_shared_run``)."""
    runs: list[int] = []
    return [_shared_run(keys, load.blocks, runs) for load in loads]


def _shared_run(keys: list[int], blocks: Mapping[int, Any], runs: list[int]) -> int:
    """``leading_run(keys, blocks)`` for one candidate's counted ``blocks``; ``runs``: the
    runs found on the prompt's other candidates so far (a new one is added). A rank's counted
    blocks are whole prompts, so the prompt's blocks held there are exactly its first ``run``:
    a run another candidate has is confirmed by two lookups (its last block held, the next
    one not), and only a new run is searched for. Only a rank holding the first block looks."""
    if not keys or keys[0] not in blocks:
        return 0
    n = len(keys)
    for run in runs:
        if keys[run - 1] in blocks and (run == n or keys[run] not in blocks):
            return run
    run = leading_run(keys, blocks)
    runs.append(run)
    return run


def softmax_probabilities(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Selection probabilities at ``temperature`` > 0 (exposed for tests)."""
    lo, hi = float(logits.min()), float(logits.max())
    if lo == hi:
        return np.full(logits.size, 1.0 / logits.size)
    scale = -1.0 / ((hi - lo) * temperature)
    p = np.exp(logits * scale - lo * scale)
    return p / p.sum()
