"""Trace formats: ``TRACE_FORMATS``, the one table of every format plansim reads or writes.

Each format is one declaration module here (its ``FORMAT``, a ``TraceFormat``): what it is (for
help), what detection looks for in a file's first line and the test that finds it (``sniff``),
its reader, its closed-loop graph builder (``linker``), whether it records latencies, the block
size a trace of it is read with when the file does not say, its writer (``trace convert``,
``trace synth``) and the reader of retune windows. Readers, linkers and writers are
``"module:attribute"`` targets imported when used, so detecting a format imports no reader. The registry's order is detection's: the most
specific test first (the agentic Mooncake header is also a row with a ``schema``).

The ``--format``/``--to`` choices and help texts, the loader's checks and the convert command's
rules all derive from the records (``input_help``, ``output_help``, ``block_size_help``).

Adding a format: one declaration module (its reader may live in it, or be named by its target)
and one line in ``TRACE_FORMATS``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plansim.registry import Registry, load_target


@dataclass(frozen=True, slots=True)
class TraceWriter:
    """How a format is written. ``target``: ``"module:attribute"`` of ``write(workload, path)``
    (with ``epoch_ms=`` when ``unix_ms``); ``about``: what it writes (help); ``unix_ms``: arrivals
    are written as Unix milliseconds (``--epoch-ms`` places relative ones); ``graph``: it holds a
    closed-loop workload's sessions or dependencies."""

    target: str
    about: str
    unix_ms: bool = False
    graph: bool = True

    def write(self, workload: Any, path: str | os.PathLike[str], epoch_ms: float) -> Path:
        extra = {"epoch_ms": epoch_ms} if self.unix_ms else {}
        return load_target(self.target)(workload, path, **extra)


@dataclass(frozen=True, slots=True)
class TraceFormat:
    """One trace format; see the module docstring. ``sniff(line, record)``: whether a file
    whose first non-blank line is ``line`` is of this format (``record``: the line's JSON value
    when it starts with ``{`` or ``[``, else None). ``reader``: ``read(path, *,
    trace_block_size)`` -> ``TraceColumns``; ``linker``: the graph builder
    ``plansim.traces.load.Linker`` (None: always open-loop); ``block_size``: tokens per hash
    block when none is given (None: the trace carries its own, a different value is an error);
    ``windows``: the reader retune windows read with (``read(path, *, trace_block_size,
    strict=False)``: rows with their event times, arrivals and outputs possibly missing; None:
    retune windows cannot be read from the format)."""

    about: str
    first_line: str
    sniff: Callable[[bytes, Any], bool]
    reader: str
    linker: str | None = None
    records_latencies: bool = False
    block_size: int | None = None
    writer: TraceWriter | None = None
    windows: str | None = None

    def read(self, path: Path, *, trace_block_size: int | None) -> Any:
        return load_target(self.reader)(path, trace_block_size=trace_block_size)

    def graph_builder(self) -> Callable[..., Any] | None:
        return None if self.linker is None else load_target(self.linker)


TRACE_FORMATS: Registry[TraceFormat] = Registry("trace format", {
    "agentic_mooncake": "plansim.traces.formats.agentic_mooncake:FORMAT",
    "dynamo": "plansim.traces.formats.dynamo:FORMAT",
    "mooncake": "plansim.traces.formats.mooncake:FORMAT",
    "azure": "plansim.traces.formats.azure:FORMAT",
})


def _either(names: list[str], word: str = "or") -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def writable() -> tuple[str, ...]:
    """The formats ``trace convert`` and ``trace synth`` write."""
    return tuple(name for name, fmt in TRACE_FORMATS.items() if fmt.writer is not None)


def windowed() -> str:
    """The formats retune windows read, with what they are (for errors)."""
    return _either([f"{name} traces ({fmt.about})" for name, fmt in TRACE_FORMATS.items()
                    if fmt.windows is not None])


def input_help() -> str:
    """``--format``'s help."""
    return "Input format: " + _either(
        ["auto (detect from the content)",
         *(f"{name} ({fmt.about})" for name, fmt in TRACE_FORMATS.items())]) + "."


def output_help() -> str:
    """``--to``'s help."""
    return "Output format: " + _either(
        [f"{name} ({TRACE_FORMATS.get(name).writer.about})" for name in writable()]) + "."


def block_size_help() -> str:
    """``--trace-block-size``'s help."""
    given = [(name, fmt.block_size) for name, fmt in TRACE_FORMATS.items()
             if fmt.block_size is not None]
    carried = [name for name, fmt in TRACE_FORMATS.items() if fmt.block_size is None]
    defaults = "; ".join(f"{_either([n for n, b in given if b == size], 'and')} traces default "
                         f"to {size}" for size in dict.fromkeys(b for _, b in given))
    return (f"Tokens per hash block. {defaults}; {_either(carried, 'and')} traces carry their own "
            "block size and a different value is an error.")


def detection_hint() -> str:
    """What detection looks for, every format's first line (for the unknown-format error)."""
    return _either([fmt.first_line for _, fmt in TRACE_FORMATS.items()])
