"""Row selection in CSR (offsets + flat values) layouts, without a Python loop per row."""

from __future__ import annotations

import numpy as np


def csr_take(offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of ``rows`` (indices, in the given order) of a CSR with ``offsets`` (n + 1).

    Returns ``(new_offsets, index)``: ``values[index]`` are the selected rows' values in
    order, ``new_offsets`` delimits them per selected row.
    """
    rows = np.asarray(rows, dtype=np.int64)
    counts = offsets[rows + 1] - offsets[rows]
    new_offsets = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(counts, out=new_offsets[1:])
    within = np.arange(int(new_offsets[-1]), dtype=np.int64) - np.repeat(new_offsets[:-1], counts)
    return new_offsets, np.repeat(offsets[rows], counts) + within
