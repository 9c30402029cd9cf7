"""Remap a trace's block hashes to compact prefix-chain ids.

The id of block t of a request stands for the whole prefix through block t: two blocks get the
same id exactly when their requests agree on every block up to and including t. Ids are dense
(0 .. number of distinct prefixes - 1) and deterministic; their order carries no meaning.

Dynamo hashes are rolling (sequence-aware), so a raw hash already names its prefix and only
needs compacting. That is checked, not assumed: if some hash follows two different parents (a
source whose hashes are per-block content ids), ids are rebuilt level by level from
(parent prefix id, block hash) pairs.

Compacting works in slices of 262,144 hashes: each slice is reordered in place so that its values
are grouped by partition (one of 128, by a multiplicative mix of the value), then each partition
(its pieces from every slice) is factorized on its own, so every hash table stays small, and
the codes are written over the values and put back in row order. Loading thus never holds two
full copies of the hashes, only one partition byte per hash besides. Ids are int32 whenever every
id fits (fewer than 2**31 blocks), which halves the finished workload's largest column: the
int32 ids are packed into the front of the same buffer, whose back half is then released.
"""

from __future__ import annotations

import numpy as np

from plansim.traces.buffers import can_release_tail, release_tail

_PARTITIONS = 128
_PARTITION_SHIFT = np.uint64(57)  # the top 7 bits of the mixed value: 128 partitions
_MIX = np.uint64(0x9E3779B97F4A7C15)
_GROUP_ROWS = 1 << 18  # hashes per grouped slice (its reordering is recomputed, not stored)
_BATCH = 1 << 19  # most values factorized at once (bounds the hash table; ~4x a mean partition)
_SLICE = 1 << 20
_UNSET = -2
# Below this many values sorting factorizes faster than importing pandas for it.
_SMALL_FACTORIZE = 1 << 18
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
    if n <= _GROUP_ROWS:
        ids, n_unique = _compact_one_slice(raw, id_dtype(n))
    else:
        part, bounds = _group_by_partition(raw)
        n_unique = _compact_groups(raw, bounds)
        ids = _ungroup(raw, part, id_dtype(n))
        del part
    del raw
    starts = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    starts = starts[counts > 0]
    if _is_rolling(ids, starts, n_unique):
        return ids
    return _chain_by_level(ids, counts, n_unique)


def _group_by_partition(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reorder each slice of ``raw`` in place, stably, by partition. Returns each value's
    partition (in original order) and ``bounds``: partition ``p`` of slice ``k`` is
    ``raw[bounds[k, p]:bounds[k, p + 1]]``."""
    n = raw.size
    part = np.empty(n, dtype=np.uint8)
    bounds = np.empty((-(-n // _GROUP_ROWS), _PARTITIONS + 1), dtype=np.int64)
    for k, lo in enumerate(range(0, n, _GROUP_ROWS)):
        chunk = raw[lo : lo + _GROUP_ROWS]
        p = part[lo : lo + chunk.size]
        np.right_shift(chunk * _MIX, _PARTITION_SHIFT, out=p, casting="unsafe")
        chunk[:] = chunk[np.argsort(p, kind="stable")]  # radix sort: linear in the slice
        bounds[k, 0] = lo
        np.cumsum(np.bincount(p, minlength=_PARTITIONS), out=bounds[k, 1:])
        bounds[k, 1:] += lo
    return part, bounds


def _compact_groups(raw: np.ndarray, bounds: np.ndarray) -> int:
    """Replace each grouped value by a dense code (equal values, equal codes), partition by
    partition; returns the code count.

    A partition is factorized in batches of at most ``_BATCH`` values, each together with the
    partition's distinct values so far (they keep their codes, being first): a hash table is
    sized by its input, and a partition can be large when one hash repeats very often (a
    system prompt's first block), while its distinct values stay few.
    """
    out = raw.view(np.int64)
    base = 0
    for p in range(_PARTITIONS):
        spans = [(int(a), int(b)) for a, b in zip(bounds[:, p], bounds[:, p + 1]) if b > a]
        seen = np.zeros(0, dtype=np.uint64)
        i = 0
        while i < len(spans):
            batch, size = [], 0
            while i < len(spans) and (not batch or size + spans[i][1] - spans[i][0] <= _BATCH):
                batch.append(spans[i])
                size += spans[i][1] - spans[i][0]
                i += 1
            values = np.concatenate([seen] + [raw[a:b] for a, b in batch])
            codes, seen = factorize(values)
            del values
            codes += base
            pos = len(codes) - size
            for a, b in batch:
                out[a:b] = codes[pos : pos + b - a]
                pos += b - a
        base += len(seen)
    return base


def _compact_one_slice(raw: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, int]:
    """The codes that grouping and ``_compact_groups`` give a single slice, in row order, and
    their count, from one sort: partition by partition, each partition's distinct values by
    first appearance (one slice's partitions keep the row order). Half the time of the grouped
    path on a small trace, whose 128 partitions are tiny."""
    uniques, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
    part = np.right_shift(uniques * _MIX, _PARTITION_SHIFT)
    rank = np.empty(uniques.size, dtype=np.int64)
    rank[np.lexsort((first, part))] = np.arange(uniques.size, dtype=np.int64)
    return rank[inverse.reshape(-1)].astype(dtype), int(uniques.size)


def _ungroup(buf: np.ndarray, part: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The grouped int64 codes in ``buf`` back in row order, as ``dtype``.

    Each slice's order is recomputed from ``part`` (the same stable sort). int32 codes are
    packed into the front half of the buffer, slice by slice from the front (a slice's codes are
    copied before its packed place, which overlaps only it and earlier slices, is written), and
    the back half is released when the buffer allows; otherwise they are copied out.
    """
    codes = buf.view(np.int64)
    n = codes.size
    in_place = dtype != np.int64 and can_release_tail(buf)
    if dtype == np.int64:
        target = codes
    elif in_place:
        target = buf.view(dtype)[:n]
    else:
        target = np.empty(n, dtype=dtype)
    for lo in range(0, n, _GROUP_ROWS):
        grouped = codes[lo : lo + _GROUP_ROWS].astype(dtype)  # a copy
        order = np.argsort(part[lo : lo + grouped.size], kind="stable")
        target[lo + order] = grouped
    if not in_place:
        return target
    del codes, target
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
        level, level_uniques = factorize(keys)
        chain[pos] = level + next_id
        next_id += len(level_uniques)
    return chain


def unshared_ids(counts: np.ndarray) -> np.ndarray:
    """Fresh ids for rows whose blocks are shared with no other row (traces without hashes)."""
    n = int(counts.sum())
    return np.arange(n, dtype=id_dtype(n))


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes (int64, dense, by first appearance) and the distinct values in that order, as
    ``pandas.factorize`` gives them; small inputs are sorted with numpy instead, so that loading
    a small trace does not import pandas."""
    if values.size >= _SMALL_FACTORIZE:
        import pandas as pd

        return pd.factorize(values)
    uniques, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size, dtype=np.int64)
    return rank[inverse.reshape(-1)], uniques[order]
