"""``polynomial`` (or ``default``): the reference default. Prefill from the pass's total new
tokens T, ``4.209989e-7*T^2 + 1.518344e-2*T + 16.50142``; decode from the KV fill fraction u,
``-25.74*u^2 + 54.01*u + 5.74``."""

from __future__ import annotations

from typing import Any

import numpy as np

from plansim.sim.timing.base import MIN_DECODE_MS, TimingKind, TimingModel

# Decode time in ms from the KV fill fraction u: U2 * u^2 + U1 * u + U0.
U2, U1, U0 = -25.74, 54.01, 5.74


class PolynomialTiming:
    """The reference mocker's default polynomial model."""

    def prefill_ms(self, new_tokens: int, batch_size: int, mean_isl: float,
                   mean_prefix: float) -> float:
        if new_tokens <= 0:
            return 0.0
        t = float(new_tokens)
        return 4.209989e-7 * t * t + 1.518344e-2 * t + 16.50142

    def decode_ms(self, batch_size: int, active_kv_tokens: int, mean_context: float,
                  total_kv_tokens: int) -> float:
        u = active_kv_tokens / total_kv_tokens
        return max(MIN_DECODE_MS, U2 * u * u + U1 * u + U0)

    def decode_ms_bulk(self, batch_size: np.ndarray, active_kv_tokens: np.ndarray,
                       mean_context: np.ndarray, total_kv_tokens: int) -> np.ndarray:
        return self.decode_ms_by_kv(active_kv_tokens, total_kv_tokens)

    def decode_ms_by_kv(self, active_kv_tokens: np.ndarray, total_kv_tokens: int) -> np.ndarray:
        """``decode_ms`` of passes over ``active_kv_tokens``: the batch and context play no
        part."""
        u = active_kv_tokens / total_kv_tokens
        # Same operation order as decode_ms, so bulk and single passes agree to the bit.
        return np.maximum(MIN_DECODE_MS, U2 * u * u + U1 * u + U0)


class PolynomialKind(TimingKind):
    def build(self, spec: Any) -> TimingModel:
        return PolynomialTiming()


KIND = PolynomialKind()
