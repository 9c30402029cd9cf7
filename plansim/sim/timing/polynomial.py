"""``polynomial`` (or ``default``): the reference default. Prefill from the pass's total new
tokens T, ``4.209989e-7*T^2 + 1.518344e-2*T + 16.50142``; decode from the KV fill fraction u,
``-25.74*u^2 + 54.01*u + 5.74``.

Each coefficient may be given (``prefill_base_ms``, ``prefill_ms_per_token``,
``prefill_ms_per_token_sq``; ``decode_base_ms``, ``decode_ms_per_kv_fill``,
``decode_ms_per_kv_fill_sq``), e.g. as ``plansim calibrate`` fits them to a deployment's
recorded latencies; one not given keeps the reference's value. Two decode terms the reference
does not have may be added (0 unless given): ``decode_ms_per_context_token`` times the pass's
mean context (what the reference's NPZ profiles vary with besides KV tokens) and
``decode_ms_per_request`` times its batch size (per-request compute)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.params import param
from plansim.sim.timing.base import MIN_DECODE_MS, TimingKind, TimingModel

# The reference's coefficients: prefill P2 * T^2 + P1 * T + P0 ms from the pass's new tokens T,
# decode U2 * u^2 + U1 * u + U0 ms from the KV fill fraction u.
P2, P1, P0 = 4.209989e-7, 1.518344e-2, 16.50142
U2, U1, U0 = -25.74, 54.01, 5.74


class PolynomialTiming:
    """The reference mocker's polynomial model, with its coefficients or others."""

    def __init__(
        self,
        prefill: tuple[float, float, float] = (P0, P1, P2),
        decode: tuple[float, float, float] = (U0, U1, U2),
    ) -> None:
        """``prefill``: (ms, ms per token, ms per token squared); ``decode``: (ms, ms per unit
        of KV fill fraction, ms per its square)."""
        self.p0, self.p1, self.p2 = (float(c) for c in prefill)
        self.u0, self.u1, self.u2 = (float(c) for c in decode)

    def prefill_ms(
        self, new_tokens: int, batch_size: int, mean_isl: float, mean_prefix: float
    ) -> float:
        if new_tokens <= 0:
            return 0.0
        t = float(new_tokens)
        return self.p2 * t * t + self.p1 * t + self.p0

    def decode_ms(
        self, batch_size: int, active_kv_tokens: int, mean_context: float, total_kv_tokens: int
    ) -> float:
        u = active_kv_tokens / total_kv_tokens
        return max(MIN_DECODE_MS, self.u2 * u * u + self.u1 * u + self.u0)

    def decode_ms_bulk(
        self,
        batch_size: np.ndarray,
        active_kv_tokens: np.ndarray,
        mean_context: np.ndarray,
        total_kv_tokens: int,
    ) -> np.ndarray:
        return self.decode_ms_by_kv(active_kv_tokens, total_kv_tokens)

    def decode_ms_by_kv(self, active_kv_tokens: np.ndarray, total_kv_tokens: int) -> np.ndarray:
        """``decode_ms`` of passes over ``active_kv_tokens``: the batch and context play no
        part."""
        u = active_kv_tokens / total_kv_tokens
        # Same operation order as decode_ms, so bulk and single passes agree to the bit.
        return np.maximum(MIN_DECODE_MS, self.u2 * u * u + self.u1 * u + self.u0)


class ContextPolynomialTiming(PolynomialTiming):
    """The polynomial model plus decode terms per mean-context token (``per_context_ms``) and
    per request of the batch (``per_request_ms``); its decode times depend on the batch, so it
    offers ``decode_ms_by_batch`` (mean context ``kv // batch``, as the engine passes it)."""

    decode_ms_by_kv = None  # type: ignore[assignment]  # the batch matters: no table by KV alone

    def __init__(
        self,
        prefill: tuple[float, float, float],
        decode: tuple[float, float, float],
        per_context_ms: float,
        per_request_ms: float,
    ) -> None:
        super().__init__(prefill, decode)
        self.uc, self.ur = float(per_context_ms), float(per_request_ms)

    def decode_ms(
        self, batch_size: int, active_kv_tokens: int, mean_context: float, total_kv_tokens: int
    ) -> float:
        u = active_kv_tokens / total_kv_tokens
        return max(
            MIN_DECODE_MS,
            self.u2 * u * u + self.u1 * u + self.u0 + self.uc * mean_context + self.ur * batch_size,
        )

    def decode_ms_bulk(
        self,
        batch_size: np.ndarray,
        active_kv_tokens: np.ndarray,
        mean_context: np.ndarray,
        total_kv_tokens: int,
    ) -> np.ndarray:
        u = np.asarray(active_kv_tokens) / total_kv_tokens
        return np.maximum(
            MIN_DECODE_MS,
            self.u2 * u * u
            + self.u1 * u
            + self.u0
            + self.uc * np.asarray(mean_context)
            + self.ur * np.asarray(batch_size),
        )

    def decode_ms_by_batch(
        self, batch_size: int, active_kv_tokens: np.ndarray, total_kv_tokens: int
    ) -> np.ndarray:
        """``decode_ms`` of ``batch_size`` requests over each of ``active_kv_tokens`` (int64)."""
        return self.decode_ms_bulk(
            np.full(active_kv_tokens.shape, batch_size),
            active_kv_tokens,
            active_kv_tokens // batch_size,
            total_kv_tokens,
        )


@dataclass(frozen=True, slots=True)
class PolynomialParams:
    """The ``timing_model`` keys of type ``polynomial``: its coefficients (unset: the
    reference's)."""

    prefill_base_ms: float | None = param(
        None, optional=True, help="prefill time of a pass, constant term (ms)"
    )
    prefill_ms_per_token: float | None = param(
        None, optional=True, help="prefill time per new token of the pass (ms)"
    )
    prefill_ms_per_token_sq: float | None = param(
        None, optional=True, help="prefill time per squared new token of the pass (ms)"
    )
    decode_base_ms: float | None = param(
        None, optional=True, help="decode time of a pass, constant term (ms)"
    )
    decode_ms_per_kv_fill: float | None = param(
        None, optional=True, help="decode time per unit of KV fill fraction (ms)"
    )
    decode_ms_per_kv_fill_sq: float | None = param(
        None, optional=True, help="decode time per squared KV fill fraction (ms)"
    )
    decode_ms_per_context_token: float | None = param(
        None, optional=True, help="decode time per token of the pass's mean context (ms)"
    )
    decode_ms_per_request: float | None = param(
        None, optional=True, help="decode time per request of the pass's batch (ms)"
    )


def _given(value: float | None, default: float) -> float:
    return default if value is None else value


class PolynomialKind(TimingKind):
    Params = PolynomialParams

    def build(self, spec: Any) -> TimingModel:
        prefill = (
            _given(spec.prefill_base_ms, P0),
            _given(spec.prefill_ms_per_token, P1),
            _given(spec.prefill_ms_per_token_sq, P2),
        )
        decode = (
            _given(spec.decode_base_ms, U0),
            _given(spec.decode_ms_per_kv_fill, U1),
            _given(spec.decode_ms_per_kv_fill_sq, U2),
        )
        context = _given(spec.decode_ms_per_context_token, 0.0)
        request = _given(spec.decode_ms_per_request, 0.0)
        if context or request:
            return ContextPolynomialTiming(prefill, decode, context, request)
        return PolynomialTiming(prefill, decode)


KIND = PolynomialKind()
