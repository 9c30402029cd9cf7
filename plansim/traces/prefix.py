"""Remap a trace's block hashes to compact prefix-chain ids.

The id of block t of a request stands for the whole prefix through block t: two blocks get the
same id exactly when their requests agree on every block up to and including t. Ids are dense
(0 .. number of distinct prefixes - 1) and deterministic; their order carries no meaning.

Dynamo hashes are rolling (sequence-aware), so a raw hash already names its prefix and only
needs compacting. That is checked, not assumed: if some hash follows two different parents (a
source whose hashes are per-block content ids), ids are rebuilt level by level from
(parent prefix id, block hash) pairs.

Compacting hashes the values in 32 partitions (by a multiplicative mix of the value), so each
hash table stays small enough to be cache- and memory-friendly, and writes the ids over the
input buffer: loading never holds two full copies of the hashes. Ids are int32 whenever every id
fits (fewer than 2**31 blocks), which halves the finished workload's largest column; the int32 ids
are packed into the front of the same buffer, whose tail is then released.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from plansim.traces.buffers import can_release_tail, release_tail

_PARTITION_SHIFT = np.uint64(59)  # 32 partitions
_MIX = np.uint64(0x9E3779B97F4A7C15)
_SLICE = 1 << 20
_UNSET = -2
# Most blocks whose ids are stored as int32 (ids are < the block count); a module constant so
# that tests can exercise the int64 form.
INT32_ID_LIMIT = int(np.iinfo(np.int32).max)


def id_dtype(n_blocks: int) -> np.dtype:
    """The dtype of the ids of ``n_blocks`` blocks: int32 when they fit, else int64."""
    return np.dtype(np.int32 if n_blocks <= INT32_ID_LIMIT else np.int64)


def prefix_chain_ids(raw_hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Compact prefix-chain ids for CSR hashes ``raw_hashes`` with ``counts`` per row, in
    ``id_dtype(raw_hashes.size)``.

    ``raw_hashes`` (uint64) is consumed: its buffer is reused (and shrunk) for the result, so
    the caller must hold no other view of it and must not use it afterwards.
    """
    raw = np.ascontiguousarray(raw_hashes, dtype=np.uint64)
    del raw_hashes
    n = raw.size
    if n == 0:
        return np.zeros(0, dtype=id_dtype(0))
    n_unique = _compact_in_place(raw)
    ids = _narrow_in_place(raw, id_dtype(n))
    del raw
    starts = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    starts = starts[counts > 0]
    if _is_rolling(ids, starts, n_unique):
        return ids
    return _chain_by_level(ids, counts, n_unique)


def _compact_in_place(raw: np.ndarray) -> int:
    """Replace each value by a dense code (equal values, equal codes); returns the code count."""
    part = np.empty(raw.size, dtype=np.uint8)
    for lo in range(0, raw.size, _SLICE):
        part[lo : lo + _SLICE] = (raw[lo : lo + _SLICE] * _MIX) >> _PARTITION_SHIFT
    out = raw.view(np.int64)
    base = 0
    for p in range(1 << (64 - int(_PARTITION_SHIFT))):
        pos = _positions(part, p)
        if pos.size == 0:
            continue
        codes, uniques = pd.factorize(raw[pos])
        codes += base
        out[pos] = codes
        base += len(uniques)
    return base


def _positions(part: np.ndarray, p: int) -> np.ndarray:
    """Indices where ``part == p``, found slice by slice: no full-length boolean temporary."""
    found = [np.flatnonzero(part[lo : lo + _SLICE] == p) + lo for lo in range(0, part.size, _SLICE)]
    return np.concatenate(found) if len(found) > 1 else found[0]


def _narrow_in_place(buf: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``buf``'s int64 codes as ``dtype``. For int32 the codes are packed into the front half of
    the buffer (slice by slice, front to back, so no code is overwritten before it is read) and
    the back half is released, when the buffer's memory can be released; otherwise copied."""
    codes = buf.view(np.int64)
    if dtype == np.int64:
        return codes
    n = codes.size
    if not can_release_tail(buf):
        return codes.astype(dtype)
    packed = buf.view(dtype)[:n]
    for lo in range(0, n, _SLICE):
        packed[lo : lo + _SLICE] = codes[lo : lo + _SLICE]  # numpy copies where they overlap
    del codes, packed
    return release_tail(buf, n * dtype.itemsize).view(dtype)[:n]


def _is_rolling(ids: np.ndarray, starts: np.ndarray, n_unique: int) -> bool:
    """True when every id always follows the same parent id (or always starts a row)."""
    small = np.int32 if n_unique < np.iinfo(np.int32).max else np.int64
    parent_of = np.full(n_unique, _UNSET, dtype=small)
    for lo in range(0, ids.size, _SLICE):
        chunk = ids[lo : lo + _SLICE]
        parent = np.empty_like(chunk)
        parent[1:] = chunk[:-1]
        parent[0] = ids[lo - 1] if lo else -1
        first, last = np.searchsorted(starts, [lo, lo + chunk.size])
        parent[starts[first:last] - lo] = -1
        parent = parent.astype(small, copy=False)
        seen = parent_of[chunk]
        if np.any((seen != _UNSET) & (seen != parent)):
            return False
        parent_of[chunk] = parent
        if not np.array_equal(parent_of[chunk], parent):
            return False
    return True


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
            keys = (chain[pos - 1].astype(np.int64) + 1) * n_unique + codes[pos]
        level, level_uniques = pd.factorize(keys)
        chain[pos] = level + next_id
        next_id += len(level_uniques)
    return chain


def unshared_ids(counts: np.ndarray) -> np.ndarray:
    """Fresh ids for rows whose blocks are shared with no other row (traces without hashes)."""
    n = int(counts.sum())
    return np.arange(n, dtype=id_dtype(n))
