"""The decoding rows' grants of a pass in one step: one token each for a slice of the batch's
rows, as ``Rank.grant(req, 1)`` would give them row by row (the rank's ``grant_decoding``).

Functions of the rank (``self``), bound as its method: a vector step over the batch's columns,
or one loop over their lists for a slice shorter than ``batch.SCALAR_ROWS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from plansim.sim import batch as soa

if TYPE_CHECKING:
    from plansim.sim.engine import Rank


def grant_decoding(self: Rank, start: int, budget: int) -> int:
    """One token each for the decoding requests of the batch from row ``start`` on, in
    one step (a vector step, or ``_grant_rows`` for a short slice): the rows up
    to the first that is not decoding (one known token left, prompt computed), at most
    ``budget`` of them, and only as many as the KV available can extend (a grant that
    would preempt is left to ``grant``). Returns the row after the last one granted
    (``start``: none). The same as ``grant(req, 1)`` row by row."""
    b = self.batch
    n = len(self.running)
    if not self.vector_grants or self.drafts is not None or budget <= 0:
        return start
    stop = n if n - start <= budget else start + budget
    if stop - start < soa.SCALAR_GRANT_ROWS or stop <= start:
        return start  # a few rows: ``grant`` one by one costs less than the vector step
    if stop - start < soa.SCALAR_ROWS:
        return _grant_rows(self, start, stop)
    computed = b.computed[start:stop]
    decoding = (b.known[start:stop] - computed == 1) & (computed >= b.isl[start:stop])
    if not decoding[0]:
        return start
    # The first row not decoding (0: every one is, the first being so); argmin costs a
    # fraction of all().
    short = int(decoding.argmin())
    if short:
        stop = start + short
        computed = computed[:short]
    bs = self.block_size
    blocks = b.blocks[start:stop]
    # A decode token needs a new block exactly when the computed tokens fill the held ones.
    new = computed >= blocks * bs
    total = int(np.count_nonzero(new))
    cache = self.cache
    if total:
        avail = cache.available()
        if total > avail:
            # Stop before the first row whose block the pool cannot give without preempting.
            stop = start + int(np.searchsorted(np.cumsum(new), avail, side="right"))
            if stop == start:
                return start
            new = new[: stop - start]
            computed = computed[: stop - start]
            blocks = blocks[: stop - start]
            total = int(np.count_nonzero(new))
        fence = cache.allocate(total)
        if fence:
            self.offload.hold_compute(fence)
        blocks += new
    b.before[start:stop] = computed
    computed += 1
    b.pass_no[start:stop] = self.pass_no
    self.pass_tokens += stop - start
    self._slices.append((start, stop))
    return stop


def _grant_rows(self: Rank, start: int, stop: int) -> int:
    """``grant_decoding`` of rows ``start:stop`` in one loop over their lists (fewer rows
    than ``soa.SCALAR_ROWS``): the same rows granted, blocks allocated and state."""
    b = self.batch
    _, isl, _, computed, known, blocks, _, _ = b.columns(start, stop)
    bs = self.block_size
    avail = -1
    grown = []
    m = 0
    for i in range(stop - start):
        c = computed[i]
        if known[i] - c != 1 or c < isl[i]:
            break  # not decoding
        if c >= blocks[i] * bs:
            # A new block: stop before the first row the pool cannot give one without
            # preempting.
            if avail < 0:
                avail = self.cache.available()
            if len(grown) == avail:
                break
            grown.append(i)
        m += 1
    if not m:
        return start
    stop = start + m
    if grown:
        fence = self.cache.allocate(len(grown))
        if fence:
            self.offload.hold_compute(fence)
        rows = b.blocks
        for i in grown:
            rows[start + i] = blocks[i] + 1
    del computed[m:]
    b.before[start:stop] = computed
    b.computed[start:stop] = [c + 1 for c in computed]
    b.pass_no[start:stop] = self.pass_no
    self.pass_tokens += m
    self._slices.append((start, stop))
    return stop
