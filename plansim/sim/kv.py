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
visible until then (``unpublished``, ``vanished``; ``publish`` at each pass end). The key lists
behind them are merged into them only when the router looks: most passes end unseen.

Host stores (``plansim.sim.host_offload``). A block a host store is still copying out must not be
overwritten: ``store_sources`` (the host tier's blocks being stored -> when their copy lands)
lets ``allocate`` say how long the blocks it evicts are still being read.

Speed: a request's keys are handled in a few bulk passes, C-level set and list operations where
one pass does. Reference counts are plain loops (taking shared blocks, releasing them): a loop
writing a dict's computed values beats a ``map``/``zip`` chain into ``dict.update``, and over a
large dict each extra C-level pass costs another cache miss per block. ``cached`` holds every
cached key (active or inactive) and ``registered`` the active ones (one reference each; extra
references are counted in ``shared``), so a block going inactive only leaves ``registered``.
The LRU holds runs, not keys: each release appends the blocks it makes inactive as one run (a
list, its last block first), of which a slice ``keys[lo:hi]`` is still inactive. Eviction takes
slices from the oldest runs. Re-activation shortens runs from their end: the blocks ``acquire``
takes are a leading run of one prefix chain, and a run's blocks are one chain's in descending
order, so the ones taken from a run are always its last inactive ones. They are found from the
run's last inactive block (``_tails``: each run's last inactive key), walking back while they
are taken.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Sequence
from itertools import compress, repeat, takewhile

# Odd, so generated blocks of different requests differ in their low bits (with ``1 << 24`` the
# low 24 bits were the block index alone: every request's block b fell in one hash slot).
GEN_STRIDE = (1 << 24) + 1

# The LRU drops its emptied runs once it holds more than twice as many runs as after the last
# time, and at least this many (amortised O(1) per run).
_COMPACT_RUNS = 1 << 10


def gen_key(rid: int, block_index: int) -> int:
    """Key of a block holding generated tokens of request ``rid`` (``block_index`` below
    ``GEN_STRIDE``): negative, and distinct for every (request, block)."""
    return -(rid * GEN_STRIDE + block_index) - 1


def gen_keys(rid: int, lo: int, hi: int) -> list[int]:
    """``gen_key(rid, b)`` for ``b`` in ``lo .. hi - 1``, in one C-level range (the keys fall by
    one a block)."""
    first = gen_key(rid, lo)
    return list(range(first, first - (hi - lo), -1)) if hi > lo else []


class _Run:
    """Blocks one release made inactive, its last block first; ``keys[lo:hi]`` are still
    inactive (the ones before ``lo`` were evicted, the ones from ``hi`` re-activated)."""

    __slots__ = ("hi", "keys", "lo")

    def __init__(self, keys: list[int]) -> None:
        self.keys = keys
        self.lo = 0
        self.hi = len(keys)


class KvCache:
    """One rank's block pool. Sizes in blocks; ``block_size`` tokens per block."""

    __slots__ = (
        "_compact_at",
        "_evicted_since",
        "_registered_since",
        "_runs",
        "_tails",
        "active",
        "block_size",
        "cached",
        "evicted_total",
        "num_blocks",
        "pending",
        "prefix_caching",
        "publishes",
        "registered",
        "shared",
        "store_sources",
        "unpublished",
        "used",
        "vanished",
    )

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        # Every cached key; ``registered`` (a subset) the ones referenced by running requests,
        # with references beyond the first in ``shared``. The others are inactive.
        self.cached: set[int] = set()
        self.registered: set[int] = set()
        self.shared: dict[int, int] = {}
        # Inactive blocks as runs in release order (the oldest first), and each run's last
        # inactive key -> the run.
        self._runs: deque[_Run] = deque()
        self._tails: dict[int, _Run] = {}
        self._compact_at = _COMPACT_RUNS
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
        # The key lists registered and evicted since, not yet in those sets: they are merged
        # only when the router looks (most passes end before any request arrives).
        self._registered_since: list[list[int]] = []
        self._evicted_since: list[list[int]] = []
        # Whether anything was registered or evicted since the last ``publish`` (else a pass
        # end has nothing to publish).
        self.pending = False

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
        # The binary search's answer is the leading run when all of ``keys[:n]`` is cached
        # (``leading_run``; one C-level pass checks it); else a hole before it ends the run
        # sooner: walk. Most prompts hold no active block: one C-level pass says so.
        cached = self.cached
        n = leading_run(keys, cached)
        if not n:
            return 0, 0
        head = keys if n == len(keys) else keys[:n]
        if not cached.issuperset(head):
            head = list(takewhile(cached.__contains__, keys))
        registered = self.registered
        if registered.isdisjoint(head):
            return len(head), 0
        return len(head), sum(map(registered.__contains__, head))

    def overlap(self, keys: list[int]) -> int:
        """Leading cached blocks of ``keys`` (active or inactive) as the router knows them: the
        cache as of the rank's last pass end (``publish``)."""
        if not self.prefix_caching or not keys:
            return 0
        if self._registered_since or self._evicted_since:
            self._merge_since()
        cached, unpublished, vanished = self.cached, self.unpublished, self.vanished
        if keys[0] not in cached and keys[0] not in vanished:
            return 0  # the common case: nothing of the prompt here
        if not unpublished and not vanished:
            return leading_run(keys, cached)
        # ``leading_run`` with the published view's membership written out (the router asks
        # every rank for every request: no call per probe). Most probes find a block cached
        # and published: two look-ups, the small sets' one after the cache's.
        k = keys[0]
        if k not in vanished and (k not in cached or k in unpublished):
            return 0
        lo, hi = 1, len(keys)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            k = keys[mid - 1]
            if (k in cached and k not in unpublished) or k in vanished:
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

    def _merge_since(self) -> None:
        if self._registered_since:
            self.unpublished.update(*self._registered_since)
            self._registered_since.clear()
        if self._evicted_since:
            self.vanished.update(*self._evicted_since)
            self._evicted_since.clear()

    def publish(self) -> None:
        """A pass ended: the router learns what it registered and evicted."""
        self.pending = False
        if self._registered_since:
            self._registered_since.clear()
        if self._evicted_since:
            self._evicted_since.clear()
        if self.unpublished:
            self.unpublished.clear()
        if self.vanished:
            self.vanished.clear()

    def acquire(self, keys: list[int]) -> None:
        """Take references on cached blocks (re-activating inactive ones): ``keys`` are a
        leading run of one prefix chain (a request's first blocks), all cached."""
        registered, shared = self.registered, self.shared
        again = [k for k in keys if k in registered]
        if not again:
            revived = keys
        else:
            for k in again:
                shared[k] = shared.get(k, 0) + 1
            revived = [k for k in keys if k not in registered] if len(again) < len(keys) else ()
        if revived:
            # Each run taken from loses its last inactive blocks: the ones taken.
            tails = self._tails
            ends = list(compress(revived, map(tails.__contains__, revived)))
            # (Every run taken from has its last inactive block taken: one end, one run.)
            taken = set(revived) if len(ends) > 1 else None
            for key in ends:
                run = tails.pop(key)
                lo, hi = run.lo, run.hi
                if taken is None:
                    hi -= len(revived)
                else:
                    hi -= len(list(takewhile(taken.__contains__, reversed(run.keys[lo:hi]))))
                run.hi = hi
                if hi > lo:
                    tails[run.keys[hi - 1]] = run
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
            self._evicted_since.extend(gone)
            self.pending = True
        sources = self.store_sources
        if not sources:
            return 0.0
        fence = 0.0
        for keys in gone:
            if not sources.keys().isdisjoint(keys):
                fence = max(fence, *map(sources.get, keys, repeat(0.0)))
        return fence

    def free_blocks(self) -> int:
        """Blocks never used or returned uncached: allocating them evicts nothing."""
        return self.num_blocks - self.used

    def _evict(self, n: int) -> list[list[int]]:
        """Drop the ``n`` least recently released inactive blocks from the cache; returns their
        keys as lists, one per run taken from (a run's own list when all of it goes: no copy,
        no joined list, each key handled once more only by the set)."""
        runs = self._runs
        gone: list[list[int]] = []
        while n:
            if not runs:
                raise RuntimeError("KV pool: fewer inactive blocks than counted")
            run = runs[0]
            keys, lo, hi = run.keys, run.lo, run.hi
            if hi - lo <= n:
                if hi > lo:
                    gone.append(keys if not lo and hi == len(keys) else keys[lo:hi])
                    n -= hi - lo
                    del self._tails[keys[hi - 1]]
                runs.popleft()
            else:
                gone.append(keys[lo : lo + n])
                run.lo = lo + n
                n = 0
        self.cached.difference_update(*gone)
        return gone

    def _retire(self, keys: list[int]) -> None:
        """``keys`` (no longer referenced, newest first; the caller's own list) become the
        newest inactive blocks, as one run."""
        if not keys:
            return
        run = _Run(keys)
        runs = self._runs
        runs.append(run)
        self._tails[keys[-1]] = run
        if len(runs) > self._compact_at:
            self._compact()

    def _compact(self) -> None:
        """Drop the runs re-activation emptied, and the dead ends of the others."""
        live = deque()
        for run in self._runs:
            lo, hi = run.lo, run.hi
            if lo < hi:
                if lo or hi < len(run.keys):
                    run.keys = run.keys[lo:hi]
                    run.lo, run.hi = 0, hi - lo
                live.append(run)
        self._runs = live
        self._compact_at = max(2 * len(live), _COMPACT_RUNS)

    def register(self, keys: list[int], held: list[int]) -> None:
        """Register freshly computed full blocks under ``keys`` (a list the caller leaves as it
        is), appending the registered ones to ``held``; a block equal to one already cached stays
        private to its request."""
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
            self._registered_since.append(fresh)
            self.pending = True
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
    first; a rank's sent blocks are whole prompts), so the present keys are a leading run.

    Whatever ``present`` holds, the answer ``n`` has ``keys[n - 1]`` present (when ``n`` > 0)
    and ``keys[n]`` absent (when ``n < len(keys)``): it is the leading run exactly when all of
    ``keys[:n]`` is present (``KvCache.match`` checks that for a cache with holes)."""
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
