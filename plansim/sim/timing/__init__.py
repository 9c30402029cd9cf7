"""Pass-time models: how long an engine pass takes, in milliseconds, before speedup ratios.

``TIMING_MODELS`` maps each ``timing_model.type`` of the engine args to its ``TimingKind``
(``plansim.sim.timing.base``): ``polynomial`` (``default``), ``fixed``, ``npz``, ``external``,
``python``, ``aic`` (AIConfigurator's estimates, :mod:`plansim.sim.timing.aic`, extra
``plansim[aic]``) and ``roofline`` (from a model config and a GPU's peak figures,
:mod:`plansim.sim.timing.roofline`). ``make_timing_model(spec)`` builds the model a spec
describes.

Adding a model: one module with its model and a ``TimingKind`` (whose ``Params`` declare any keys
of its own: they become ``timing_model`` fields), and one line in ``TIMING_MODELS``.
"""

from __future__ import annotations

import functools
from typing import Any

from plansim.params import Param, params_of
from plansim.registry import Registry
from plansim.sim.timing.base import MIN_DECODE_MS, TimingKind, TimingModel
from plansim.sim.timing.npz import NpzTiming, load_npz_profile
from plansim.sim.timing.polynomial import PolynomialTiming

TIMING_MODELS: Registry[TimingKind] = Registry(
    "timing model type",
    {
        "polynomial": "plansim.sim.timing.polynomial:KIND",
        "default": "plansim.sim.timing.polynomial:KIND",
        "fixed": "plansim.sim.timing.fixed:KIND",
        "npz": "plansim.sim.timing.npz:KIND",
        "external": "plansim.sim.timing.npz:EXTERNAL_KIND",
        "python": "plansim.sim.timing.python_callable:KIND",
        "aic": "plansim.sim.timing.aic:KIND",
        "roofline": "plansim.sim.timing.roofline:KIND",
    },
)


@functools.cache
def timing_params(kinds: Registry[TimingKind] = TIMING_MODELS) -> dict[str, Param]:
    """Every type's own keys (``TimingKind.Params``) by name; ``TypeError`` when two types
    declare one key differently."""
    out: dict[str, Param] = {}
    for name, kind in kinds.items():
        for p in params_of(kind.Params):
            if out.setdefault(p.name, p) != p:
                raise TypeError(
                    f"timing_model key {p.name} of {name} differs from another type's declaration"
                )
    return out


def make_timing_model(spec: Any) -> TimingModel:
    """Build the model an ``EngineArgs.effective_timing`` spec describes."""
    return TIMING_MODELS.get(spec.type).build(spec)


__all__ = [
    "MIN_DECODE_MS",
    "TIMING_MODELS",
    "NpzTiming",
    "PolynomialTiming",
    "TimingKind",
    "TimingModel",
    "load_npz_profile",
    "make_timing_model",
    "timing_params",
]
