"""``Table``: a result table as named numpy columns, in order.

A replay builds its tables as columns and a command writes them straight to Parquet through
Arrow (``to_arrow``); a pandas DataFrame is built only when someone asks for one
(``to_pandas``), so that ``plansim replay run`` never imports pandas. Column dtypes are the
schema's (``plansim.sim.result``): int64, float64 (NaN where undefined, stored as Parquet
nulls, as pandas writes them) and str (numpy ``U`` or object arrays of ``str``; Arrow
``large_string``, pandas' ``str`` dtype).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


class Table:
    """Named columns of equal length; ``table[name]`` is the numpy column."""

    __slots__ = ("columns",)

    def __init__(self, columns: Mapping[str, np.ndarray]) -> None:
        self.columns = dict(columns)
        lengths = {len(c) for c in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def __repr__(self) -> str:
        return f"Table({len(self)} rows: {', '.join(self.columns)})"

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.columns)

    def to_arrow(self) -> pa.Table:
        """The Arrow table pandas would write for ``to_pandas()`` (without pandas' metadata)."""
        import pyarrow as pa

        return pa.table({name: _arrow_column(values) for name, values in self.columns.items()})


def _arrow_column(values: np.ndarray) -> Any:
    """One column as an Arrow array, from its buffers: ``pa.array`` on a numpy array imports
    pandas (to test for pandas types), which is most of the cost of writing a small table."""
    import pyarrow as pa

    n = len(values)
    if values.dtype.kind in "UO":
        items = values.tolist()
        encoded = [b"" if v is None else v.encode() for v in items]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        validity = None
        if None in items:
            validity = pa.py_buffer(np.packbits([v is not None for v in items],
                                                bitorder="little"))
        return pa.Array.from_buffers(pa.large_string(), n, [
            validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])
    if values.dtype not in (np.float64, np.int64):
        raise TypeError(f"no Arrow column for dtype {values.dtype}")
    values = np.ascontiguousarray(values)
    validity = None
    if values.dtype == np.float64:  # NaN is a null, as pandas writes it
        valid = ~np.isnan(values)
        if not valid.all():
            validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        return pa.Array.from_buffers(pa.float64(), n, [validity, pa.py_buffer(values)])
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(values)])


def column(table: Any, name: str, dtype: Any = None) -> np.ndarray:
    """Column ``name`` of a ``Table`` or a DataFrame as a numpy array (of ``dtype`` if given)."""
    return np.asarray(table[name], dtype=dtype)
