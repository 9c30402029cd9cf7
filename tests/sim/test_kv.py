"""KV block pool: prefix matching, reference counts, LRU of inactive blocks, accounting."""

from __future__ import annotations

from plansim.sim.kv import KvCache, gen_key


def _cache_with(keys, num_blocks=10):
    cache = KvCache(num_blocks, 64)
    cache.allocate(len(keys))
    held: list[int] = []
    cache.register(keys, held)
    return cache, held


def test_match_counts_active_and_inactive_cached_prefix_blocks_separately():
    cache, held = _cache_with([1, 2, 3])
    cache.release(held[:1], 0, [])  # block 1 inactive; 2 and 3 stay active
    assert cache.match([1, 2, 3, 4]) == (3, 2)
    assert cache.match([9, 2]) == (0, 0)


def test_released_blocks_become_inactive_tail_first_and_are_evicted_oldest_first():
    cache, held = _cache_with([1, 2, 3], num_blocks=4)
    cache.release(held, 0, [])
    assert cache.available() == 4 and cache.used == 3
    cache.allocate(2)  # one free block, then evict the oldest inactive: the tail block 3
    assert cache.match([1, 2, 3]) == (2, 0)
    assert cache.evicted_total == 1


def test_shared_blocks_stay_active_until_the_last_reference_goes():
    cache, held = _cache_with([1, 2])
    cache.acquire([1, 2])
    assert cache.refcount(1) == 2
    cache.release([1, 2], 0, [])
    assert cache.match([1, 2]) == (2, 2)
    cache.release([1, 2], 0, [])
    assert cache.match([1, 2]) == (2, 0)
    assert cache.active == 0


def test_a_duplicate_of_a_cached_block_stays_private():
    cache, held = _cache_with([1, 2])
    cache.allocate(2)
    second: list[int] = []
    cache.register([1, 5], second)
    assert second == [5]


def test_private_generated_blocks_are_cached_under_their_request_key():
    cache = KvCache(10, 64)
    cache.allocate(3)
    cache.release([], 3, [gen_key(7, 0), gen_key(7, 1)])
    # two cached, one freed
    assert cache.used == 2 and cache.active == 0
    assert cache.match([gen_key(7, 0), gen_key(7, 1)]) == (2, 0)


def test_without_prefix_caching_nothing_is_matched_or_kept():
    cache = KvCache(10, 64, prefix_caching=False)
    cache.allocate(3)
    held: list[int] = []
    cache.register([1, 2], held)
    assert held == [] and cache.match([1, 2]) == (0, 0)
    cache.release(held, 3, [])
    assert cache.used == 0 and cache.available() == 10


def test_router_overlap_agrees_with_match_on_prefix_shaped_contents():
    cache, held = _cache_with(list(range(1, 8)))
    assert cache.overlap(list(range(1, 12))) == 7 == cache.match(list(range(1, 12)))[0]
    assert cache.overlap([99, 1]) == 0


def test_allocation_says_until_when_a_host_store_still_reads_the_blocks_it_evicts():
    cache, held = _cache_with([1, 2, 3], num_blocks=4)
    cache.release(held, 0, [])  # inactive, oldest first: 3, 2, 1
    cache.store_sources = {3: 50.0, 2: 80.0, 1: 20.0}  # block -> when its host copy lands
    assert cache.allocate(1) == 0.0  # the free block: nothing evicted
    assert cache.allocate(2) == 80.0  # evicts 3 and 2: the later landing
    assert cache.allocate(1) == 20.0
