"""The KV router: its cost (prefix overlap and load, per pool role), softmax selection,
parameter patches."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simkit import prefill_ms, req, run, workload

from plansim.roles import Role
from plansim.sim.deployment import build_deployment
from plansim.sim.host import ReplayHost
from plansim.sim.routing import RankLoad, Route
from plansim.sim.routing.base import recurring_blocks
from plansim.sim.routing.kv_router import KvRouter, _shared_runs, softmax_probabilities


def test_kv_router_sends_a_request_to_the_worker_holding_its_prefix():
    rows = [(0.0, 2048, 2, [1, 2, 3, 4]), (1000.0, 2048, 2, [1, 2, 3, 5])]
    for seed in range(4):  # whichever worker the first tie picks, the second follows it
        r = run(rows, num_workers=4, router={"mode": "kv_router"}, seed=seed)
        assert req(r, 1).decode_worker == req(r, 0).decode_worker
        assert req(r, 1).reused_input_tokens == 1536
        assert req(r, 1).ttft_ms == pytest.approx(prefill_ms(512), abs=1e-6)


def test_kv_router_sees_a_prefix_only_once_the_pass_computing_it_ends():
    # B arrives during A's prefill pass (85.756 ms) sharing A's 4096-token prompt. The router
    # does not see A's blocks yet: A's rank costs 2 x 128 prefill plus 64 + 128 decode blocks,
    # the idle one 128 + 128, so B goes there and recomputes. Had the router seen them
    # (credit 2 per block), A's rank would cost 192 - 128 + 64 + 64 and win.
    a_ids, b_ids = [1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    rows = [(0.0, 4096, 50, a_ids), (40.0, 8192, 2, b_ids)]
    r = run(rows, num_workers=2, router={"mode": "kv_router", "overlap_score_credit": 2.0})
    a, b = req(r, 0), req(r, 1)
    assert b.decode_worker != a.decode_worker and b.reused_input_tokens == 0
    assert b.ttft_ms == pytest.approx(prefill_ms(8192), abs=1e-6)


def test_kv_router_avoids_a_worker_with_queued_prefill_work():
    # Both arrive while nothing is cached: the second sees the first's queued prompt tokens.
    rows = [(0.0, 4000, 2, [1, 2, 3, 4, 5, 6, 7, 8]), (1.0, 1000, 2, [9, 10])]
    r = run(rows, num_workers=2, router={"mode": "kv_router"}, seed=0)
    assert req(r, 0).decode_worker != req(r, 1).decode_worker


def test_kv_router_cost_is_weighted_prefill_blocks_plus_decode_blocks():
    router = KvRouter({"overlap_score_weight": 1.0}, 64, np.random.default_rng(0), pool=Role.AGG)
    busy = RankLoad()
    busy.prefill_tokens, busy.n_blocks = 640, 3  # 10 queued prefill blocks, 3 active blocks
    idle = RankLoad()
    keys = list(range(8))  # a 512-token request: 8 blocks
    # busy rank with 6 cached blocks: (640 + 512 - 384)/64 + 3 + 8 = 23; idle: 8 + 8 = 16
    assert router.choose(512, keys, [_CachedView(6), _CachedView(0)], [busy, idle]).index == 1
    # Weight 3 on prefill: busy 3*12 + 11 = 47 vs idle 3*8 + 8 = 32; still idle. Weight 0:
    # busy 11 vs idle 8.
    router.set_parameters({"overlap_score_weight": 0.0})
    assert router.choose(512, keys, [_CachedView(6), _CachedView(0)], [busy, idle]).index == 1


class _CachedView:
    """A candidate's prefix view that holds ``cached`` leading blocks of any request, and
    counts how often the router looks at it."""

    def __init__(self, cached: int) -> None:
        self.cached = cached
        self.looks = 0

    def overlap(self, keys):
        self.looks += 1
        return min(self.cached, len(keys))  # the leading blocks of ``keys``: at most all


def test_active_blocks_count_full_blocks_only():
    # 600 tokens at block size 64: 9 full blocks and a partial one the reference does not hash.
    router = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    load = RankLoad()
    router.sent(0, 600, list(range(9)), Route(0, 0), load)
    assert load.n_blocks == 9
    assert load.prefill_tokens == 600
    router.finished(0)
    assert (load.n_blocks, load.prefill_tokens, load.blocks) == (0, 0, {})


def test_prefill_pool_cost_is_the_prefill_term_alone():
    # Rank 0: 128 queued prefill tokens and 40 active blocks; rank 1: 256 queued, none active.
    # Agg cost: (128+512)/64 + 40 + 8 = 58 vs (256+512)/64 + 8 = 20 -> rank 1.
    # Prefill pool: 10 vs 12 -> rank 0 (active blocks do not count there).
    heavy, light = RankLoad(), RankLoad()
    heavy.prefill_tokens, heavy.n_blocks = 128, 40
    light.prefill_tokens = 256
    keys = list(range(8))
    ranks = [_CachedView(0), _CachedView(0)]
    agg = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    prefill = KvRouter({}, 64, np.random.default_rng(0), pool=Role.PREFILL)
    assert agg.choose(512, keys, ranks, [heavy, light]).index == 1
    assert prefill.choose(512, keys, ranks, [heavy, light]).index == 0


def test_decode_pool_cost_is_active_full_blocks_without_overlap():
    # Rank 0 holds the whole prefix in cache but has 5 active blocks; rank 1 is empty.
    router = KvRouter({}, 64, np.random.default_rng(0), pool=Role.DECODE)
    busy = RankLoad()
    router.sent(7, 330, list(range(5)), Route(0, 0), busy)  # 5 full blocks of 330 tokens
    assert busy.n_blocks == 5 and busy.prefill_tokens == 0
    assert (
        router.choose(
            512, list(range(8)), [_CachedView(8), _CachedView(0)], [busy, RankLoad()]
        ).index
        == 1
    )


def test_softmax_probabilities_follow_the_normalised_negated_logits():
    p = softmax_probabilities(np.array([0.0, 1.0]), temperature=1.0)
    assert p[0] == pytest.approx(1 / (1 + math.exp(-1)))
    assert p[1] == pytest.approx(math.exp(-1) / (1 + math.exp(-1)))
    assert softmax_probabilities(np.array([2.0, 2.0, 2.0]), 0.5).tolist() == [1 / 3] * 3


def test_set_parameters_reports_only_changes():
    router = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    assert router.set_parameters({"prefill_load_scale": 1.0}) == {}
    assert router.set_parameters({"router_temperature": 0.5}) == {"router_temperature": 0.5}
    params = router.parameters()
    assert (params["prefill_load_scale"], params["router_temperature"]) == (1.0, 0.5)
    # The deprecated spelling patches its target, and wins over it in one patch.
    assert router.set_parameters({"overlap_score_weight": 3.0, "prefill_load_scale": 2.0}) == {
        "prefill_load_scale": 3.0
    }
    assert "overlap_score_weight" not in router.parameters()


# Rank A: 4 of the request's 8 blocks cached, 128 prompt tokens queued (2 blocks); rank B: idle.
def _a_and_b(a_active_blocks=0):
    a, b = RankLoad(), RankLoad()
    a.prefill_tokens, a.n_blocks = 128, a_active_blocks
    return [_CachedView(4), _CachedView(0)], [a, b]


def _pick(knobs, a_active_blocks=0):
    views, loads = _a_and_b(a_active_blocks)
    router = KvRouter(knobs, 64, np.random.default_rng(0), pool=Role.AGG)
    return "AB"[router.choose(512, list(range(8)), views, loads).index]


def test_overlap_score_credit_is_the_blocks_credited_per_cached_block():
    # credit 1: A (2 + 8 - 4) + 8 = 14 < B 8 + 8 = 16; credit 0.25: A (10 - 1) + 8 = 17 > 16.
    assert _pick({}) == "A"
    assert _pick({"overlap_score_credit": 0.25}) == "B"


def test_credit_decay_shrinks_the_credit_of_a_rank_with_more_queued_prefill():
    # A's excess over the least loaded rank: 2 queued blocks / 8 request blocks = 0.25.
    # Decay 8: credit 4 / (1 + 8 x 0.25) = 4/3 -> A 10 - 4/3 + 8 = 16.67 > B 16.
    # Decay 2: credit 4 / 1.5 = 2.67 -> A 15.33 < 16.
    assert _pick({"overlap_score_credit_decay": 8.0}) == "B"
    assert _pick({"overlap_score_credit_decay": 2.0}) == "A"


def test_prefill_load_scale_weighs_the_prefill_term_against_active_blocks():
    # A also holds 10 active blocks. Scale 1: A 6 + 18 = 24 > B 8 + 8 = 16.
    # Scale 6: A 36 + 18 = 54 < B 48 + 8 = 56.
    assert _pick({}, a_active_blocks=10) == "B"
    assert _pick({"prefill_load_scale": 6.0}, a_active_blocks=10) == "A"


def test_overlap_score_weight_is_the_deprecated_spelling_of_prefill_load_scale():
    assert (
        _pick({"overlap_score_weight": 6.0, "prefill_load_scale": 1.0}, a_active_blocks=10) == "A"
    )
    # Weight 0 drops the prefill term and the cache credit: A 18 > B 8.
    assert _pick({"overlap_score_weight": 0.0}, a_active_blocks=10) == "B"


def test_decode_active_request_weight_costs_each_active_request():
    views = [_CachedView(0), _CachedView(0)]
    a, b = RankLoad(), RankLoad()
    a.n_blocks, a.requests = 2, 1
    b.requests = 3
    keys = list(range(8))
    # Weight 0: A 8 + 10 = 18 > B 8 + 8 = 16. Weight 2: A 18 + 2 = 20 < B 16 + 6 = 22.
    plain = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    weighted = KvRouter(
        {"decode_active_request_weight": 2.0}, 64, np.random.default_rng(0), pool=Role.AGG
    )
    assert plain.choose(512, keys, views, [a, b]).index == 1
    assert weighted.choose(512, keys, views, [a, b]).index == 0


class _HostView(_CachedView):
    def __init__(self, cached: int, on_host: int) -> None:
        super().__init__(cached)
        self.on_host = on_host

    def host_overlap(self, keys, device_blocks):
        return min(self.on_host, len(keys) - device_blocks)


def test_host_cache_hit_weight_credits_blocks_in_the_host_tier():
    # A: 4 blocks on the host, none on the device; B: 2 on the device.
    # Weight 0.75: A 8 - 3 + 8 = 13 < B 6 + 8 = 14; weight 0.25: A 15 > 14.
    views = [_HostView(0, 4), _HostView(2, 0)]
    keys = list(range(8))
    for weight, pick in ((0.75, 0), (0.25, 1)):
        router = KvRouter(
            {"host_cache_hit_weight": weight}, 64, np.random.default_rng(0), pool=Role.AGG
        )
        route = router.choose(512, keys, views, [RankLoad(), RankLoad()])
        assert route.index == pick
        assert route.overlap_blocks == (0, 2)[pick]  # the device overlap: what is reused


def _queued_order(policy):
    # One worker, queue threshold 0: each request waits while any prompt is queued there.
    rows = [
        (0.0, 2048, 2, [1, 2, 3, 4]),
        (1.0, 1024, 2, [10, 11]),
        (2.0, 512, 2, [20]),
        (3.0, 1536, 2, [30, 31, 32]),
    ]
    r = run(
        rows,
        num_workers=1,
        router={"mode": "kv_router", "router_queue_threshold": 0.0, "router_queue_policy": policy},
    )
    first_token = r.requests["arrival_ms"] + r.requests["ttft_ms"]
    return [int(i) for i in first_token.sort_values(kind="stable").index]


def test_the_queue_releases_waiting_requests_in_policy_order_as_prefill_frees():
    assert _queued_order("fcfs") == [0, 1, 2, 3]
    assert _queued_order("lcfs") == [0, 3, 2, 1]
    assert _queued_order("wspt") == [0, 2, 1, 3]


def test_without_a_queue_threshold_requests_are_routed_on_arrival():
    rows = [(0.0, 2048, 2, [1, 2, 3, 4]), (1.0, 1024, 2, [10, 11]), (2.0, 512, 2, [20])]
    r = run(rows, num_workers=1, router={"mode": "kv_router"})
    first_token = (r.requests["arrival_ms"] + r.requests["ttft_ms"]).tolist()
    # The two later prompts wait at the engine and are prefilled together in its next pass.
    assert first_token[1] == first_token[2] > first_token[0]


def test_a_patch_that_turns_the_queue_off_releases_the_waiting_requests_at_once():
    rows = [(0.0, 2048, 2, [1, 2, 3, 4]), (1.0, 1024, 2, [10, 11]), (2.0, 512, 2, [20])]
    dep = build_deployment(
        {"num_workers": 1, "router": {"mode": "kv_router", "router_queue_threshold": 0.0}}
    )
    host = ReplayHost(workload(rows), dep)

    def patch():
        assert host.patch_router(Role.AGG, {"router_queue_threshold": None}) == {
            "router_queue_threshold": None
        }

    host.clock.call_at(10.0, patch)
    host.run()
    r = host.result(wall_ms=0.0)
    first_token = (r.requests["arrival_ms"] + r.requests["ttft_ms"]).tolist()
    # Released at 10 ms, both reach the engine during its first pass and share the next one.
    assert first_token[1] == first_token[2] > first_token[0]


def test_a_rank_queues_the_prompt_less_its_device_and_weighted_host_cached_tokens():
    # 640 tokens (10 blocks): 2 blocks on the device, the next 4 in the host tier. Cached:
    # (2 + 0.75 x 4) x 64 = 320 tokens, so 320 are queued as that rank's prefill (reference
    # cache_hit_estimates: the weighted overlap, rounded to tokens).
    router = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    load = RankLoad()
    route = router.choose(
        640, list(range(10)), [_HostView(2, 4), _HostView(0, 0)], [load, RankLoad()]
    )
    assert (route.index, route.overlap_blocks, route.cached_tokens) == (0, 2, 320)
    router.sent(1, 640, list(range(10)), route, load)
    assert load.prefill_tokens == 320


# Prompts as prefix-chain keys: a prompt is a path from the root of a small tree of blocks
# (block i's key is the tuple of its path), so equal keys mean equal prefixes.
_prompts = st.lists(st.integers(0, 2), min_size=1, max_size=8).map(
    lambda path: [hash(tuple(path[: i + 1])) for i in range(len(path))]
)


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(st.tuples(st.booleans(), st.integers(0, 7), _prompts), min_size=1, max_size=40)
)
def test_a_ranks_counted_blocks_are_the_distinct_blocks_of_its_unfinished_requests(events):
    # Requests finish in any order (a prefix's first sender may finish before the requests
    # extending it): the counted blocks are the union of the unfinished prompts, by hand.
    for recurring in (None, _recurring(events)):
        _check_counted_blocks(events, recurring)


def _recurring(events):
    """Per request (event index), its leading blocks up to the last one another event's
    prompt also has (``Policy.recurring``, worked out from the prompts themselves)."""
    prompts = [event[-1] for event in events]
    out = []
    for rid, keys in enumerate(prompts):
        others = {k for j, prompt in enumerate(prompts) if j != rid for k in prompt}
        out.append(max((i + 1 for i, k in enumerate(keys) if k in others), default=0))
    return out


def _check_counted_blocks(events, recurring):
    router = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    router.recurring = recurring
    load = RankLoad()
    active: dict[int, list[int]] = {}
    for rid, (finish, which, keys) in enumerate(events):
        if finish and active:
            gone = sorted(active)[which % len(active)]
            router.finished(gone)
            del active[gone]
        else:
            router.sent(rid, 64 * len(keys), keys, Route(0, 0), load)
            active[rid] = keys
        union = {k for prompt in active.values() for k in prompt}
        # Indexed: all of them, or (given what recurs) the ones another prompt may share.
        indexed = (
            union
            if recurring is None
            else {k for r, prompt in active.items() for k in prompt[: recurring[r]]}
        )
        assert set(load.blocks) == indexed and load.n_blocks == len(union)
        assert load.requests == len(active)


def test_a_request_released_at_a_pass_end_sees_the_requests_that_pass_finished_gone():
    # Queue threshold 0.5 x 8192: a rank is busy above 4096 queued prefill tokens. A (16384
    # tokens, 256 blocks, 1 output token) takes two 8192-token passes, ending at
    # 2 x prefill_ms(8192) = 338.27 ms, where it also finishes. B (4160 tokens, 65 blocks)
    # arrives at 300 and goes to the idle rank (65 + 65 against A's 321 + 321), busy until
    # 300 + prefill_ms(4160) = 386.95. C (1 block) arrives at 310 with both busy and waits.
    # A's pass end releases C with A's blocks gone: A's rank costs 1 + 0 + 1 = 2, B's
    # (4160 + 64) / 64 + 65 + 1 = 132, so C goes to A's rank and is prefilled at once. Had
    # the router still counted A's 256 blocks (1 + 256 + 1 = 258), C would go to B's rank.
    rows = [
        (0.0, 16384, 1, list(range(32))),
        (300.0, 4160, 20, list(range(100, 109))),
        (310.0, 64, 2, [200]),
    ]
    router = {"mode": "kv_router", "router_queue_threshold": 0.5}
    for seed in range(2):  # whichever rank A's tie picks
        r = run(rows, num_workers=2, router=router, seed=seed)
        a, b, c = req(r, 0), req(r, 1), req(r, 2)
        assert a.ttft_ms == pytest.approx(2 * prefill_ms(8192), abs=1e-6)
        assert b.decode_worker != a.decode_worker
        assert c.decode_worker == a.decode_worker
        assert c.ttft_ms == pytest.approx(2 * prefill_ms(8192) + prefill_ms(64) - 310.0, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.tuples(st.integers(0, 3), st.booleans(), st.integers(0, 7), _prompts),
        min_size=1,
        max_size=40,
    ),
    probes=st.lists(_prompts, min_size=1, max_size=4),
)
def test_a_prompts_shared_blocks_on_a_rank_are_its_longest_prefix_held_there(events, probes):
    # Four ranks; a request is sent to one of them or one there finishes (any of them). A
    # prompt's shared blocks on a rank (the decode term's discount) are its longest common
    # prefix with an unfinished request there, found per rank by hand; also when the router
    # indexes only the blocks that recur (the probes are requests too).
    _check_shared_runs(events, probes, None)
    _check_shared_runs(events, probes, _recurring(events + [(0, False, 0, p) for p in probes]))


def _check_shared_runs(events, probes, recurring):
    router = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    router.recurring = recurring
    loads = [RankLoad() for _ in range(4)]
    active: list[dict[int, list[int]]] = [{} for _ in loads]
    for rid, (rank, finish, which, keys) in enumerate(events):
        if finish and active[rank]:
            gone = sorted(active[rank])[which % len(active[rank])]
            router.finished(gone)
            del active[rank][gone]
        else:
            router.sent(rid, 64 * len(keys), keys, Route(rank, 0), loads[rank])
            active[rank][rid] = keys
    for keys in probes:
        expected = []
        for held in active:
            best = 0
            for prompt in held.values():
                n = 0
                while n < min(len(prompt), len(keys)) and prompt[n] == keys[n]:
                    n += 1
                best = max(best, n)
            expected.append(best)
        assert _shared_runs(keys, loads) == expected


def test_a_requests_recurring_blocks_reach_its_last_trace_block_another_request_has():
    # Trace blocks of 128 tokens, engine blocks of 64. Hashes: request 0 [1, 2, 3], request 1
    # [1, 2, 9] (1, 2 recur: 2 trace blocks = 4 blocks), request 2 [7, 3] (3 recurs: all 4),
    # request 3 [] (none), request 4 [5, 5] (a hash twice in one prompt recurs too).
    ids = np.array([1, 2, 3, 1, 2, 9, 7, 3, 5, 5])
    offsets = np.array([0, 3, 6, 8, 8, 10])
    assert recurring_blocks(ids, offsets, 128, 64) == [6, 4, 4, 0, 4]
    assert recurring_blocks(ids, offsets, 128, 48) == [8, 5, 5, 0, 5]  # 2.67 blocks a hash
    assert recurring_blocks(np.array([], dtype=np.int64), np.array([0, 0]), 128, 64) == [0]
    # Offsets into a longer array: only the requests' own hashes count (4 outside recurs not).
    assert recurring_blocks(np.array([4, 1, 2, 1, 3, 4]), np.array([1, 3, 5]), 128, 64) == [2, 2]
    # Ids far apart (not a compact range) are counted by sorting: the same answers.
    assert recurring_blocks(ids * 10**12, offsets, 128, 64) == [6, 4, 4, 0, 4]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 12), max_size=6), min_size=1, max_size=8),
    st.sampled_from([(1, np.int32), (7, np.int64), (10**12, np.int64), (10**12, np.uint64)]),
)
def test_recurring_blocks_are_those_up_to_the_last_hash_another_occurrence_shares(
    prompts, spread_dtype
):
    # Compact ids (counted) and ids far apart (sorted), in the dtypes a workload holds.
    spread, dtype = spread_dtype
    ids = np.array([h * spread for p in prompts for h in p], dtype=dtype)
    offsets = np.cumsum([0] + [len(p) for p in prompts])
    occurrences = {}
    for h in ids.tolist():
        occurrences[h] = occurrences.get(h, 0) + 1
    expected, lo = [], 0
    for p in prompts:
        mine = ids[lo : lo + len(p)].tolist()
        lo += len(p)
        last = max((i + 1 for i, h in enumerate(mine) if occurrences[h] > 1), default=0)
        expected.append(last * 128 // 64)
    assert recurring_blocks(ids, offsets, 128, 64) == expected


def test_a_decode_pool_is_routed_by_load_alone_so_its_ranks_keep_no_router_view():
    # Disaggregated: the prefill pool's router reads the prefix caches as of each pass end;
    # the decode pool's never does, so its ranks need not keep that view.
    host = ReplayHost(
        workload([(0.0, 128, 2, [1, 2])]),
        build_deployment({"mode": "disagg", "router": {"mode": "kv_router"}}),
    )
    publishes = {
        role: {r.cache.publishes for w in pool.workers for r in w.ranks}
        for role, pool in host.pools.items()
    }
    assert publishes == {Role.PREFILL: {True}, Role.DECODE: {False}}


def test_a_route_says_how_many_leading_prompt_blocks_its_rank_already_counts():
    # Rank 0 counts an unfinished [1, 2, 3]; rank 1 nothing. The prompt [1, 2, 9] shares two
    # blocks with rank 0; sent then counts only block 9 anew there.
    router = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    loads = [RankLoad(), RankLoad()]
    router.sent(0, 192, [1, 2, 3], Route(0, 0), loads[0])
    for target, shared in ((0, 2), (1, 0)):
        loads[1 - target].prefill_tokens = 6400  # the other rank has 100 blocks queued
        route = router.choose(192, [1, 2, 9], [_CachedView(0)] * 2, loads)
        assert (route.index, route.shared_blocks) == (target, shared)
        loads[1 - target].prefill_tokens = 0
    router.sent(1, 192, [1, 2, 9], Route(0, 0, 0, 2), loads[0])
    assert loads[0].n_blocks == 4 and set(loads[0].blocks) == {1, 2, 3, 9}


_knobs = st.fixed_dictionaries(
    {
        "overlap_score_credit": st.sampled_from([0.0, 0.5, 1.0, 2.0]),
        "overlap_score_credit_decay": st.sampled_from([0.0, 0.5, 4.0]),
        "prefill_load_scale": st.sampled_from([0.0, 1.0, 3.0]),
        "decode_active_request_weight": st.sampled_from([0.0, 1.0, 8.0]),
        "router_track_active_blocks": st.booleans(),
        "router_track_prefill_tokens": st.booleans(),
    }
)


@settings(max_examples=300, deadline=None)
@given(
    knobs=_knobs.map(lambda k: {**k, "host_cache_hit_weight": 0.5}),
    pool=st.sampled_from([Role.AGG, Role.PREFILL, Role.DECODE]),
    ranks=st.lists(
        st.tuples(
            st.integers(0, 5000),
            st.integers(0, 3000),
            st.integers(0, 40),
            st.integers(0, 12),
            st.integers(0, 12),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=6,
    ),
    host_tier=st.booleans(),
    isl=st.integers(1, 1000),
)
def test_a_ranks_cost_is_the_documented_formula(knobs, pool, ranks, host_tier, isl):
    # The module docstring's cost, stated plainly, rank by rank (float for float), with and
    # without host blocks.
    router = KvRouter(knobs, 64, np.random.default_rng(0), pool=pool)
    loads = []
    for queued, blocks, requests, *_ in ranks:
        load = RankLoad()
        load.prefill_tokens, load.n_blocks, load.requests = queued, blocks, requests
        loads.append(load)
    device = [d for *_, d, _, _ in ranks]
    shared = [s for *_, s, _ in ranks]
    host = [h if host_tier else 0 for *_, h in ranks]
    keys = list(range(isl // 64))
    track_prefill = knobs["router_track_prefill_tokens"] and pool is not Role.DECODE
    track_blocks = knobs["router_track_active_blocks"] and pool is not Role.PREFILL
    floor = min(load.prefill_tokens for load in loads)
    expected = []
    for load, d, s, h in zip(loads, device, shared, host):
        cost = 0.0
        if track_prefill:
            credit = knobs["overlap_score_credit"] * d
            if knobs["overlap_score_credit_decay"] > 0:
                excess = (load.prefill_tokens - floor) / 64 / (-(-isl // 64) or 1)
                credit /= 1.0 + knobs["overlap_score_credit_decay"] * excess
            prefill = (load.prefill_tokens + isl) / 64 - credit - 0.5 * h
            cost = knobs["prefill_load_scale"] * prefill if prefill > 0 else 0.0
        if track_blocks:
            cost += load.n_blocks + len(keys) - s
        if knobs["decode_active_request_weight"]:
            cost += knobs["decode_active_request_weight"] * load.requests
        expected.append(cost)
    assert router._costs(isl, keys, loads, device, host, shared) == expected


def test_at_temperature_0_the_router_never_looks_at_a_rank_that_cannot_win():
    # 8-block prompt. Rank 0 is idle: 8 + 8 = 16 with nothing cached. Rank 1 has 6,400 prompt
    # tokens queued (100 blocks): even with every block cached and counted it costs
    # 100 + 8 - 8 = 100 > 16, so its cache is never looked at; rank 2 (2 blocks queued) may
    # still win (2 + 0 + 0 = 2 at best) and is looked at.
    router = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    loads = [RankLoad(), RankLoad(), RankLoad()]
    loads[1].prefill_tokens = 6400
    loads[2].prefill_tokens = 128
    views = [_CachedView(0), _CachedView(8), _CachedView(0)]
    route = router.choose(512, list(range(8)), views, loads)
    assert route.index == 0  # rank 2: 2 + 8 + 8 = 18 > 16
    assert [v.looks for v in views] == [1, 0, 1]


# ``_knobs`` with the block-sharing switch and the host credit.
_any_knobs = st.tuples(_knobs, st.booleans(), st.sampled_from([0.0, 0.5, 1.0])).map(
    lambda t: {**t[0], "router_assume_kv_reuse": t[1], "host_cache_hit_weight": t[2]}
)


# The knobs with which the router scores only the ranks that can win (no decay, no host
# credit, both tracking switches on, shared blocks counted once).
_usual_knobs = st.fixed_dictionaries(
    {
        "overlap_score_credit": st.sampled_from([0.0, 0.5, 1.0, 2.0]),
        "prefill_load_scale": st.sampled_from([0.0, 1.0, 3.0]),
        "decode_active_request_weight": st.sampled_from([0.0, 1.0, 8.0]),
    }
)


@settings(max_examples=500, deadline=None)
@given(
    knobs=st.one_of(_usual_knobs, _any_knobs),
    pool=st.sampled_from([Role.AGG, Role.AGG, Role.PREFILL, Role.DECODE]),
    ranks=st.lists(
        st.tuples(
            st.sampled_from([0, 64, 128, 640]),
            st.integers(0, 6),
            st.integers(0, 8),
            st.integers(0, 8),
            st.integers(0, 2),
            st.lists(st.integers(0, 8), max_size=3),
        ),
        min_size=1,
        max_size=8,
    ),
    host_tier=st.booleans(),
    n_keys=st.integers(0, 8),
    queued=st.booleans(),
    seed=st.integers(0, 3),
)
def test_the_cheapest_rank_is_the_minimum_of_every_ranks_cost_draws_included(
    knobs, pool, ranks, host_tier, n_keys, queued, seed
):
    # Costs drawn to tie often (few distinct loads and overlaps). Whatever the router scores,
    # it picks what scoring every rank picks: the cheapest, ties in rank order broken by the
    # same draws of the generator (its next draw agrees afterwards too). ``queued``: the
    # overlaps are the ones seen on arrival (a request released by the router queue).
    keys = list(range(100, 100 + n_keys))
    isl = n_keys * 64 + 10
    views, loads = [], []
    for prefill, blocks, device, host, requests, _sent in ranks:
        load = RankLoad()
        load.prefill_tokens, load.n_blocks, load.requests = prefill, blocks, requests
        loads.append(load)
        views.append(_HostView(device, host) if host_tier else _CachedView(device))
    routers = [KvRouter(knobs, 64, np.random.default_rng(seed), pool=pool) for _ in range(2)]
    for c, (*_, sent) in enumerate(ranks):
        for rid, n in enumerate(sent):  # earlier prompts sharing the first n blocks
            routers[0].sent(
                1000 * c + rid, n * 64, keys[:n] + [-1 - rid - 10 * c], Route(c, 0), loads[c]
            )
    full = routers[1]
    overlaps = full._overlaps(keys, views)
    device, host = overlaps
    shared = _shared_runs(keys, loads) if full._shares_blocks() else None
    costs = full._costs(isl, keys, loads, device, host, shared)
    ties = [c for c, cost in enumerate(costs) if cost == min(costs)]
    expected = ties[full.rng.integers(len(ties))] if len(ties) > 1 else ties[0]
    route = routers[0].choose(isl, keys, views, loads, overlaps=overlaps if queued else None)
    assert route.index == expected
    assert route.overlap_blocks == device[expected]
    assert route.cached_tokens == full._cached_tokens(device[expected], host[expected])
    assert route.shared_blocks == (None if shared is None else shared[expected])
    assert routers[0].rng.random() == full.rng.random()


@settings(max_examples=300, deadline=None)
@given(
    knobs=_any_knobs,
    pool=st.sampled_from([Role.AGG, Role.PREFILL, Role.DECODE]),
    prefill=st.integers(0, 5000),
    floor=st.integers(0, 5000),
    blocks=st.integers(0, 3000),
    requests=st.integers(0, 40),
    isl=st.integers(1, 1000),
    low=st.tuples(st.integers(0, 16), st.integers(0, 16), st.integers(0, 16)),
    more=st.tuples(st.integers(0, 16), st.integers(0, 16), st.integers(0, 16)),
)
def test_a_ranks_cost_never_rises_as_its_overlaps_and_counted_blocks_grow(
    knobs, pool, prefill, floor, blocks, requests, isl, low, more
):
    # What lets the router skip ranks: the cost with more device, host or counted blocks is
    # at most the cost with fewer, float for float.
    router = KvRouter(knobs, 64, np.random.default_rng(0), pool=pool)
    load, other = RankLoad(), RankLoad()
    load.prefill_tokens, load.n_blocks, load.requests = prefill, blocks, requests
    other.prefill_tokens = min(prefill, floor)  # the least queued rank sets the decay's floor
    keys = list(range(48))

    def cost(device, host, shared):
        return router._costs(isl, keys, [load, other], [device, 0], [host, 0], [shared, 0])[0]

    high = tuple(a + b for a, b in zip(low, more))
    assert cost(*high) <= cost(*low)


def test_a_rank_whose_host_blocks_make_it_cheapest_is_looked_at():
    # Credit 0.5 per device block, 1.0 per host block; 8-block prompt of 522 tokens. Rank 0 is
    # idle: 522/64 + 8 = 16.156. Rank 1 (384 tokens queued) holds the prompt in its host tier
    # and counts its 8 blocks already: 906/64 - 8 + (8 + 8 - 8) = 14.156 wins. Bounded with the
    # device credit alone it would seem to cost at least 906/64 - 4 + 8 = 18.156 and be skipped.
    keys = list(range(8))
    router = KvRouter(
        {"overlap_score_credit": 0.5, "host_cache_hit_weight": 1.0},
        64,
        np.random.default_rng(0),
        pool=Role.AGG,
    )
    loads = [RankLoad(), RankLoad()]
    router.sent(0, 512, keys, Route(1, 0), loads[1])
    loads[1].prefill_tokens = 384
    route = router.choose(522, keys, [_HostView(0, 0), _HostView(0, 8)], loads)
    assert (route.index, route.shared_blocks) == (1, 8)


def test_tied_ranks_are_drawn_among_in_rank_order_whatever_order_they_are_scored_in():
    # 522-token prompt, 8 blocks. Rank 0 (64 tokens queued, 1 block cached) and rank 1 (idle,
    # nothing cached) both cost 9.156 - 1 + 8 = 522/64 + 8 = 16.156; rank 1's bound is lower,
    # so it is scored first. The draw picks the tie's i-th rank counting in rank order.
    keys = list(range(8))
    for seed in range(6):
        router = KvRouter({}, 64, np.random.default_rng(seed), pool=Role.AGG)
        loads = [RankLoad(), RankLoad()]
        loads[0].prefill_tokens = 64
        route = router.choose(522, keys, [_CachedView(1), _CachedView(0)], loads)
        assert route.index == [0, 1][np.random.default_rng(seed).integers(2)]


def test_a_rank_tying_the_cheapest_at_its_bound_is_scored():
    # 8-block prompt of 522 tokens, credit 1. Rank 0 (idle, nothing cached): 522/64 + 8. Rank
    # 1 (512 tokens queued, the whole prompt cached and counted there): (1034/64 - 8) + 8 - 8,
    # the same float, and exactly its bound, so it ties and the draw may pick it.
    keys = list(range(8))
    picks = set()
    for seed in range(6):
        router = KvRouter({}, 64, np.random.default_rng(seed), pool=Role.AGG)
        loads = [RankLoad(), RankLoad()]
        router.sent(0, 512, keys, Route(1, 0), loads[1])
        loads[1].prefill_tokens = 512
        route = router.choose(522, keys, [_CachedView(0), _CachedView(8)], loads)
        assert route.index == [0, 1][np.random.default_rng(seed).integers(2)]
        picks.add(route.index)
    assert picks == {0, 1}


def test_a_rank_not_counting_the_prompts_first_block_is_bounded_with_its_whole_decode_term():
    # 8-block prompt of 522 tokens. Rank 0 is idle: 522/64 + 8 = 16.156. Rank 1 has 320 tokens
    # queued and counts other blocks (2): with every block cached its prefill term is
    # 842/64 - 8 = 5.156, and it counts none of the prompt, so it costs at least
    # 5.156 + 2 + 8 = 15.156 (could win: looked at). Rank 2 is the same with 4 other blocks:
    # at least 17.156 > 16.156, never looked at (counting the prompt would have bounded it at
    # 9.156).
    keys = list(range(8))
    router = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    loads = [RankLoad(), RankLoad(), RankLoad()]
    router.sent(0, 128, [50, 51], Route(1, 0), loads[1])
    router.sent(1, 256, [60, 61, 62, 63], Route(2, 0), loads[2])
    loads[1].prefill_tokens = loads[2].prefill_tokens = 320
    views = [_CachedView(0), _CachedView(0), _CachedView(0)]
    assert router.choose(522, keys, views, loads).index == 0
    assert [v.looks for v in views] == [1, 1, 0]
