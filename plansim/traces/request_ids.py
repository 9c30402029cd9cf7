"""Request ids as a compact numpy string array, and the uniqueness check over them.

Ids are held in numpy's variable-width ``StringDType``: an id of up to 15 bytes is stored inside
its 16-byte array slot (longer ones in one arena per array), so a million ids take ~16 MB
instead of ~70 MB as an object array of Python ``str``. Indexing yields ``str``; ``tolist()``,
comparisons, fancy indexing and ``np.asarray(ids, dtype=object)`` work as for any array.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STRING = np.dtypes.StringDType()
# Ids hashed per step by the uniqueness check: bounds the temporary Python strings.
_HASH_ROWS = 65536


def as_ids(values) -> np.ndarray:
    """``values`` (str sequence or array) as a ``StringDType`` array."""
    return np.asarray(values, dtype=STRING)


def ordinal_ids(start: int, n: int) -> np.ndarray:
    """The ids ``"start"``, ``"start + 1"``, ... (``n`` of them)."""
    return np.arange(start, start + n, dtype=np.int64).astype(STRING)


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
    hashes collide are compared as strings, so the answer is exact.
    """
    n = ids.size
    if n < 2:
        return None
    hashes = np.empty(n, dtype=np.uint64)
    for lo in range(0, n, _HASH_ROWS):
        chunk = np.asarray(ids[lo : lo + _HASH_ROWS], dtype=object)
        hashes[lo : lo + chunk.size] = pd.util.hash_array(chunk, categorize=False)
    ordered = np.sort(hashes)
    shared = ordered[1:][ordered[1:] == ordered[:-1]]
    if shared.size == 0:
        return None
    seen: set[str] = set()
    for i in np.flatnonzero(np.isin(hashes, shared)).tolist():
        rid = str(ids[i])
        if rid in seen:
            return i
        seen.add(rid)
    return None
