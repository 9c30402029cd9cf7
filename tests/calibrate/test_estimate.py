"""The fast estimate and a fit on a trace that met no queueing: every request alone on its
worker, so its TTFT is its own prefill chunks plus the overhead, its TPOT the decode passes at
its own KV fill."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.calibrate import calibrate, load_recorded
from plansim.calibrate.estimate import chunk_features, fast_estimate
from plansim.sim.deployment import build_deployment
from plansim.traces.request_ids import ordinal_ids
from plansim.traces.workload import Workload
from tests.calibrate.calibrate_traces import record

PREFILL = {"prefill_base_ms": 20.0, "prefill_ms_per_token": 0.025, "prefill_ms_per_token_sq": 6e-7}
DECODE = {"decode_base_ms": 8.0, "decode_ms_per_kv_fill": 300.0, "decode_ms_per_kv_fill_sq": 0.0}
OVERHEAD_MS = 5.0
# One worker with a small KV cache (the fill of one long request is visible), 2048-token
# prefill chunks, so that prompts of up to 12,000 tokens take up to 6 chunks.
ENGINE = {"num_gpu_blocks": 2048, "max_num_batched_tokens": 2048}
TRUE = {
    "num_workers": 1,
    "engine": {**ENGINE, "timing_model": {"type": "polynomial", **PREFILL, **DECODE}},
    "request_overhead_ms": OVERHEAD_MS,
}
GIVEN = {"num_workers": 1, "engine": ENGINE, "sla": {"ttft_ms": 1000.0}}


def test_chunk_features_sum_each_chunk():
    # 5000 tokens in chunks of 2048: 2048, 2048, 904.
    (row,) = chunk_features(np.array([5000]), 2048)
    assert row.tolist() == [3, 5000, 2 * 2048**2 + 904**2]
    (row,) = chunk_features(np.array([2048]), 2048)
    assert row.tolist() == [1, 2048, 2048**2]


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """300 requests, one every 6 s (each done in under 5 s: 6 chunks of at most 74 ms, 99
    decode passes of at most 8 + 300 * 12100 / 131072 = 36 ms), prompts 200 to 12,000 tokens
    without shared prefixes, 100 output tokens."""
    n = 300
    rng = np.random.default_rng(5)
    isl = rng.integers(200, 12000, n)
    blocks = -(-isl // 64)
    workload = Workload(
        arrival_ms=np.arange(n) * 6000.0,
        isl_tokens=isl,
        osl_tokens=np.full(n, 100),
        request_id=ordinal_ids(0, n),
        hash_offsets=np.concatenate([[0], np.cumsum(blocks)]),
        hash_ids=np.arange(int(blocks.sum())),
        trace_block_size=64,
    )
    path = record(tmp_path_factory.mktemp("alone") / "alone.jsonl.gz", workload, TRUE)
    return load_recorded([path])


def test_the_fast_estimate_of_unqueued_requests_is_the_prefill_and_the_overhead(alone):
    workload, recorded = alone
    estimate = fast_estimate(workload, recorded, build_deployment(GIVEN), recorded.scored)
    assert estimate.unqueued_prefill == len(workload) and estimate.multi_chunk > 100
    assert estimate.prefill == pytest.approx(tuple(PREFILL.values()), rel=1e-3)
    assert estimate.overhead_ms == pytest.approx(OVERHEAD_MS, rel=1e-2)
    # Decode passes of one request: 8 ms plus 300 ms per unit of KV fill (a 12,000-token
    # prompt fills 0.09 of 131,072 tokens). The line through the low TPOT of each band of the
    # fill sampled once a second is a start, within 15% of both at 0.09 (the fit refines it).
    base, slope, square = estimate.decode
    assert base + slope * 0.09 == pytest.approx(8.0 + 300.0 * 0.09, rel=0.15)
    assert base == pytest.approx(8.0, rel=0.15) and square == 0.0


def test_a_fit_on_windows_without_queueing_recovers_the_coefficients(alone):
    # Recorded without measurement noise by the same simulator: the fit finds the coefficients
    # themselves, and every window is reproduced.
    workload, recorded = alone
    result = calibrate(
        workload, recorded, build_deployment(GIVEN), families=["polynomial"], windows=6
    )
    fit = result.chosen
    truth = {**PREFILL, **DECODE, "request_overhead_ms": OVERHEAD_MS}
    assert [p.name for p in fit.parameters] == list(truth)
    for p, value in zip(fit.parameters, fit.values):
        # Within a thousandth of the coefficient (of its typical magnitude for the zero one).
        assert abs(value - truth[p.name]) <= 1e-3 * max(abs(truth[p.name]), p.scale), p.name
    assert fit.identified.all()
    for window in result.windows:
        for metric in ("median_ttft_ms", "p90_ttft_ms", "median_tpot_ms", "p90_tpot_ms"):
            assert abs(window.error[metric]) < 1e-3, (window.window, metric)
