"""Timing models: the reference polynomial, the NPZ profile (linear and bilinear interpolation
with extrapolation), fixed times, a Python callable, and NPZ validation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from plansim.errors import ConfigError
from plansim.params import param
from plansim.registry import Registry
from plansim.sim.deployment import EngineArgs, TimingModelSpec, build_deployment
from plansim.sim.timing import (
    TIMING_MODELS,
    PolynomialTiming,
    TimingKind,
    load_npz_profile,
    make_timing_model,
    timing_params,
)
from plansim.sim.timing.fixed import FixedTiming
from plansim.sim.timing.python_callable import CallableTiming

NPZ = Path(__file__).resolve().parent / "reference" / "profiles" / "sample_h200.npz"


def test_polynomial_prefill_uses_new_tokens_and_is_zero_without_them():
    m = PolynomialTiming()
    assert m.prefill_ms(1000, 1, 1000, 0) == pytest.approx(
        4.209989e-7 * 1e6 + 1.518344e-2 * 1000 + 16.50142
    )
    assert m.prefill_ms(0, 1, 100, 100) == 0.0


def test_polynomial_decode_depends_on_kv_fill_and_never_drops_under_1ms():
    m = PolynomialTiming()
    u = 524288 / 1048576
    assert m.decode_ms(7, 524288, 1000, 1048576) == pytest.approx(-25.74 * u * u + 54.01 * u + 5.74)
    assert m.decode_ms(1, 3 * 1048576, 1000, 1048576) == 1.0  # u = 3: the polynomial is negative


def test_bulk_decode_matches_the_scalar_model_bit_for_bit():
    m = PolynomialTiming()
    kv = np.array([1000, 50000, 900000], dtype=np.int64)
    bulk = m.decode_ms_bulk(np.ones(3), kv, kv, 1048576)
    assert bulk.tolist() == [m.decode_ms(1, int(k), float(k), 1048576) for k in kv]


def test_npz_prefill_interpolates_linearly_and_extrapolates_past_the_grid():
    m = load_npz_profile(NPZ)
    isl, ttft = m.prefill_isl, m.prefill_ttft_ms
    # 2000 lies between 1024 and 2048.
    expected = ttft[4] + (2000 - 1024) / (2048 - 1024) * (ttft[5] - ttft[4])
    assert m.prefill_ms(2000, 1, 2000, 0) == pytest.approx(expected)
    beyond = ttft[-1] + (40000 - isl[-1]) / (isl[-1] - isl[-2]) * (ttft[-1] - ttft[-2])
    assert m.prefill_ms(40000, 1, 40000, 0) == pytest.approx(beyond)


def test_npz_decode_interpolates_bilinearly():
    m = load_npz_profile(NPZ)
    z = m.decode_itl
    # kv 2001 in [0, 4096], context 2001 in [512, 2048]
    tx = 2001 / 4096
    ty = (2001 - 512) / (2048 - 512)
    near = z[0, 1] + ty * (z[0, 2] - z[0, 1])
    far = z[1, 1] + ty * (z[1, 2] - z[1, 1])
    assert m.decode_ms(1, 2001, 2001, 1) == pytest.approx(near + tx * (far - near))


def test_npz_with_wrong_shapes_fails_naming_the_key(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(
        bad,
        prefill_isl=np.array([1.0, 2.0]),
        prefill_ttft_ms=np.array([1.0, 2.0]),
        decode_active_kv_tokens=np.array([0.0, 1.0, 2.0]),
        decode_context_length=np.array([1.0, 2.0]),
        decode_itl=np.ones((2, 2)),
    )
    with pytest.raises(ConfigError) as err:
        build_deployment({"engine": {"planner_profile_data": str(bad)}})
    assert err.value.field == "engine.planner_profile_data"
    assert "decode_itl" in str(err.value)


@pytest.mark.parametrize(
    "key",
    [
        "prefill_isl",
        "prefill_ttft_ms",
        "decode_active_kv_tokens",
        "decode_context_length",
        "decode_itl",
    ],
)
@pytest.mark.parametrize("bad_value", [np.nan, np.inf])
def test_npz_with_a_value_that_is_not_finite_fails_naming_the_array(tmp_path, key, bad_value):
    arrays = {
        "prefill_isl": np.array([1.0, 2.0]),
        "prefill_ttft_ms": np.array([1.0, 2.0]),
        "decode_active_kv_tokens": np.array([0.0, 1.0]),
        "decode_context_length": np.array([1.0, 2.0]),
        "decode_itl": np.ones((2, 2)),
    }
    arrays[key] = arrays[key].copy()
    arrays[key].flat[-1] = bad_value
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    with pytest.raises(ConfigError) as err:
        build_deployment({"engine": {"planner_profile_data": str(bad)}})
    assert err.value.field == "engine.planner_profile_data"
    assert f"{key} holds a value that is not finite" in str(err.value)


def test_missing_npz_fails_before_the_replay():
    with pytest.raises(ConfigError) as err:
        build_deployment({"engine": {"timing_model": {"type": "npz", "path": "/nowhere.npz"}}})
    assert err.value.field == "engine.timing_model"


@pytest.mark.parametrize(
    ("model", "call", "method"),
    [
        ("NanDecode", lambda m: m.decode_ms(1, 10, 10.0, 100), "decode_ms returned nan"),
        ("InfPrefill", lambda m: m.prefill_ms(5, 1, 5.0, 0.0), "prefill_ms returned inf"),
        (
            "NanBulk",
            lambda m: m.decode_ms_bulk(
                np.array([1, 1]), np.array([10, 20]), np.array([10.0, 20.0]), 100
            ),
            "decode_ms_bulk returned nan",
        ),
    ],
)
def test_a_user_model_time_that_is_not_finite_is_a_config_error(model, call, method):
    user = make_timing_model(
        EngineArgs(
            timing_model={"type": "python", "callable": f"simkit_timing:{model}"}
        ).effective_timing
    )
    with pytest.raises(ConfigError) as err:
        call(user)
    assert err.value.field == "timing_model.callable"
    assert method in str(err.value)


def test_fixed_and_callable_models():
    fixed = make_timing_model(TimingModelSpec(type="fixed", prefill_ms=10, decode_ms=2))
    assert isinstance(fixed, FixedTiming)
    assert (fixed.prefill_ms(5, 1, 5, 0), fixed.prefill_ms(0, 0, 0, 0)) == (10.0, 0.0)
    user = make_timing_model(
        EngineArgs(
            timing_model={"type": "python", "callable": "simkit_timing:Linear"}
        ).effective_timing
    )
    assert isinstance(user, CallableTiming)
    assert user.prefill_ms(100, 1, 100, 0) == 10.0
    assert user.decode_ms(1, 10, 10, 100) == 1.0  # 0.5 from the user, floored at 1 ms


def test_the_timing_registry_names_every_type_and_rejects_others():
    assert set(TIMING_MODELS.names()) == {
        "polynomial",
        "default",
        "fixed",
        "npz",
        "external",
        "python",
        "aic",
        "roofline",
    }
    with pytest.raises(ConfigError, match=r"unknown timing model type 'measured' \(known: "):
        build_deployment({"engine": {"timing_model": {"type": "measured"}}})


@pytest.mark.parametrize(
    ("spec", "missing"),
    [
        ({"type": "fixed", "prefill_ms": 5.0}, "prefill_ms and decode_ms"),
        ({"type": "npz"}, "needs path"),
        ({"type": "external", "provider": "dynamo_profile"}, "needs config.path"),
        ({"type": "python"}, "needs callable"),
    ],
)
def test_each_type_checks_the_keys_it_needs(spec, missing):
    with pytest.raises(ConfigError, match=missing):
        build_deployment({"engine": {"timing_model": spec}})


def test_a_types_own_keys_are_timing_model_fields_with_their_bounds():
    assert TimingModelSpec.model_fields["decode_ms"].description.startswith("time of a pass")
    with pytest.raises(ConfigError) as err:
        build_deployment(
            {"engine": {"timing_model": {"type": "fixed", "prefill_ms": -1, "decode_ms": 2}}}
        )
    assert err.value.field == "engine.timing_model.prefill_ms"


@dataclass(frozen=True, slots=True)
class _ScaleA:
    scale: float = param(1.0, gt=0, help="a multiplier")


@dataclass(frozen=True, slots=True)
class _ScaleB:
    scale: float = param(2.0, gt=0, help="a multiplier")


class _KindA(TimingKind):
    Params = _ScaleA


class _KindB(TimingKind):
    Params = _ScaleB


def test_two_types_declaring_one_key_differently_is_refused():
    kinds = Registry("timing model type", {"a": f"{__name__}:KIND_A", "b": f"{__name__}:KIND_B"})
    with pytest.raises(TypeError, match="scale of b differs"):
        timing_params(kinds)
    alike = Registry("timing model type", {"a": f"{__name__}:KIND_A", "c": f"{__name__}:KIND_A"})
    assert list(timing_params(alike)) == ["scale"]


KIND_A, KIND_B = _KindA(), _KindB()


def test_polynomial_coefficients_given_replace_the_references_and_the_rest_stay():
    spec = TimingModelSpec(
        type="polynomial",
        prefill_base_ms=20.0,
        prefill_ms_per_token=0.03,
        decode_ms_per_kv_fill=10.0,
    )
    m = make_timing_model(spec)
    # Prefill 4.209989e-7 T^2 (the reference's square term) + 0.03 T + 20.
    assert m.prefill_ms(1000, 1, 1000, 0) == pytest.approx(4.209989e-7 * 1e6 + 30.0 + 20.0)
    u = 262144 / 1048576
    assert m.decode_ms(3, 262144, 1000, 1048576) == pytest.approx(-25.74 * u * u + 10.0 * u + 5.74)
    # Decode still depends on the KV tokens alone: the engine tabulates it by KV.
    assert m.decode_ms_by_kv(np.array([262144]), 1048576)[0] == m.decode_ms(3, 262144, 1, 1048576)


def test_polynomial_context_and_request_terms_add_to_decode_by_batch():
    spec = TimingModelSpec(
        type="polynomial",
        decode_base_ms=4.0,
        decode_ms_per_kv_fill=16.0,
        decode_ms_per_kv_fill_sq=0.0,
        decode_ms_per_context_token=1e-4,
        decode_ms_per_request=0.5,
    )
    m = make_timing_model(spec)
    # 4 requests over 40000 KV tokens, mean context 10000: 4 + 16 u + 1 + 2 ms.
    expected = 4.0 + 16.0 * 40000 / 1048576 + 1.0 + 2.0
    assert m.decode_ms(4, 40000, 10000, 1048576) == pytest.approx(expected)
    assert getattr(m, "decode_ms_by_kv", None) is None  # no table by KV alone
    by_batch = m.decode_ms_by_batch(4, np.array([40000, 80000]), 1048576)
    assert by_batch[0] == pytest.approx(expected)
    assert by_batch[1] == pytest.approx(4.0 + 16.0 * 80000 / 1048576 + 2.0 + 2.0)


def test_polynomial_coefficient_keys_belong_to_the_polynomial_type():
    with pytest.raises(ConfigError) as err:
        build_deployment(
            {"engine": {"timing_model": {"type": "npz", "path": str(NPZ), "decode_base_ms": 3.0}}}
        )
    assert err.value.field == "engine.timing_model.decode_base_ms"
