"""Atomic output writes: a reader never sees a half-written file, and a failed run leaves the
previous file intact (write to a temporary name in the same folder, then rename)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import orjson


@contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to stream into; it appears at ``path`` only when the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        _publish(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:  # a write error (a full disk) names no file: name the target
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_open(path) as fh:
        fh.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """``json_bytes(obj)`` written atomically."""
    return atomic_write_bytes(path, json_bytes(obj))


def json_bytes(obj: Any) -> bytes:
    """JSON with sorted keys and 2-space indent and a final newline, as plansim writes every
    JSON file; numpy scalars and arrays are serialised, and string-enum keys
    (``plansim.roles.Role``) written as their values."""
    opts = (
        orjson.OPT_INDENT_2
        | orjson.OPT_SORT_KEYS
        | orjson.OPT_SERIALIZE_NUMPY
        | orjson.OPT_NON_STR_KEYS
    )
    return orjson.dumps(obj, option=opts, default=_json_default) + b"\n"


def write_parquet_atomic(path: str | os.PathLike[str], frame: Any) -> Path:
    """Write a ``plansim.result_table.Table`` or a pandas DataFrame as Parquet atomically, both
    through ``plansim.parquet`` (plansim's one Parquet writer)."""
    from plansim.parquet import frame_columns, write_table
    from plansim.result_table import Table

    columns = frame.columns if isinstance(frame, Table) else frame_columns(frame)
    with atomic_open(path) as fh:
        write_table(fh, columns)
    return Path(path)


def _publish(tmp: str, target: Path) -> None:
    """Give the temporary file ordinary permissions (mkstemp makes it 0600), then rename."""
    os.chmod(tmp, 0o666 & ~_UMASK)
    os.replace(tmp, target)


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
