"""KV block pool of one engine rank: prefix-cached blocks, reference counts, LRU of inactive blocks.

Block identity. A full engine block is identified by an integer key: a prompt block ending at
token index ``e`` (inclusive) gets ``chain_id(e // trace_block_size) * trace_block_size +
e % trace_block_size``, so equal keys mean equal prefixes (``Workload.hash_ids`` are prefix-chain
ids). A block that holds generated tokens can only ever be reused by its own request (after a
preemption); it gets the negative key ``-(rid * GEN_STRIDE + block_index) - 1``.

Accounting. ``used`` counts every block that is not free: active blocks (referenced by running
requests, registered or private) plus inactive cached blocks. Allocation takes free blocks first
and then evicts inactive blocks oldest-first. When a request releases its blocks they become
inactive in reverse order (its last block first), so eviction takes the tail of a sequence before
its head, keeping shared prefixes longest.

Host stores (``plansim.sim.host_offload``). A block a host store is still copying out must not be
overwritten: ``store_sources`` (the host tier's blocks being stored -> when their copy lands)
lets ``allocate`` say how long the blocks it evicts are still being read.

Speed: registered active keys live in a set (one reference each) with extra references counted
in ``shared``, so the common operations run as C-level set and dict bulk operations.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import repeat
from operator import add

GEN_STRIDE = 1 << 24


def gen_key(rid: int, block_index: int) -> int:
    """Key of a block holding generated tokens of request ``rid``."""
    return -(rid * GEN_STRIDE + block_index) - 1


class KvCache:
    """One rank's block pool. Sizes in blocks; ``block_size`` tokens per block."""

    __slots__ = ("num_blocks", "block_size", "prefix_caching", "registered", "shared", "inactive",
                 "used", "active", "evicted_total", "store_sources")

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        # Registered blocks referenced by running requests; ``shared`` holds references beyond
        # the first.
        self.registered: set[int] = set()
        self.shared: dict[int, int] = {}
        # The first key is the least recently released (OrderedDict pops its head in O(1)).
        self.inactive: OrderedDict[int, None] = OrderedDict()
        self.used = 0
        self.active = 0
        self.evicted_total = 0
        # Blocks a host store is reading -> when it lands (the host tier's dict); None without one.
        self.store_sources: dict[int, float] | None = None

    def available(self) -> int:
        """Blocks that can be allocated now: free plus evictable."""
        return self.num_blocks - self.used + len(self.inactive)

    def refcount(self, key: int) -> int:
        """References on a registered active block (0 if inactive or unknown)."""
        if key not in self.registered:
            return 0
        return 1 + self.shared.get(key, 0)

    def match(self, keys: list[int]) -> tuple[int, int]:
        """Leading blocks of ``keys`` that are cached: (all cached, of which active)."""
        if not self.prefix_caching:
            return 0, 0
        registered, inactive = self.registered, self.inactive
        n = n_active = 0
        for k in keys:
            if k in registered:
                n_active += 1
            elif k not in inactive:
                break
            n += 1
        return n, n_active

    def overlap(self, keys: list[int]) -> int:
        """Leading cached blocks of ``keys`` (active or inactive), for routing.

        Found by binary search for the last cached block, which assumes the cached blocks of a
        prefix form a prefix (eviction takes sequence tails first); a hole in the middle of a
        cached prefix can make this differ from ``match``. O(log n) lookups instead of O(n).
        """
        if not self.prefix_caching or not keys:
            return 0
        registered, inactive = self.registered, self.inactive
        k0 = keys[0]
        if k0 not in registered and k0 not in inactive:
            return 0
        lo, hi = 1, len(keys)  # keys[:lo] cached; answer in [lo, hi]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            k = keys[mid - 1]
            if k in registered or k in inactive:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def acquire(self, keys: list[int]) -> None:
        """Take references on cached blocks (re-activating inactive ones)."""
        registered, inactive, shared = self.registered, self.inactive, self.shared
        again = [k for k in keys if k in registered]
        if again:
            shared.update(zip(again, map(add, map(shared.get, again, repeat(0)), repeat(1))))
        revived = [k for k in keys if k not in registered] if again else keys
        deque(map(inactive.pop, revived), 0)
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
        sources = self.store_sources
        if not sources:
            deque(map(self.inactive.popitem, repeat(False, evict)), 0)
            return 0.0
        popitem = self.inactive.popitem
        get = sources.get
        fence = 0.0
        for _ in range(evict):
            landing = get(popitem(False)[0])
            if landing is not None and landing > fence:
                fence = landing
        return fence

    def free_blocks(self) -> int:
        """Blocks never used or returned uncached: allocating them evicts nothing."""
        return self.num_blocks - self.used

    def register(self, keys: list[int], held: list[int]) -> None:
        """Register freshly computed full blocks under ``keys``, appending the registered ones to
        ``held``; a block equal to one already cached stays private to its request."""
        if not self.prefix_caching or not keys:
            return
        registered, inactive = self.registered, self.inactive
        if registered.isdisjoint(keys) and inactive.keys().isdisjoint(keys):
            registered.update(keys)
            held.extend(keys)
            return
        for k in keys:
            if k not in registered and k not in inactive:
                registered.add(k)
                held.append(k)

    def release(self, keys: list[int], n_private: int, cache_keys: list[int]) -> None:
        """Return a request's blocks: ``keys`` are its registered blocks in sequence order,
        ``n_private`` its other blocks, of which the ones keyed by ``cache_keys`` (sequence order)
        stay cached as inactive."""
        registered, inactive, shared = self.registered, self.inactive, self.shared
        self.active -= n_private
        if not self.prefix_caching:
            self.used -= n_private
            return
        if cache_keys:
            if registered.isdisjoint(cache_keys) and inactive.keys().isdisjoint(cache_keys):
                inactive.update(zip(reversed(cache_keys), repeat(None)))
                self.used -= n_private - len(cache_keys)
            else:
                for k in reversed(cache_keys):
                    if k in registered or k in inactive:
                        self.used -= 1
                    else:
                        inactive[k] = None
                self.used -= n_private - len(cache_keys)
        else:
            self.used -= n_private
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
            registered.difference_update(gone)
            inactive.update(zip(gone, repeat(None)))
            self.active -= len(gone)
        else:
            registered.difference_update(keys)
            inactive.update(zip(reversed(keys), repeat(None)))
            self.active -= len(keys)
