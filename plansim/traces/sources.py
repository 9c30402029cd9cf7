"""Finding trace files and reading them as numbered line batches.

A trace argument may be a file, a glob or a folder (searched recursively for ``.jsonl`` and
``.jsonl.gz`` shards). Files are opened by content, not name: a gzip magic number means a
(possibly multi-member) gzip stream. Every read failure becomes a ``TraceError`` naming the file
and, for a broken gzip stream, the line at which the stream broke.
"""

from __future__ import annotations

import glob
import gzip
import os
import queue
import threading
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

from plansim.errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"
SHARD_SUFFIXES = (".jsonl", ".jsonl.gz")
# Uncompressed bytes per block of whole lines (~2.5k Dynamo rows): two of pyarrow's 1 MB parse
# blocks (one per core), and small, since a few blocks are in flight at a time.
CHUNK_BYTES = 2 << 20
# Bytes per piece read or inflated: the reader thread's allocations stay small.
PIECE_BYTES = 256 << 10
T = TypeVar("T")


def resolve_paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand files, globs and folders into a de-duplicated list of files: arguments in the
    order given, the matches of a glob or folder sorted by path.

    Raises ``TraceError`` for a path that does not exist, a glob that matches nothing, a folder
    without shards, or a shard present both as ``x.jsonl`` and ``x.jsonl.gz``.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: list[Path] = []
    for raw in paths:
        text = os.fspath(raw)
        path = Path(text)
        if path.is_dir():
            shards = sorted(
                p for p in path.rglob("*") if p.is_file() and p.name.endswith(SHARD_SUFFIXES)
            )
            if not shards:
                raise TraceError("folder holds no .jsonl or .jsonl.gz shards", source=text)
            found.extend(shards)
        elif path.exists():
            if not path.is_file():
                raise TraceError("not a regular file", source=text)
            found.append(path)
        elif glob.has_magic(text):
            matches = sorted(Path(m) for m in glob.glob(text, recursive=True) if Path(m).is_file())
            if not matches:
                raise TraceError("glob matches no files", source=text)
            found.extend(matches)
        else:
            raise TraceError("no such file or folder", source=text)
    if not found:
        raise TraceError("no trace files given")
    unique = list(dict.fromkeys(found))
    names = {str(p) for p in unique}
    for p in unique:
        if str(p).endswith(".jsonl.gz") and str(p)[: -len(".gz")] in names:
            raise TraceError(
                f"both {p.name[: -len('.gz')]} and {p.name} are given; use one copy of the shard",
                source=str(p),
            )
    return unique


def open_raw(path: Path) -> BinaryIO:
    """Open ``path`` for reading raw bytes; unreadable paths raise ``TraceError``."""
    try:
        return open(path, "rb")
    except OSError as exc:
        raise TraceError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None


def open_binary(path: Path) -> BinaryIO:
    """Open ``path`` for reading bytes, decompressing gzip when the content is gzip."""
    fh = open_raw(path)
    try:
        magic = fh.read(2)
        fh.seek(0)
    except OSError as exc:
        fh.close()
        raise TraceError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None
    if magic == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh


def read_head(path: Path, max_bytes: int = 1 << 16) -> bytes:
    """Up to ``max_bytes`` of the (decompressed) start of the file, for format detection.

    A broken gzip stream just ends the head early; the reader reports it with its line.
    """
    out = bytearray()
    with open_raw(path) as fh:
        gz = fh.read(2) == GZIP_MAGIC
        fh.seek(0)
        try:
            for data in _decompressed(fh, gz, in_bytes=1 << 16):
                out += data
                if len(out) >= max_bytes:
                    break
        except _StreamError:
            pass
        except OSError as exc:
            raise TraceError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None
    return bytes(out[:max_bytes])


class _StreamError(Exception):
    """Decompression failed; carries the reason for the ``TraceError`` built by the caller."""


def _decompressed(fh: BinaryIO, gz: bool, in_bytes: int = PIECE_BYTES) -> Iterator[bytes]:
    """Yield the file's bytes, inflating every member of a multi-member gzip stream.

    Pieces are at most ``in_bytes`` long (inflated output is capped too), so the reader
    thread only ever allocates pieces of one size.
    """
    if not gz:
        while data := fh.read(in_bytes):
            yield data
        return
    inflater = zlib.decompressobj(wbits=47)
    fed = False
    pending = b""
    while True:
        data = pending or fh.read(in_bytes)
        pending = b""
        if not data:
            if fed and not inflater.eof:
                raise _StreamError("compressed stream ended before the end-of-stream marker")
            return
        fed = True
        while True:
            try:
                out = inflater.decompress(data, in_bytes)
            except zlib.error as exc:
                raise _StreamError(str(exc)) from None
            if out:
                yield out
            data = inflater.unconsumed_tail
            # A full piece may leave output pending inside zlib even with no input left.
            if inflater.eof or not (data or len(out) == in_bytes):
                break
        if inflater.eof:
            pending = inflater.unused_data
            inflater = zlib.decompressobj(wbits=47)
            fed = False


def text_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
    """Yield ``(first_line_number, block)``: consecutive blocks of whole lines (1-based numbers).

    Every block but possibly the last ends with a newline. A broken gzip stream raises
    ``TraceError`` at the line where decompression failed. A block is joined once from the
    pieces read (no growing buffer, no intermediate copies).
    """
    next_line = 1
    pieces: list[bytes] = []
    size = 0
    with open_raw(path) as fh:
        gz = fh.read(2) == GZIP_MAGIC
        fh.seek(0)
        stream = _decompressed(fh, gz)
        while True:
            try:
                data = next(stream, None)
            except _StreamError as exc:
                raise TraceError(
                    f"truncated or corrupt gzip stream: {exc}",
                    source=str(path),
                    line=next_line + sum(p.count(b"\n") for p in pieces),
                ) from None
            except OSError as exc:
                raise TraceError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None
            if data is None:
                if pieces:
                    yield next_line, b"".join(pieces)
                return
            pieces.append(data)
            size += len(data)
            if size < chunk_bytes:
                continue
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # no line ends in this piece: keep reading
                continue
            pieces[-1] = memoryview(data)[:cut]
            block = b"".join(pieces)
            rest = data[cut:]
            pieces = [rest] if rest else []
            size = len(rest)
            yield next_line, block
            next_line += block.count(b"\n")


def line_batches(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, list[bytes]]]:
    """Yield ``(first_line_number, lines)`` for consecutive batches of whole lines (1-based).

    Lines keep no newline; a final line without a newline is included.
    """
    for first_line, block in text_chunks(path, chunk_bytes):
        lines = block.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        yield first_line, lines


def prefetch(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Iterate ``items`` in a background thread, ``depth`` items ahead.

    Decompression (zlib) and JSON parsing (pyarrow) release the GIL, so reading the next block
    overlaps parsing this one. Exceptions from ``items`` are re-raised in the caller's thread;
    a consumer that stops early stops the producer.
    """
    box: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        box.put((True, item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            box.put((True, done))
        except BaseException as exc:
            box.put((False, exc))

    worker = threading.Thread(target=produce, name="plansim-trace-read", daemon=True)
    worker.start()
    try:
        while True:
            ok, item = box.get()
            if not ok:
                raise item
            if item is done:
                return
            yield item
    finally:
        stop.set()
        while worker.is_alive():
            try:
                box.get(timeout=0.1)
            except queue.Empty:
                pass
