"""summary.summarize: every key against hand-computed values of a tiny replay.

The replay (virtual ms):
  A completed: arrival 0, tokens at 10, 20, 25, 40; input 100, reused 50
  B completed: arrival 5, one token at 25;          input 200, reused 0
  C completed: arrival 10, tokens at 30, 32, 36;    input 100, reused 100
  D rejected:  input 1000, never admitted
  E incomplete: arrival 30, token at 45 (cut off); input 300
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from plansim.sim.summary import STAT_NAMES, SlaThresholds, good_mask, summarize, weighted_stats

NAN = float("nan")


def _requests() -> pd.DataFrame:
    rows = [
        # id, status, arrival, first, last, ttst, tpot, in, out, reused
        ("A", "completed", 0.0, 10.0, 40.0, 10.0, 10.0, 100, 4, 50),
        ("B", "completed", 5.0, 25.0, 25.0, NAN, NAN, 200, 1, 0),
        ("C", "completed", 10.0, 30.0, 36.0, 2.0, 3.0, 100, 3, 100),
        ("D", "rejected", 0.0, NAN, NAN, NAN, NAN, 1000, 0, 0),
        ("E", "incomplete", 30.0, 45.0, 45.0, NAN, NAN, 300, 1, 0),
    ]
    cols = [
        "request_id",
        "status",
        "arrival_ms",
        "first_token_ms",
        "last_token_ms",
        "ttst_ms",
        "tpot_ms",
        "input_length",
        "output_length",
        "reused_input_tokens",
    ]
    frame = pd.DataFrame(rows, columns=cols)
    frame["ttft_ms"] = frame["first_token_ms"] - frame["arrival_ms"]
    frame["e2e_latency_ms"] = frame["last_token_ms"] - frame["arrival_ms"]
    return frame


# token gaps of the completed requests: A 10, 5, 15; C 2, 4
GAPS = np.array([10.0, 5.0, 15.0, 2.0, 4.0])
COUNTS = np.ones(5, dtype=np.int64)


def _summary(**kw):
    args = {
        "prefill_worker_seconds": 3.0,
        "decode_worker_seconds": 10.0,
        "prefill_gpus_per_worker": 4,
        "decode_gpus_per_worker": 2,
    }
    args.update(kw)
    return summarize(_requests(), GAPS, COUNTS, **args)


def test_counts_and_tokens_cover_completed_requests_only():
    s = _summary()
    assert s["num_requests"] == 5
    assert s["completed_requests"] == 3
    assert s["total_input_tokens"] == 400
    assert s["total_output_tokens"] == 8


def test_duration_is_latest_completed_last_token_and_throughputs_use_it():
    s = _summary()
    assert s["duration_ms"] == 40.0  # E's token at 45 does not count: incomplete
    assert s["request_throughput_rps"] == pytest.approx(3 / 0.04)
    assert s["input_throughput_tok_s"] == pytest.approx(400 / 0.04)
    assert s["output_throughput_tok_s"] == pytest.approx(8 / 0.04)
    assert s["total_throughput_tok_s"] == pytest.approx(408 / 0.04)


def test_gpu_hours_weights_worker_seconds_by_gpus_per_worker():
    s = _summary()
    assert s["prefill_worker_seconds"] == 3.0
    assert s["decode_worker_seconds"] == 10.0
    assert s["prefill_gpus_per_worker"] == 4
    assert s["decode_gpus_per_worker"] == 2
    assert s["gpu_hours"] == pytest.approx((3 * 4 + 10 * 2) / 3600)


def test_prefix_reuse_ratio_is_reused_over_input_tokens_of_completed():
    assert _summary()["prefix_cache_reused_ratio"] == pytest.approx(150 / 400)


def _check(s, prefix, suffix, expected):
    for name, value in expected.items():
        assert s[f"{name}_{prefix}{suffix}"] == pytest.approx(value), name


def test_ttft_distribution():
    # samples 10, 20, 20; mean 50/3; population std sqrt(((20/3)^2 + 2 (10/3)^2) / 3)
    _check(
        _summary(),
        "ttft",
        "_ms",
        {
            "mean": 50 / 3,
            "min": 10,
            "max": 20,
            "median": 20,
            "p75": 20,
            "p90": 20,
            "p95": 20,
            "p99": 20,
            "std": math.sqrt((400 / 9 + 2 * 100 / 9) / 3),
        },
    )


def test_ttst_distribution_skips_single_token_requests_and_rounds_rank_half_up():
    # samples 2, 10: median rank round(0.5) = 1 -> 10
    _check(
        _summary(),
        "ttst",
        "_ms",
        {
            "mean": 6,
            "min": 2,
            "max": 10,
            "median": 10,
            "p75": 10,
            "p90": 10,
            "p95": 10,
            "p99": 10,
            "std": 4,
        },
    )


def test_tpot_distribution():
    # samples 10 (A: 30 ms / 3 gaps), 3 (C: 6 ms / 2 gaps)
    _check(
        _summary(),
        "tpot",
        "_ms",
        {
            "mean": 6.5,
            "min": 3,
            "max": 10,
            "median": 10,
            "p75": 10,
            "p90": 10,
            "p95": 10,
            "p99": 10,
            "std": 3.5,
        },
    )


def test_itl_distribution_is_over_every_token_gap():
    # sorted 2, 4, 5, 10, 15; mean 7.2; ranks: p50 2, p75 3, p90 round(3.6) = 4
    s = _summary()
    _check(
        s,
        "itl",
        "_ms",
        {
            "mean": 7.2,
            "min": 2,
            "max": 15,
            "median": 5,
            "p75": 10,
            "p90": 15,
            "p95": 15,
            "p99": 15,
            "std": math.sqrt((27.04 + 10.24 + 4.84 + 7.84 + 60.84) / 5),
        },
    )
    assert s["max_itl_ms"] == 15


def test_e2e_distribution():
    # samples 20 (B), 26 (C), 40 (A)
    mean = 86 / 3
    _check(
        _summary(),
        "e2e_latency",
        "_ms",
        {
            "mean": mean,
            "min": 20,
            "max": 40,
            "median": 26,
            "p75": 40,
            "p90": 40,
            "p95": 40,
            "p99": 40,
            "std": math.sqrt(((20 - mean) ** 2 + (26 - mean) ** 2 + (40 - mean) ** 2) / 3),
        },
    )


def test_per_user_throughput_is_1000_over_each_gap():
    # 1000 / gaps: 500, 250, 200, 100, 66.67
    values = [500, 250, 200, 100, 1000 / 15]
    mean = sum(values) / 5
    _check(
        _summary(),
        "output_token_throughput_per_user",
        "",
        {
            "mean": mean,
            "min": 1000 / 15,
            "max": 500,
            "median": 200,
            "p75": 250,
            "p90": 500,
            "p95": 500,
            "p99": 500,
            "std": math.sqrt(sum((v - mean) ** 2 for v in values) / 5),
        },
    )


def test_zero_gaps_count_in_itl_but_not_in_per_user_throughput():
    s = summarize(
        _requests(),
        np.array([0.0, 4.0]),
        np.array([3, 1]),
        prefill_worker_seconds=0,
        decode_worker_seconds=0,
        prefill_gpus_per_worker=1,
        decode_gpus_per_worker=1,
    )
    assert s["mean_itl_ms"] == 1.0  # (0 * 3 + 4) / 4
    assert s["median_itl_ms"] == 0.0
    assert s["mean_output_token_throughput_per_user"] == 250.0


def test_no_goodput_keys_without_sla():
    assert not any(key.startswith("goodput") for key in _summary())
    assert not any(key.startswith("goodput") for key in _summary(sla=SlaThresholds()))


def test_goodput_ttft_and_tpot_the_mean_token_gap():
    # A: ttft 10 ok, tpot 30/3 = 10 > 8 -> bad. B: ttft 20 ok, one token so tpot unchecked.
    # C: ttft 20 ok (<=), tpot 6/2 = 3 ok. Good: B, C -> 2 requests, 4 tokens over 0.04 s.
    s = _summary(sla=SlaThresholds(ttft_ms=20.0, tpot_ms=8.0))
    assert s["goodput_completed_requests"] == 2
    assert s["goodput_request_throughput_rps"] == pytest.approx(50.0)
    assert s["goodput_output_throughput_tok_s"] == pytest.approx(100.0)


def test_goodput_e2e_only():
    # e2e: A 40, B 20, C 26 -> only B within 25
    s = _summary(sla=SlaThresholds(e2e_ms=25.0))
    assert s["goodput_completed_requests"] == 1
    assert s["goodput_output_throughput_tok_s"] == pytest.approx(25.0)


def test_good_mask_marks_the_requests_goodput_counts_per_row():
    # same rule as test_goodput_ttft_and_tpot_the_mean_token_gap: B and C good; D rejected,
    # E incomplete
    mask = good_mask(_requests(), SlaThresholds(ttft_ms=20.0, tpot_ms=8.0))
    assert mask.tolist() == [False, True, True, False, False]
    assert good_mask(_requests(), SlaThresholds(e2e_ms=25.0)).tolist() == [
        False,
        True,
        False,
        False,
        False,
    ]
    assert not good_mask(_requests(), SlaThresholds()).any()


def test_wall_time_keys_only_when_given():
    assert "wall_time_ms" not in _summary()
    s = _summary(wall_time_ms=2000.0)
    assert s["wall_time_ms"] == 2000.0
    assert s["processed_tokens"] == 408
    assert s["processed_tokens_per_s"] == pytest.approx(204.0)
    assert s["processed_output_tokens_per_s"] == pytest.approx(4.0)


def test_no_completed_requests_reports_zeros():
    frame = _requests()
    frame = frame[frame["status"] != "completed"]
    s = summarize(
        frame,
        np.array([]),
        np.array([]),
        prefill_worker_seconds=0,
        decode_worker_seconds=1,
        prefill_gpus_per_worker=1,
        decode_gpus_per_worker=1,
    )
    assert s["completed_requests"] == 0
    assert s["duration_ms"] == 0.0
    assert s["prefix_cache_reused_ratio"] == 0.0
    for name in STAT_NAMES:
        assert s[f"{name}_ttft_ms"] == 0.0
        assert s[f"{name}_itl_ms"] == 0.0


def test_weighted_percentiles_match_the_expanded_rounded_rank():
    # expanded: 1 1 1 2 5 5 9 9 9 20 (n = 10)
    # ranks: p50 round(4.5) = 5 -> 5; p75 round(6.75) = 7 -> 9; p90 round(8.1) = 8 -> 9;
    # p95 round(8.55) = 9 -> 20; p99 round(8.91) = 9 -> 20
    stats = weighted_stats(np.array([9.0, 1.0, 20.0, 5.0, 2.0]), np.array([3, 3, 1, 2, 1]))
    assert stats == pytest.approx(
        {
            "mean": 6.2,
            "min": 1,
            "max": 20,
            "median": 5,
            "p75": 9,
            "p90": 9,
            "p95": 20,
            "p99": 20,
            "std": math.sqrt(315.6 / 10),
        }
    )


def test_median_of_even_count_takes_upper_middle_not_interpolated():
    # 1..6: rank round(2.5) = 3 -> 4 (an interpolating median would say 3.5)
    assert weighted_stats(np.arange(1.0, 7.0))["median"] == 4.0
