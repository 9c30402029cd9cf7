"""``npz``: the reference mocker's NPZ profile at ``path``; ``external`` with ``provider:
dynamo_profile`` (or ``npz``) and ``config.path`` reads the same profile. Prefill by 1-D linear
interpolation over new tokens, decode by 2-D bilinear interpolation over (active KV tokens,
context length); both extrapolate linearly beyond the grid."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from plansim.errors import ConfigError
from plansim.sim.timing.base import MIN_DECODE_MS, TimingKind, TimingModel
from plansim.sim.timing.interp import Grid, Surface, interp1_scalar, interp2_scalar


class NpzTiming:
    """Interpolated model from the reference mocker's NPZ arrays."""

    def __init__(
        self,
        prefill_isl: np.ndarray,
        prefill_ttft_ms: np.ndarray,
        decode_kv: np.ndarray,
        decode_ctx: np.ndarray,
        decode_itl: np.ndarray,
    ) -> None:
        self.prefill_isl = prefill_isl
        self.prefill_ttft_ms = prefill_ttft_ms
        self.decode_kv = decode_kv
        self.decode_ctx = decode_ctx
        self.decode_itl = decode_itl
        # Scalar look-ups (one pass at a time) in plain Python.
        self._isl = Grid(prefill_isl)
        self._ttft = [float(v) for v in prefill_ttft_ms]
        self._kv = Grid(decode_kv)
        self._ctx = Grid(decode_ctx)
        self._itl = decode_itl.tolist()
        self._surface = Surface(decode_kv, decode_ctx, decode_itl)

    def prefill_ms(
        self, new_tokens: int, batch_size: int, mean_isl: float, mean_prefix: float
    ) -> float:
        if new_tokens <= 0:
            return 0.0
        return interp1_scalar(self._isl, self._ttft, float(new_tokens))

    def decode_ms(
        self, batch_size: int, active_kv_tokens: int, mean_context: float, total_kv_tokens: int
    ) -> float:
        value = interp2_scalar(
            self._kv, self._ctx, self._itl, float(active_kv_tokens), float(mean_context)
        )
        return max(MIN_DECODE_MS, value)

    def decode_ms_by_batch(
        self, batch_size: int, active_kv_tokens: np.ndarray, total_kv_tokens: int
    ) -> np.ndarray:
        """``decode_ms`` of ``batch_size`` requests over each of ``active_kv_tokens`` (int64),
        with mean context ``kv // batch_size``."""
        value = self._surface(
            active_kv_tokens.astype(np.float64), (active_kv_tokens // batch_size).astype(np.float64)
        )
        return np.maximum(MIN_DECODE_MS, value, out=value)

    def decode_ms_bulk(
        self,
        batch_size: np.ndarray,
        active_kv_tokens: np.ndarray,
        mean_context: np.ndarray,
        total_kv_tokens: int,
    ) -> np.ndarray:
        value = self._surface(
            np.asarray(active_kv_tokens, dtype=np.float64),
            np.asarray(mean_context, dtype=np.float64),
        )
        return np.maximum(MIN_DECODE_MS, value, out=value)


@lru_cache(maxsize=16)
def _load_npz_cached(path: str) -> NpzTiming:
    with np.load(path) as z:
        arrays = {k: np.asarray(z[k], dtype=np.float64) for k in z.files}
    return _npz_from_arrays(arrays, path)


def load_npz_profile(
    path: str | Path, *, field: str = "timing_model", source: str | None = None
) -> NpzTiming:
    """Load and check an NPZ profile; ``ConfigError`` naming ``field`` when missing or malformed."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"NPZ file not found: {p}", field=field, source=source)
    try:
        return _load_npz_cached(str(p.resolve()))
    except ConfigError as exc:
        raise ConfigError(exc.message, field=field, source=source) from None
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"cannot read NPZ {p}: {exc}", field=field, source=source) from None


def _npz_from_arrays(arrays: dict[str, np.ndarray], path: str) -> NpzTiming:
    need = (
        "prefill_isl",
        "prefill_ttft_ms",
        "decode_active_kv_tokens",
        "decode_context_length",
        "decode_itl",
    )
    missing = [k for k in need if k not in arrays]
    if missing:
        raise ConfigError(f"NPZ {path} lacks arrays {', '.join(missing)}")
    isl, ttft = arrays["prefill_isl"], arrays["prefill_ttft_ms"]
    kv, ctx = arrays["decode_active_kv_tokens"], arrays["decode_context_length"]
    itl = arrays["decode_itl"]
    if isl.ndim != 1 or ttft.shape != isl.shape or isl.size < 2:
        raise ConfigError(
            f"NPZ {path}: prefill_isl and prefill_ttft_ms must be equal 1-D arrays "
            f"of at least 2 points, got {isl.shape} and {ttft.shape}"
        )
    if (
        kv.ndim != 1
        or ctx.ndim != 1
        or kv.size < 2
        or ctx.size < 2
        or itl.shape != (kv.size, ctx.size)
    ):
        raise ConfigError(
            f"NPZ {path}: decode_itl must have shape (len(decode_active_kv_tokens), "
            f"len(decode_context_length)) = ({kv.size}, {ctx.size}), got {itl.shape}"
        )
    # NaN passes every comparison below and would time passes as NaN (or as the 1 ms floor,
    # where a scalar max() drops it): a profile is finite or refused.
    for name in need:
        if not np.all(np.isfinite(arrays[name])):
            raise ConfigError(f"NPZ {path}: {name} holds a value that is not finite (NaN or inf)")
    for name, arr in (
        ("prefill_isl", isl),
        ("decode_active_kv_tokens", kv),
        ("decode_context_length", ctx),
    ):
        if np.any(np.diff(arr) <= 0):
            raise ConfigError(f"NPZ {path}: {name} must be strictly increasing")
    return NpzTiming(isl, ttft, kv, ctx, itl)


class NpzKind(TimingKind):
    """``npz``: the profile at ``path``."""

    shared_keys = frozenset({"path"})

    def check(self, spec: Any) -> None:
        if not spec.path:
            raise ValueError("an npz timing model needs path")

    def npz_path(self, spec: Any) -> str | None:
        return spec.path

    def build(self, spec: Any) -> TimingModel:
        return load_npz_profile(self.npz_path(spec))


class ExternalKind(NpzKind):
    """``external``: the reference's ``dynamo_profile`` provider, the same NPZ profile."""

    shared_keys = frozenset({"path", "provider", "config"})

    def check(self, spec: Any) -> None:
        if spec.provider not in (None, "dynamo_profile", "npz"):
            raise ValueError(f"unknown external timing provider {spec.provider!r}")
        if not self.npz_path(spec):
            raise ValueError("an external dynamo_profile timing model needs config.path")

    def npz_path(self, spec: Any) -> str | None:
        return spec.path or (spec.config or {}).get("path")


KIND = NpzKind()
EXTERNAL_KIND = ExternalKind()
