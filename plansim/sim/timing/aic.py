"""The ``aic`` timing model: an engine timed by AIConfigurator's estimates for a real model on a
real GPU, interpolated from :mod:`plansim.aic.table` (multilinear, extrapolating linearly beyond
the grid, like the NPZ model).

- Prefill of ``count`` requests, ``mean_isl`` tokens each of which ``mean_prefix`` are cached or
  computed in an earlier chunk: the table at (``count``, ``mean_isl - mean_prefix``,
  ``mean_prefix``), the reference mocker's AIC call ``predict_prefill(batch, isl, prefix)``.
- Decode of ``batch`` requests at mean context ``mean_context``: the table at (``batch``,
  ``mean_context``), the mocker's ``predict_decode(batch, context)``; never under 1 ms.
- A mixed pass (prefill and decode requests together): :meth:`AicTiming.mixed_decode_ms`, the
  time the decode requests add to a pass already prefilling ``prefill_tokens`` tokens.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from plansim.aic import sdk as aic_sdk
from plansim.aic.spec import AicSpec, parse_aic_spec
from plansim.aic.table import AicTable, load_table
from plansim.sim.timing.base import MIN_DECODE_MS, TimingKind
from plansim.sim.timing.interp import Axis


class AicTiming:
    """Pass times in ms from one :class:`AicTable`."""

    def __init__(self, table: AicTable) -> None:
        self.table = table
        self._prefill = Grid(
            (table.prefill_batch, table.prefill_tokens, table.prefill_prefix), table.prefill_ms
        )
        self._decode = Grid((table.decode_batch, table.decode_context), table.decode_ms)
        self._shared = Grid((table.shared_tokens,), table.shared_ms)

    @classmethod
    def for_spec(cls, spec: AicSpec) -> AicTiming:
        """The timing model of ``spec`` (its table loaded once per process)."""
        return _timing_for(spec)

    def prefill_ms(
        self, new_tokens: int, batch_size: int, mean_isl: float, mean_prefix: float
    ) -> float:
        if new_tokens <= 0:
            return 0.0
        per_request = max(1.0, float(mean_isl) - float(mean_prefix))
        return self._prefill.at((float(batch_size), per_request, float(mean_prefix)))

    def decode_ms(
        self, batch_size: int, active_kv_tokens: int, mean_context: float, total_kv_tokens: int
    ) -> float:
        return max(MIN_DECODE_MS, self._decode.at((float(batch_size), float(mean_context))))

    def decode_ms_bulk(
        self,
        batch_size: np.ndarray,
        active_kv_tokens: np.ndarray,
        mean_context: np.ndarray,
        total_kv_tokens: int,
    ) -> np.ndarray:
        return np.maximum(MIN_DECODE_MS, self._decode.bulk((batch_size, mean_context)))

    def mixed_decode_ms(
        self,
        batch_size: int,
        active_kv_tokens: int,
        mean_context: float,
        total_kv_tokens: int,
        prefill_tokens: int,
    ) -> float:
        """What ``batch_size`` decode requests add to a pass that also prefills
        ``prefill_tokens`` new tokens: their decode step less the weights pass they share,
        ``shared(T) + shared(B) - shared(T + B)``, never below 0."""
        shared = self._shared.at
        saving = (
            shared((float(prefill_tokens),))
            + shared((float(batch_size),))
            - shared((float(prefill_tokens + batch_size),))
        )
        alone = self._decode.at((float(batch_size), float(mean_context)))
        return max(0.0, alone - saving)


@lru_cache(maxsize=16)
def _timing_for(spec: AicSpec) -> AicTiming:
    return AicTiming(load_table(spec))


class AicKind(TimingKind):
    """``timing_model.type: aic``: the keys beside ``type`` are :class:`AicSpec`'s, validated
    into ``spec.aic`` (which needs the SDK, extra ``plansim[aic]``); AIConfigurator's backend
    defaults to the engine's."""

    shared_keys = frozenset({"aic"})

    def from_written(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        if aic_sdk.sdk_version() is None:
            raise ValueError(aic_sdk.MISSING_SDK)
        if "aic" in data:
            return data
        return {
            "type": data["type"],
            "aic": parse_aic_spec({k: v for k, v in data.items() if k != "type"}),
        }

    def to_written(self, spec: Any, data: dict[str, Any]) -> dict[str, Any]:
        # Its keys beside ``type``, so that a dotted override (``engine.timing_model.system``)
        # applies to a dump.
        return data if spec.aic is None else {**data.get("aic", {}), "type": spec.type}

    def engine_defaults(self, data: Mapping[str, Any], backend: Any) -> Mapping[str, Any]:
        return data if "backend" in data else {**data, "backend": backend}

    def check(self, spec: Any) -> None:
        if spec.aic is None:
            raise ValueError("aic settings belong to a timing model of type aic")

    def build(self, spec: Any) -> AicTiming:
        return AicTiming.for_spec(spec.aic)


KIND = AicKind()


class Grid:
    """Multilinear interpolation of ``values`` over ``axes`` (ascending), extrapolating
    linearly beyond the edges. ``at`` (one point, plain floats) and ``bulk`` (arrays) use the
    same operation order, so they agree to the bit."""

    def __init__(self, axes: tuple[np.ndarray, ...], values: np.ndarray) -> None:
        self.axes = tuple(np.asarray(a, dtype=np.float64) for a in axes)
        self.values = np.asarray(values, dtype=np.float64)
        if self.values.shape != tuple(a.size for a in self.axes):
            raise ValueError(
                f"grid values shaped {self.values.shape}, axes {tuple(a.size for a in self.axes)}"
            )
        self._lists = tuple(a.tolist() for a in self.axes)
        self._segments = tuple(Axis(a) for a in self.axes)
        self._flat = self.values.ravel().tolist()
        self._strides = [int(s // 8) for s in self.values.strides]

    def at(self, point: tuple[float, ...]) -> float:
        base = 0
        fracs = []
        for d, (grid, x) in enumerate(zip(self._lists, point)):
            i = bisect_right(grid, x) - 1
            i = 0 if i < 0 else (len(grid) - 2 if i > len(grid) - 2 else i)
            fracs.append((x - grid[i]) / (grid[i + 1] - grid[i]))
            base += i * self._strides[d]
        out = 0.0
        for corner in range(1 << len(fracs)):
            offset = base
            weight = 1.0
            for d, frac in enumerate(fracs):
                if (corner >> d) & 1:
                    offset += self._strides[d]
                    weight = weight * frac
                else:
                    weight = weight * (1.0 - frac)
            out = out + weight * self._flat[offset]
        return out

    def bulk(self, points: tuple[np.ndarray, ...]) -> np.ndarray:
        segments = [
            axis.segment(np.asarray(x, dtype=np.float64)) for axis, x in zip(self._segments, points)
        ]
        out = np.zeros(np.broadcast(*[i for i, _ in segments]).shape)
        for corner in range(1 << len(segments)):
            index = []
            weight = np.float64(1.0)
            for d, (i, frac) in enumerate(segments):
                if (corner >> d) & 1:
                    index.append(i + 1)
                    weight = weight * frac
                else:
                    index.append(i)
                    weight = weight * (1.0 - frac)
            out = out + weight * self.values[tuple(index)]
        return out
