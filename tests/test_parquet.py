"""``plansim.parquet``: Arrow reads back the columns written, with their types, nulls and
statistics; a DataFrame reads back as pandas' own Parquet writer would give it."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plansim import parquet
from plansim.parquet import Nulls, arrow_schema_message, frame_columns, write_table


def _written(columns) -> bytes:
    fh = io.BytesIO()
    write_table(fh, columns)
    return fh.getvalue()


def _expected(columns) -> pa.Table:
    """The Arrow table of the columns, built by Arrow from Python values (NaN a null)."""
    types = {
        "f": pa.float64(),
        "i": pa.int64(),
        "b": pa.bool_(),
        "U": pa.large_string(),
        "O": pa.large_string(),
    }
    return pa.table(
        {
            name: pa.array(values.tolist(), types[values.dtype.kind], from_pandas=True)
            for name, values in columns.items()
        }
    )


def _text(draw, n, null):
    pool = draw(st.lists(st.text(max_size=6), min_size=1, max_size=5))  # repeats: a dictionary
    values = draw(
        st.lists(
            st.sampled_from(pool) | (st.none() if null else st.nothing()), min_size=n, max_size=n
        )
    )
    return np.array(values, dtype=object) if null else np.array(values, dtype=str)


@st.composite
def tables(draw):
    n = draw(st.integers(0, 40))
    floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
    return {
        "f_ms": np.array(draw(st.lists(floats, min_size=n, max_size=n)), dtype=np.float64),
        "n": np.array(
            draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)), dtype=np.int64
        ),
        "flag": np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool),
        "label": _text(draw, n, null=False),
        "maybe": _text(draw, n, null=True),
        "ünïcode name": np.array([f"r{i}é" for i in range(n)], dtype=object),  # distinct
        "sparse": np.array(
            [
                f"s{i}" if keep else None
                for i, keep in enumerate(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
            ],
            dtype=object,
        ),
    }


@settings(max_examples=150, deadline=None)
@given(tables(), st.sampled_from([1, 3, 8, parquet.PAGE_ROWS]))
def test_arrow_reads_back_the_columns(columns, page_rows):
    original, parquet.PAGE_ROWS = parquet.PAGE_ROWS, page_rows
    try:  # several pages a column: nulls and dictionary codes split across them
        data = _written(columns)
    finally:
        parquet.PAGE_ROWS = original
    ours = pq.read_table(io.BytesIO(data))
    assert ours.schema.equals(_expected(columns).schema)
    assert ours.equals(_expected(columns))


def test_nan_and_none_are_nulls_and_every_column_is_nullable():
    table = pq.read_table(
        io.BytesIO(
            _written(
                {"x": np.array([1.5, np.nan, -0.0]), "s": np.array(["a", None, ""], dtype=object)}
            )
        )
    )
    assert table.column("x").to_pylist() == [1.5, None, -0.0]
    assert table.column("s").to_pylist() == ["a", None, ""]
    assert all(field.nullable for field in table.schema)
    assert [str(t) for t in table.schema.types] == ["double", "large_string"]


def test_repeating_text_is_dictionary_encoded_and_distinct_text_and_numbers_are_plain():
    data = _written(
        {
            "s": np.array(["b", "a", "b", "b"]),
            "id": np.array(["1", "2", "3", "4"]),
            "n": np.arange(4, dtype=np.int64),
        }
    )
    group = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    assert group.column(0).encodings == ("PLAIN", "RLE", "RLE_DICTIONARY")
    assert group.column(0).has_dictionary_page
    for plain in (1, 2):
        assert group.column(plain).encodings == ("PLAIN", "RLE")
        assert not group.column(plain).has_dictionary_page


def test_a_file_of_no_rows_keeps_its_column_types():
    table = pq.read_table(
        io.BytesIO(
            _written({"s": np.array([], dtype=str), "x": np.zeros(0), "n": np.zeros(0, np.int64)})
        )
    )
    assert table.num_rows == 0
    assert [str(t) for t in table.schema.types] == ["large_string", "double", "int64"]


def test_the_footer_carries_the_arrow_schema_that_arrow_decodes():
    # INT64, DOUBLE, BYTE_ARRAY, BOOLEAN, and INT32 for a column of nulls
    message = arrow_schema_message(["i", "x", "s", "b", "z"], [2, 5, 6, 0, 1])
    assert message[:4] == b"\xff\xff\xff\xff" and len(message) % 8 == 0
    assert pa.ipc.read_schema(pa.py_buffer(message)).equals(
        pa.schema(
            [
                ("i", pa.int64()),
                ("x", pa.float64()),
                ("s", pa.large_string()),
                ("b", pa.bool_()),
                ("z", pa.null()),
            ]
        )
    )


@pytest.mark.parametrize("dtype", [np.float32, np.int32, "datetime64[s]"])
def test_a_column_of_another_dtype_is_refused(dtype):
    with pytest.raises(TypeError, match="no Parquet column for dtype"):
        write_table(io.BytesIO(), {"a": np.zeros(2, dtype=dtype)})


def test_an_object_column_mixing_text_and_numbers_is_refused():
    with pytest.raises(TypeError, match=r"values of types int, str .column 'a'"):
        write_table(io.BytesIO(), {"a": np.array(["x", 1, None], dtype=object)})


def test_booleans_with_nulls_and_a_column_of_nulls_only_keep_their_arrow_types():
    table = pq.read_table(
        io.BytesIO(
            _written(
                {
                    "b": np.array([True, None, False], dtype=object),
                    "z": Nulls(3),
                    "none_text": np.array([None, None, None], dtype=object),
                }
            )
        )
    )
    assert table.column("b").to_pylist() == [True, None, False]
    assert table.column("z").to_pylist() == [None] * 3
    assert [str(t) for t in table.schema.types] == ["bool", "null", "large_string"]


def test_statistics_are_the_null_count_and_the_min_and_max_of_the_present_values():
    data = _written(
        {
            "n": np.array([5, -3, 9], dtype=np.int64),
            "x": np.array([np.nan, 0.0, -2.5]),
            "s": np.array(["pear", None, "apple"], dtype=object),
            "b": np.array([True, False, True]),
            "z": Nulls(3),
        }
    )
    group = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    stats = [group.column(i).statistics for i in range(5)]
    assert [s.null_count for s in stats] == [0, 1, 1, 0, 3]
    assert [(s.min, s.max) for s in stats[:4]] == [
        (-3, 9),
        (-2.5, 0.0),
        ("apple", "pear"),
        (False, True),
    ]
    assert math.copysign(1, stats[1].max) == 1  # a zero maximum is +0.0
    assert not stats[4].has_min_max


def test_a_zero_minimum_is_negative_zero():
    data = _written({"x": np.array([0.0, 1.0])})
    low = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).column(0).statistics.min
    assert low == 0 and math.copysign(1, low) == -1


def test_every_column_chunk_is_gzip_compressed_and_the_same_columns_give_the_same_bytes():
    columns = {"n": np.arange(1000, dtype=np.int64) % 7, "s": np.array(["a", "b"] * 500)}
    data = _written(columns)
    group = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    for i in range(2):
        chunk = group.column(i)
        assert chunk.compression == "GZIP"
        assert chunk.total_compressed_size < chunk.total_uncompressed_size
    assert _written(columns) == data


def test_a_frame_reads_back_as_pandas_own_parquet_writer_gives_it():
    frame = pd.DataFrame(
        {
            "n": [1, 2, 3],
            "x": [0.5, None, 1.0],
            "flag": [True, False, False],
            "maybe": [True, None, False],
            "label": ["a", None, "b"],
            "none": [None] * 3,
            "count": pd.Series([3, None, 4], dtype=object),  # ints and a None, not floats
            "mixed": pd.Series([1, 2.5, None], dtype=object),
        }
    )
    assert frame["count"].tolist() == [3, None, 4]
    fh = io.BytesIO()
    frame.to_parquet(fh, index=False)
    pd.testing.assert_frame_equal(
        pd.read_parquet(io.BytesIO(_written(frame_columns(frame)))),
        pd.read_parquet(io.BytesIO(fh.getvalue())),
        check_exact=True,
    )


# The pieces, against the format's own definitions.


def test_varints_are_little_endian_groups_of_seven_bits_and_zigzag_maps_signs():
    assert parquet._varint(1) == b"\x01" and parquet._varint(300) == b"\xac\x02"
    assert [parquet._zigzag(n) for n in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]


def test_bit_packing_is_the_specs_example():
    # Parquet's encodings spec: 0..7 with bit width 3 pack to 10001000 11000110 11111010.
    assert parquet._bit_packed(np.arange(8), 3) == bytes([0b11, 0b10001000, 0b11000110, 0b11111010])


def test_levels_are_one_run_when_every_row_is_present_and_bits_otherwise():
    # 4-byte length, then RLE run (5 << 1, value 1) / bit-packed run (1 group: 1 << 1 | 1).
    assert parquet._levels(None, 5) == b"\x02\x00\x00\x00\x0a\x01"
    assert parquet._levels(np.array([True, False, True]), 3) == b"\x02\x00\x00\x00\x03\x05"
    assert parquet._levels(None, 0) == b"\x00\x00\x00\x00"


def test_a_thrift_struct_field_header_holds_the_id_delta_and_type():
    # Field 1 (i32 = 5), then field 17: a delta over 15 takes a type byte and a zigzag id.
    _, encoded = parquet._struct({1: parquet._i32(3), 17: parquet._i64(1)})
    assert encoded == bytes([0x15, 6, 0x06, 34, 2, 0])


def test_each_page_holds_exactly_its_rows_values():
    # Five distinct words (PLAIN), two rows a page: pages of 2, 2 and 1 rows. A page is its
    # header (17 bytes here: every number in it is below 64), the levels (4-byte length, one
    # 2-byte run) and each value's 4-byte length and bytes.
    words = ["a", "bb", "c", "dd", "e"]
    original, parquet.PAGE_ROWS = parquet.PAGE_ROWS, 2
    try:
        data = _written({"w": np.array(words)})
    finally:
        parquet.PAGE_ROWS = original
    pages = [words[0:2], words[2:4], words[4:5]]
    expected = sum(17 + 6 + sum(4 + len(w) for w in page) for page in pages)
    assert (
        pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).column(0).total_uncompressed_size
        == expected
    )
