"""Parquet files of named numpy columns (a ``plansim.result_table.Table``'s, or a pandas
DataFrame's through ``frame_columns``): plansim's one Parquet writer, for every table.

Importing pyarrow and its Parquet module costs several times what a replay of the sample spends
writing all of its tables; ``plansim replay run`` writes them with this module and never imports
pyarrow (``bench/dependency_choices.py parquet``; the figures in ``docs/architecture.md``,
"Dependencies"). The file is the one Arrow readers take back as the table pandas would write
for ``Table.to_pandas()`` (without pandas' metadata):

- one row group; every column optional (nullable), as Arrow's columns are;
- int64 and float64 columns PLAIN-encoded, a float NaN written as a null (as pandas writes it);
- text columns UTF-8 byte arrays, ``None`` a null, dictionary-encoded when values repeat;
- bool columns PLAIN (bit-packed); ``Nulls`` Arrow's null type (as Arrow writes it: INT32,
  logical type UNKNOWN);
- an object column of ``bool``, ``int`` or numbers and ``None`` a bool, int64 or float64 column
  with nulls, as Arrow types a pandas object column;
- every page GZIP-compressed at level 1 (zlib: the only Parquet codec in Python 3.11's standard
  library; level 1 writes the sample's tables 3x faster than level 6, 3% larger);
- statistics for every column chunk (null count; min and max of the present values, in the
  type's own order: TYPE_DEFINED_ORDER);
- the Arrow schema in the footer (``ARROW:schema``, as Arrow writes it), so that Arrow readers
  read text columns back as ``large_string``.

The same columns give the same bytes (the gzip header carries no time).

Formats: Apache Parquet (format 2.6: footer and page headers in Thrift's compact protocol, data
page v1, levels in the RLE/bit-packing hybrid) and Arrow's IPC schema message (a flatbuffer).
"""

from __future__ import annotations

import binascii
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

MAGIC = b"PAR1"
# Rows per data page: about 1 MiB of 8-byte values, the page size Arrow's writer aims at.
PAGE_ROWS = 1 << 17
CREATED_BY = b"plansim"
GZIP_LEVEL = 1

# Parquet enums (parquet.thrift).
_BOOLEAN, _INT32, _INT64, _DOUBLE, _BYTE_ARRAY = 0, 1, 2, 5, 6
_NULL = _INT32  # a column of nulls only is INT32 with logical type UNKNOWN, as Arrow writes it
_OPTIONAL = 1
_UTF8 = 0  # ConvertedType
_PLAIN, _RLE, _RLE_DICTIONARY = 0, 3, 8
_DATA_PAGE, _DICTIONARY_PAGE = 0, 2
_GZIP = 2
# LogicalType union fields.
_LOGICAL_STRING, _LOGICAL_UNKNOWN = 1, 11

# Thrift compact protocol type codes.
_T_I32, _T_I64, _T_BINARY, _T_LIST, _T_STRUCT = 5, 6, 8, 9, 12

_LENGTH = struct.Struct("<I").pack


def write_table(fh: BinaryIO, columns: Mapping[str, np.ndarray]) -> None:
    """Write named columns of equal length (int64, float64, bool, or ``str`` in numpy ``U`` or
    object arrays, ``None`` a missing value; object arrays of ``bool``, ``int`` or numbers and
    ``None``; ``Nulls``) to ``fh`` as a Parquet file."""
    names = list(columns)
    prepared = [_column(name, columns[name]) for name in names]
    num_rows = len(columns[names[0]]) if names else 0
    fh.write(MAGIC)
    offset = len(MAGIC)
    chunks = []  # (size in bytes, the encoded ColumnChunk)
    for name, col in zip(names, prepared):
        start = offset
        raw_size = 0  # the pages' headers and uncompressed bodies
        dictionary_offset = data_offset = None
        encodings = [_PLAIN, _RLE]  # the values (or the dictionary), the levels
        for encoding, header, body, raw in _pages(col):
            if encoding == _DICTIONARY_PAGE:
                dictionary_offset = offset
                encodings.append(_RLE_DICTIONARY)
            elif data_offset is None:
                data_offset = offset
            fh.write(header)
            fh.write(body)
            offset += len(header) + len(body)
            raw_size += len(header) + raw
        size = offset - start
        meta = {
            1: _i32(col.kind),
            2: _list(_T_I32, [_varint(_zigzag(e)) for e in encodings]),
            3: _list(_T_BINARY, [_bytes(name.encode())]),
            4: _i32(_GZIP),
            5: _i64(num_rows),
            6: _i64(raw_size),
            7: _i64(size),
            9: _i64(data_offset),
            12: _statistics(col),
        }
        if dictionary_offset is not None:
            meta[11] = _i64(dictionary_offset)
        chunks.append((size, _struct({2: _i64(start), 3: _struct(meta)})[1]))
    footer = _footer(names, [col.kind for col in prepared], num_rows, chunks)
    fh.write(footer)
    fh.write(_LENGTH(len(footer)))
    fh.write(MAGIC)


@dataclass(frozen=True, slots=True)
class Nulls:
    """A column of ``rows`` nulls and no type: Arrow's null type, what pandas writes for an
    object column of missing values only."""

    rows: int

    def __len__(self) -> int:
        return self.rows


def frame_columns(frame: Any) -> dict[str, np.ndarray | Nulls]:
    """A pandas DataFrame's columns as ``write_table`` takes them, typed as pandas' own
    ``to_parquet(index=False)`` types them: numpy int64, float64 and bool columns as they are,
    an object column of missing values only as ``Nulls``, the others as object arrays with
    ``None`` where pandas has a missing value. The index is left out."""
    columns: dict[str, np.ndarray | Nulls] = {}
    for name in frame.columns:
        series = frame[name]
        if series.dtype.kind in "fib" and isinstance(series.dtype, np.dtype):
            columns[str(name)] = series.to_numpy()
        elif series.dtype == object and series.isna().all():
            columns[str(name)] = Nulls(len(series))
        else:
            values = series.to_numpy(dtype=object, copy=True)
            values[series.isna().to_numpy()] = None
            columns[str(name)] = values
    return columns


@dataclass(frozen=True, slots=True)
class _Column:
    """One column ready to encode: its Parquet physical type (``_NULL``: nulls only), which
    rows are present (None: all), and the present values (a numpy array; a list of ``str`` for
    text)."""

    kind: int
    rows: int
    valid: np.ndarray | None
    values: Any


def _column(name: str, values: np.ndarray | Nulls) -> _Column:
    """The column's kind and present values (an object array of ``None`` only is text, as a
    ``Table``'s text column); other dtypes, and object arrays of other values, are refused."""
    n = len(values)
    if isinstance(values, Nulls):
        return _Column(_NULL, n, np.zeros(n, dtype=bool), [])
    if values.dtype.kind == "U":
        return _Column(_BYTE_ARRAY, n, None, values.tolist())
    if values.dtype.kind == "O":
        items = values.tolist()
        valid = None
        if None in items:
            valid = np.fromiter((v is not None for v in items), dtype=bool, count=n)
            items = [v for v in items if v is not None]
        types = set(map(type, items))
        if types <= {str}:
            return _Column(_BYTE_ARRAY, n, valid, items)
        if types <= {bool, np.bool_}:
            return _Column(_BOOLEAN, n, valid, np.array(items, dtype=bool))
        if types <= {int, np.int64}:
            return _Column(_INT64, n, valid, np.array(items, dtype="<i8"))
        if types <= {int, np.int64, float, np.float64}:
            return _Column(_DOUBLE, n, valid, np.array(items, dtype="<f8"))
        kinds = ", ".join(sorted(t.__name__ for t in types))
        raise TypeError(f"no Parquet column for values of types {kinds} (column {name!r})")
    if values.dtype == np.int64:
        return _Column(_INT64, n, None, np.ascontiguousarray(values, dtype="<i8"))
    if values.dtype == np.bool_:
        return _Column(_BOOLEAN, n, None, values)
    if values.dtype == np.float64:
        present = np.ascontiguousarray(values, dtype="<f8")
        finite = ~np.isnan(present)
        if not finite.all():
            return _Column(_DOUBLE, n, finite, present[finite])
        return _Column(_DOUBLE, n, None, present)
    raise TypeError(f"no Parquet column for dtype {values.dtype} (column {name!r})")


def _statistics(col: _Column) -> tuple[int, bytes]:
    """The column chunk's Statistics: null count, and min and max of the present values
    (``min_value``/``max_value``; a float's zero as -0.0 in min and +0.0 in max, as the format
    asks)."""
    fields = {3: _i64(col.rows - len(col.values))}
    if len(col.values) and col.kind != _NULL:
        if col.kind == _BYTE_ARRAY:
            low, high = min(col.values).encode(), max(col.values).encode()
        elif col.kind == _DOUBLE:
            low, high = float(col.values.min()), float(col.values.max())
            low, high = (-0.0 if low == 0 else low), (0.0 if high == 0 else high)
            low, high = struct.pack("<d", low), struct.pack("<d", high)
        elif col.kind == _INT64:
            low, high = (
                struct.pack("<q", int(col.values.min())),
                struct.pack("<q", int(col.values.max())),
            )
        else:
            low, high = bytes([bool(col.values.min())]), bytes([bool(col.values.max())])
        fields[5], fields[6] = _binary(high), _binary(low)
    return _struct(fields)


def _footer(
    names: list[str], kinds: list[int], num_rows: int, chunks: list[tuple[int, bytes]]
) -> bytes:
    """The FileMetaData: the schema (a root and one optional leaf a column), the one row group,
    the Arrow schema, each column's statistics ordered by its type."""
    schema = [_struct({4: _binary(b"schema"), 5: _i32(len(names))})[1]]
    for name, kind in zip(names, kinds):
        leaf = {1: _i32(kind), 3: _i32(_OPTIONAL), 4: _binary(name.encode())}
        if kind == _BYTE_ARRAY:
            leaf[6] = _i32(_UTF8)
            leaf[10] = _struct({_LOGICAL_STRING: _struct({})})
        elif kind == _NULL:
            leaf[10] = _struct({_LOGICAL_UNKNOWN: _struct({})})
        schema.append(_struct(leaf)[1])
    row_group = _struct(
        {
            1: _list(_T_STRUCT, [c for _, c in chunks]),
            2: _i64(sum(size for size, _ in chunks)),
            3: _i64(num_rows),
        }
    )[1]
    arrow_schema = binascii.b2a_base64(arrow_schema_message(names, kinds), newline=False)
    key_value = _struct({1: _binary(b"ARROW:schema"), 2: _binary(arrow_schema)})[1]
    type_order = _struct({1: _struct({})})[1]  # ColumnOrder: TYPE_ORDER
    return _struct(
        {
            1: _i32(2),
            2: _list(_T_STRUCT, schema),
            3: _i64(num_rows),
            4: _list(_T_STRUCT, [row_group]),
            5: _list(_T_STRUCT, [key_value]),
            6: _binary(CREATED_BY),
            7: _list(_T_STRUCT, [type_order] * len(names)),
        }
    )[1]


def _pages(col: _Column) -> Iterator[tuple[int, bytes, bytes, int]]:
    """The column chunk's pages, each as (the data page's encoding, or ``_DICTIONARY_PAGE``;
    its header; its compressed body; the body's uncompressed size). Numbers and booleans are
    PLAIN; text is dictionary-encoded when at most half of its present values are distinct
    (Arrow's writer too gives up its dictionary when that grows large), else PLAIN. A chunk of
    no rows is one empty data page."""
    values = col.values
    encoding = _PLAIN
    if col.kind == _BYTE_ARRAY:
        distinct = dict.fromkeys(values)  # in order of first appearance
        if 2 * len(distinct) <= len(values):
            index = {v: i for i, v in enumerate(distinct)}
            codes = np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))
            plain = _byte_arrays([v.encode() for v in distinct])
            body = _deflate(plain)
            yield (
                _DICTIONARY_PAGE,
                _page_header(
                    _DICTIONARY_PAGE,
                    len(plain),
                    len(body),
                    7,
                    _struct({1: _i32(len(distinct)), 2: _i32(_PLAIN)}),
                ),
                body,
                len(plain),
            )
            width = max(1, (len(distinct) - 1).bit_length())
            encoding = _RLE_DICTIONARY

            def encode(lo: int, hi: int) -> bytes:
                return bytes([width]) + _bit_packed(codes[lo:hi], width)
        else:
            words = [v.encode() for v in values]

            def encode(lo: int, hi: int) -> bytes:
                return _byte_arrays(words[lo:hi])
    elif col.kind == _BOOLEAN:

        def encode(lo: int, hi: int) -> bytes:
            return np.packbits(values[lo:hi], bitorder="little").tobytes()
    elif col.kind == _NULL:

        def encode(lo: int, hi: int) -> bytes:
            return b""
    else:

        def encode(lo: int, hi: int) -> bytes:
            return values[lo:hi].tobytes()

    n, done = col.rows, 0  # rows; present values already written
    for lo in range(0, max(n, 1), PAGE_ROWS):
        rows = min(PAGE_ROWS, n - lo)
        page_valid = None if col.valid is None else col.valid[lo : lo + rows]
        count = rows if page_valid is None else int(np.count_nonzero(page_valid))
        data = _levels(page_valid, rows) + encode(done, done + count)
        done += count
        body = _deflate(data)
        yield encoding, _data_page_header(len(data), len(body), rows, encoding), body, len(data)


def _deflate(data: bytes) -> bytes:
    """``data`` in the gzip format (Parquet's GZIP codec); its header's time is 0."""
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def _byte_arrays(words: list[bytes]) -> bytes:
    """PLAIN byte arrays: each a 4-byte little-endian length, then its bytes."""
    parts: list[bytes] = [b""] * (2 * len(words))
    parts[0::2] = map(_LENGTH, map(len, words))
    parts[1::2] = words
    return b"".join(parts)


def _levels(valid: np.ndarray | None, rows: int) -> bytes:
    """Definition levels (1 present, 0 null; bit width 1) in the RLE/bit-packing hybrid, with
    the 4-byte length that data page v1 puts before them: one RLE run when every row is
    present, else one bit-packed run."""
    if rows == 0:
        encoded = b""
    elif valid is None:
        encoded = _varint(rows << 1) + b"\x01"
    else:
        encoded = _bit_packed(valid, 1)
    return _LENGTH(len(encoded)) + encoded


def _bit_packed(values: np.ndarray, width: int) -> bytes:
    """Non-negative ints below ``2**width`` as one bit-packed run of the RLE/bit-packing hybrid:
    groups of 8 values, each value's bits least significant first."""
    if len(values) == 0:
        return b""
    groups = -(-len(values) // 8)
    padded = np.zeros(groups * 8, dtype="<u4")
    padded[: len(values)] = values
    bits = np.unpackbits(padded.view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")
    return _varint(groups << 1 | 1) + np.packbits(bits[:, :width], bitorder="little").tobytes()


def _page_header(
    page_type: int, size: int, compressed_size: int, field: int, header: tuple[int, bytes]
) -> bytes:
    return _struct({1: _i32(page_type), 2: _i32(size), 3: _i32(compressed_size), field: header})[1]


def _data_page_header(size: int, compressed_size: int, rows: int, encoding: int) -> bytes:
    return _page_header(
        _DATA_PAGE,
        size,
        compressed_size,
        5,
        _struct({1: _i32(rows), 2: _i32(encoding), 3: _i32(_RLE), 4: _i32(_RLE)}),
    )


# ---------------------------------------------------------------- Thrift compact protocol


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _zigzag(n: int) -> int:
    return n << 1 if n >= 0 else (-n << 1) - 1


def _i32(n: int) -> tuple[int, bytes]:
    return _T_I32, _varint(_zigzag(n))


def _i64(n: int) -> tuple[int, bytes]:
    return _T_I64, _varint(_zigzag(n))


def _bytes(data: bytes) -> bytes:
    return _varint(len(data)) + data


def _binary(data: bytes) -> tuple[int, bytes]:
    return _T_BINARY, _bytes(data)


def _list(element_type: int, elements: list[bytes]) -> tuple[int, bytes]:
    n = len(elements)
    head = bytes([n << 4 | element_type]) if n < 15 else bytes([0xF0 | element_type]) + _varint(n)
    return _T_LIST, head + b"".join(elements)


def _struct(fields: Mapping[int, tuple[int, bytes]]) -> tuple[int, bytes]:
    """A struct of ``{field id: (type, encoded value)}``: each field's header carries the
    difference to the previous id when it is 1 to 15."""
    out = bytearray()
    last = 0
    for field_id in sorted(fields):
        kind, value = fields[field_id]
        delta = field_id - last
        out += (
            bytes([delta << 4 | kind])
            if 0 < delta <= 15
            else (bytes([kind]) + _varint(_zigzag(field_id)))
        )
        out += value
        last = field_id
    out.append(0)
    return _T_STRUCT, bytes(out)


# ---------------------------------------------------------------- Arrow's schema message

# Arrow's flatbuffer enums (Schema.fbs, Message.fbs).
_V5, _HEADER_SCHEMA = 4, 1
_TYPE_NULL, _TYPE_INT, _TYPE_FLOATING_POINT, _TYPE_BOOL, _TYPE_LARGE_UTF8 = 1, 2, 3, 6, 20
_DOUBLE_PRECISION = 2


def arrow_schema_message(names: list[str], kinds: list[int]) -> bytes:
    """The encapsulated IPC message of the Arrow schema (every field nullable; int64, float64,
    bool, null, large_string), as Arrow's Parquet writer stores it in ``ARROW:schema`` (before
    base64)."""
    fb = _Flatbuffer()
    fields = []
    for name, kind in zip(names, kinds):
        children = fb.vector([])
        if kind == _INT64:
            type_type, arrow_type = _TYPE_INT, fb.table([(0, "i", 64), (1, "B", 1)])
        elif kind == _DOUBLE:
            type_type = _TYPE_FLOATING_POINT
            arrow_type = fb.table([(0, "h", _DOUBLE_PRECISION)])
        elif kind == _BOOLEAN:
            type_type, arrow_type = _TYPE_BOOL, fb.table([])
        elif kind == _NULL:
            type_type, arrow_type = _TYPE_NULL, fb.table([])
        else:
            type_type, arrow_type = _TYPE_LARGE_UTF8, fb.table([])
        label = fb.string(name.encode())
        fields.append(
            fb.table(
                [
                    (0, "offset", label),
                    (1, "B", 1),
                    (2, "B", type_type),
                    (3, "offset", arrow_type),
                    (5, "offset", children),
                ]
            )
        )
    schema = fb.table([(1, "offset", fb.vector(fields))])
    message = fb.table([(0, "h", _V5), (1, "B", _HEADER_SCHEMA), (2, "offset", schema)])
    body = fb.finish(message)
    return b"\xff\xff\xff\xff" + struct.pack("<i", len(body)) + body


class _Flatbuffer:
    """A minimal flatbuffer builder: objects are prepended, so an object's references point
    forward to what was built before it, as the format requires. Positions are counted from
    the buffer's end; the finished buffer's length is a multiple of 8, so a value aligned from
    the end is aligned from the start."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def _prepend(self, data: bytes, align: int) -> int:
        """Prepend ``data`` (``align`` bytes or a multiple of them) so that it starts at a
        multiple of ``align``; its position."""
        self.buf[:0] = bytes((-len(self.buf)) % align)
        self.buf[:0] = data
        return len(self.buf)

    def _offset(self, target: int) -> int:
        """Prepend a 4-byte reference to the object at ``target``; its position."""
        self.buf[:0] = bytes((-len(self.buf)) % 4)
        self.buf[:0] = struct.pack("<I", len(self.buf) + 4 - target)
        return len(self.buf)

    def string(self, data: bytes) -> int:
        self.buf[:0] = bytes((-(len(self.buf) + len(data) + 1)) % 4)
        self.buf[:0] = data + b"\x00"
        return self._prepend(struct.pack("<I", len(data)), 4)

    def vector(self, targets: list[int]) -> int:
        """A vector of references to tables."""
        for target in reversed(targets):
            self._offset(target)
        return self._prepend(struct.pack("<I", len(targets)), 4)

    def table(self, fields: list[tuple[int, str, int]]) -> int:
        """A table of ``(slot, struct format or "offset", value)``; its vtable is prepended
        right before it."""
        end = len(self.buf)
        slots: dict[int, int] = {}
        # Larger values first, so that each is aligned with no padding between smaller ones.
        for slot, fmt, value in sorted(fields, key=lambda f: -_size(f[1])):
            if fmt == "offset":
                slots[slot] = self._offset(value)
            else:
                slots[slot] = self._prepend(struct.pack("<" + fmt, value), _size(fmt))
        self.buf[:0] = bytes((-len(self.buf)) % 4)
        vtable_size = 4 + 2 * (max(slots, default=-1) + 1)
        start = self._prepend(struct.pack("<i", vtable_size), 4)
        entries = [0] * (max(slots, default=-1) + 1)
        for slot, position in slots.items():
            entries[slot] = start - position
        self.buf[:0] = struct.pack(f"<HH{len(entries)}H", vtable_size, start - end, *entries)
        return start

    def finish(self, root: int) -> bytes:
        self.buf[:0] = bytes((-(len(self.buf) + 4)) % 8)
        self._prepend(struct.pack("<I", len(self.buf) + 4 - root), 4)
        return bytes(self.buf)


def _size(fmt: str) -> int:
    return 4 if fmt == "offset" else struct.calcsize("<" + fmt)
