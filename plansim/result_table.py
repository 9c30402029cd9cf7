"""``Table``: a result table as named numpy columns, in order.

A replay builds its tables as columns and a command writes them straight to Parquet
(``plansim.io.write_parquet_atomic``, through ``plansim.parquet``); a pandas DataFrame is built
only when someone asks for one (``to_pandas``), so that ``plansim replay run`` imports neither
pandas nor pyarrow. Column dtypes are the schema's (``plansim.sim.result``): int64, float64 (NaN
where undefined, stored as Parquet nulls, as pandas writes them) and str (numpy ``U`` or object
arrays of ``str``, ``None`` where missing; Arrow ``large_string``, pandas' ``str`` dtype).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


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


def column(table: Any, name: str, dtype: Any = None) -> np.ndarray:
    """Column ``name`` of a ``Table`` or a DataFrame as a numpy array (of ``dtype`` if given)."""
    return np.asarray(table[name], dtype=dtype)
