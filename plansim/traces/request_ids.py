"""Request ids as a compact numpy string array, and the uniqueness check over them.

Ids are held in numpy's variable-width ``StringDType``: an id of up to 15 bytes is stored inside
its 16-byte array slot (longer ones in one arena per array), so a million ids take ~16 MB
instead of ~70 MB as an object array of Python ``str``. Indexing yields ``str``; ``tolist()``,
comparisons, fancy indexing and ``np.asarray(ids, dtype=object)`` work as for any array.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from plansim.traces.buffers import GrowingArray, release_front

if TYPE_CHECKING:
    import pyarrow as pa

STRING = np.dtypes.StringDType()
# Ids converted or hashed per step: bounds the temporary Python strings.
_HASH_ROWS = 65536


def as_ids(values) -> np.ndarray:
    """``values`` (str sequence or array) as a ``StringDType`` array."""
    return np.asarray(values, dtype=STRING)


def ordinal_ids(start: int, n: int) -> np.ndarray:
    """The ids ``"start"``, ``"start + 1"``, ... (``n`` of them)."""
    return np.arange(start, start + n, dtype=np.int64).astype(STRING)


class IdCollector:
    """Collects string ids block by block as UTF-8 bytes and offsets (in growing memory maps)
    and builds the ``StringDType`` array once at the end, releasing the bytes as they are
    converted: no per-block arrays are left scattered over the heap while a large file is
    read, and the conversion holds little more than its result."""

    def __init__(self) -> None:
        self._offsets = GrowingArray(np.int64)
        self._offsets.extend(np.zeros(1, dtype=np.int64))
        self._bytes = GrowingArray(np.uint8)
        self._size = 0

    def extend(self, ids: pa.Array | list[str]) -> None:
        """Append ``ids``: a pyarrow string array without nulls, or a list of ``str``."""
        if isinstance(ids, list):
            # Encoded here: pyarrow's conversion of a list imports pandas.
            encoded = [s.encode() for s in ids]
            if not encoded:
                return
            ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
            self._bytes.extend(np.frombuffer(b"".join(encoded), dtype=np.uint8))
            self._offsets.extend(ends + self._size)
            self._size += int(ends[-1])
            return
        arr = ids
        if len(arr) == 0:
            return
        offsets_buf, data_buf = arr.buffers()[1:3]
        offsets = np.frombuffer(
            offsets_buf, dtype=np.int32, count=len(arr) + 1, offset=arr.offset * 4
        )
        first, last = int(offsets[0]), int(offsets[-1])
        if last > first:
            self._bytes.extend(np.frombuffer(data_buf, dtype=np.uint8)[first:last])
        self._offsets.extend(offsets[1:].astype(np.int64) + (self._size - first))
        self._size += last - first

    def array(self) -> np.ndarray:
        """All ids collected, as a ``StringDType`` array (call once)."""
        offsets = self._offsets.array()
        data = self._bytes.array()
        n = offsets.size - 1
        if n <= _HASH_ROWS:
            # Decoded here: pyarrow's conversion to numpy imports pandas, a cost only many ids
            # repay.
            raw = data.tobytes()
            bounds = offsets.tolist()
            return np.array(
                [raw[a:b].decode() for a, b in itertools.pairwise(bounds)], dtype=STRING
            )
        import pyarrow as pa

        strings = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
        out = np.empty(n, dtype=STRING)
        for lo in range(0, n, _HASH_ROWS):
            hi = min(lo + _HASH_ROWS, n)
            out[lo:hi] = strings.slice(lo, hi - lo).to_numpy(zero_copy_only=False)
            release_front(data, int(offsets[hi]))
            release_front(offsets, hi * offsets.itemsize)
        return out


def fill_missing(values: np.ndarray, start: int) -> np.ndarray:
    """``values`` (object, ``None`` where a row has no id) as ids; a missing id becomes the
    row's ordinal ``start + i``."""
    if values.dtype == STRING:
        return values
    missing = np.equal(values, None)
    if not missing.any():
        return as_ids(values)
    if missing.all():
        return ordinal_ids(start, values.size)
    filled = values.copy()
    filled[missing] = [str(start + int(i)) for i in np.flatnonzero(missing)]
    return as_ids(filled)


def first_repeat(ids: np.ndarray) -> int | None:
    """Index of the first id equal to an earlier one, or ``None`` when all are unique.

    Ids are hashed to 64 bits in steps (no set of a million Python strings); only ids whose
    hashes collide are compared as strings, so the answer is exact (and does not depend on
    Python's per-process hash seed).
    """
    return next(_repeats(ids), None)


def repeated(ids: np.ndarray) -> np.ndarray:
    """Whether each id equals an earlier one (bool per row; an id's first row is False), found
    as ``first_repeat`` finds the first."""
    out = np.zeros(ids.size, dtype=bool)
    out[list(_repeats(ids))] = True
    return out


def _repeats(ids: np.ndarray) -> Iterator[int]:
    """The rows whose id equals an earlier row's, in order: only the rows whose hashes collide
    are compared as strings."""
    seen: set[str] = set()
    for i in _colliding_rows(ids):
        rid = str(ids[i])
        if rid in seen:
            yield i
        else:
            seen.add(rid)


def _colliding_rows(ids: np.ndarray) -> list[int]:
    """The rows, in order, whose id's 64-bit hash another row's shares: the only rows that can
    repeat an id."""
    if ids.size < 2:
        return []
    ordered = _hashes(ids)
    ordered.sort()
    shared = ordered[1:][ordered[1:] == ordered[:-1]]
    del ordered
    if shared.size == 0:
        return []
    return np.flatnonzero(np.isin(_hashes(ids), shared)).tolist()


def _hashes(ids: np.ndarray) -> np.ndarray:
    """64-bit hashes of ``ids``, computed in steps (bounded temporary Python strings)."""
    out = np.empty(ids.size, dtype=np.int64)
    for lo in range(0, ids.size, _HASH_ROWS):
        chunk = ids[lo : lo + _HASH_ROWS].tolist()
        out[lo : lo + len(chunk)] = np.fromiter(map(hash, chunk), dtype=np.int64, count=len(chunk))
    return out
