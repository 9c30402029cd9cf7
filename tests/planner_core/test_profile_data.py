"""Profiling data (reference section 8) converted to bootstrap FPMs."""

from pathlib import Path

import numpy as np
import pytest

from plansim.planner_core.config import parse_planner_config
from plansim.planner_core.profile_data import decode_fpms_from_usage, fpms_from_arrays, prefill_fpms
from plansim.planner_io import read_profile_fpms, read_warmup_observations

SAMPLE_NPZ = (
    Path(__file__).resolve().parents[1] / "sim" / "reference" / "profiles" / "sample_h200.npz"
)


def test_prefill_sample_becomes_one_request_pass():
    (f,) = prefill_fpms([1000], [50.0])
    assert (f.num_prefill_requests, f.sum_prefill_tokens, f.wall_time_s) == (1, 1000, 0.05)


def test_decode_sample_from_kv_usage():
    # 0.5 of 10000 KV tokens at context 1000: 5000 KV tokens, batch 5, ITL 20 ms
    (f,) = decode_fpms_from_usage([0.5], [1000], [20.0], 10000)
    assert (f.sum_decode_kv_tokens, f.num_decode_requests, f.wall_time_s) == (5000, 5, 0.02)


def test_planner_profile_layout(tmp_path):
    (tmp_path / "selected_prefill_interpolation").mkdir()
    np.savez(
        tmp_path / "selected_prefill_interpolation" / "raw_data.npz",
        prefill_isl=np.array([100.0, 200.0]),
        prefill_ttft=np.array([10.0, 12.0]),
        prefill_thpt_per_gpu=np.array([1e4, 1.6e4]),
    )
    (tmp_path / "decode_raw_data.json").write_text(
        '{"x_kv_usage": [0.1, 0.2], "y_context_length": [100, 100], "z_itl": [5, 6],'
        ' "z_thpt_per_gpu": [1, 2], "max_kv_tokens": 1000}'
    )
    fpms = read_profile_fpms(tmp_path)
    assert [f.sum_prefill_tokens for f in fpms["prefill"]] == [100, 200]
    assert [(f.sum_decode_kv_tokens, f.num_decode_requests) for f in fpms["decode"]] == [
        (100, 1),
        (200, 2),
    ]


def test_engine_profile_npz():
    fpms = read_profile_fpms(SAMPLE_NPZ)
    with np.load(SAMPLE_NPZ) as z:
        n_prefill = len(z["prefill_isl"])
        n_decode = int((z["decode_active_kv_tokens"] > 0).sum()) * len(z["decode_context_length"])
        assert fpms["prefill"][0].wall_time_s == pytest.approx(z["prefill_ttft_ms"][0] / 1000)
    assert len(fpms["prefill"]) == n_prefill
    assert len(fpms["decode"]) == n_decode


def test_missing_profile_dir_gives_nothing(tmp_path):
    assert read_profile_fpms(tmp_path / "absent") == {}
    assert fpms_from_arrays({}) == {}


def test_warmup_trace_buckets_at_throughput_interval(tmp_path):
    # Mooncake rows at 0 s, 1 s and 250 s; 120 s buckets -> counts 2, 0, 1
    trace = tmp_path / "warm.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]}\n'
        '{"timestamp": 1000, "input_length": 300, "output_length": 30, "hash_ids": [2]}\n'
        '{"timestamp": 250000, "input_length": 50, "output_length": 5, "hash_ids": [3]}\n'
    )
    config = parse_planner_config(
        {
            "optimization_target": "sla",
            "enable_load_scaling": True,
            "throughput_adjustment_interval_seconds": 120,
            "load_predictor_warmup_trace": str(trace),
        }
    )
    obs = read_warmup_observations(config)
    assert [o.num_req for o in obs] == [2.0, 0.0, 1.0]
    assert (obs[0].isl, obs[0].osl, obs[0].duration_s) == (200.0, 20.0, 120.0)
    assert read_warmup_observations(parse_planner_config({})) is None
