"""What a trace format declares (``TraceFormat``, with its ``TraceWriter``); the registry is
``plansim.traces.formats``."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plansim.registry import load_target


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
    """One trace format (see ``plansim.traces.formats``). ``sniff(line, record)``: whether a file
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
        """One file's ``TraceColumns``; ``trace_block_size`` None: the format's ``block_size``
        (None too when the trace carries its own)."""
        size = self.block_size if trace_block_size is None else trace_block_size
        return load_target(self.reader)(path, trace_block_size=size)

    def graph_builder(self) -> Callable[..., Any] | None:
        return None if self.linker is None else load_target(self.linker)
