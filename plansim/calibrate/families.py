"""The timing-model families a calibration can fit, each as the deployment keys it sets.

Every family fits the per-request overhead (``request_overhead_ms``: time outside the engines,
added to TTFT and E2E) besides its own parameters:

- ``polynomial``: the reference's polynomial model with all six coefficients free: prefill
  ``prefill_base_ms + prefill_ms_per_token * T + prefill_ms_per_token_sq * T^2`` of a pass's new
  tokens T, decode ``decode_base_ms + decode_ms_per_kv_fill * u + decode_ms_per_kv_fill_sq *
  u^2`` of its KV fill fraction u;
- ``linear``: the same prefill; decode linear in u, in the pass's mean context
  (``decode_ms_per_context_token``) and in its batch size (``decode_ms_per_request``): the
  terms an NPZ profile's decode surface over (KV tokens, context) is made of, and what
  memory-bound decode is (no square term bending beyond the fill levels the trace saw);
- ``scaled``: the deployment's own timing model (an NPZ profile, AIConfigurator's estimates,
  the polynomial) with prefill and decode times scaled apart, through the engine's
  ``speedup_ratio`` and ``decode_speedup_ratio``.

The polynomial families replace the deployment's timing model and set its speedup ratios to 1,
so that the coefficients are the pass times themselves. Keys go to every engine section the
deployment has (``engine``, and ``prefill_engine`` / ``decode_engine`` when given).

``FAMILIES`` is the registry; a family is a ``Family`` with its ``Parameter`` records, a start
from the fast estimate (``plansim.calibrate.estimate``) and the overrides of a parameter vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.registry import Registry

OVERHEAD_KEY = "request_overhead_ms"
SECTIONS = ("engine", "prefill_engine", "decode_engine")


@dataclass(frozen=True, slots=True)
class Parameter:
    """A fitted parameter: its name (a deployment key's last part), unit, bounds and typical
    magnitude (the fit's step and scale)."""

    name: str
    unit: str
    lower: float
    upper: float
    scale: float


@dataclass(frozen=True, slots=True)
class Scales:
    """The magnitudes the parameters are measured against: the prefill tokens of a long prompt,
    the KV fill fraction the trace reaches, a typical pass time (ms), a typical request context
    (tokens) and batch (requests)."""

    tokens: float
    kv_fill: float
    pass_ms: float
    context_tokens: float
    batch: float


class Family:
    """Base of a family: ``name``, ``summary``, ``parameters(scales)`` (overhead excluded),
    ``start(estimate)`` (the fast estimate's values, overhead excluded) and
    ``overrides(values, deployment)`` (dotted deployment keys, overhead excluded)."""

    name: str = ""
    summary: str = ""
    # The highest power of the KV load among the fitted decode terms (0: none is fitted, the
    # deployment's own shape is only scaled). Beyond the loads a trace recorded, a fitted square
    # term bends either way; the choice between equally good families prefers the lower power.
    load_degree: int = 1

    def parameters(self, scales: Scales) -> tuple[Parameter, ...]:
        raise NotImplementedError

    def start(self, estimate: Any) -> np.ndarray:
        raise NotImplementedError

    def overrides(self, values: np.ndarray, deployment: Any) -> dict[str, Any]:
        raise NotImplementedError


def overhead_parameter(scales: Scales) -> Parameter:
    return Parameter(OVERHEAD_KEY, "ms", 0.0, 1e6, scales.pass_ms)


def sections(deployment: Any) -> list[str]:
    """The engine sections ``deployment`` has."""
    return [s for s in SECTIONS if s == "engine" or getattr(deployment, s) is not None]


POLYNOMIAL_KEYS = (
    "prefill_base_ms",
    "prefill_ms_per_token",
    "prefill_ms_per_token_sq",
    "decode_base_ms",
    "decode_ms_per_kv_fill",
    "decode_ms_per_kv_fill_sq",
    "decode_ms_per_context_token",
    "decode_ms_per_request",
)


class Polynomial(Family):
    """The polynomial timing type; ``decode`` names its decode coefficients fitted (the others
    are 0)."""

    name = "polynomial"
    summary = "polynomial timing, the reference's six coefficients"
    load_degree = 2
    decode: tuple[str, ...] = (
        "decode_base_ms",
        "decode_ms_per_kv_fill",
        "decode_ms_per_kv_fill_sq",
    )

    def parameters(self, scales: Scales) -> tuple[Parameter, ...]:
        t, u, ms = scales.tokens, scales.kv_fill, scales.pass_ms
        decode = {
            "decode_base_ms": Parameter("decode_base_ms", "ms", 0.0, 1e5, ms / 4),
            "decode_ms_per_kv_fill": Parameter("decode_ms_per_kv_fill", "ms", 0.0, 1e6, ms / 2 / u),
            "decode_ms_per_kv_fill_sq": Parameter(
                "decode_ms_per_kv_fill_sq", "ms", -1e6, 1e6, ms / 2 / u**2
            ),
            "decode_ms_per_context_token": Parameter(
                "decode_ms_per_context_token", "ms/token", 0.0, 1e3, ms / 4 / scales.context_tokens
            ),
            "decode_ms_per_request": Parameter(
                "decode_ms_per_request", "ms/request", 0.0, 1e4, ms / 4 / scales.batch
            ),
        }
        return (
            Parameter("prefill_base_ms", "ms", 0.0, 1e5, ms),
            Parameter("prefill_ms_per_token", "ms/token", 0.0, 1e3, 5 * ms / t),
            Parameter("prefill_ms_per_token_sq", "ms/token^2", 0.0, 1e3, ms / t**2),
            *(decode[name] for name in self.decode),
        )

    def start(self, estimate: Any) -> np.ndarray:
        decode = dict(
            zip(
                ("decode_base_ms", "decode_ms_per_kv_fill", "decode_ms_per_kv_fill_sq"),
                estimate.decode,
            )
        )
        return np.array(
            [*estimate.prefill, *(decode.get(n, 0.0) for n in self.decode)], dtype=np.float64
        )

    def overrides(self, values: np.ndarray, deployment: Any) -> dict[str, Any]:
        names = POLYNOMIAL_KEYS[:3] + self.decode
        coefficients = {
            **dict.fromkeys(POLYNOMIAL_KEYS, 0.0),
            **dict(zip(names, (float(v) for v in values))),
        }
        out: dict[str, Any] = {}
        for s in sections(deployment):
            out[f"{s}.timing_model"] = {"type": "polynomial", **coefficients}
            out[f"{s}.speedup_ratio"] = 1.0
            out[f"{s}.decode_speedup_ratio"] = 1.0
        return out


class Linear(Polynomial):
    name = "linear"
    summary = "polynomial prefill; decode linear in KV fill, mean context and batch size"
    load_degree = 1
    decode = (
        "decode_base_ms",
        "decode_ms_per_kv_fill",
        "decode_ms_per_context_token",
        "decode_ms_per_request",
    )


class Scaled(Family):
    name = "scaled"
    summary = "the deployment's own timing model, prefill and decode scaled apart"
    load_degree = 0

    def parameters(self, scales: Scales) -> tuple[Parameter, ...]:
        return (
            Parameter("prefill_scale", "x", 0.01, 100.0, 0.5),
            Parameter("decode_scale", "x", 0.01, 100.0, 0.5),
        )

    def start(self, estimate: Any) -> np.ndarray:
        return np.array([estimate.prefill_scale, estimate.decode_scale], dtype=np.float64)

    def overrides(self, values: np.ndarray, deployment: Any) -> dict[str, Any]:
        prefill, decode = (float(v) for v in values)
        out: dict[str, Any] = {}
        for s in sections(deployment):
            args = getattr(deployment, s)
            # Prefill time is divided by speedup_ratio, decode time by speedup_ratio *
            # decode_speedup_ratio (plansim.sim.engine).
            out[f"{s}.speedup_ratio"] = args.speedup_ratio / prefill
            out[f"{s}.decode_speedup_ratio"] = args.decode_speedup_ratio * prefill / decode
        return out


POLYNOMIAL = Polynomial()
LINEAR = Linear()
SCALED = Scaled()

# Between equally good families ``heldout.choose`` prefers the lower load degree, then the fewer
# parameters.
FAMILIES: Registry[Family] = Registry(
    "calibration family",
    {
        "scaled": "plansim.calibrate.families:SCALED",
        "polynomial": "plansim.calibrate.families:POLYNOMIAL",
        "linear": "plansim.calibrate.families:LINEAR",
    },
)


def family_overrides(family: Family, values: np.ndarray, deployment: Any) -> dict[str, Any]:
    """Every deployment key a family's parameters (the overhead last) set."""
    return {**family.overrides(values[:-1], deployment), OVERHEAD_KEY: float(values[-1])}


def parameter_names(family: Family, scales: Scales) -> list[str]:
    return [p.name for p in (*family.parameters(scales), overhead_parameter(scales))]
