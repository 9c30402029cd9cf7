"""What a report needs to render from an output folder: the folder's tables, each read and
checked once (``FolderTables``), where its pages go (``FolderOutput``), and the declaration a
report module makes to be rendered by ``reports.folder.render_dir`` (``FolderReport``).

A table that cannot be read is a user mistake: ``InputError`` naming the file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from plansim.errors import InputError
from plansim.io import atomic_write_text
from plansim.reports.assets import plotly_src
from plansim.reports.tables import finite_number
from plansim.schema import INPUTS_JSON, POINTS_TABLE, SCALING_EVENTS_JSON, SUMMARY_JSON


def read_json(path: Path) -> Any:
    """The JSON in ``path``; None when the file is absent."""
    if not path.is_file():
        return None
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc}", source=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None


def read_parquet(path: Path) -> pd.DataFrame | None:
    """The Parquet table in ``path``; None when the file is absent."""
    if not path.is_file():
        return None
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a damaged or foreign file
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"not a readable Parquet table: {first_line}", source=str(path)) from None


class FolderTables:
    """An output folder's tables, each read when first asked for and then kept. ``inputs``
    (``inputs.json``, a dict), ``summary`` (``summary.json`` as written) and ``scaling_events``
    (the records of ``scaling_events.json``) are read at once: several reports show them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._read: dict[str, Any] = {}
        inputs = read_json(folder / INPUTS_JSON)
        self.inputs: dict[str, Any] = inputs if isinstance(inputs, dict) else {}
        self.summary: Any = read_json(folder / SUMMARY_JSON)
        events = read_json(folder / SCALING_EVENTS_JSON)
        self.scaling_events: list[Mapping[str, Any]] = (
            [e for e in events if isinstance(e, Mapping)] if isinstance(events, list) else []
        )

    def read(self, name: str, reader: Callable[[Path], Any]) -> Any:
        """``reader(folder / name)``, once per name."""
        if name not in self._read:
            self._read[name] = reader(self.folder / name)
        return self._read[name]

    def parquet(self, name: str) -> pd.DataFrame | None:
        """Table ``name`` (None when absent)."""
        return self.read(name, read_parquet)

    def json(self, name: str) -> Any:
        """The JSON file ``name`` (None when absent)."""
        return self.read(name, read_json)


@dataclass(frozen=True, slots=True)
class FolderOutput:
    """Where a report's pages go: ``folder``, loading plotly.js from the folder's shared copy
    unless ``self_contained``."""

    folder: Path
    self_contained: bool

    def plotly_src(self, page: Path) -> str | None:
        """What ``page`` loads plotly.js from (None: embedded)."""
        return None if self.self_contained else plotly_src(page, self.folder)

    def write_html(self, name: str, render: Callable[[str | None], str]) -> Path:
        """Page ``name`` of the folder, ``render(plotly_src)`` written atomically."""
        page = self.folder / name
        return atomic_write_text(page, render(self.plotly_src(page)))


@dataclass(frozen=True, slots=True)
class FolderReport:
    """A report ``render_dir`` writes. ``triggers``: the files (globs: ``windows/*.json``)
    whose presence makes a folder renderable for it; ``read(tables)`` reads (and so checks)
    every table the report uses, present or not, and says whether it has anything to draw;
    ``write(tables, out)`` writes its pages from what was read, returning the paths."""

    triggers: tuple[str, ...]
    read: Callable[[FolderTables], bool]
    write: Callable[[FolderTables, FolderOutput], list[Path]]


def result_reader(what: str, needed: tuple[str, ...]) -> Callable[[Path], Mapping | None]:
    """A reader of a command's result JSON (``what``: e.g. ``plansim capacity``): the mapping,
    None when the file is absent, ``InputError`` naming the file when a key of ``needed`` is
    missing."""

    def read(path: Path) -> Mapping[str, Any] | None:
        report = read_json(path)
        if report is None:
            return None
        if not isinstance(report, Mapping) or any(k not in report for k in needed):
            raise InputError(
                f"not a {what} result (needs " + ", ".join(needed) + ")", source=str(path)
            )
        return report

    return read


def result_report(
    result_json: str,
    read: Callable[[Path], Mapping | None],
    page: str,
    render: Callable[..., str],
    table: str = POINTS_TABLE,
) -> FolderReport:
    """The report of a folder holding ``result_json`` (read by ``read``) and, when present,
    ``table``: ``page`` is ``render(result, table, inputs, plotly_src=src)``."""

    def read_folder(tables: FolderTables) -> bool:
        if tables.read(result_json, read) is None:
            return False
        tables.parquet(table)
        return True

    def write_folder(tables: FolderTables, out: FolderOutput) -> list[Path]:
        return [
            out.write_html(
                page,
                lambda src: render(
                    tables.read(result_json, read),
                    tables.parquet(table),
                    tables.inputs,
                    plotly_src=src,
                ),
            )
        ]

    return FolderReport((result_json,), read_folder, write_folder)


def positive(value: Any) -> float | None:
    """``value`` as a finite positive float, else None."""
    out = finite_number(value)
    return out if out is not None and out > 0 else None
