"""``fixed``: constant per-pass times, ``prefill_ms`` and ``decode_ms``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.params import param
from plansim.sim.timing.base import TimingKind, TimingModel


class FixedTiming:
    """Constant pass times (the reference's ``fixed`` timing model)."""

    def __init__(self, prefill_ms: float, decode_ms: float) -> None:
        self._prefill_pass_ms = float(prefill_ms)
        self._decode_pass_ms = float(decode_ms)

    def prefill_ms(
        self, new_tokens: int, batch_size: int, mean_isl: float, mean_prefix: float
    ) -> float:
        return self._prefill_pass_ms if new_tokens > 0 else 0.0

    def decode_ms(
        self, batch_size: int, active_kv_tokens: int, mean_context: float, total_kv_tokens: int
    ) -> float:
        return self._decode_pass_ms

    def decode_ms_bulk(
        self,
        batch_size: np.ndarray,
        active_kv_tokens: np.ndarray,
        mean_context: np.ndarray,
        total_kv_tokens: int,
    ) -> np.ndarray:
        return np.full(np.shape(active_kv_tokens), self._decode_pass_ms)


@dataclass(frozen=True, slots=True)
class FixedParams:
    """The ``timing_model`` keys of type ``fixed``."""

    prefill_ms: float | None = param(
        None, ge=0, optional=True, help="time of a pass that prefills any tokens (ms)"
    )
    decode_ms: float | None = param(
        None, ge=0, optional=True, help="time of a pass that only decodes (ms)"
    )


class FixedKind(TimingKind):
    Params = FixedParams

    def check(self, spec: Any) -> None:
        if spec.prefill_ms is None or spec.decode_ms is None:
            raise ValueError("a fixed timing model needs prefill_ms and decode_ms")

    def build(self, spec: Any) -> TimingModel:
        return FixedTiming(spec.prefill_ms, spec.decode_ms)


KIND = FixedKind()
