"""KV block pool: prefix matching, reference counts, LRU of inactive blocks, accounting."""

from __future__ import annotations

from unittest.mock import patch

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from plansim.sim import kv
from plansim.sim.kv import GEN_STRIDE, KvCache, gen_key, gen_keys, leading_run


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


def test_a_reactivated_prefix_leaves_the_lru_and_the_rest_of_its_release_keeps_its_place():
    cache, held = _cache_with([1, 2, 3, 4], num_blocks=6)
    cache.release(held, 0, [])  # inactive, oldest first: 4 3 2 1
    cache.acquire([1, 2])  # a request reuses the first two: inactive 4 3
    cache.allocate(3)  # two free blocks, then the oldest inactive: 4
    assert cache.match([1, 2, 3, 4]) == (3, 2) and cache.evicted_total == 1
    cache.release([1, 2], 0, [])  # inactive: 3 (released first), then 2 1
    cache.allocate(2)  # evicts 3, then 2
    assert cache.match([1, 2, 3]) == (1, 0) and cache.evicted_total == 3


def test_shared_blocks_stay_active_until_the_last_reference_goes():
    cache, _held = _cache_with([1, 2])
    cache.acquire([1, 2])
    assert cache.refcount(1) == 2
    cache.release([1, 2], 0, [])
    assert cache.match([1, 2]) == (2, 2)
    cache.release([1, 2], 0, [])
    assert cache.match([1, 2]) == (2, 0)
    assert cache.active == 0


def test_a_duplicate_of_a_cached_block_stays_private():
    cache, _held = _cache_with([1, 2])
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


def test_generated_block_keys_are_negative_and_distinct_per_request_and_block():
    keys = [gen_key(rid, b) for rid in range(50) for b in [*range(40), GEN_STRIDE - 1]]
    assert len(set(keys)) == len(keys) and max(keys) < 0
    # Prompt keys are chain ids times a stride plus an offset, never negative.
    assert gen_key(0, 0) == -1


def test_match_stops_at_a_hole_the_binary_search_would_step_over():
    # Cached 1, 3, 4, 5 (2 was never registered): the leading run of [1..5] is [1] alone,
    # although 3, 4 and 5, where a binary search probes, are cached. 1 and 4 are active.
    cache = KvCache(8, 64)
    cache.allocate(5)
    held: list[int] = []
    cache.register([1, 3, 4, 5, 6], held)
    cache.release([3, 5, 6], 0, [])
    assert cache.match([1, 2, 3, 4, 5]) == (1, 1)
    assert cache.match([4, 5, 2]) == (2, 1)
    assert cache.match([3, 5, 6]) == (3, 0)


def test_without_prefix_caching_nothing_is_matched_or_kept():
    cache = KvCache(10, 64, prefix_caching=False)
    cache.allocate(3)
    held: list[int] = []
    cache.register([1, 2], held)
    assert held == [] and cache.match([1, 2]) == (0, 0)
    cache.release(held, 3, [])
    assert cache.used == 0 and cache.available() == 10


def test_router_overlap_agrees_with_match_on_prefix_shaped_contents():
    cache, _held = _cache_with(list(range(1, 8)))
    cache.publish()
    assert cache.overlap(list(range(1, 12))) == 7 == cache.match(list(range(1, 12)))[0]
    assert cache.overlap([99, 1]) == 0


def test_the_router_learns_what_a_pass_registers_and_evicts_when_the_pass_ends():
    cache, held = _cache_with([1, 2, 3], num_blocks=4)
    assert cache.overlap([1, 2, 3]) == 0 and cache.cached_run([1, 2, 3]) == 3
    cache.publish()
    assert cache.overlap([1, 2, 3]) == 3
    cache.release(held, 0, [])
    cache.allocate(3)  # the free block, then 3 and 2 evicted (tail first)
    assert cache.overlap([1, 2, 3]) == 3 and cache.cached_run([1, 2, 3]) == 1
    cache.publish()
    assert cache.overlap([1, 2, 3]) == 1


def test_what_a_pass_registers_and_evicts_after_the_router_looked_stays_hidden_too():
    # Within one pass: register 1 2, the router looks, then 3 4 are registered and 1 2's
    # successors evicted; every change since the last pass end stays out of the router's view.
    cache = KvCache(8, 64)
    cache.allocate(6)
    held: list[int] = []
    cache.register([1, 2], held)
    cache.publish()
    cache.register([3, 4], held)
    assert cache.overlap([1, 2, 3, 4]) == 2
    cache.register([5, 6], held)
    assert cache.overlap([1, 2, 3, 4, 5, 6]) == 2
    cache.release(held[2:], 0, [])  # 6 5 4 3 inactive
    cache.allocate(4)  # the two free blocks, then 6 and 5 evicted
    assert cache.overlap([1, 2, 3, 4, 5, 6]) == 2 and cache.cached_run([1, 2, 3, 4, 5, 6]) == 4
    cache.publish()
    assert cache.overlap([1, 2, 3, 4, 5, 6]) == 4


def test_a_pass_end_has_something_to_publish_only_after_a_registration_or_an_eviction():
    cache = KvCache(4, 64)
    assert not cache.pending
    cache.allocate(3)  # free blocks: nothing evicted
    assert not cache.pending
    held: list[int] = []
    cache.register([1, 2, 3], held)
    assert cache.pending
    cache.publish()
    assert not cache.pending
    cache.release(held, 0, [])
    assert not cache.pending  # released blocks stay cached: the router's view is unchanged
    cache.allocate(3)  # the free block, then 3 and 2 evicted
    assert cache.pending
    cache.publish()
    assert not cache.pending


def test_a_pool_no_router_reads_never_has_anything_to_publish():
    cache = KvCache(4, 64)
    cache.publishes = False
    cache.allocate(3)
    held: list[int] = []
    cache.register([1, 2, 3], held)
    cache.release(held, 0, [])
    cache.allocate(3)
    assert not cache.pending


def test_allocation_says_until_when_a_host_store_still_reads_the_blocks_it_evicts():
    cache, held = _cache_with([1, 2, 3], num_blocks=4)
    cache.release(held, 0, [])  # inactive, oldest first: 3, 2, 1
    cache.store_sources = {3: 50.0, 2: 80.0, 1: 20.0}  # block -> when its host copy lands
    assert cache.allocate(1) == 0.0  # the free block: nothing evicted
    assert cache.allocate(2) == 80.0  # evicts 3 and 2: the later landing
    assert cache.allocate(1) == 20.0


class _ModelPool:
    """The pool's rules stated plainly: a reference count per cached key (0: inactive), the
    inactive keys in a list oldest first, one list operation per block."""

    def __init__(self, num_blocks):
        self.num_blocks = num_blocks
        self.refs: dict[int, int] = {}
        self.lru: list[int] = []
        self.used = self.active = self.evicted_total = 0

    def available(self):
        return self.num_blocks - self.used + len(self.lru)

    def match(self, keys):
        n = n_active = 0
        for k in keys:
            if k not in self.refs:
                break
            n += 1
            n_active += self.refs[k] > 0
        return n, n_active

    def acquire(self, keys):
        for k in keys:
            if self.refs[k] == 0:
                self.lru.remove(k)
                self.active += 1
            self.refs[k] += 1

    def allocate(self, n):
        take = min(n, self.num_blocks - self.used)
        self.used += take
        for _ in range(n - take):
            del self.refs[self.lru.pop(0)]
            self.evicted_total += 1
        self.active += n

    def register(self, keys, held):
        for k in keys:
            if k not in self.refs:
                self.refs[k] = 1
                held.append(k)

    def release(self, keys, n_private, cache_keys):
        self.active -= n_private
        self.used -= n_private
        for k in reversed(cache_keys):
            if k not in self.refs:
                self.refs[k] = 0
                self.lru.append(k)
                self.used += 1
        for k in reversed(keys):
            self.refs[k] -= 1
            if self.refs[k] == 0:
                self.lru.append(k)
                self.active -= 1


def _binary_overlap(cached, keys):
    """``KvCache.overlap``'s contract: binary search for the last cached leading block."""
    if not keys or keys[0] not in cached:
        return 0
    lo, hi = 1, len(keys)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if keys[mid - 1] in cached else (lo, mid - 1)
    return lo


# Prompts are paths in a small prefix tree (key = 10 * parent + branch), so prompts share
# prefixes, blocks are evicted, re-activated while inactive and released again many times.
_prompt = st.lists(st.integers(0, 2), min_size=1, max_size=6).map(
    lambda branches: [
        int("1" + "".join(str(b) for b in branches[: i + 1])) for i in range(len(branches))
    ]
)
_step = st.one_of(
    st.tuples(st.just("admit"), _prompt, st.integers(0, 3)),
    st.tuples(st.just("release"), st.integers(0, 99), st.integers(0, 3)),
)


# One prompt admitted and released again and again: its runs are emptied by re-activation faster
# than eviction consumes them, so the LRU drops them.
_CYCLES = [("admit", [1, 10, 100, 1000, 10000], 1), ("release", 0, 1)] * 12 + [
    ("admit", [2, 20, 200, 2000], 3),
    ("admit", [1, 11, 110], 2),
]


@settings(max_examples=300, deadline=None)
@example(num_blocks=14, steps=_CYCLES)
@example(num_blocks=6, steps=_CYCLES)
@given(num_blocks=st.integers(4, 14), steps=st.lists(_step, max_size=60))
def test_pool_follows_the_lru_and_reference_count_rules(num_blocks, steps):
    # A tiny compaction threshold, so that the LRU drops its emptied runs within a short test.
    with patch.object(kv, "_COMPACT_RUNS", 2):
        _check_against_model(num_blocks, steps)


def _check_against_model(num_blocks, steps):
    cache, model = KvCache(num_blocks, 64), _ModelPool(num_blocks)
    running: list[tuple[list[int], int, int]] = []  # held keys, private blocks, request id
    probes = [[1, 10, 100], [1, 11, 111, 1112], [12, 120], [1, 12, 121, 1210, 12101]]
    for rid, (action, arg, extra) in enumerate(steps):
        if action == "admit":
            keys = arg
            n_match, _ = cache.match(keys)
            need = len(keys) - n_match + extra
            revived = n_match - cache.match(keys)[1]
            if need + revived > cache.available():
                continue
            for pool in (cache, model):
                pool.acquire(keys[:n_match])
                pool.allocate(need)
            held, model_held = keys[:n_match], keys[:n_match]
            cache.register(keys[n_match:], held)
            model.register(keys[n_match:], model_held)
            assert held == model_held
            running.append((held, need - (len(held) - n_match), rid))
        elif running:
            held, n_private, owner = running.pop(arg % len(running))
            cache_keys = [gen_key(owner, b) for b in range(min(extra, n_private))]
            cache.release(held, n_private, cache_keys)
            model.release(held, n_private, cache_keys)
        assert (cache.available(), cache.used, cache.active, cache.evicted_total) == (
            model.available(),
            model.used,
            model.active,
            model.evicted_total,
        )
        for keys in probes + [list(model.refs)]:
            assert cache.match(keys) == model.match(keys)
            assert cache.cached_run(keys) == _binary_overlap(model.refs, keys)
        for k in model.refs:
            assert cache.refcount(k) == model.refs[k]
        assert cache.cached == set(model.refs)
        # The inactive blocks in eviction order (the runs' live slices, oldest first).
        assert [k for r in cache._runs for k in r.keys[r.lo : r.hi]] == model.lru


@pytest.mark.parametrize(
    ("held", "expected"),
    [(set(), 0), ({10}, 1), ({10, 11}, 2), ({10, 11, 12, 13, 14}, 5), ({10, 11, 12, 99}, 3)],
)
def test_leading_run_counts_the_held_leading_keys(held, expected):
    # Held keys of whole prompts: a prefix of this prompt's keys, whatever else is held.
    assert leading_run([10, 11, 12, 13, 14], held) == expected


def test_leading_run_of_no_keys_is_zero():
    assert leading_run([], {1}) == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=6), min_size=1, max_size=8), st.data()
)
def test_leading_run_equals_a_walk_over_whole_prompts(paths, data):
    # Prompts as paths in a prefix tree (a key names its whole prefix); the router holds the
    # keys of some whole prompts; the binary search must find what a walk from the front finds.
    def keys_of(path):
        return [hash(tuple(path[: i + 1])) for i in range(len(path))]

    held = set()
    for path in data.draw(st.lists(st.sampled_from(paths), max_size=len(paths))):
        held.update(keys_of(path))
    for path in paths:
        keys = keys_of(path)
        walk = 0
        while walk < len(keys) and keys[walk] in held:
            walk += 1
        assert leading_run(keys, held) == walk


@given(st.integers(0, 10**6), st.integers(0, 300), st.integers(-5, 300))
def test_gen_keys_are_gen_key_block_by_block(rid, lo, hi):
    assert gen_keys(rid, lo, hi) == [gen_key(rid, b) for b in range(lo, hi)]
