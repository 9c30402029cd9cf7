"""``plansim.parquet``: Arrow reads back the columns written, with their types and nulls."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plansim import parquet
from plansim.parquet import arrow_schema_message, write_table


def _written(columns) -> bytes:
    fh = io.BytesIO()
    write_table(fh, columns)
    return fh.getvalue()


def _expected(columns) -> pa.Table:
    """The Arrow table of the columns, built by Arrow from Python values (NaN a null)."""
    types = {"f": pa.float64(), "i": pa.int64(), "U": pa.large_string(), "O": pa.large_string()}
    return pa.table({name: pa.array(values.tolist(), types[values.dtype.kind],
                                    from_pandas=True) for name, values in columns.items()})


def _text(draw, n, null):
    pool = draw(st.lists(st.text(max_size=6), min_size=1, max_size=5))  # repeats: a dictionary
    values = draw(st.lists(st.sampled_from(pool) | (st.none() if null else st.nothing()),
                           min_size=n, max_size=n))
    return np.array(values, dtype=object) if null else np.array(values, dtype=str)


@st.composite
def tables(draw):
    n = draw(st.integers(0, 40))
    floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
    return {
        "f_ms": np.array(draw(st.lists(floats, min_size=n, max_size=n)), dtype=np.float64),
        "n": np.array(draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n)),
                      dtype=np.int64),
        "label": _text(draw, n, null=False),
        "maybe": _text(draw, n, null=True),
        "ünïcode name": np.array([f"r{i}é" for i in range(n)], dtype=object),  # distinct
        "sparse": np.array([f"s{i}" if keep else None for i, keep in enumerate(
            draw(st.lists(st.booleans(), min_size=n, max_size=n)))], dtype=object),
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
    table = pq.read_table(io.BytesIO(_written({
        "x": np.array([1.5, np.nan, -0.0]), "s": np.array(["a", None, ""], dtype=object)})))
    assert table.column("x").to_pylist() == [1.5, None, -0.0]
    assert table.column("s").to_pylist() == ["a", None, ""]
    assert all(field.nullable for field in table.schema)
    assert [str(t) for t in table.schema.types] == ["double", "large_string"]


def test_repeating_text_is_dictionary_encoded_and_distinct_text_and_numbers_are_plain():
    data = _written({"s": np.array(["b", "a", "b", "b"]), "id": np.array(["1", "2", "3", "4"]),
                     "n": np.arange(4, dtype=np.int64)})
    group = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    assert group.column(0).encodings == ("PLAIN", "RLE", "RLE_DICTIONARY")
    assert group.column(0).has_dictionary_page
    for plain in (1, 2):
        assert group.column(plain).encodings == ("PLAIN", "RLE")
        assert not group.column(plain).has_dictionary_page


def test_a_file_of_no_rows_keeps_its_column_types():
    table = pq.read_table(io.BytesIO(_written({
        "s": np.array([], dtype=str), "x": np.zeros(0), "n": np.zeros(0, np.int64)})))
    assert table.num_rows == 0
    assert [str(t) for t in table.schema.types] == ["large_string", "double", "int64"]


def test_the_footer_carries_the_arrow_schema_that_arrow_decodes():
    message = arrow_schema_message(["i", "x", "s"], [2, 5, 6])  # INT64, DOUBLE, BYTE_ARRAY
    assert message[:4] == b"\xff\xff\xff\xff" and len(message) % 8 == 0
    assert pa.ipc.read_schema(pa.py_buffer(message)).equals(
        pa.schema([("i", pa.int64()), ("x", pa.float64()), ("s", pa.large_string())]))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, bool])
def test_a_column_of_another_dtype_is_refused(dtype):
    with pytest.raises(TypeError, match="no Parquet column for dtype"):
        write_table(io.BytesIO(), {"a": np.zeros(2, dtype=dtype)})


# The pieces, against the format's own definitions.

def test_varints_are_little_endian_groups_of_seven_bits_and_zigzag_maps_signs():
    assert parquet._varint(1) == b"\x01" and parquet._varint(300) == b"\xac\x02"
    assert [parquet._zigzag(n) for n in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]


def test_bit_packing_is_the_specs_example():
    # Parquet's encodings spec: 0..7 with bit width 3 pack to 10001000 11000110 11111010.
    assert parquet._bit_packed(np.arange(8), 3) == bytes([0b11, 0b10001000, 0b11000110,
                                                          0b11111010])


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
    assert pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).column(0) \
        .total_uncompressed_size == expected
