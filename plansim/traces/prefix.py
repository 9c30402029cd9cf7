"""Remap a trace's block hashes to compact prefix-chain ids.

The id of block t of a request stands for the whole prefix through block t: two blocks get the
same id exactly when their requests agree on every block up to and including t. Ids are
0, 1, 2, ... in order of first appearance in the given row order.

Dynamo hashes are rolling (sequence-aware), so a raw hash already names its prefix and only
needs compacting; that is checked, not assumed: if some hash follows two different parents (a
source whose hashes are per-block content ids), ids are built level by level from
(parent prefix id, block hash) pairs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def prefix_chain_ids(raw_hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Compact prefix-chain ids (int64) for CSR hashes ``raw_hashes`` with ``counts`` per row."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    codes, uniques = pd.factorize(raw_hashes)
    codes = codes.astype(np.int64, copy=False)
    n_unique = len(uniques)
    del uniques
    starts = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    starts = starts[counts > 0]
    parent = np.empty_like(codes)
    parent[1:] = codes[:-1]
    parent[starts] = -1
    parent_of = np.full(n_unique, -2, dtype=np.int64)
    parent_of[codes] = parent
    if np.array_equal(parent_of[codes], parent):
        return codes
    del parent, parent_of
    return _chain_by_level(codes, counts, n_unique)


def _chain_by_level(codes: np.ndarray, counts: np.ndarray, n_unique: int) -> np.ndarray:
    starts = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    chain = np.empty_like(codes)
    next_id = 0
    for depth in range(int(counts.max())):
        pos = starts[counts > depth] + depth
        if depth == 0:
            keys = codes[pos]
        else:
            keys = (chain[pos - 1] + 1) * n_unique + codes[pos]
        level, level_uniques = pd.factorize(keys)
        chain[pos] = level + next_id
        next_id += len(level_uniques)
    ids, _ = pd.factorize(chain)
    return ids.astype(np.int64, copy=False)


def unshared_ids(counts: np.ndarray) -> np.ndarray:
    """Fresh ids for rows whose blocks are shared with no other row (traces without hashes)."""
    return np.arange(int(counts.sum()), dtype=np.int64)
