"""``plansim.result_table.Table``: written to Parquet as pandas would write its DataFrame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from plansim.io import write_parquet_atomic
from plansim.result_table import Table


def _table(n: int) -> Table:
    rng = np.random.default_rng(n)
    floats = rng.random(n)
    floats[::3] = np.nan  # undefined latencies
    return Table(
        {
            "request_id": np.array([f"r{i}é" for i in range(n)], dtype=object),
            "x_ms": floats,
            "count": rng.integers(-5, 5, n).astype(np.int64),
            "status": np.array(["completed", "rejected", ""] * n, dtype=str)[:n],
        }
    )


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_parquet_holds_what_pandas_writes_for_the_same_frame(tmp_path, n):
    table = _table(n)
    write_parquet_atomic(tmp_path / "ours.parquet", table)
    table.to_pandas().to_parquet(tmp_path / "pandas.parquet", index=False)
    ours = pq.read_table(tmp_path / "ours.parquet")
    theirs = pq.read_table(tmp_path / "pandas.parquet")
    assert ours.schema.remove_metadata().equals(theirs.schema.remove_metadata())
    assert ours.equals(theirs)
    assert ours.column("x_ms").null_count == len(range(0, n, 3))  # NaN is a null, as pandas has it
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "ours.parquet"),
        pd.read_parquet(tmp_path / "pandas.parquet"),
        check_exact=True,
    )


def test_to_pandas_is_the_frame_of_the_same_columns():
    table = _table(5)
    pd.testing.assert_frame_equal(table.to_pandas(), pd.DataFrame(table.columns))
    assert len(table) == 5 and table["count"] is table.columns["count"]


def test_columns_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="different lengths"):
        Table({"a": np.zeros(2), "b": np.zeros(3)})
