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
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from plansim.errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"
SHARD_SUFFIXES = (".jsonl", ".jsonl.gz")
# Uncompressed bytes per read; a batch of lines is whatever whole lines fit (~8k Dynamo rows).
CHUNK_BYTES = 4 << 20


def resolve_paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand files, globs and folders into a sorted, de-duplicated list of files.

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


def open_binary(path: Path) -> BinaryIO:
    """Open ``path`` for reading bytes, decompressing gzip when the content is gzip."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - returned to the caller
    except OSError as exc:
        raise TraceError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None
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
    """The first bytes of the (decompressed) file, for format detection."""
    with open_binary(path) as fh:
        try:
            return fh.read(max_bytes)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(f"truncated or corrupt gzip stream: {exc}", source=str(path)) from None


def line_batches(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, list[bytes]]]:
    """Yield ``(first_line_number, lines)`` for consecutive batches of whole lines (1-based).

    Lines keep no newline; a final line without a newline is included. A broken gzip stream
    raises ``TraceError`` at the line where decompression failed.
    """
    next_line = 1
    tail = b""
    with open_binary(path) as fh:
        while True:
            try:
                chunk = fh.read(chunk_bytes)
            except (OSError, EOFError, zlib.error) as exc:
                raise TraceError(
                    f"truncated or corrupt gzip stream: {exc}",
                    source=str(path),
                    line=next_line + tail.count(b"\n"),
                ) from None
            if not chunk:
                break
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            if lines:
                yield next_line, lines
                next_line += len(lines)
    if tail:
        yield next_line, [tail]
