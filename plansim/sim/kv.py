"""KV block pool of one engine rank: prefix-cached blocks, reference counts, LRU of inactive blocks.

Block identity. A full engine block is identified by an integer key: a prompt block ending at
token index ``e`` (inclusive) gets ``chain_id(e // trace_block_size) * trace_block_size +
e % trace_block_size``, so equal keys mean equal prefixes (``Workload.hash_ids`` are prefix-chain
ids); where engine blocks tile trace blocks, ``per`` to one, the host keys the ``k``-th of them
``chain_id * per + k`` instead (``plansim.sim.host.key_grid``: the same identities, with varied
low bits for the hash sets). A block that holds generated tokens can only ever be reused by its
own request (after a preemption); it gets the negative key ``-(rid * GEN_STRIDE + block_index)
- 1``.

Accounting. ``used`` counts every block that is not free: active blocks (referenced by running
requests, registered or private) plus inactive cached blocks. Allocation takes free blocks first
and then evicts inactive blocks oldest-first. When a request releases its blocks they become
inactive in reverse order (its last block first), so eviction takes the tail of a sequence before
its head, keeping shared prefixes longest.

What the router sees (``overlap``). The reference engine's KV events reach its router when a pass
ends: blocks a pass registers are invisible to routing until then, and blocks it evicts stay
visible until then (``unpublished``, ``vanished``; ``publish`` at each pass end).

Host stores (``plansim.sim.host_offload``). A block a host store is still copying out must not be
overwritten: ``store_sources`` (the host tier's blocks being stored -> when their copy lands)
lets ``allocate`` say how long the blocks it evicts are still being read.

Speed: every operation is a few C-level set and list bulk operations over a request's keys, not
Python work per block. ``cached`` holds every cached key (active or inactive) and ``registered``
the active ones (one reference each; extra references are counted in ``shared``), so a block
going inactive only leaves ``registered``. The LRU is a list of keys in release order with lazy
deletion: a block re-activated while inactive leaves its entry in place, counted in ``_stale``,
and eviction skips it. A key's stale entries always precede its live one (entries are appended),
so while ``_stale[k] > 0`` the next entry of ``k`` met from the oldest end is a stale one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Sequence
from itertools import compress, repeat, takewhile
from operator import add

# Odd, so generated blocks of different requests differ in their low bits (with ``1 << 24`` the
# low 24 bits were the block index alone: every request's block b fell in one hash slot).
GEN_STRIDE = (1 << 24) + 1

# The LRU list drops its consumed head once it is this long (amortised O(1) per entry).
_COMPACT_HEAD = 1 << 14


def gen_key(rid: int, block_index: int) -> int:
    """Key of a block holding generated tokens of request ``rid`` (``block_index`` below
    ``GEN_STRIDE``): negative, and distinct for every (request, block)."""
    return -(rid * GEN_STRIDE + block_index) - 1


class KvCache:
    """One rank's block pool. Sizes in blocks; ``block_size`` tokens per block."""

    __slots__ = ("num_blocks", "block_size", "prefix_caching", "cached", "registered", "shared",
                 "used", "active", "evicted_total", "store_sources", "publishes",
                 "unpublished", "vanished",
                 "_lru", "_head", "_stale")

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        # Every cached key; ``registered`` (a subset) the ones referenced by running requests,
        # with references beyond the first in ``shared``. The others are inactive.
        self.cached: set[int] = set()
        self.registered: set[int] = set()
        self.shared: dict[int, int] = {}
        # Inactive keys in release order from ``_head`` on (the oldest first), with the stale
        # entries of re-activated keys counted per key in ``_stale``.
        self._lru: list[int] = []
        self._head = 0
        self._stale: dict[int, int] = {}
        self.used = 0
        self.active = 0
        self.evicted_total = 0
        # Blocks a host store is reading -> when it lands (the host tier's dict); None without one.
        self.store_sources: dict[int, float] | None = None
        # Since the last pass end: blocks registered (the router does not know them yet) and
        # blocks evicted (it still counts them); kept only while ``publishes`` (a router reads
        # the pool).
        self.publishes = True
        self.unpublished: set[int] = set()
        self.vanished: set[int] = set()

    def available(self) -> int:
        """Blocks that can be allocated now: free plus evictable (``used`` is the active blocks
        plus the inactive ones)."""
        return self.num_blocks - self.active

    def refcount(self, key: int) -> int:
        """References on a registered active block (0 if inactive or unknown)."""
        if key not in self.registered:
            return 0
        return 1 + self.shared.get(key, 0)

    def match(self, keys: list[int]) -> tuple[int, int]:
        """Leading blocks of ``keys`` that are cached: (all cached, of which active)."""
        if not self.prefix_caching:
            return 0, 0
        n = len(list(takewhile(self.cached.__contains__, keys)))
        return n, sum(map(self.registered.__contains__, keys[:n])) if n else 0

    def overlap(self, keys: list[int]) -> int:
        """Leading cached blocks of ``keys`` (active or inactive) as the router knows them: the
        cache as of the rank's last pass end (``publish``)."""
        if not self.prefix_caching or not keys:
            return 0
        cached, unpublished, vanished = self.cached, self.unpublished, self.vanished
        if keys[0] not in cached and keys[0] not in vanished:
            return 0  # the common case: nothing of the prompt here
        if not unpublished and not vanished:
            return leading_run(keys, cached)
        # ``leading_run`` with the published view's membership written out (the router asks
        # every rank for every request: no call per probe).
        k = keys[0]
        if k not in vanished and (k not in cached or k in unpublished):
            return 0
        lo, hi = 1, len(keys)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            k = keys[mid - 1]
            if k in vanished or (k in cached and k not in unpublished):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def cached_run(self, keys: list[int]) -> int:
        """Leading cached blocks of ``keys`` (active or inactive) now.

        Found by binary search for the last cached block, which assumes the cached blocks of a
        prefix form a prefix (eviction takes sequence tails first); a hole in the middle of a
        cached prefix can make this differ from ``match``. O(log n) lookups instead of O(n).
        """
        if not self.prefix_caching or not keys:
            return 0
        return leading_run(keys, self.cached)

    def publish(self) -> None:
        """A pass ended: the router learns what it registered and evicted."""
        if self.unpublished:
            self.unpublished.clear()
        if self.vanished:
            self.vanished.clear()

    def acquire(self, keys: list[int]) -> None:
        """Take references on cached blocks (re-activating inactive ones)."""
        registered, shared = self.registered, self.shared
        again = [k for k in keys if k in registered]
        if again:
            shared.update(zip(again, map(add, map(shared.get, again, repeat(0)), repeat(1))))
            revived = [k for k in keys if k not in registered]
        else:
            revived = keys
        if revived:
            # Their LRU entries stay behind, stale.
            stale = self._stale
            stale.update(zip(revived, map(add, map(stale.get, revived, repeat(0)), repeat(1))))
            registered.update(revived)
            self.active += len(revived)

    def allocate(self, n: int) -> float:
        """Allocate ``n`` fresh blocks; the caller checked ``available() >= n``. Returns when the
        last host store still reading a block it evicted lands (0.0: none): nothing may be
        written to the blocks before then."""
        free = self.num_blocks - self.used
        take = n if n <= free else free
        self.used += take
        evict = n - take
        self.active += n
        if not evict:
            return 0.0
        self.evicted_total += evict
        gone = self._evict(evict)
        if self.publishes:
            self.vanished.update(gone)
        sources = self.store_sources
        if not sources or sources.keys().isdisjoint(gone):
            return 0.0
        fence = max(map(sources.get, gone, repeat(0.0)))
        return fence if fence > 0.0 else 0.0

    def free_blocks(self) -> int:
        """Blocks never used or returned uncached: allocating them evicts nothing."""
        return self.num_blocks - self.used

    def _evict(self, n: int) -> list[int]:
        """Drop the ``n`` least recently released inactive blocks from the cache; returns their
        keys."""
        lru, stale = self._lru, self._stale
        head = self._head
        gone: list[int] = []
        while n:
            chunk = lru[head:head + n]
            if not chunk:
                raise RuntimeError("KV pool: fewer inactive blocks than counted")
            head += len(chunk)
            if not stale or stale.keys().isdisjoint(chunk):
                gone += chunk
                n -= len(chunk)
                continue
            # Skip the stale entries (the live ones around them are taken in slices).
            prev = 0
            for j in compress(range(len(chunk)), map(stale.__contains__, chunk)):
                k = chunk[j]
                c = stale.get(k)
                if c:
                    gone += chunk[prev:j]
                    prev = j + 1
                    n += 1
                    if c == 1:
                        del stale[k]
                    else:
                        stale[k] = c - 1
            gone += chunk[prev:]
            n -= len(chunk)
        self.cached.difference_update(gone)
        if head >= _COMPACT_HEAD and 2 * head >= len(lru):
            del lru[:head]
            head = 0
        self._head = head
        return gone

    def _retire(self, keys: list[int]) -> None:
        """``keys`` (no longer referenced, oldest first) become the newest inactive blocks."""
        lru = self._lru
        lru += keys
        if len(lru) - self._head > 2 * self.num_blocks + _COMPACT_HEAD:
            self._drop_stale()

    def _drop_stale(self) -> None:
        """Rebuild the LRU list without its stale entries (once they outnumber the live ones,
        so amortised O(1) per entry)."""
        stale = self._stale
        live = []
        for k in self._lru[self._head:]:
            c = stale.get(k)
            if c:
                if c == 1:
                    del stale[k]
                else:
                    stale[k] = c - 1
            else:
                live.append(k)
        self._lru = live
        self._head = 0

    def register(self, keys: list[int], held: list[int]) -> None:
        """Register freshly computed full blocks under ``keys``, appending the registered ones to
        ``held``; a block equal to one already cached stays private to its request."""
        if not self.prefix_caching or not keys:
            return
        cached = self.cached
        if cached.isdisjoint(keys):
            fresh = keys
            cached.update(keys)
        else:
            fresh = []
            for k in keys:
                if k not in cached:
                    cached.add(k)
                    fresh.append(k)
        self.registered.update(fresh)
        if self.publishes:
            self.unpublished.update(fresh)
        held.extend(fresh)

    def release(self, keys: list[int], n_private: int, cache_keys: list[int]) -> None:
        """Return a request's blocks: ``keys`` are its registered blocks in sequence order,
        ``n_private`` its other blocks, of which the ones keyed by ``cache_keys`` (sequence order)
        stay cached as inactive."""
        registered, cached, shared = self.registered, self.cached, self.shared
        self.active -= n_private
        if not self.prefix_caching:
            self.used -= n_private
            return
        self.used -= n_private
        if cache_keys:
            if cached.isdisjoint(cache_keys):
                kept = cache_keys[::-1]
                cached.update(kept)
            else:
                kept = []
                for k in reversed(cache_keys):
                    if k not in cached:
                        cached.add(k)
                        kept.append(k)
            self.used += len(kept)
            self._retire(kept)
        if shared and not shared.keys().isdisjoint(keys):
            gone = []
            for k in reversed(keys):
                c = shared.get(k)
                if c is None:
                    gone.append(k)
                elif c == 1:
                    del shared[k]
                else:
                    shared[k] = c - 1
        else:
            gone = keys[::-1]
        registered.difference_update(gone)
        self.active -= len(gone)
        self._retire(gone)


def leading_run(keys: Sequence[int], present: Container[int]) -> int:
    """How many leading ``keys`` are in ``present``, by binary search: ``keys`` are prefix-chain
    ids and ``present`` holds a key only with every key before it (a cache evicts sequence tails
    first; a rank's sent blocks are whole prompts), so the present keys are a leading run."""
    if not keys or keys[0] not in present:
        return 0
    lo, hi = 1, len(keys)  # keys[:lo] present; the answer is in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if keys[mid - 1] in present:
            lo = mid
        else:
            hi = mid - 1
    return lo
