"""Perf models: bucketed retirement, the fit, TTFT/ITL estimates and the capacity search."""

import math

import pytest
from planner_fakes import decode_wall, fpm, prefill_wall

from plansim.planner_core.perf_model import (
    EngineLimits,
    EnginePerfModel,
    FpmSampleStore,
    candidate_batches,
    effective_isl,
    within_sla,
)


def _prefill_model(mbt=8192, max_seqs=512, min_obs=5):
    model = EnginePerfModel(
        "prefill", EngineLimits(mbt, max_seqs, 2_000_000), min_observations=min_obs
    )
    for t in (500, 1000, 2000, 4000, 8000):
        model.observe(
            fpm(wall_time_s=prefill_wall(t), n_prefill=max(1, t // 500), prefill_tokens=t)
        )
    return model


def _decode_model(max_seqs=512, max_kv=2_000_000):
    model = EnginePerfModel("decode", EngineLimits(8192, max_seqs, max_kv))
    for kv in (10_000, 50_000, 100_000, 200_000, 400_000):
        model.observe(fpm(wall_time_s=decode_wall(kv), n_decode=kv // 1000, decode_kv=kv))
    return model


def test_store_drops_oldest_sample_of_fullest_bucket():
    store = FpmSampleStore(dims=1, bucket_count=4, max_samples=4)
    for x in (0.0, 1.0, 2.0, 3.0, 0.1):  # buckets of width 0.75: 0 and 0.1 share bucket 0
        store.add((x,), x)
    x, _ = store.arrays()
    assert x.ravel().tolist() == [1.0, 2.0, 3.0, 0.1]


def test_store_2d_uses_sqrt_buckets_per_axis():
    store = FpmSampleStore(dims=2, bucket_count=16, max_samples=10)
    assert store.bins_per_axis == 4


def test_fit_recovers_linear_pass_time():
    coef = _prefill_model().coefficients
    assert coef[0] == pytest.approx(0.01)
    assert coef[1] == pytest.approx(1e-5)


def test_fit_needs_min_observations():
    model = EnginePerfModel("prefill", EngineLimits(), min_observations=3)
    model.observe(fpm(wall_time_s=0.02, n_prefill=1, prefill_tokens=1000))
    model.observe(fpm(wall_time_s=0.03, n_prefill=1, prefill_tokens=2000))
    assert not model.ready
    model.observe(fpm(wall_time_s=0.05, n_prefill=1, prefill_tokens=4000))
    assert model.ready


def test_idle_heartbeats_are_not_samples():
    model = EnginePerfModel("decode", EngineLimits(), min_observations=1)
    model.observe(fpm(wall_time_s=0.0))
    assert len(model.store) == 0


def test_negative_slope_rejects_the_fit():
    model = EnginePerfModel("decode", EngineLimits(), min_observations=2)
    model.observe(fpm(wall_time_s=0.03, n_decode=1, decode_kv=1000))
    model.observe(fpm(wall_time_s=0.02, n_decode=1, decode_kv=5000))
    assert not model.ready
    assert model.wall_s(0, 1000) is None


def test_prediction_floor():
    model = EnginePerfModel("prefill", EngineLimits(), min_observations=2)
    model.observe(fpm(wall_time_s=0.01, n_prefill=1, prefill_tokens=2000))
    model.observe(fpm(wall_time_s=0.03, n_prefill=1, prefill_tokens=4000))  # intercept -0.01 s
    assert model.wall_s(0) == 1e-6


def test_chunked_prefill_time():
    # MBT 1000, 2500 tokens: two full chunks (20 ms each) + 500-token tail (15 ms) = 55 ms
    model = _prefill_model(mbt=1000)
    assert model.chunked_prefill_s(2500) == pytest.approx(0.055)
    assert model.chunked_prefill_s(0) == 0.0


def test_ttft_estimate_discounts_kv_hits():
    model = _prefill_model()  # average prefill tokens per request: 500
    # (1500 queued + 500 own) * (1 - 0.5) = 1000 tokens -> 10 ms + 10 ms
    f = fpm(queued_prefill_tokens=1500)
    assert model.estimate_ttft_s(f, 0.5) == pytest.approx(0.02)
    # queue scale 0: only the request's own 500 tokens -> 15 ms
    assert model.estimate_ttft_s(f, None, queue_scale=0.0) == pytest.approx(0.015)


def test_itl_estimate_adds_one_average_request():
    model = _decode_model()  # average decode length 1000 KV tokens
    f = fpm(n_decode=20, decode_kv=20_000, queued_decode_kv=5_000)
    # 20000 + 5000 + 1000 = 26000 KV tokens -> 5 ms + 2.6 ms
    assert model.estimate_itl_s(f) == pytest.approx(0.0076)
    # consolidation factor 2: 50000 + 1000 -> 10.1 ms
    assert model.estimate_itl_s(f, decode_scale=2.0) == pytest.approx(0.0101)


def test_kv_discount_clamps():
    assert effective_isl(1000, 0.5) == 500
    assert effective_isl(1000, 0.99) == 50  # clamped to 0.95
    assert effective_isl(1000, None) == 1000
    assert effective_isl(1000, math.nan) == 1000
    assert effective_isl(10, 0.95) == 1


def test_candidate_batches():
    assert candidate_batches(3) == [1, 2, 3]
    many = candidate_batches(512)
    assert len(many) == 128 and many[0] == 1 and many[-1] == 512
    assert many[33] == 1 + 33 * 511 // 127


def test_prefill_capacity_under_sla():
    # isl 1000, MBT 8192 -> B = 8; ttft(b) = 10 ms + 10 ms * b; SLA 50 ms -> b = 4, 80 req/s
    cap = _prefill_model().find_engine_capacity(1000, 200, ttft_sla_ms=50)
    assert cap.batch == 4 and cap.eligible
    assert cap.rps == pytest.approx(80.0)
    assert cap.ttft_ms == pytest.approx(50.0)


def test_sla_bound_met_up_to_the_stated_relative_tolerance():
    # 1e-9 relative: 50 ms * (1 + 1e-9) = 50.00000005 ms still meets a 50 ms bound
    assert within_sla(50.00000000000003, 50.0)
    assert within_sla(50.00000004, 50.0)
    assert not within_sla(50.0000001, 50.0)
    assert within_sla(1e9, None)


def test_prefill_capacity_just_over_the_sla_is_not_eligible():
    # ttft(4) = 50 ms; an SLA of 49.999 ms leaves b = 3 (ttft 40 ms): 3 / 0.04 = 75 req/s
    cap = _prefill_model().find_engine_capacity(1000, 200, ttft_sla_ms=49.999)
    assert cap.batch == 3 and cap.rps == pytest.approx(75.0)


def test_prefill_capacity_without_eligible_point_takes_highest_rps():
    # SLA 15 ms < ttft(1) = 20 ms: nothing eligible -> highest rps, b = 8: 8 / 0.09 s
    cap = _prefill_model().find_engine_capacity(1000, 200, ttft_sla_ms=15)
    assert not cap.eligible and cap.batch == 8
    assert cap.rps == pytest.approx(8 / 0.09)


def test_decode_capacity_under_sla():
    # ctx = 1000 + 100 = 1100; B = min(512, 2e6 // 1100) = 512 -> 128 spaced candidates.
    # itl(b) = 5 ms + 0.11 ms * b <= 20 ms -> b <= 136; largest candidate: 1 + 33*511//127 = 133
    cap = _decode_model().find_engine_capacity(1000, 200, itl_sla_ms=20)
    assert cap.batch == 133 and cap.eligible
    itl = 0.005 + 1e-7 * 133 * 1100
    assert cap.rps == pytest.approx(133 / (200 * itl))


def test_decode_capacity_with_accept_length():
    # accept length 2 halves the ITL: itl(b) = (5 ms + 0.11 ms b) / 2 <= 20 ms -> b <= 318
    cap = _decode_model().find_engine_capacity(1000, 200, itl_sla_ms=20, accept_length=2.0)
    assert cap.eligible
    assert (0.005 + 1e-7 * cap.batch * 1100) / 2 <= 0.020
    assert cap.batch > 300


def test_agg_capacity_respects_balance_condition():
    model = EnginePerfModel("agg", EngineLimits(1000, 64, 2_000_000))
    for p, kv in ((0, 10_000), (500, 0), (1000, 20_000), (200, 50_000), (800, 100_000)):
        model.observe(
            fpm(
                wall_time_s=0.005 + 1e-5 * p + 1e-7 * kv,
                n_prefill=1 if p else 0,
                prefill_tokens=p,
                n_decode=5,
                decode_kv=kv,
            )
        )
    cap = model.find_engine_capacity(400, 100, ttft_sla_ms=1000, itl_sla_ms=1000)
    # per-iteration prefill ceil(b * 400 / 100) = 4b must fit beside b decodes: 5b <= 1000
    assert cap.batch <= 64 and 4 * cap.batch <= 1000 - cap.batch
    itl = 0.005 + 1e-5 * 4 * cap.batch + 1e-7 * cap.batch * 450
    assert cap.rps == pytest.approx(cap.batch / (100 * itl))


def test_capacity_none_when_not_ready():
    model = EnginePerfModel("decode", EngineLimits())
    assert model.find_engine_capacity(1000, 100, itl_sla_ms=50) is None


def test_prefill_per_pass_average_counts_each_observation_once():
    # Two observations: 3000 prefill tokens per pass, then a decode-only one. Unweighted, as
    # the reference adds them: (3000 + 0) / 2, whatever their pass times.
    model = EnginePerfModel("agg", EngineLimits())
    model.observe(
        fpm(wall_time_s=0.1, n_prefill=1, prefill_tokens=3000, n_decode=4, decode_kv=4000)
    )
    model.observe(fpm(wall_time_s=0.01, n_decode=5, decode_kv=5000))
    assert model.avg_prefill_tokens.value == pytest.approx(1500)
    # ISL per prefill request: 3000, then 0 for the observation without prefill.
    assert model.avg_isl.value == pytest.approx(1500)
    assert model.avg_decode_len.value == pytest.approx(1000)
