"""Pass-time models: how long an engine pass takes, in milliseconds, before speedup ratios.

A model has ``prefill_ms(new_tokens, batch_size, mean_isl, mean_prefix)`` (0 when there are no
new tokens) and ``decode_ms(batch_size, active_kv_tokens, mean_context, total_kv_tokens)`` (never
under 1 ms), plus ``decode_ms_bulk`` taking numpy arrays of the same arguments, which the engine
uses to time a run of decode-only passes in one call.

- ``PolynomialTiming``: the reference default. Prefill from the pass's total new tokens T,
  ``4.209989e-7*T^2 + 1.518344e-2*T + 16.50142``; decode from the KV fill fraction u,
  ``-25.74*u^2 + 54.01*u + 5.74``.
- ``NpzTiming``: the reference mocker's NPZ profile; prefill by 1-D linear interpolation over
  new tokens, decode by 2-D bilinear interpolation over (active KV tokens, context length); both
  extrapolate linearly beyond the grid.
- ``FixedTiming``: constant per-pass times.
- ``CallableTiming``: wraps a user object with ``prefill_ms`` and ``decode_ms`` methods.
- ``aic``: AIConfigurator's estimates (:mod:`plansim.aic.timing`).

A model may also offer ``mixed_decode_ms(batch_size, active_kv_tokens, mean_context,
total_kv_tokens, prefill_tokens)``: the time decode requests add to a pass that also prefills
``prefill_tokens`` tokens. Without it a mixed pass costs ``prefill_ms + decode_ms``.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from plansim.errors import ConfigError

MIN_DECODE_MS = 1.0


class TimingModel(Protocol):
    def prefill_ms(self, new_tokens: int, batch_size: int, mean_isl: float,
                   mean_prefix: float) -> float: ...

    def decode_ms(self, batch_size: int, active_kv_tokens: int, mean_context: float,
                  total_kv_tokens: int) -> float: ...

    def decode_ms_bulk(self, batch_size: np.ndarray, active_kv_tokens: np.ndarray,
                       mean_context: np.ndarray, total_kv_tokens: int) -> np.ndarray: ...


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
        return max(MIN_DECODE_MS, -25.74 * u * u + 54.01 * u + 5.74)

    def decode_ms_bulk(self, batch_size: np.ndarray, active_kv_tokens: np.ndarray,
                       mean_context: np.ndarray, total_kv_tokens: int) -> np.ndarray:
        u = active_kv_tokens / total_kv_tokens
        # Same operation order as decode_ms, so bulk and single passes agree to the bit.
        return np.maximum(MIN_DECODE_MS, -25.74 * u * u + 54.01 * u + 5.74)


class FixedTiming:
    """Constant pass times (the reference's ``fixed`` timing model)."""

    def __init__(self, prefill_ms: float, decode_ms: float) -> None:
        self._prefill_pass_ms = float(prefill_ms)
        self._decode_pass_ms = float(decode_ms)

    def prefill_ms(self, new_tokens: int, batch_size: int, mean_isl: float,
                   mean_prefix: float) -> float:
        return self._prefill_pass_ms if new_tokens > 0 else 0.0

    def decode_ms(self, batch_size: int, active_kv_tokens: int, mean_context: float,
                  total_kv_tokens: int) -> float:
        return self._decode_pass_ms

    def decode_ms_bulk(self, batch_size: np.ndarray, active_kv_tokens: np.ndarray,
                       mean_context: np.ndarray, total_kv_tokens: int) -> np.ndarray:
        return np.full(np.shape(active_kv_tokens), self._decode_pass_ms)


class NpzTiming:
    """Interpolated model from the reference mocker's NPZ arrays."""

    def __init__(self, prefill_isl: np.ndarray, prefill_ttft_ms: np.ndarray,
                 decode_kv: np.ndarray, decode_ctx: np.ndarray, decode_itl: np.ndarray) -> None:
        self.prefill_isl = prefill_isl
        self.prefill_ttft_ms = prefill_ttft_ms
        self.decode_kv = decode_kv
        self.decode_ctx = decode_ctx
        self.decode_itl = decode_itl

    def prefill_ms(self, new_tokens: int, batch_size: int, mean_isl: float,
                   mean_prefix: float) -> float:
        if new_tokens <= 0:
            return 0.0
        return float(_interp1(self.prefill_isl, self.prefill_ttft_ms, np.float64(new_tokens)))

    def decode_ms(self, batch_size: int, active_kv_tokens: int, mean_context: float,
                  total_kv_tokens: int) -> float:
        value = _interp2(self.decode_kv, self.decode_ctx, self.decode_itl,
                         np.float64(active_kv_tokens), np.float64(mean_context))
        return max(MIN_DECODE_MS, float(value))

    def decode_ms_bulk(self, batch_size: np.ndarray, active_kv_tokens: np.ndarray,
                       mean_context: np.ndarray, total_kv_tokens: int) -> np.ndarray:
        value = _interp2(self.decode_kv, self.decode_ctx, self.decode_itl,
                         np.asarray(active_kv_tokens, dtype=np.float64),
                         np.asarray(mean_context, dtype=np.float64))
        return np.maximum(MIN_DECODE_MS, value)


class CallableTiming:
    """A user-supplied model: any object with ``prefill_ms`` and ``decode_ms`` as above."""

    def __init__(self, impl: Any) -> None:
        self.impl = impl
        mixed = getattr(impl, "mixed_decode_ms", None)
        if mixed is not None:
            self.mixed_decode_ms = lambda *args: max(0.0, float(mixed(*args)))

    def prefill_ms(self, new_tokens: int, batch_size: int, mean_isl: float,
                   mean_prefix: float) -> float:
        if new_tokens <= 0:
            return 0.0
        return float(self.impl.prefill_ms(new_tokens, batch_size, mean_isl, mean_prefix))

    def decode_ms(self, batch_size: int, active_kv_tokens: int, mean_context: float,
                  total_kv_tokens: int) -> float:
        return max(MIN_DECODE_MS, float(self.impl.decode_ms(batch_size, active_kv_tokens,
                                                            mean_context, total_kv_tokens)))

    def decode_ms_bulk(self, batch_size: np.ndarray, active_kv_tokens: np.ndarray,
                       mean_context: np.ndarray, total_kv_tokens: int) -> np.ndarray:
        bulk = getattr(self.impl, "decode_ms_bulk", None)
        if bulk is not None:
            return np.maximum(MIN_DECODE_MS, np.asarray(
                bulk(batch_size, active_kv_tokens, mean_context, total_kv_tokens), dtype=np.float64))
        return np.array([self.decode_ms(int(b), int(k), float(c), total_kv_tokens)
                         for b, k, c in zip(batch_size, active_kv_tokens, mean_context)])


def make_timing_model(spec: Any) -> TimingModel:
    """Build the model an ``EngineArgs.effective_timing`` spec describes."""
    kind = spec.type
    if kind in ("default", "polynomial"):
        return PolynomialTiming()
    if kind == "fixed":
        return FixedTiming(spec.prefill_ms, spec.decode_ms)
    if kind in ("npz", "external"):
        return load_npz_profile(spec.npz_path)
    if kind == "python":
        return CallableTiming(_import_callable(spec.callable))
    if kind == "aic":
        from plansim.aic.timing import AicTiming

        return AicTiming.for_spec(spec.aic)
    raise ConfigError(f"unknown timing model type {kind!r}", field="timing_model.type")


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


@lru_cache(maxsize=16)
def _load_npz_cached(path: str) -> NpzTiming:
    with np.load(path) as z:
        arrays = {k: np.asarray(z[k], dtype=np.float64) for k in z.files}
    return _npz_from_arrays(arrays, path)


def load_npz_profile(path: str | Path, *, field: str = "timing_model",
                     source: str | None = None) -> NpzTiming:
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
    need = ("prefill_isl", "prefill_ttft_ms", "decode_active_kv_tokens", "decode_context_length",
            "decode_itl")
    missing = [k for k in need if k not in arrays]
    if missing:
        raise ConfigError(f"NPZ {path} lacks arrays {', '.join(missing)}")
    isl, ttft = arrays["prefill_isl"], arrays["prefill_ttft_ms"]
    kv, ctx = arrays["decode_active_kv_tokens"], arrays["decode_context_length"]
    itl = arrays["decode_itl"]
    if isl.ndim != 1 or ttft.shape != isl.shape or isl.size < 2:
        raise ConfigError(f"NPZ {path}: prefill_isl and prefill_ttft_ms must be equal 1-D arrays "
                          f"of at least 2 points, got {isl.shape} and {ttft.shape}")
    if kv.ndim != 1 or ctx.ndim != 1 or kv.size < 2 or ctx.size < 2 or itl.shape != (kv.size, ctx.size):
        raise ConfigError(f"NPZ {path}: decode_itl must have shape (len(decode_active_kv_tokens), "
                          f"len(decode_context_length)) = ({kv.size}, {ctx.size}), got {itl.shape}")
    for name, arr in (("prefill_isl", isl), ("decode_active_kv_tokens", kv),
                      ("decode_context_length", ctx)):
        if np.any(np.diff(arr) <= 0):
            raise ConfigError(f"NPZ {path}: {name} must be strictly increasing")
    return NpzTiming(isl, ttft, kv, ctx, itl)


def _segment(grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the left grid point of x's segment (end segments extend outwards) and the
    fractional position within it (outside [0, 1] when extrapolating)."""
    i = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, grid.size - 2)
    t = (x - grid[i]) / (grid[i + 1] - grid[i])
    return i, t


def _interp1(xs: np.ndarray, ys: np.ndarray, x: np.ndarray) -> np.ndarray:
    i, t = _segment(xs, x)
    return ys[i] + t * (ys[i + 1] - ys[i])


def _interp2(xs: np.ndarray, ys: np.ndarray, z: np.ndarray, x: np.ndarray,
             y: np.ndarray) -> np.ndarray:
    i, tx = _segment(xs, x)
    j, ty = _segment(ys, y)
    z00, z01 = z[i, j], z[i, j + 1]
    z10, z11 = z[i + 1, j], z[i + 1, j + 1]
    near = z00 + ty * (z01 - z00)
    far = z10 + ty * (z11 - z10)
    return near + tx * (far - near)
