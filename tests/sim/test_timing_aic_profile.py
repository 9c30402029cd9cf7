"""The aic table as an NPZ profile: the NPZ timing model and the planner read what it holds."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.aic.table import load_table
from plansim.planner_io import read_profile_fpms
from plansim.sim.timing import load_npz_profile
from plansim.sim.timing.aic import AicTiming
from plansim.sim.timing.aic_profile import profile_arrays, write_profile


@pytest.fixture(scope="module")
def written(qwen_spec, tmp_path_factory):
    arrays = profile_arrays(load_table(qwen_spec), max_batch=64, max_context=8192)
    path = write_profile(tmp_path_factory.mktemp("profile") / "qwen.npz", arrays)
    return path, arrays


def test_profile_covers_the_requested_context_and_batch(written):
    _, arrays = written
    assert arrays["prefill_isl"][-1] <= 8192 and arrays["decode_context_length"][-1] <= 8192
    assert arrays["decode_active_kv_tokens"][-1] == 64 * arrays["decode_context_length"][-1]
    assert arrays["decode_itl"].shape == (
        arrays["decode_active_kv_tokens"].size,
        arrays["decode_context_length"].size,
    )


def test_the_npz_model_reads_single_request_prefill_and_decode_at_active_over_context(
    written, qwen_spec
):
    path, arrays = written
    npz = load_npz_profile(path)
    aic = AicTiming.for_spec(qwen_spec)
    for isl in (1024.0, 4096.0):
        assert isl in arrays["prefill_isl"]
        assert npz.prefill_ms(int(isl), 1, isl, 0) == pytest.approx(
            aic.prefill_ms(int(isl), 1, isl, 0)
        )
    kv, ctx = 32 * 2048, 2048
    assert kv in arrays["decode_active_kv_tokens"] and ctx in arrays["decode_context_length"]
    assert npz.decode_ms(32, kv, ctx, 10**7) == pytest.approx(aic.decode_ms(32, kv, ctx, 10**7))


def test_the_planner_bootstraps_from_the_profile(written):
    path, arrays = written
    fpms = read_profile_fpms(path)
    assert len(fpms["prefill"]) == arrays["prefill_isl"].size
    first = fpms["prefill"][0]
    assert (first.num_prefill_requests, first.sum_prefill_tokens) == (
        1,
        int(arrays["prefill_isl"][0]),
    )
    assert first.wall_time_s == pytest.approx(arrays["prefill_ttft_ms"][0] / 1000)
    kv = np.asarray(arrays["decode_active_kv_tokens"])
    assert len(fpms["decode"]) == kv.size * arrays["decode_context_length"].size
