"""Decode pass times tabulated by KV tokens, for the timing models whose decode time depends on
a pass's KV tokens alone (those with ``decode_ms_by_kv``, e.g. the reference's polynomial).

Entry ``kv`` of a ``DecodeTable`` is the time of a decode-only pass over ``kv`` KV tokens,
divided by the rank's decode speedup and quantised to whole nanoseconds: the very float the
engine times such a pass with (``quantised``). A decode run of ``n`` requests from ``kv0``
tokens then takes its pass times as one strided slice (``kv0, kv0 + n, ...``) instead of about
ten numpy calls a run. The table grows, doubling, to the furthest KV a run reaches (at most the
KV pool), and is shared by the ranks of one pool (``shared``), whose model, KV pool and speedup
are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

NS_PER_MS = 1e6
_FIRST_SIZE = 4096


def quantised(raw: np.ndarray, div: float) -> np.ndarray:
    """``round(raw / div * 1e6) / 1e6`` element by element (``div`` > 0; rounding half to even,
    as Python's ``round``), in a new array: pass times divided by their speedup and quantised to
    whole nanoseconds, as the reference's durations are."""
    if div == 1.0:
        out = raw * NS_PER_MS  # x / 1.0 is x
    else:
        out = raw / div
        out *= NS_PER_MS
    np.rint(out, out=out)
    out /= NS_PER_MS
    return out


class DecodeTable:
    """Quantised decode pass times by KV tokens (see the module docstring): ``by_kv(kv,
    total_kv_tokens)`` gives the model's raw times of an array of KV token counts; ``div`` (>
    0) is the decode speedup."""

    __slots__ = ("_by_kv", "_total", "_div", "_times")

    def __init__(self, by_kv: Callable[[np.ndarray, int], np.ndarray], total_kv_tokens: int,
                 div: float) -> None:
        self._by_kv = by_kv
        self._total = total_kv_tokens
        self._div = div
        self._times = np.zeros(0)

    def run(self, kv0_tokens: int, batch_size: int, passes: int) -> np.ndarray:
        """The pass times of a decode run of ``passes`` passes of ``batch_size`` requests, the
        first over ``kv0_tokens`` KV tokens and each next one over ``batch_size`` more: a
        read-only view of the table."""
        hi = kv0_tokens + (passes - 1) * batch_size + 1
        if hi > self._times.shape[0]:
            self._grow(hi)
        return self._times[kv0_tokens:hi:batch_size]

    def _grow(self, hi: int) -> None:
        have = self._times.shape[0]
        size = max(hi, 2 * have, _FIRST_SIZE)
        raw = self._by_kv(np.arange(have, size, dtype=np.int64), self._total)
        times = np.concatenate((self._times, quantised(raw, self._div)))
        times.flags.writeable = False
        self._times = times


def shared(tables: dict[Any, DecodeTable], timing: Any, total_kv_tokens: int,
           div: float) -> DecodeTable | None:
    """The table of ``timing`` for a KV pool of ``total_kv_tokens`` and decode speedup ``div``
    from ``tables`` (a cache the ranks of one pool share; made on first use); None when the
    model's decode time depends on more than the KV tokens, or passes take no time (``div`` <=
    0)."""
    by_kv = getattr(timing, "decode_ms_by_kv", None)
    if by_kv is None or div <= 0:
        return None
    key = (id(timing), total_kv_tokens, div)
    table = tables.get(key)
    if table is None:
        table = tables[key] = DecodeTable(by_kv, total_kv_tokens, div)
    return table
