"""The aic timing model: the reference mocker's AIC calls, bulk = scalar, mixed passes."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.aic import sdk
from plansim.aic.table import load_table
from plansim.sim.deployment import TimingModelSpec
from plansim.sim.timing import make_timing_model
from plansim.sim.timing.aic import AicTiming, Grid


def test_make_timing_model_builds_the_aic_model(qwen_spec):
    spec = TimingModelSpec.model_validate(
        {"type": "aic", "model": "Qwen/Qwen3-32B", "system": "h200_sxm", "backend": "vllm"}
    )
    model = make_timing_model(spec)
    assert isinstance(model, AicTiming) and model is AicTiming.for_spec(qwen_spec)


def test_grid_interpolates_multilinearly_and_extrapolates_linearly():
    grid = Grid((np.array([0.0, 2.0]), np.array([0.0, 10.0])), np.array([[0.0, 10.0], [4.0, 14.0]]))
    # f(x, y) = 2x + y on this grid.
    assert grid.at((1.0, 5.0)) == pytest.approx(7.0)
    assert grid.at((3.0, 20.0)) == pytest.approx(26.0)
    assert grid.bulk((np.array([1.0, 3.0]), np.array([5.0, 20.0]))).tolist() == [
        grid.at((1.0, 5.0)),
        grid.at((3.0, 20.0)),
    ]


def test_bulk_decode_matches_scalar_decode_bit_for_bit(qwen_spec):
    model = AicTiming.for_spec(qwen_spec)
    batch = np.array([1, 3, 37, 64, 300, 2000])
    context = np.array([1.0, 700.0, 3001.0, 4096.0, 12345.0, 90000.0])
    bulk = model.decode_ms_bulk(batch, batch * context, context, 10**6)
    assert bulk.tolist() == [
        model.decode_ms(int(b), 0, float(c), 10**6) for b, c in zip(batch, context)
    ]


def test_prefill_uses_requests_new_tokens_and_prefix_like_the_reference_call(qwen_spec):
    model = AicTiming.for_spec(qwen_spec)
    t = load_table(qwen_spec)
    i, j, k = (
        int(np.flatnonzero(t.prefill_batch == 4)[0]),
        int(np.flatnonzero(t.prefill_tokens == 512)[0]),
        int(np.flatnonzero(t.prefill_prefix == 1024)[0]),
    )
    # 4 requests of 1536 tokens, 1024 of them cached: 4 x 512 new tokens.
    assert model.prefill_ms(2048, 4, 1536, 1024) == t.prefill_ms[i, j, k]
    assert model.prefill_ms(0, 4, 1536, 1536) == 0.0


def test_a_mixed_pass_shares_the_weights_pass_like_the_sdk_mixed_step(qwen_spec):
    """One prefill request of 2048 tokens with 32 decodes at context 2048: the SDK's own mixed
    step costs about the prefill plus the decode share, well under prefill + decode."""
    model = AicTiming.for_spec(qwen_spec)
    handle = sdk.engine(qwen_spec)
    with sdk.quiet():
        mixed = handle.mixed_step_latency(2048, 32, 2048, 2)
    prefill = model.prefill_ms(2048, 1, 2048, 0)
    share = model.mixed_decode_ms(32, 32 * 2048, 2048.0, 10**6, 2048)
    assert prefill + share == pytest.approx(mixed, rel=0.01)
    assert share < model.decode_ms(32, 32 * 2048, 2048.0, 10**6)


def test_the_aic_model_follows_the_engines_draft_tokens():
    from plansim.sim.deployment import EngineArgs

    args = EngineArgs.model_validate(
        {
            "aic_nextn": 2,
            "timing_model": {"type": "aic", "model": "Qwen/Qwen3-32B", "system": "h200_sxm"},
        }
    )
    spec = args.effective_timing.aic
    assert spec.nextn == 2 and args.timing_model.aic.nextn == 0
    model = make_timing_model(args.effective_timing)
    with sdk.quiet():
        expected = sdk.engine(spec).predict_decode_latency(16, 2048)
    assert model.decode_ms(16, 16 * 2048, 2048.0, 10**6) == pytest.approx(expected, rel=0.03)
    assert model.decode_ms(16, 16 * 2048, 2048.0, 10**6) > AicTiming.for_spec(
        args.timing_model.aic
    ).decode_ms(16, 16 * 2048, 2048.0, 10**6)


def test_draft_tokens_are_set_on_the_engine_not_the_timing_model():
    from plansim.aic.spec import parse_aic_spec

    with pytest.raises(ValueError, match=r"^nextn: set aic_nextn on the engine"):
        parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "nextn": 1})


def test_the_backend_defaults_to_the_engine_type():
    from plansim.sim.deployment import EngineArgs

    args = EngineArgs.model_validate(
        {
            "engine_type": "sglang",
            "timing_model": {"type": "aic", "model": "Qwen/Qwen3-32B", "system": "h200_sxm"},
        }
    )
    assert args.timing_model.aic.backend == "sglang"
