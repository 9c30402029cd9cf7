"""Host (G2) KV offload tier of one engine rank (reference ``native_host_offload``, vLLM's
offloading connector over a private host pool).

- **Stores.** Every full prompt block a pass computes is copied to the host at the end of that
  pass (one transfer per request and pass, skipping blocks the host already has or is
  receiving). A transfer takes ``blocks x block_bytes / d2h_bandwidth``; transfers in one
  direction run one after another (a FIFO lane), so a transfer starts when the lane frees. A
  block is visible in the host once its transfer completes. Room is made by evicting the least
  recently used resident blocks that no load is reading; a transfer that still does not fit is
  dropped.
- **Lookups.** A waiting request whose prompt continues past its device-cached prefix asks the
  host for the following prompt blocks: the leading run of resident blocks is a hit; a block
  still being stored makes the request wait for that store. A lookup touches the request's
  prompt blocks (most recent first in its prompt order, so its first block ends up the most
  recently used).
- **Loads.** A hit is copied back on the H2D lane, ``blocks x block_bytes / h2d_bandwidth``; the
  request is admitted when the load completes, with the loaded blocks counted as cached.

Times are virtual ms; bandwidths are decimal GB/s (0 means instantaneous).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class HostLookup:
    """A lookup's result: ``hits`` leading resident blocks, or ``ready_ms``: the request must
    wait until the blocks of its run still being stored land (then ``hits`` is 0)."""

    hits: int
    ready_ms: float | None = None


class _Lane:
    """One transfer direction: transfers run back to back."""

    __slots__ = ("ms_per_block", "tail_ms")

    def __init__(self, block_bytes: int, gbps: float) -> None:
        self.ms_per_block = block_bytes / (gbps * 1e6) if gbps > 0 else 0.0
        self.tail_ms = 0.0

    def submit(self, now_ms: float, blocks: int) -> float:
        """Queue a transfer of ``blocks``; returns its completion time."""
        start = self.tail_ms if self.tail_ms > now_ms else now_ms
        self.tail_ms = start + blocks * self.ms_per_block
        return self.tail_ms


class HostTier:
    """One rank's host pool of ``capacity_blocks`` blocks of ``block_bytes`` bytes."""

    __slots__ = ("capacity", "resident", "storing", "pins", "d2h", "h2d", "stored_blocks",
                 "loaded_blocks")

    def __init__(self, capacity_blocks: int, block_bytes: int, d2h_gbps: float,
                 h2d_gbps: float) -> None:
        self.capacity = capacity_blocks
        # Resident blocks, least recently used first.
        self.resident: OrderedDict[int, None] = OrderedDict()
        # Blocks being stored -> the time their transfer completes.
        self.storing: dict[int, float] = {}
        # Resident blocks a load in flight reads (not evictable) -> reader count.
        self.pins: dict[int, int] = {}
        self.d2h = _Lane(block_bytes, d2h_gbps)
        self.h2d = _Lane(block_bytes, h2d_gbps)
        self.stored_blocks = 0
        self.loaded_blocks = 0

    def advance(self, now_ms: float) -> None:
        """Stores completed by ``now_ms`` become resident (most recently used)."""
        if not self.storing:
            return
        landed = [k for k, t in self.storing.items() if t <= now_ms]
        for key in landed:
            del self.storing[key]
            self.resident[key] = None

    def store(self, keys: Sequence[int], now_ms: float) -> float | None:
        """Copy ``keys`` (a request's newly computed prompt blocks) to the host; returns the
        completion time, or None when nothing was sent (all present, or no room)."""
        self.advance(now_ms)
        missing = [k for k in keys if k not in self.resident and k not in self.storing]
        if not missing:
            return None
        room = self.capacity - len(self.resident) - len(self.storing)
        if room < len(missing):
            victims = [k for k in self.resident if k not in self.pins][: len(missing) - room]
            if room + len(victims) < len(missing):
                return None
            for key in victims:
                del self.resident[key]
        done = self.d2h.submit(now_ms, len(missing))
        for key in missing:
            self.storing[key] = done
        self.stored_blocks += len(missing)
        self.advance(now_ms)  # an instantaneous transfer lands at once
        return done

    def lookup(self, prompt_keys: Sequence[int], start: int, now_ms: float) -> HostLookup:
        """Resident run of ``prompt_keys[start:]``; touches the whole prompt."""
        self.advance(now_ms)
        hits = 0
        ready: float | None = None
        resident, storing = self.resident, self.storing
        for key in prompt_keys[start:]:
            if key in resident:
                hits += 1
                continue
            landing = storing.get(key)
            if landing is None:
                break
            # A block still being stored makes the whole lookup wait for it.
            ready = landing if ready is None or landing > ready else ready
        for key in reversed(prompt_keys):
            if key in resident:
                resident.move_to_end(key)
        if ready is not None:
            return HostLookup(0, ready)
        return HostLookup(hits)

    def load(self, keys: Iterable[int], now_ms: float) -> float:
        """Copy resident ``keys`` back to the device; returns the completion time. They cannot
        be evicted until ``loaded`` is called."""
        keys = list(keys)
        for key in keys:
            self.pins[key] = self.pins.get(key, 0) + 1
        self.loaded_blocks += len(keys)
        return self.h2d.submit(now_ms, len(keys))

    def loaded(self, keys: Iterable[int]) -> None:
        """A load of ``keys`` completed: they are evictable again."""
        for key in keys:
            left = self.pins[key] - 1
            if left:
                self.pins[key] = left
            else:
                del self.pins[key]

    def overlap(self, keys: Sequence[int], start: int) -> int:
        """Leading resident blocks of ``keys[start:]`` (for the router's host credit)."""
        n = 0
        resident = self.resident
        for key in keys[start:]:
            if key not in resident:
                break
            n += 1
        return n


class HostOffload:
    """One rank's host offload: its tier and the waiting requests held back for a transfer.

    The rank calls ``settle`` and ``fetch`` as a pass starts and ``store`` as it is composed;
    ``wake`` (the host's) is told when a held request becomes ready. A request held back leaves
    the waiting queue (others go ahead, as vLLM skips a request waiting for remote KV) and
    returns to its head when its transfer lands; the loaded blocks are then cached device blocks
    its admission reuses.
    """

    __slots__ = ("tier", "held", "wake")

    def __init__(self, capacity_blocks: int, block_bytes: int, d2h_gbps: float,
                 h2d_gbps: float, wake: Callable[[float], None]) -> None:
        self.tier = HostTier(capacity_blocks, block_bytes, d2h_gbps, h2d_gbps)
        # (ready ms, request, device blocks being loaded for it)
        self.held: list[tuple[float, Any, list[int]]] = []
        self.wake = wake

    def settle(self, rank: Any, now_ms: float) -> None:
        """Requests whose transfer has landed go back to the head of the waiting queue, their
        loaded blocks cached on the device."""
        if not self.held:
            return
        due = [h for h in self.held if h[0] <= now_ms]
        if not due:
            return
        self.held = [h for h in self.held if h[0] > now_ms]
        cache = rank.cache
        for _, req, keys in reversed(due):
            if keys:
                self.tier.loaded(keys)
                cache.release((), len(keys), keys)
                req.host_loaded = True  # one load per admission
            rank.requeue(req)

    def fetch(self, rank: Any, now_ms: float) -> None:
        """Look up the host for the waiting head (and the next heads) past its device-cached
        prefix; a hit starts a load, a block still being stored waits for its store."""
        waiting = rank.waiting
        tier = self.tier
        while waiting and not waiting[0].prebuilt and not waiting[0].host_loaded:
            req = waiting[0]
            keys = req.prompt_keys
            base = rank.prefix_match(req).cached_tokens // rank.block_size
            if base >= len(keys):
                tier.lookup(keys, len(keys), now_ms)  # touches the prompt
                return
            found = tier.lookup(keys, base, now_ms)
            if found.ready_ms is not None:
                self._hold(rank, req, found.ready_ms, [])
                continue
            if not found.hits or found.hits > rank.cache.available():
                return
            hit = keys[base:base + found.hits]
            rank.cache.allocate(len(hit))
            self._hold(rank, req, tier.load(hit, now_ms), hit)

    def _hold(self, rank: Any, req: Any, ready_ms: float, keys: list[int]) -> None:
        rank.unqueue(req)
        self.held.append((ready_ms, req, keys))
        self.wake(ready_ms)

    def store(self, req: Any, block_size: int, end_ms: float) -> None:
        """Copy ``req``'s newly computed full prompt blocks to the host at ``end_ms``."""
        done = min(req.computed // block_size, len(req.prompt_keys))
        if done > req.stored_blocks:
            self.tier.store(req.prompt_keys[req.stored_blocks:done], end_ms)
            req.stored_blocks = done


class OffloadView:
    """The router's view of a rank with a host tier: the device cache's overlap, and the blocks
    that continue it in the host (``host_overlap``, credited by ``host_cache_hit_weight``)."""

    __slots__ = ("overlap", "tier")

    def __init__(self, cache: Any, tier: HostTier) -> None:
        self.overlap = cache.overlap
        self.tier = tier

    def host_overlap(self, keys: Sequence[int], device_blocks: int) -> int:
        return self.tier.overlap(keys, device_blocks)
