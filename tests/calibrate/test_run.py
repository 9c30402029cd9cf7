"""``calibrate`` end to end on traces plansim recorded itself: known coefficients come back
within their intervals, and the held-out windows are never seen by the fit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from plansim.calibrate import calibrate, load_recorded
from plansim.sim.deployment import build_deployment
from plansim.traces.synth import LengthSpec
from tests.calibrate.calibrate_traces import DEPLOYMENT, record, synthetic

KNOWN = {
    "prefill_base_ms": 25.0,
    "prefill_ms_per_token": 0.03,
    "prefill_ms_per_token_sq": 5e-7,
    "decode_base_ms": 7.0,
    "decode_ms_per_kv_fill": 40.0,
    "decode_ms_per_kv_fill_sq": 0.0,
    "request_overhead_ms": 4.0,
}
# A KV cache of 4000 blocks (256,000 tokens per worker), so that the fill varies with the load.
ENGINE = {"num_gpu_blocks": 4000}


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """1500 requests at 2/s on 2 workers, prompts of 5000 +- 4000 tokens (a tenth over one
    8192-token chunk, which tells the prefill constant from the overhead), recorded with the
    known coefficients and a 2% log-normal measurement error on each TTFT and decode time."""
    workload = synthetic(n=1500, rate_rps=2.0, isl=LengthSpec.lognormal(5000, 4000, maximum=30000))
    engine = {
        **ENGINE,
        "timing_model": {
            "type": "polynomial",
            **{k: v for k, v in KNOWN.items() if k != "request_overhead_ms"},
        },
    }
    truth = {**DEPLOYMENT, "engine": engine, "request_overhead_ms": KNOWN["request_overhead_ms"]}
    path = record(
        tmp_path_factory.mktemp("known") / "known.jsonl.gz", workload, truth, noise=0.02, seed=1
    )
    return load_recorded([path])


def test_known_coefficients_come_back_within_their_intervals(known):
    workload, recorded = known
    result = calibrate(
        workload,
        recorded,
        build_deployment({**DEPLOYMENT, "engine": ENGINE}),
        families=["polynomial"],
    )
    fit = result.chosen
    assert [p.name for p in fit.parameters] == list(KNOWN)
    for p, low, high, determined in zip(fit.parameters, fit.low, fit.high, fit.identified):
        assert determined, p.name
        assert low <= KNOWN[p.name] <= high, (p.name, low, high)
    # The held-out windows are reproduced within the measurement error's reach.
    held = result.held_out_summary()
    for metric in ("median_ttft_ms", "median_tpot_ms"):
        assert abs(held[metric]["median"]) < 0.02, metric


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    workload = synthetic(n=400)
    path = record(
        tmp_path_factory.mktemp("small") / "small.jsonl.gz",
        workload,
        DEPLOYMENT,
        noise=0.02,
        seed=2,
    )
    return load_recorded([path])


def test_the_fit_never_sees_the_held_out_windows(small):
    workload, recorded = small
    deployment = build_deployment(DEPLOYMENT)
    steps = []
    plain = calibrate(
        workload,
        recorded,
        deployment,
        families=["scaled"],
        progress=lambda text, done, total: steps.append((done, total)),
    )
    # The fast estimate, then the one family's fit.
    assert steps == [(0, 2), (1, 2), (2, 2)]
    # Production twice as slow in the held-out windows only.
    held = plain.held_out[plain.window_of]
    slow = dataclasses.replace(
        recorded,
        ttft_ms=np.where(held, 2 * recorded.ttft_ms, recorded.ttft_ms),
        e2e_ms=np.where(held, 2 * recorded.e2e_ms, recorded.e2e_ms),
        tpot_ms=np.where(held, 2 * recorded.tpot_ms, recorded.tpot_ms),
    )
    changed = calibrate(workload, slow, deployment, families=["scaled"])
    assert changed.chosen.values.tolist() == plain.chosen.values.tolist()
    for before, after in zip(plain.windows, changed.windows):
        assert before.held_out == after.held_out
        if before.held_out:
            # Replayed the same, recorded twice as long: the error is (1 + e) / 2 - 1.
            for m in ("median_ttft_ms", "median_tpot_ms"):
                assert after.error[m] == pytest.approx((1 + before.error[m]) / 2 - 1, abs=1e-9)
        else:
            assert after.error == before.error
    assert any(n.startswith("window 1 ") and "is off by" in n for n in changed.notes)
    assert not any(n.startswith("window ") for n in plain.notes)
