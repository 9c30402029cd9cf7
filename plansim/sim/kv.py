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
"""

from __future__ import annotations

from collections import OrderedDict

GEN_STRIDE = 1 << 24


def gen_key(rid: int, block_index: int) -> int:
    """Key of a block holding generated tokens of request ``rid``."""
    return -(rid * GEN_STRIDE + block_index) - 1


class KvCache:
    """One rank's block pool. Sizes in blocks; ``block_size`` tokens per block."""

    __slots__ = ("num_blocks", "block_size", "prefix_caching", "ref", "inactive", "used", "active",
                 "evicted_total")

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.ref: dict[int, int] = {}
        # The first key is the least recently released (OrderedDict pops its head in O(1)).
        self.inactive: OrderedDict[int, None] = OrderedDict()
        self.used = 0
        self.active = 0
        self.evicted_total = 0

    def available(self) -> int:
        """Blocks that can be allocated now: free plus evictable."""
        return self.num_blocks - self.used + len(self.inactive)

    def match(self, keys: list[int]) -> tuple[int, int]:
        """Leading blocks of ``keys`` that are cached: (all cached, of which active)."""
        if not self.prefix_caching:
            return 0, 0
        ref, inactive = self.ref, self.inactive
        n = n_active = 0
        for k in keys:
            if k in ref:
                n_active += 1
            elif k not in inactive:
                break
            n += 1
        return n, n_active

    def overlap(self, keys: list[int]) -> int:
        """Leading cached blocks of ``keys`` (active or inactive)."""
        return self.match(keys)[0]

    def acquire(self, keys: list[int]) -> None:
        """Take references on cached blocks (re-activating inactive ones)."""
        ref, inactive = self.ref, self.inactive
        for k in keys:
            c = ref.get(k)
            if c is not None:
                ref[k] = c + 1
            else:
                del inactive[k]
                ref[k] = 1
                self.active += 1

    def allocate(self, n: int) -> None:
        """Allocate ``n`` fresh blocks; the caller checked ``available() >= n``."""
        free = self.num_blocks - self.used
        take = n if n <= free else free
        self.used += take
        evict = n - take
        if evict:
            pop = self.inactive.popitem
            for _ in range(evict):
                pop(last=False)
            self.evicted_total += evict
        self.active += n

    def register(self, keys: list[int], held: list[int]) -> None:
        """Register freshly computed full blocks under ``keys``, appending the registered ones to
        ``held``; a block equal to one already cached stays private to its request."""
        if not self.prefix_caching:
            return
        ref, inactive = self.ref, self.inactive
        for k in keys:
            if k not in ref and k not in inactive:
                ref[k] = 1
                held.append(k)

    def release(self, keys: list[int], n_private: int, cache_keys: list[int]) -> None:
        """Return a request's blocks: ``keys`` are its registered blocks in sequence order,
        ``n_private`` its other blocks, of which the ones keyed by ``cache_keys`` (sequence order)
        stay cached as inactive."""
        ref, inactive = self.ref, self.inactive
        self.active -= len(keys) + n_private
        if self.prefix_caching:
            for k in reversed(cache_keys):
                if k in ref or k in inactive:
                    self.used -= 1
                else:
                    inactive[k] = None
            self.used -= n_private - len(cache_keys)
        else:
            self.used -= n_private
        for k in reversed(keys):
            c = ref[k] - 1
            if c:
                ref[k] = c
            else:
                del ref[k]
                inactive[k] = None
