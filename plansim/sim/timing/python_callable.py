"""``python``: ``callable`` is ``"module:attr"`` naming a factory or object with ``prefill_ms`` and
``decode_ms`` (and optionally ``decode_ms_bulk``, ``mixed_decode_ms``) as in
``plansim.sim.timing.base``."""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.errors import ConfigError
from plansim.params import param
from plansim.sim.timing.base import MIN_DECODE_MS, TimingKind, TimingModel


class CallableTiming:
    """A user-supplied model: any object with ``prefill_ms`` and ``decode_ms`` as above."""

    def __init__(self, impl: Any) -> None:
        self.impl = impl
        mixed = getattr(impl, "mixed_decode_ms", None)
        if mixed is not None:
            self.mixed_decode_ms = lambda *args: max(0.0, _ms(mixed(*args), "mixed_decode_ms"))

    def prefill_ms(
        self, new_tokens: int, batch_size: int, mean_isl: float, mean_prefix: float
    ) -> float:
        if new_tokens <= 0:
            return 0.0
        return _ms(
            self.impl.prefill_ms(new_tokens, batch_size, mean_isl, mean_prefix), "prefill_ms"
        )

    def decode_ms(
        self, batch_size: int, active_kv_tokens: int, mean_context: float, total_kv_tokens: int
    ) -> float:
        return max(
            MIN_DECODE_MS,
            _ms(
                self.impl.decode_ms(batch_size, active_kv_tokens, mean_context, total_kv_tokens),
                "decode_ms",
            ),
        )

    def decode_ms_bulk(
        self,
        batch_size: np.ndarray,
        active_kv_tokens: np.ndarray,
        mean_context: np.ndarray,
        total_kv_tokens: int,
    ) -> np.ndarray:
        bulk = getattr(self.impl, "decode_ms_bulk", None)
        if bulk is not None:
            raw = np.asarray(
                bulk(batch_size, active_kv_tokens, mean_context, total_kv_tokens), dtype=np.float64
            )
            if not np.all(np.isfinite(raw)):
                _ms(raw[~np.isfinite(raw)][0], "decode_ms_bulk")
            return np.maximum(MIN_DECODE_MS, raw)
        return np.array(
            [
                self.decode_ms(int(b), int(k), float(c), total_kv_tokens)
                for b, k, c in zip(batch_size, active_kv_tokens, mean_context)
            ]
        )


def _ms(value: Any, method: str) -> float:
    """The user model's ``value`` as a float; ``ConfigError`` if it is NaN or infinite (NaN
    would pass the 1 ms floor of a scalar ``max`` as 1 ms and poison the clock elsewhere)."""
    ms = float(value)
    if not math.isfinite(ms):
        raise ConfigError(
            f"{method} returned {ms!r}, not a finite time in ms", field="timing_model.callable"
        )
    return ms


def _import_callable(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not attr:
        raise ConfigError("callable must look like 'module:attr'", field="timing_model.callable")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {target}: {exc}", field="timing_model.callable") from None
    if isinstance(obj, type) or not (hasattr(obj, "prefill_ms") and hasattr(obj, "decode_ms")):
        obj = obj()  # a class or a factory
    if not (hasattr(obj, "prefill_ms") and hasattr(obj, "decode_ms")):
        raise ConfigError(f"{target} has no prefill_ms/decode_ms", field="timing_model.callable")
    return obj


@dataclass(frozen=True, slots=True)
class PythonParams:
    """The ``timing_model`` key of type ``python``."""

    callable: str | None = param(
        None, optional=True, help="'module:attr' naming the model, a class or a factory"
    )


class PythonKind(TimingKind):
    Params = PythonParams

    def check(self, spec: Any) -> None:
        if not spec.callable:
            raise ValueError("a python timing model needs callable: 'module:attr'")

    def build(self, spec: Any) -> TimingModel:
        return CallableTiming(_import_callable(spec.callable))


KIND = PythonKind()
