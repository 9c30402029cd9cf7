"""Decode pass times tabulated by KV tokens, for the timing models whose decode time is known
for a whole array of KV token counts at once: those with ``decode_ms_by_kv`` (the time depends
on a pass's KV tokens alone, e.g. the reference's polynomial) and those with
``decode_ms_by_batch`` (it depends on the batch size too, with mean context ``kv // batch``, as
a decode run's passes have; e.g. the NPZ profile).

Entry ``kv`` of a table is the time of a decode-only pass over ``kv`` KV tokens, divided by the
rank's decode speedup and quantised to whole nanoseconds: the very float the engine times such a
pass with (``quantised``). A decode run of ``n`` requests from ``kv0`` tokens then takes its pass
times as one strided slice (``kv0, kv0 + n, ...``) instead of timing each run (about ten numpy
calls, or a Python loop over its passes). A ``DecodeTable`` (KV alone) grows, doubling, to the
furthest KV a run reaches (at most the KV pool); ``DecodePages`` (by batch size) keeps a page of
``PAGE`` KV values per batch size and page reached, made on first use, and starts over past
``MAX_PAGES`` pages (bounded memory; the same floats either way). Either is shared by the ranks
of one pool (``shared``), whose model, KV pool and speedup are the same.
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

    __slots__ = ("_by_kv", "_div", "_times", "_total")

    def __init__(
        self, by_kv: Callable[[np.ndarray, int], np.ndarray], total_kv_tokens: int, div: float
    ) -> None:
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


PAGE_BITS = 12
PAGE = 1 << PAGE_BITS
MAX_PAGES = 1024  # 32 MB


class DecodePages:
    """Quantised decode pass times by batch size and KV tokens (see the module docstring):
    ``by_batch(n, kv, total_kv_tokens)`` gives the model's raw times of ``n`` requests over an
    array of KV token counts; ``div`` (> 0) is the decode speedup."""

    __slots__ = ("_by_batch", "_div", "_pages", "_total")

    def __init__(
        self,
        by_batch: Callable[[int, np.ndarray, int], np.ndarray],
        total_kv_tokens: int,
        div: float,
    ) -> None:
        self._by_batch = by_batch
        self._total = total_kv_tokens
        self._div = div
        self._pages: dict[tuple[int, int], np.ndarray] = {}

    def run(self, kv0_tokens: int, batch_size: int, passes: int) -> np.ndarray:
        """``DecodeTable.run``: a read-only view of one page, or a new array for a run
        reaching past its first page."""
        last = kv0_tokens + (passes - 1) * batch_size
        first = kv0_tokens >> PAGE_BITS
        lo = first << PAGE_BITS
        page = self._page(batch_size, first)
        if last - lo >= PAGE:
            page = np.concatenate(
                [page]
                + [self._page(batch_size, p) for p in range(first + 1, (last >> PAGE_BITS) + 1)]
            )
        return page[kv0_tokens - lo : last - lo + 1 : batch_size]

    def _page(self, batch_size: int, index: int) -> np.ndarray:
        key = (batch_size, index)
        page = self._pages.get(key)
        if page is None:
            if len(self._pages) >= MAX_PAGES:
                self._pages.clear()
            kv = np.arange(index << PAGE_BITS, (index + 1) << PAGE_BITS, dtype=np.int64)
            page = quantised(self._by_batch(batch_size, kv, self._total), self._div)
            page.flags.writeable = False
            self._pages[key] = page
        return page


def shared(
    tables: dict[Any, DecodeTable | DecodePages], timing: Any, total_kv_tokens: int, div: float
) -> DecodeTable | DecodePages | None:
    """The table of ``timing`` for a KV pool of ``total_kv_tokens`` and decode speedup ``div``
    from ``tables`` (a cache the ranks of one pool share; made on first use); None when the
    model offers neither ``decode_ms_by_kv`` nor ``decode_ms_by_batch``, or passes take no time
    (``div`` <= 0)."""
    if div <= 0:
        return None
    key = (id(timing), total_kv_tokens, div)
    table = tables.get(key)
    if table is None:
        by_kv = getattr(timing, "decode_ms_by_kv", None)
        by_batch = getattr(timing, "decode_ms_by_batch", None)
        if by_kv is not None:
            table = DecodeTable(by_kv, total_kv_tokens, div)
        elif by_batch is not None:
            table = DecodePages(by_batch, total_kv_tokens, div)
        else:
            return None
        tables[key] = table
    return table
