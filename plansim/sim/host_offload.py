"""Host (G2) KV offload tier of one engine rank (reference ``native_host_offload``, vLLM's
offloading connector over a private host pool).

- **Stores.** Each request has a store cursor, in prompt blocks. For every pass it runs in,
  the full prompt blocks it will have computed past the cursor are offered to the host as the
  pass is scheduled (vLLM's connector prepares stores then: what is missing, the victims and
  the touch see the pool before the pass; the copy starts at the pass's end): the
  ones the host lacks (neither resident nor being stored) are copied in one transfer and the
  cursor moves past all offered blocks; when the host has them all the cursor just moves. A
  transfer takes ``blocks x block_bytes / d2h_bandwidth``; transfers in one direction run one
  after another (a FIFO lane). A block is visible once its transfer lands. Room is made by
  evicting the least recently used resident blocks that no load is reading and that are not
  among the offered ones; without enough room nothing is copied and the cursor stays (the next
  pass offers again). A copy touches the request's prompt blocks. A landed store is one
  cohort: its blocks become the most recently used together, and which of them goes first
  is unrelated to their prompt positions (``cohort_rank``).
- **Lookups.** When the scheduler considers a waiting request for admission (a request the
  pass never reaches is not looked up), its prompt blocks past the device-cached prefix are
  looked up: the leading run of blocks resident, being stored or being loaded counts. A run
  with blocks still in flight holds the request until they land (then it is looked up again);
  so does the request's own latest store still in flight. A resident run is a hit. A lookup
  first touches the prompt's resident blocks (most recent first in its prompt order, so its
  first block ends up the most recently used); blocks being loaded are not touched.
- **Loads.** A hit reserves device blocks for itself and keeps the cached prefix it extends (if
  they do not fit, admission stops for the pass), and is copied back on the H2D lane,
  ``blocks x block_bytes / h2d_bandwidth``. The request is held until the load lands, then
  rejoins the head of the queue with the loaded blocks cached and, with the prefix they
  extend, kept for it (not evictable) until it is admitted; its admission reuses them and its
  store cursor restarts past the reused prefix. A hit loads only if the request's whole known
  sequence fits beside what running prefills still need and what requests with a load in
  flight or landed will allocate past it (vLLM's headroom: a load cannot be preempted);
  otherwise admission stops for the pass. Blocks read back become the most recently used,
  as one cohort like a landed store.
- **Reuse of blocks being stored.** A store reads the device blocks it copies until it lands,
  also after their request has released them. A pass whose allocation evicts such a block
  computes only once that store lands (vLLM's connector flushes the copy before the memory is
  rewritten), and a load into such a block starts on the H2D lane only then. So when D2H is
  slower than the rank fills its pool, the rank runs at the pace of its stores.
- **Preemption.** vLLM copies a preempted request's blocks out before reusing them: no pass
  computes before its latest store lands.

Times are virtual ms; bandwidths are decimal GB/s (0 means instantaneous).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import filterfalse, islice, takewhile
from typing import Any

import numpy as np

# ``HostTier.store``'s answer when the host has (or is receiving) every block offered.
ALREADY_PRESENT = -1.0


_MASK64 = (1 << 64) - 1
_GOLDEN, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
# From this many keys a cohort is ranked in numpy (a fixed ~4 us against ~0.37 us a key).
_NUMPY_COHORT = 16
# The mix's constants as numpy words, made once (a scalar made per call costs ~0.2 us).
_U_GOLDEN, _U_MIX1, _U_MIX2 = np.uint64(_GOLDEN), np.uint64(_MIX1), np.uint64(_MIX2)
_U30, _U27, _U31 = np.uint64(30), np.uint64(27), np.uint64(31)


def cohort_rank(key: int) -> int:
    """Eviction order inside a cohort of blocks that became evictable together (a landed
    store or load): lowest rank first. vLLM's offloading connector hands such a cohort over
    as a Python set, so its order is unrelated to the blocks' prompt positions; the reference
    breaks the tie by block hash. Ranking by a 64-bit mix of the key keeps that property
    deterministically: partly evicting a cohort leaves holes anywhere in its prompt, not a
    clean cut at one end."""
    x = (key + _GOLDEN) & _MASK64
    x = ((x ^ (x >> 30)) * _MIX1) & _MASK64
    x = ((x ^ (x >> 27)) * _MIX2) & _MASK64
    return x ^ (x >> 31)


def in_cohort_order(keys: list[int]) -> list[int]:
    """``sorted(keys, key=cohort_rank)`` for distinct int64 keys: ranks are distinct (the mix
    is a bijection of 64-bit words), so the order is fully determined, and numpy's wrapping
    uint64 arithmetic gives the same ranks as the masked Python integers."""
    if len(keys) < _NUMPY_COHORT:
        return sorted(keys, key=cohort_rank)
    k = np.array(keys, dtype=np.int64)
    x = k.view(np.uint64) + _U_GOLDEN
    x ^= x >> _U30
    x *= _U_MIX1
    x ^= x >> _U27
    x *= _U_MIX2
    x ^= x >> _U31
    return k[x.argsort()].tolist()


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

    __slots__ = (
        "_transfers",
        "capacity",
        "d2h",
        "h2d",
        "loaded_blocks",
        "pins",
        "resident",
        "stored_blocks",
        "storing",
    )

    def __init__(
        self, capacity_blocks: int, block_bytes: int, d2h_gbps: float, h2d_gbps: float
    ) -> None:
        self.capacity = capacity_blocks
        # Resident blocks, least recently used first: a plain dict's insertion order (making a
        # block the most recent takes it out and puts it back), far smaller than an ordered
        # dict's linked nodes, which is what its probes cost. Values are True, so that
        # ``pop(key, False)`` tells a resident block from an absent one.
        self.resident: dict[int, bool] = {}
        # Blocks being stored -> the time their transfer completes.
        self.storing: dict[int, float] = {}
        # The stores in flight in submission order, (completion ms, keys): the D2H lane
        # completes them in that order, at non-decreasing times.
        self._transfers: deque[tuple[float, list[int]]] = deque()
        # Resident blocks a load in flight reads (not evictable) -> reader count.
        self.pins: dict[int, int] = {}
        self.d2h = _Lane(block_bytes, d2h_gbps)
        self.h2d = _Lane(block_bytes, h2d_gbps)
        self.stored_blocks = 0
        self.loaded_blocks = 0

    def advance(self, now_ms: float) -> None:
        """Stores completed by ``now_ms`` become resident, the blocks landing at one time one
        cohort of the most recently used (see ``cohort_rank``)."""
        transfers = self._transfers
        if not transfers or transfers[0][0] > now_ms:
            return
        resident, storing = self.resident, self.storing
        while transfers and transfers[0][0] <= now_ms:
            done, cohort = transfers.popleft()
            # Transfers landing at the same time (an instantaneous lane) are one cohort.
            while transfers and transfers[0][0] == done:
                cohort = cohort + transfers.popleft()[1]
            for key in in_cohort_order(cohort):
                resident[key] = True
            for key in cohort:
                del storing[key]

    def store(
        self, keys: Sequence[int], now_ms: float, submit_ms: float | None = None
    ) -> float | None:
        """Copy the ones of ``keys`` (a request's prompt blocks) the host lacks to it; returns
        the completion time, ``ALREADY_PRESENT`` when it has them all, or None when there is no
        room (the
        least recently used resident blocks not being loaded and not among ``keys`` are
        evicted to make it). What is missing and what is evicted are decided on the pool as
        it is at ``now_ms``; the copy joins the D2H lane at ``submit_ms`` (default ``now_ms``)."""
        self.advance(now_ms)
        resident, storing = self.resident, self.storing
        absent = list(filterfalse(resident.__contains__, keys))
        missing = list(filterfalse(storing.__contains__, absent)) if storing else absent
        if not missing:
            return ALREADY_PRESENT
        room = self.capacity - len(resident) - len(storing)
        if room < len(missing):
            need = len(missing) - room
            # Not evictable: resident blocks being loaded or offered.
            guarded = self.pins.keys() & resident.keys()
            if len(absent) < len(keys):
                guarded.update(filter(resident.__contains__, keys))
            if len(resident) - len(guarded) < need:
                return None
            victims = list(
                islice(filterfalse(guarded.__contains__, resident) if guarded else resident, need)
            )
            for key in victims:
                del resident[key]
        done = self.d2h.submit(now_ms if submit_ms is None else submit_ms, len(missing))
        before = len(storing)
        for key in missing:
            storing[key] = done
        # A block offered twice lands once (``advance`` takes each landed block out once).
        landing = missing if len(storing) - before == len(missing) else list(dict.fromkeys(missing))
        self._transfers.append((done, landing))
        self.stored_blocks += len(missing)
        self.advance(now_ms)  # an instantaneous transfer submitted now lands at once
        return done

    def touch(self, keys: Sequence[int]) -> None:
        """Mark the resident blocks of ``keys`` not being loaded most recently used, the first
        of ``keys`` the most recent."""
        resident = self.resident
        if self.pins:
            keys = list(filterfalse(self.pins.__contains__, keys))
        # The rule moves them one by one from the last of ``keys`` to the first: a block given
        # twice ends where its first place in ``keys`` puts it. So one pass takes the resident
        # ones out in ``keys`` order (a repeat finds its block gone) and they go back reversed.
        pop = resident.pop
        moved = [key for key in keys if pop(key, False)]
        for key in reversed(moved):
            resident[key] = True

    def load(self, keys: Iterable[int], now_ms: float) -> float:
        """Copy resident ``keys`` back to the device; returns the completion time. They cannot
        be evicted until ``loaded`` is called."""
        keys = list(keys)
        for key in keys:
            self.pins[key] = self.pins.get(key, 0) + 1
        self.loaded_blocks += len(keys)
        return self.h2d.submit(now_ms, len(keys))

    def loaded(self, keys: Sequence[int]) -> None:
        """A load of ``keys`` completed: the ones no other load reads are evictable again, as
        one cohort of the most recently used (see ``cohort_rank``)."""
        pins, resident = self.pins, self.resident
        unpinned: list[int] = []
        for key in keys:
            left = pins[key] - 1
            if left:
                pins[key] = left
            else:
                del pins[key]
                unpinned.append(key)
        order = in_cohort_order(unpinned)
        for key in order:
            del resident[key]
        for key in order:
            resident[key] = True

    def overlap(self, keys: Sequence[int], start: int) -> int:
        """Leading resident blocks of ``keys[start:]`` (for the router's host credit)."""
        return len(list(takewhile(self.resident.__contains__, islice(keys, start, None))))


# What a host lookup tells the scheduler about the waiting request it considers.
PROCEED = 0  # admit it as usual (nothing to load, or its load has landed)
HELD = 1  # it left the queue for a transfer; consider the next request
BLOCKED = 2  # its hit does not fit in device KV now; admit nothing more this pass


class HostOffload:
    """One rank's host offload: its tier and the waiting requests held back for a transfer.

    The scheduler calls ``lookup`` for each waiting request it considers for admission (in
    queue order, while the pass has room: a request the pass never reaches is not looked up);
    the rank calls ``settle`` as a pass starts (and when woken), ``admitted`` on admission,
    ``store`` for each request of a finished pass and ``preempted`` on a preemption. ``wake``
    (the host's) is told when a held request becomes ready. A request held back leaves the
    waiting queue (others go ahead, as vLLM skips a request waiting for KV) and returns to its
    head when its transfer lands; the loaded blocks are then cached device blocks its admission
    reuses.

    Per request (``Request`` fields): ``stored_blocks``, the store cursor (prompt blocks
    already offered to the host; kept across preemptions, set to the reused prefix after a
    load); ``store_done_ms``, when its latest store lands; ``host_loaded``, its load landed for
    the coming admission.
    """

    __slots__ = ("held", "kept", "loading", "not_before_ms", "tails", "tier", "wake")

    def __init__(
        self,
        capacity_blocks: int,
        block_bytes: int,
        d2h_gbps: float,
        h2d_gbps: float,
        wake: Callable[[float], None],
    ) -> None:
        self.tier = HostTier(capacity_blocks, block_bytes, d2h_gbps, h2d_gbps)
        # (ready ms, request, blocks being loaded for it, the cached prefix they extend)
        self.held: list[tuple[float, Any, list[int], list[int]]] = []
        self.wake = wake
        # Host blocks being loaded to the device -> when that load lands.
        self.loading: dict[int, float] = {}
        # No pass computes before this time: blocks it rewrites (evicted ones, or a preempted
        # request's) are still being copied out (vLLM flushes those stores first).
        self.not_before_ms = 0.0
        # Requests whose load is in flight or landed, not yet admitted -> the blocks their
        # admission will allocate past the loaded prefix.
        self.tails: dict[Any, int] = {}
        # Requests whose load landed, not yet admitted -> the cached blocks kept for them (the
        # loaded ones and the prefix they extend) and the loaded blocks that stayed private.
        self.kept: dict[Any, tuple[list[int], int]] = {}

    def settle(self, rank: Any, now_ms: float) -> None:
        """Requests whose transfer has landed go back to the head of the waiting queue, their
        loaded blocks and the prefix they extend cached on the device and kept for them (not
        evictable) until they are admitted."""
        if not self.held:
            return
        due = [h for h in self.held if h[0] <= now_ms]
        if not due:
            return
        self.held = [h for h in self.held if h[0] > now_ms]
        cache = rank.cache
        loading = self.loading
        for _, req, keys, prefix in reversed(due):
            if keys:
                self.tier.loaded(keys)
                for key in keys:
                    loading.pop(key, None)
                kept: list[int] = []
                cache.register(keys, kept)  # a block cached meanwhile keeps its own copy
                self.kept[req] = (prefix + kept, len(keys) - len(kept))
                req.host_loaded = True  # one load per admission
            rank.requeue(req)

    def lookup(self, rank: Any, req: Any, match: Any, now_ms: float) -> int:
        """Look the host up for waiting ``req`` past its device-cached prefix (``match``): a
        resident run starts a load and holds the request until it lands; a run with blocks
        still being stored or loaded holds it until they land; so does its own latest store
        still in flight. Touches the prompt's resident blocks (its first the most recent)."""
        if req.host_loaded or req.prebuilt:
            return PROCEED
        if req.store_done_ms > now_ms:
            self._hold(rank, req, req.store_done_ms, [])
            return HELD
        tier = self.tier
        tier.advance(now_ms)
        keys = req.prompt_keys
        tier.touch(keys)
        base = match.cached_tokens // rank.block_size
        n = len(keys)
        if base >= n:
            return PROCEED
        resident, storing, loading = tier.resident, tier.storing, self.loading
        hits = 0
        ready = 0.0
        for key in keys[base:]:
            landing = loading.get(key)
            if landing is None:
                if key in resident:
                    hits += 1
                    continue
                landing = storing.get(key)
                if landing is None:
                    break
            hits += 1
            if landing > ready:
                ready = landing
        if not hits:
            return PROCEED
        if ready:
            self._hold(rank, req, ready, [])
            return HELD
        # The load reserves device blocks for the hit and keeps the cached prefix it extends.
        cache = rank.cache
        prefix = match.keys[:base]
        registered = cache.registered
        revived = base - sum(map(registered.__contains__, prefix))
        available = cache.available()
        if hits + revived > available or match.blocks_needed > available - self._headroom(rank):
            return BLOCKED
        hit = keys[base : base + hits]
        cache.acquire(prefix)
        # The copy cannot overwrite evicted blocks a host store still reads.
        reused = cache.allocate(hits)
        done = tier.load(hit, reused if reused > now_ms else now_ms)
        for key in hit:
            loading[key] = done
        # What its admission will still allocate past the loaded prefix.
        self.tails[req] = -(-(req.isl + req.generated) // rank.block_size) - base - hits
        self._hold(rank, req, done, hit, prefix)
        return HELD

    def _headroom(self, rank: Any) -> int:
        """Device blocks already promised (vLLM's headroom for a load, which cannot be
        preempted): what running prefills still need for their known tokens, and what requests
        whose load is in flight or landed will allocate past it when admitted."""
        bs = rank.block_size
        promised = sum(self.tails.values())
        for r in rank.running:
            if r.computed < r.isl:
                left = -(-(r.isl + r.generated) // bs) - r.n_blocks
                if left > 0:
                    promised += left
        return promised

    def _hold(
        self, rank: Any, req: Any, ready_ms: float, keys: list[int], prefix: list[int] | None = None
    ) -> None:
        rank.unqueue(req)
        self.held.append((ready_ms, req, keys, prefix or []))
        self.wake(ready_ms)

    def admitted(self, req: Any, cache: Any, cached_tokens: int, block_size: int) -> None:
        """``req`` is admitted reusing ``cached_tokens`` (it holds its cached blocks now): what
        its load kept for it is let go, and its store cursor restarts past the reused prefix
        (loaded blocks are not copied back)."""
        self.tails.pop(req, None)
        if req.host_loaded:
            req.host_loaded = False
            req.stored_blocks = cached_tokens // block_size
            self._let_go(req, cache)

    def dropped(self, req: Any, cache: Any) -> None:
        """``req`` left the rank without being admitted."""
        self.tails.pop(req, None)
        self._let_go(req, cache)

    def _let_go(self, req: Any, cache: Any) -> None:
        kept = self.kept.pop(req, None)
        if kept is not None:
            cache.release(kept[0], kept[1], [])

    def store(
        self, req: Any, block_size: int, end_ms: float, scheduled_ms: float | None = None
    ) -> None:
        """Offer ``req``'s full prompt blocks computed by ``end_ms`` past its store cursor to
        the host: those it lacks are copied (the prompt is then touched), or, without room,
        retried after its next pass; the cursor moves past what was offered. As vLLM's
        connector, the store is prepared when the pass is scheduled (``scheduled_ms``, default
        ``end_ms``): the missing blocks, the victims and the touch see the pool as it is then
        (a store landing during the pass is not yet resident); the copy starts at ``end_ms``."""
        computed = req.computed if req.computed < req.isl else req.isl
        done = computed // block_size
        start = req.stored_blocks
        if done <= start:
            return
        keys = req.prompt_keys
        landing = self.tier.store(
            keys[start:done], end_ms if scheduled_ms is None else scheduled_ms, end_ms
        )
        if landing is None:
            return  # no room: the cursor stays, the next pass retries
        req.stored_blocks = done
        if landing != ALREADY_PRESENT:
            req.store_done_ms = landing
            self.tier.touch(keys)

    def preempted(self, req: Any) -> None:
        """``req`` was preempted: its blocks are reused only once its stores have landed."""
        self.hold_compute(req.store_done_ms)

    def hold_compute(self, until_ms: float) -> None:
        """No pass computes before ``until_ms``: it writes to blocks a host store still reads."""
        if until_ms > self.not_before_ms:
            self.not_before_ms = until_ms


class OffloadView:
    """The router's view of a rank with a host tier: the device cache's overlap, and the blocks
    that continue it in the host (``host_overlap``, credited by ``host_cache_hit_weight``)."""

    __slots__ = ("overlap", "tier")

    def __init__(self, cache: Any, tier: HostTier) -> None:
        self.overlap = cache.overlap
        self.tier = tier

    def host_overlap(self, keys: Sequence[int], device_blocks: int) -> int:
        return self.tier.overlap(keys, device_blocks)
