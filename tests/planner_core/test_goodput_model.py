"""The per-request SLA model of sla_goodput: pass-time fit with separate prefill and decode terms,
the exact M/G/1 wait, prefill stalls on each request's TPOT, the decode pool's batch."""

import math

import numpy as np
import pytest

from plansim.planner_core.goodput_model import (
    INFEASIBLE,
    PassSample,
    PassTimeModel,
    PoolLimits,
    RequestMix,
    agg_violations,
    decode_violations,
    episode_counts,
    queue_violation,
    stalled_tpot_violation,
    window_samples,
)
from plansim.planner_core.observations import ForwardPassMetrics, PassTotals

# A worker whose decode-only pass takes 5 ms + 1e-7 s per KV token and whose passes with a
# prompt chunk pay 10 ms more plus 10 us per prompt token.
A_DECODE, A_PREFILL, B1, C = 0.005, 0.010, 1e-5, 1e-7


def _wall(prefill, kv):
    return A_DECODE + (A_PREFILL + B1 * prefill if prefill else 0.0) + C * kv


def _model():
    model = PassTimeModel()
    for p, kv in (
        (0, 10_000),
        (0, 200_000),
        (1000, 0),
        (4000, 20_000),
        (8000, 50_000),
        (2000, 100_000),
    ):
        model.add_bootstrap(PassSample(1.0 if p else 0.0, p, p * p, kv, _wall(p, kv)))
    return model


def test_pass_time_fit_separates_the_prefill_intercept_from_the_decode_floor():
    a_d, a_p, b1, b2, c = _model().coefficients
    assert a_d == pytest.approx(A_DECODE, rel=1e-6)
    assert a_p == pytest.approx(A_PREFILL, rel=1e-6)
    assert (b1, c) == (pytest.approx(B1, rel=1e-6), pytest.approx(C, rel=1e-6))
    assert b2 == pytest.approx(0.0, abs=1e-15)


def test_a_window_trains_one_mean_pass_of_each_kind():
    mixed = PassTotals(
        passes=2,
        wall_s=0.3,
        prefill_requests=2,
        prefill_tokens=6000,
        decode_kv_tokens=4000,
        prefill_tokens_sq=2000**2 + 4000**2,
    )
    decode = PassTotals(passes=4, wall_s=0.04, decode_requests=8, decode_kv_tokens=8000)
    fpm = ForwardPassMetrics.from_window(0, 0, mixed, decode)
    rows = window_samples(fpm)
    assert rows == [
        PassSample(1.0, 3000.0, 10_000_000.0, 2000.0, 0.15),
        PassSample(0.0, 0.0, 0.0, 2000.0, 0.01),
    ]


def test_mg1_wait_is_exact_for_deterministic_service():
    # M/D/1, D = 100 ms, 2 req/s (rho 0.2): P(W <= t) = (1 - rho) e^(lambda t) for t < D. With a
    # 150 ms bound the 100 ms prompt may wait 50 ms: P(miss) = 1 - 0.8 e^0.1 = 0.11586.
    p, rho = queue_violation(np.full(1000, 0.1), 2.0, 0.15)
    assert rho == pytest.approx(0.2)
    assert p[0] == pytest.approx(1 - 0.8 * math.exp(0.1), abs=2e-3)


def test_a_prompt_whose_own_prefill_exceeds_the_bound_always_misses():
    p, _ = queue_violation(np.array([0.05, 0.9]), 1.0, 0.8)
    assert p[1] == 1.0 and p[0] < 1.0


def test_prefill_stalls_on_tpot_follow_the_overlapping_prompts():
    # Decode pass 10 ms, bound 15 ms: 5 ms of slack per gap. Each overlapping prompt stalls 90 ms.
    # Prompts arrive at 0.5/s over a 1 s exposure: Poisson(0.5) of them.
    gaps = np.array([4.0, 40.0])
    p = stalled_tpot_violation(gaps, np.array([1.0, 1.0]), 0.5, 0.010, np.array([0.09]), 0.015)
    # 4 gaps: 20 ms of slack, one prompt is enough: 1 - e^-0.5.
    assert p[0] == pytest.approx(1 - math.exp(-0.5), abs=1e-3)
    # 40 gaps: 200 ms of slack, two prompts (180 ms) fit, three do not.
    assert p[1] == pytest.approx(1 - math.exp(-0.5) * (1 + 0.5 + 0.125), abs=1e-3)


def test_one_token_outputs_have_no_gap_to_miss():
    p = stalled_tpot_violation(np.array([0.0]), np.array([5.0]), 2.0, 0.010, np.array([0.5]), 0.015)
    assert p[0] == 0.0


def test_a_balanced_router_sends_a_worker_every_nth_arrival():
    # Two workers share Poisson(1.0) pool arrivals; the tagged request's worker gets the second,
    # fourth, ...: P(at least one) = P(M >= 2) = 1 - 2 e^-1.
    counts = episode_counts(np.array([1.0]), 2, 3)
    assert counts[0, 0] == pytest.approx(2 * math.exp(-1))
    assert 1 - counts[0, 0] == pytest.approx(1 - 2 * math.exp(-1))
    p = stalled_tpot_violation(
        np.array([4.0]), np.array([1.0]), 0.5, 0.010, np.array([0.09]), 0.015, spread=2
    )
    assert p[0] == pytest.approx(1 - 2 * math.exp(-1), abs=1e-3)


def test_decode_pool_batch_and_its_spread_decide_itl():
    # Decode pass 10 ms + 1 ms per request of 1000 KV tokens; 10 req/s of 10-token outputs:
    # B = 10 * 9 * (0.011 + 0.001 B) -> B = 0.99 / 0.91. A request misses 15 ms when more than
    # 4 others decode with it: P(Poisson(B) > 4).
    model = PassTimeModel()
    for kv in (1000, 5000, 20_000, 50_000, 100_000):
        model.add_bootstrap(PassSample(0.0, 0.0, 0.0, kv, 0.010 + 1e-6 * kv))
    mix = RequestMix.from_lengths(np.full(100, 1000 - 5), np.full(100, 10), np.zeros(100))
    v = decode_violations(model, mix, 10.0, PoolLimits(8192, 256, 1_000_000), 0.015)
    batch = 0.99 / 0.91
    assert v.batch == pytest.approx(batch, rel=1e-4)
    tail = 1 - sum(math.exp(-batch) * batch**k / math.factorial(k) for k in range(5))
    assert v.tpot == pytest.approx(tail, rel=1e-3)


def test_the_fit_keeps_decode_only_passes_beside_long_prompt_passes():
    # Long chunked prompts beside a large decoding batch take 6e-9 s per prompt token squared
    # (0.1 to 1.5 s) and show no decode cost; decode-only passes take 6 ms + 1e-7 s per KV
    # token. In plain seconds the decode-only passes' few ms would be given up for the long
    # passes' residuals; in relative error each pass counts alike, so a decode pass is timed
    # within 20% of what the decode-only passes took.
    model = PassTimeModel()
    for t in np.linspace(4000, 16000, 200):
        model.add(PassSample(1.0, t, t * t, 300_000.0, 6e-9 * t * t))
    for kv in (500.0, 5000.0, 10000.0, 20000.0):
        for _ in range(5):
            model.add(PassSample(0.0, 0.0, 0.0, kv, 0.006 + 1e-7 * kv))
    for kv in (500.0, 20000.0):
        assert float(model.decode_s(kv)) == pytest.approx(0.006 + 1e-7 * kv, rel=0.2)


def test_passes_that_say_nothing_of_decoding_make_an_aggregated_pool_infeasible_not_a_crash():
    # Prompt passes only, their time all in the squared prompt term: the fit times a decode
    # pass at zero, from which no decoding batch follows.
    model = PassTimeModel()
    for t in (1000.0, 2000.0, 4000.0, 6000.0, 8000.0):
        model.add(PassSample(1.0, t, t * t, 0.0, 6e-9 * t * t))
    assert float(model.decode_s(10_000.0)) == 0.0
    mix = RequestMix.from_lengths(np.full(100, 1000), np.full(100, 10), np.zeros(100))
    v = agg_violations(model, mix, 1.0, PoolLimits(8192, 256, 1_000_000), 0.5, 0.015)
    assert v == INFEASIBLE
