"""The one error type for user mistakes: bad files, bad configs, bad options.

The CLI turns an ``InputError`` into one line on stderr and exit status 2; everything else
is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any


class InputError(Exception):
    """A user mistake, located as precisely as we can: ``source:line: field: message``."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.line = line
        self.field = field

    def __str__(self) -> str:
        where = ""
        if self.source is not None:
            where = f"{self.source}:{self.line}: " if self.line is not None else f"{self.source}: "
        what = f"{self.field}: " if self.field and not self.message.startswith(self.field) else ""
        return f"{where}{what}{self.message}"


class TraceError(InputError):
    """A trace file that cannot be read: names the file, the line and the field."""


class ConfigError(InputError):
    """A deployment, planner or retune config value that is invalid: names the key."""


@contextmanager
def located(source: str | None) -> Iterator[None]:
    """Errors of the block that name no file are about ``source`` (the config being applied)."""
    try:
        yield
    except InputError as exc:
        if exc.source is not None or source is None:
            raise
        raise type(exc)(exc.message, source=source, line=exc.line, field=exc.field) from None


def describe_value(value: Any) -> str:
    """A user value as the user would write it: NaN, inf, true, null, 'text', a list."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:g}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def unknown_key(key: str, known: Iterable[str]) -> str:
    """The message for an unknown ``key``: "unknown key", with "did you mean 'x'?" when one of
    the ``known`` keys at that place is close to it (a typo)."""
    close = difflib.get_close_matches(key, sorted(set(known)), n=1, cutoff=0.75)
    return f"unknown key; did you mean {close[0]!r}?" if close else "unknown key"
