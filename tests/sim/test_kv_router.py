"""The KV router: its cost (prefix overlap and load, per pool role), softmax selection,
parameter patches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plansim.roles import Role
from plansim.sim.routing import RankLoad, Route
from plansim.sim.routing.kv_router import KvRouter, softmax_probabilities
from simkit import prefill_ms, req, run


def test_kv_router_sends_a_request_to_the_worker_holding_its_prefix():
    rows = [(0.0, 2048, 2, [1, 2, 3, 4]), (1000.0, 2048, 2, [1, 2, 3, 5])]
    for seed in range(4):  # whichever worker the first tie picks, the second follows it
        r = run(rows, num_workers=4, router={"mode": "kv_router"}, seed=seed)
        assert req(r, 1).decode_worker == req(r, 0).decode_worker
        assert req(r, 1).reused_input_tokens == 1536
        assert req(r, 1).ttft_ms == pytest.approx(prefill_ms(512), abs=1e-6)


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
    """A candidate's prefix view that holds ``cached`` leading blocks of any request."""

    def __init__(self, cached: int) -> None:
        self.cached = cached

    def overlap(self, keys):
        return self.cached


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
    assert router.choose(512, list(range(8)), [_CachedView(8), _CachedView(0)],
                         [busy, RankLoad()]).index == 1


def test_softmax_probabilities_follow_the_normalised_negated_logits():
    p = softmax_probabilities(np.array([0.0, 1.0]), temperature=1.0)
    assert p[0] == pytest.approx(1 / (1 + math.exp(-1)))
    assert p[1] == pytest.approx(math.exp(-1) / (1 + math.exp(-1)))
    assert softmax_probabilities(np.array([2.0, 2.0, 2.0]), 0.5).tolist() == [1 / 3] * 3


def test_set_parameters_reports_only_changes():
    router = KvRouter({}, 64, np.random.default_rng(0), pool=Role.AGG)
    assert router.set_parameters({"overlap_score_weight": 1.0}) == {}
    assert router.set_parameters({"router_temperature": 0.5}) == {"router_temperature": 0.5}
    assert router.parameters() == {"overlap_score_weight": 1.0, "router_temperature": 0.5}
