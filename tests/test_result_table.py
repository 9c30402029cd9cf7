"""``plansim.result_table.Table``: written through Arrow as pandas would write its DataFrame."""

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
    return Table({
        "request_id": np.array([f"r{i}é" for i in range(n)], dtype=object),
        "x_ms": floats,
        "count": rng.integers(-5, 5, n).astype(np.int64),
        "status": np.array(["completed", "rejected", ""] * n, dtype=str)[:n],
    })


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
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "ours.parquet"),
                                  pd.read_parquet(tmp_path / "pandas.parquet"), check_exact=True)


def test_text_columns_are_dictionary_encoded_and_numbers_are_not(tmp_path):
    write_parquet_atomic(tmp_path / "t.parquet", _table(1000))
    group = pq.ParquetFile(tmp_path / "t.parquet").metadata.row_group(0)
    encodings = {group.column(i).path_in_schema: group.column(i).encodings
                 for i in range(group.num_columns)}
    assert "RLE_DICTIONARY" in encodings["request_id"] and "RLE_DICTIONARY" in encodings["status"]
    assert "RLE_DICTIONARY" not in encodings["x_ms"] and "RLE_DICTIONARY" not in encodings["count"]


def test_a_missing_string_is_a_null():
    arrow = Table({"s": np.array(["a", None, "b"], dtype=object)}).to_arrow()
    assert arrow.column("s").to_pylist() == ["a", None, "b"]


def test_to_pandas_is_the_frame_of_the_same_columns():
    table = _table(5)
    pd.testing.assert_frame_equal(table.to_pandas(), pd.DataFrame(table.columns))
    assert len(table) == 5 and table["count"] is table.columns["count"]


def test_columns_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="different lengths"):
        Table({"a": np.zeros(2), "b": np.zeros(3)})


@pytest.mark.parametrize("dtype", [np.float32, np.int32, bool])
def test_a_column_of_another_dtype_is_refused(dtype):
    with pytest.raises(TypeError, match="no Arrow column"):
        Table({"a": np.zeros(2, dtype=dtype)}).to_arrow()


def test_an_empty_table_writes_its_columns(tmp_path):
    table = Table({"s": np.array([], dtype=str), "x": np.zeros(0), "n": np.zeros(0, np.int64)})
    write_parquet_atomic(tmp_path / "e.parquet", table)
    back = pq.read_table(tmp_path / "e.parquet")
    assert back.num_rows == 0 and [str(t) for t in back.schema.types] == [
        "large_string", "double", "int64"]
