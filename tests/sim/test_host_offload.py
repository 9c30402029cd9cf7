"""Host KV tier: store and load transfer times on FIFO lanes, LRU eviction, the store cursor,
lookups as the scheduler considers a request."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plansim.sim.host_offload import (
    ALREADY_PRESENT,
    BLOCKED,
    HELD,
    HostOffload,
    HostTier,
    cohort_rank,
    in_cohort_order,
)
from plansim.sim.kv import KvCache
from plansim.sim.schedulers.base import PrefixMatch

BLOCK_BYTES = 64 * 131072  # 64 tokens x 128 KiB per token = 8 MiB


def test_a_store_takes_blocks_times_block_bytes_over_the_bandwidth():
    tier = HostTier(16, BLOCK_BYTES, d2h_gbps=32.0, h2d_gbps=16.0)
    done = tier.store([1, 2, 3], now_ms=10.0)
    assert done == pytest.approx(10.0 + 3 * BLOCK_BYTES / 32e9 * 1e3)  # 0.786 ms
    tier.advance(10.5)
    assert tier.overlap([1, 2, 3], 0) == 0 and set(tier.storing) == {1, 2, 3}
    tier.advance(done)
    assert tier.overlap([1, 2, 3], 0) == 3


def test_transfers_in_one_direction_queue_behind_each_other():
    tier = HostTier(16, BLOCK_BYTES, d2h_gbps=32.0, h2d_gbps=32.0)
    one = BLOCK_BYTES / 32e9 * 1e3
    first = tier.store([1, 2], now_ms=0.0)
    second = tier.store([3], now_ms=0.1)
    assert (first, second) == pytest.approx((2 * one, 3 * one))
    assert tier.store([1, 3], now_ms=0.2) == ALREADY_PRESENT  # there or on the way


def test_a_load_comes_back_at_the_h2d_bandwidth_after_the_previous_load():
    tier = HostTier(16, BLOCK_BYTES, d2h_gbps=0.0, h2d_gbps=16.0)
    tier.store([1, 2, 3, 4], now_ms=0.0)  # 0 bandwidth: instantaneous
    one = BLOCK_BYTES / 16e9 * 1e3
    assert tier.load([1, 2], now_ms=5.0) == pytest.approx(5.0 + 2 * one)
    assert tier.load([3], now_ms=5.0) == pytest.approx(5.0 + 3 * one)


def test_the_router_credit_counts_the_resident_run_after_the_device_prefix():
    tier = HostTier(16, BLOCK_BYTES, 0.0, 0.0)
    tier.store([10, 11, 12, 14], now_ms=0.0)
    assert tier.overlap([10, 11, 12, 13, 14], 1) == 2  # 11, 12; 13 missing
    assert tier.overlap([10, 11, 12, 13], 0) == 3


def test_eviction_takes_the_least_recently_used_unpinned_blocks():
    tier = HostTier(4, BLOCK_BYTES, 0.0, 0.0)
    tier.store([1, 2], now_ms=0.0)
    tier.store([3, 4], now_ms=0.0)
    tier.touch([1, 2])  # 1, 2 most recently used (1 the most): 3, 4 go first
    tier.load([3], now_ms=0.0)  # 3 is being read: not evictable
    tier.store([5, 6], now_ms=0.0)
    assert list(tier.resident) == [3, 1, 5, 6]  # two victims: 4 (oldest unpinned), then 2


def test_a_store_does_not_evict_the_blocks_it_offers_and_without_room_copies_nothing():
    tier = HostTier(3, BLOCK_BYTES, 0.0, 0.0)
    tier.store([1, 2], now_ms=0.0)
    assert tier.store([1, 2, 3, 4], now_ms=0.0) is None  # 1 and 2 are offered: no victim
    tier.load([1, 2], now_ms=0.0)
    assert tier.store([3, 4], now_ms=0.0) is None  # both being read: no victim
    tier.loaded([1, 2])  # read back: one cohort of the most recently used, 1 ranked first
    assert tier.store([3, 4], now_ms=0.0) == 0.0
    assert list(tier.resident) == [2, 3, 4]


def test_a_landed_store_is_one_cohort_whose_eviction_order_ignores_prompt_position():
    # The reference (1.6.1, probe in the issue-16 s3c report): host 24 blocks, A's 16 prompt
    # blocks then B's 16 evict 8 of A's, and A's prompt then still finds 4 of them in a row:
    # its cohort is not cut at one end. Here keys 1..4 rank 3, 4, 1, 2 inside their cohort.
    assert sorted([1, 2, 3, 4], key=cohort_rank) == [3, 4, 1, 2]
    tier = HostTier(6, BLOCK_BYTES, 0.0, 0.0)
    tier.store([1, 2, 3, 4], now_ms=0.0)
    tier.store([9, 10], now_ms=0.0)  # a later cohort: all of the first one goes before it
    tier.store([11, 12], now_ms=0.0)
    assert set(tier.resident) == {1, 2, 9, 10, 11, 12}
    assert tier.overlap([1, 2, 3, 4], 0) == 2  # 3 and 4 went first: 1, 2 still a run


def test_blocks_read_back_as_one_cohort_are_evicted_in_cohort_order():
    assert sorted([5, 6, 7, 8], key=cohort_rank) == [5, 7, 8, 6]
    tier = HostTier(5, BLOCK_BYTES, 0.0, 0.0)
    tier.store([5, 6, 7, 8], now_ms=0.0)
    tier.load([5, 6, 7, 8], now_ms=0.0)
    tier.loaded([5, 6, 7, 8])
    tier.store([20, 21], now_ms=0.0)  # one free block: one victim, 5 (ranked first)
    assert set(tier.resident) == {6, 7, 8, 20, 21}
    assert tier.overlap([5, 6, 7, 8], 0) == 0


def test_blocks_read_back_become_the_most_recently_used_when_their_load_lands():
    tier = HostTier(4, BLOCK_BYTES, 0.0, 0.0)
    tier.store([1, 2], now_ms=0.0)
    tier.store([3, 4], now_ms=0.0)  # least recently used first: 1, 2, 3, 4
    tier.load([1, 2], now_ms=0.0)
    tier.load([2], now_ms=0.0)  # 2 is read twice
    tier.loaded([1, 2])
    assert list(tier.resident) == [2, 3, 4, 1]  # 2 is still being read: it stays put
    tier.loaded([2])
    assert list(tier.resident) == [3, 4, 1, 2]


def test_transfers_landing_at_one_time_are_one_cohort():
    # An instantaneous lane submitting two stores at a pass end: both land then, together.
    tier = HostTier(8, BLOCK_BYTES, 0.0, 0.0)
    tier.store([1, 2], now_ms=0.0, submit_ms=5.0)
    tier.store([3, 4], now_ms=0.0, submit_ms=5.0)
    tier.advance(5.0)
    assert list(tier.resident) == [3, 4, 1, 2]  # sorted by cohort_rank as one cohort


def test_a_block_offered_twice_in_one_store_lands_once():
    tier = HostTier(8, BLOCK_BYTES, 0.0, 0.0)
    tier.store([5, 6, 5], now_ms=0.0, submit_ms=5.0)
    tier.advance(5.0)
    assert sorted(tier.resident) == [5, 6] and not tier.storing


def test_a_block_given_twice_in_a_touch_ends_where_its_first_place_puts_it():
    tier = HostTier(8, BLOCK_BYTES, d2h_gbps=0.0, h2d_gbps=0.0)
    for key in (1, 2, 3):
        tier.store([key], now_ms=0.0)  # instantaneous: each lands at once, oldest first
    tier.touch([2, 3, 2])  # moves 2, then 3, then 2 again: 2 is the most recent
    assert list(tier.resident) == [1, 3, 2]
    tier.load([3], now_ms=0.0)
    tier.touch([3, 1, 3])  # 3 is being loaded: it stays put
    assert list(tier.resident) == [3, 2, 1]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), unique=True, max_size=40))
def test_cohort_order_is_the_order_of_cohort_rank(keys):
    assert in_cohort_order(keys) == sorted(keys, key=cohort_rank)


class _PlainTier:
    """The host tier's rules block by block (the model ``HostTier`` must match): an LRU of
    resident blocks, stores in flight with their landing times, pins of blocks being loaded."""

    def __init__(self, capacity, ms_per_block):
        self.capacity, self.ms_per_block, self.tail = capacity, ms_per_block, 0.0
        self.resident, self.storing, self.pins = [], {}, {}

    def advance(self, now):
        landed = [k for k, t in self.storing.items() if t <= now]
        for t in sorted({self.storing[k] for k in landed}):
            self.resident += sorted((k for k in landed if self.storing[k] == t), key=cohort_rank)
        for k in landed:
            del self.storing[k]

    def store(self, keys, now, submit):
        self.advance(now)
        missing = [k for k in keys if k not in self.resident and k not in self.storing]
        if not missing:
            return ALREADY_PRESENT
        need = len(missing) - (self.capacity - len(self.resident) - len(self.storing))
        if need > 0:
            victims = [k for k in self.resident if k not in self.pins and k not in keys][:need]
            if len(victims) < need:
                return None
            self.resident = [k for k in self.resident if k not in victims]
        self.tail = max(self.tail, submit) + len(missing) * self.ms_per_block
        self.storing.update(dict.fromkeys(missing, self.tail))
        self.advance(now)
        return self.tail

    def touch(self, keys):
        for k in reversed(keys):
            if k in self.resident and k not in self.pins:
                self.resident.remove(k)
                self.resident.append(k)

    def load(self, keys):
        for k in keys:
            self.pins[k] = self.pins.get(k, 0) + 1

    def loaded(self, keys):
        free = []
        for k in keys:
            self.pins[k] -= 1
            if not self.pins[k]:
                del self.pins[k]
                free.append(k)
        for k in sorted(free, key=cohort_rank):
            self.resident.remove(k)
            self.resident.append(k)


# Keys may repeat within one call: a prompt whose trace repeats a block hash has repeated keys.
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["store", "touch", "load", "advance"]),
        st.lists(st.integers(0, 30), max_size=12),
        st.floats(0.0, 3.0),
        st.floats(0.0, 2.0),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_OPS, st.integers(1, 24), st.sampled_from([0.0, BLOCK_BYTES / 64e9 * 1e3 * 100]))
def test_the_tier_follows_the_plain_block_by_block_rules(ops, capacity, ms_per_block):
    gbps = BLOCK_BYTES / (ms_per_block * 1e6) if ms_per_block else 0.0
    tier = HostTier(capacity, BLOCK_BYTES, gbps, 0.0)
    model = _PlainTier(capacity, tier.d2h.ms_per_block)
    now, loads = 0.0, []
    for op, keys, step, delay in ops:
        now += step
        if op == "store":
            got = tier.store(keys, now, now + delay)
            want = model.store(keys, now, now + delay)
            assert got == want
        elif op == "touch":
            tier.touch(keys)
            model.touch(keys)
        elif op == "load":
            # A load reads resident blocks; an earlier load lands first when there is one.
            tier.advance(now)
            model.advance(now)
            if loads and delay > 1.0:
                done = loads.pop(0)
                tier.loaded(done)
                model.loaded(done)
            hit = [k for k in keys if k in model.resident]
            tier.load(hit, now)
            model.load(hit)
            loads.append(hit)
        else:
            tier.advance(now)
            model.advance(now)
        assert list(tier.resident) == model.resident
        assert tier.storing == model.storing
        assert tier.pins == model.pins
        assert [tier.overlap(keys, s) for s in range(3)] == [
            len(list(_leading(keys[s:], model.resident))) for s in range(3)
        ]


def _leading(keys, present):
    for k in keys:
        if k not in present:
            return
        yield k


class _Req:
    """The request fields the host offload reads and writes."""

    def __init__(self, keys, computed, isl, n_blocks=0):
        self.prompt_keys, self.computed, self.isl = keys, computed, isl
        self.stored_blocks, self.store_done_ms, self.host_loaded = 0, 0.0, False
        self.prebuilt = False
        self.generated, self.n_blocks = 0, n_blocks


class _Rank:
    """The rank fields a host lookup reads: 64-token blocks, a KV pool, the running batch."""

    block_size = 64

    def __init__(self, num_blocks, running=()):
        self.cache = KvCache(num_blocks, 64)
        self.running = list(running)
        self.unqueued = []

    def unqueue(self, req):
        self.unqueued.append(req)

    def requeue(self, req):
        self.unqueued.remove(req)


def _fresh(keys):
    """What admitting ``keys`` would reuse with nothing cached on the device."""
    return PrefixMatch(keys, 0, 0, len(keys), 0)


def _offload(capacity=16, d2h_gbps=0.0):
    return HostOffload(capacity, BLOCK_BYTES, d2h_gbps, 0.0, wake=lambda at_ms: None)


def test_the_store_cursor_moves_past_what_was_offered_and_stays_without_room():
    offload = _offload(capacity=3)
    a = _Req([1, 2, 3, 4, 5, 6], computed=200, isl=384)  # 3 full blocks of 64 computed
    offload.store(a, 64, end_ms=1.0)
    assert a.stored_blocks == 3 and set(offload.tier.resident) == {1, 2, 3}
    b = _Req([1, 2, 7, 8], computed=256, isl=256)
    offload.store(b, 64, end_ms=2.0)  # 7, 8 missing; 1 and 2 offered: only 3 evictable
    assert b.stored_blocks == 0 and set(offload.tier.resident) == {1, 2, 3}
    c = _Req([1, 2], computed=128, isl=300)
    offload.store(c, 64, end_ms=3.0)  # the host has both: the cursor just moves
    assert c.stored_blocks == 2 and c.store_done_ms == 0.0


def test_a_store_is_prepared_as_its_pass_is_scheduled_so_its_touch_misses_later_stores():
    # vLLM's connector prepares a pass's store when it schedules the pass. A chunked prompt's
    # second chunk is scheduled as the first chunk's store starts: that store is not yet
    # resident, so the second store's touch leaves it alone and it lands as one cohort (1
    # ranked first), older than the second chunk's. The reference binary, on a 320-block
    # prompt in 3 chunks, keeps exactly the run this order predicts (s3c report).
    assert sorted([1, 2], key=cohort_rank) == [1, 2]
    offload = _offload(capacity=4, d2h_gbps=32.0)  # 0.262144 ms a block
    a = _Req([1, 2, 3, 4], computed=128, isl=256)
    offload.store(a, 64, end_ms=10.0, scheduled_ms=0.0)  # [1, 2] lands at 10.524
    a.computed = 256
    offload.store(a, 64, end_ms=20.0, scheduled_ms=10.0)  # [3, 4] lands at 20.524
    other = _Req([9], computed=64, isl=64)
    offload.store(other, 64, end_ms=30.0, scheduled_ms=30.0)  # evicts the oldest: 1
    assert set(offload.tier.resident) == {2, 3, 4}
    assert offload.tier.overlap(a.prompt_keys, 0) == 0


def test_after_a_load_the_store_cursor_restarts_past_the_reused_prefix():
    offload = _offload()
    req = _Req([1, 2, 3, 4], computed=0, isl=256)
    req.host_loaded = True
    offload.admitted(req, KvCache(8, 64), cached_tokens=192, block_size=64)
    assert (req.stored_blocks, req.host_loaded) == (3, False)
    other = _Req([5, 6], computed=0, isl=128)
    offload.admitted(
        other, KvCache(8, 64), cached_tokens=128, block_size=64
    )  # no load: the cursor stays
    assert other.stored_blocks == 0


def test_a_preempted_request_delays_passes_until_its_latest_store_lands():
    offload = _offload(d2h_gbps=1.0)
    req = _Req([1, 2], computed=128, isl=128)
    offload.store(req, 64, end_ms=10.0)
    assert req.store_done_ms == pytest.approx(10.0 + 2 * BLOCK_BYTES / 1e9 * 1e3)
    offload.preempted(req)
    assert offload.not_before_ms == req.store_done_ms


def test_a_load_into_blocks_a_store_still_reads_starts_when_that_store_lands():
    offload = HostOffload(16, BLOCK_BYTES, 1.0, 8.0, wake=lambda at_ms: None)
    tier = offload.tier
    store_ms = 2 * BLOCK_BYTES / 1e9 * 1e3  # 16.777216 ms for two blocks at 1 GB/s
    tier.store([1, 2], now_ms=0.0)  # resident from 16.777216
    rank = _Rank(4)
    rank.cache.allocate(2)
    sources: list[int] = []
    rank.cache.register([5, 6], sources)
    tier.store([5, 6], now_ms=20.0)  # copied out until 20 + 16.777216
    rank.cache.release(sources, 0, [])
    rank.cache.allocate(2)  # the other two device blocks, held by running work
    rank.cache.store_sources = tier.storing
    d = _Req([1, 2], computed=0, isl=128)
    assert offload.lookup(rank, d, _fresh([1, 2]), now_ms=20.0) == HELD
    # Its two destination blocks are 5 and 6 evicted: the H2D copy (2.097152 ms at 8 GB/s)
    # starts when their store lands.
    ((ready_ms, held, _, _),) = offload.held
    assert held is d and ready_ms == pytest.approx(20.0 + store_ms + 2 * BLOCK_BYTES / 8e6)


def test_a_host_hit_needs_room_beside_running_prefills_and_loads_in_flight():
    offload = _offload()
    offload.tier.store([1, 2, 5, 6], now_ms=0.0)
    # A running prefill at 128 of 512 tokens holds 2 blocks and will need 6 more.
    prefill = _Req([40, 41, 42, 43, 44, 45, 46, 47], computed=128, isl=512, n_blocks=2)
    rank = _Rank(20, running=[prefill])
    rank.cache.allocate(2)
    first = _Req([1, 2, 3, 4], computed=0, isl=256)
    # 4 blocks needed <= 18 available - 6 promised: it loads 1 and 2 and will need 2 more.
    assert offload.lookup(rank, first, _fresh([1, 2, 3, 4]), now_ms=0.0) == HELD
    second_keys = [5, 6, 7, 8, 9, 10, 11, 12, 13]
    second = _Req(second_keys, computed=0, isl=576)
    # 9 blocks needed > 16 available - 6 - 2 promised: admission stops.
    assert offload.lookup(rank, second, _fresh(second_keys), now_ms=0.0) == BLOCKED
    offload.admitted(first, rank.cache, cached_tokens=128, block_size=64)  # its tail is its own now
    assert offload.lookup(rank, second, _fresh(second_keys), now_ms=0.0) == HELD


def test_blocks_read_back_are_kept_for_their_request_until_it_is_admitted():
    offload = _offload()
    offload.tier.store([1, 2], now_ms=0.0)
    rank = _Rank(4)
    d = _Req([1, 2], computed=0, isl=192)
    assert offload.lookup(rank, d, _fresh([1, 2]), now_ms=0.0) == HELD
    offload.settle(rank, now_ms=0.0)  # instantaneous: landed
    cache = rank.cache
    assert not rank.unqueued and d.host_loaded
    assert cache.match([1, 2]) == (2, 2) and cache.available() == 2  # cached, not evictable
    cache.acquire([1, 2])  # d's admission takes them
    offload.admitted(d, cache, cached_tokens=128, block_size=64)
    assert cache.refcount(1) == 1 and cache.available() == 2
    cache.release([1, 2], 0, [])  # d done: cached, evictable
    assert cache.match([1, 2]) == (2, 0) and cache.available() == 4


# ---------------------------------------------------------------- on an engine rank

from simkit import prefill_ms, req, run  # noqa: E402

A, B, C = [1, 2, 3, 4], [10, 11, 12, 13], [20, 21, 22, 23]
# 64 device blocks: each 2048-token prompt takes 32, so the third evicts the first's.
ROWS = [(0.0, 2048, 2, A), (100.0, 2048, 2, B), (200.0, 2048, 2, C), (300.0, 2048, 2, A)]


def _engine(**offload):
    return {
        "num_gpu_blocks": 64,
        "kv_cache_bytes_per_token": 131072,
        "native_host_offload": {"num_host_blocks": 256, **offload},
    }


def test_an_evicted_prefix_comes_back_from_the_host_at_the_h2d_bandwidth():
    # A's 32 prompt blocks were copied out when computed; D waits for them to be copied back
    # (32 x 8 MiB at 8 GB/s = 33.554432 ms), then recomputes only its last block.
    r = run(ROWS, engine=_engine(h2d_bandwidth_gbps=8.0))
    load_ms = 32 * 64 * 131072 / 8e9 * 1e3
    d = req(r, 3)
    assert d.first_admit_ms == pytest.approx(300.0 + load_ms, abs=1e-6)
    assert d.ttft_ms == pytest.approx(load_ms + prefill_ms(64), abs=1e-6)
    assert d.reused_input_tokens == 31 * 64


def test_a_request_is_looked_up_when_the_scheduler_reaches_it_not_only_at_the_head():
    # X and D arrive together; X (no prefix) is admitted first in the pass, then D is
    # considered, found in the host and held for its load while X runs.
    rows = ROWS[:3] + [(300.0, 64, 2, [30]), (300.0, 2048, 2, A)]
    r = run(rows, engine=_engine(h2d_bandwidth_gbps=8.0))
    load_ms = 32 * 64 * 131072 / 8e9 * 1e3
    x, d = req(r, 3), req(r, 4)
    assert (x.first_admit_ms, x.reused_input_tokens) == (300.0, 0)
    assert d.first_admit_ms == pytest.approx(300.0 + load_ms, abs=1e-6)
    assert d.reused_input_tokens == 31 * 64
    assert d.ttft_ms == pytest.approx(load_ms + prefill_ms(64), abs=1e-6)


def test_without_the_host_tier_the_evicted_prefix_is_recomputed():
    r = run(ROWS, engine={"num_gpu_blocks": 64})
    assert req(r, 3).reused_input_tokens == 0
    assert req(r, 3).ttft_ms == pytest.approx(prefill_ms(2048), abs=1e-6)


def test_host_offload_needs_the_host_block_size():
    from plansim.errors import ConfigError
    from plansim.sim.deployment import build_deployment

    with pytest.raises(ConfigError, match="kv_cache_bytes_per_token"):
        build_deployment({"engine": {"native_host_offload": {"num_host_blocks": 8}}})
    with pytest.raises(ConfigError, match="supported only for backend vllm"):
        build_deployment(
            {
                "engine": {
                    "backend": "sglang",
                    "kv_cache_bytes_per_token": 4096,
                    "native_host_offload": {"num_host_blocks": 8},
                }
            }
        )
    old = build_deployment({"engine": {"num_host_blocks": 8, "kv_bytes_per_token": 4096}})
    assert old.engine.kv_cache_bytes_per_token == 4096  # the older flags' sizing


def test_a_pass_reusing_blocks_a_store_still_reads_computes_when_the_store_lands():
    # A's 32 prompt blocks are copied out at 1 GB/s from the end of its prefill (32 x 8 MiB:
    # 268.435456 ms). B (48 blocks) arrives when A is done: 32 blocks are free, 16 are A's,
    # evicted while still being read, so B's prefill starts only when A's store lands.
    rows = [(0.0, 2048, 2, A), (100.0, 3072, 2, [30, 31, 32, 33, 34, 35])]
    r = run(rows, engine=_engine(d2h_bandwidth_gbps=1.0))
    a, b = req(r, 0), req(r, 1)
    assert a.last_token_ms < 100.0
    landed = prefill_ms(2048) + 32 * 64 * 131072 / 1e9 * 1e3
    assert b.first_admit_ms == 100.0
    assert b.ttft_ms == pytest.approx(landed + prefill_ms(3072) - 100.0, abs=1e-6)
    fast = run(rows, engine=_engine(d2h_bandwidth_gbps=0.0))  # copies are instantaneous
    assert req(fast, 1).ttft_ms == pytest.approx(prefill_ms(3072), abs=1e-6)


def test_a_head_waiting_for_blocks_a_load_holds_waits_for_the_load_and_is_not_refused():
    # D finds A's prompt in the host and loads 32 blocks (33.554432 ms at 8 GB/s) into 32 of
    # the 64 device blocks; E, behind it, needs 48 and nothing runs meanwhile: E waits (it
    # is not refused as unschedulable), D runs once its load lands, E once D is done.
    rows = ROWS[:3] + [(300.0, 2048, 2, A), (300.0, 3072, 2, [50, 51, 52, 53, 54, 55])]
    r = run(rows, engine=_engine(h2d_bandwidth_gbps=8.0))
    d, e = req(r, 3), req(r, 4)
    assert d.first_admit_ms == pytest.approx(300.0 + 32 * 64 * 131072 / 8e9 * 1e3, abs=1e-6)
    assert (d.status, e.status) == ("completed", "completed")
    assert e.first_admit_ms == pytest.approx(d.last_token_ms, abs=1e-9)
