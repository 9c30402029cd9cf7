"""The output layer: where every command's files go, checked before any work starts.

An output folder holds exactly one run. ``OutputFolder.claim(--out, ...)`` validates it first
(nothing is created yet): not a file, creatable, writable, and either empty or (with
``--force``) holding a previous plansim run whose files are then replaced, never mixed with the
new ones. ``folder.writing()`` wraps the writing phase: it creates the folder, removes the
previous run's files, writes ``run.json`` with ``"status": "incomplete"`` first and rewrites it
with ``"complete"`` and the list of files last, so an interrupted or failed run is marked as such.
A run that fails before writing anything leaves no folder behind.

``check_output_file(path, option)`` does the same up-front check for a single output file
(``trace convert``/``synth``). Files themselves are written atomically (``plansim.io``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from plansim import schema
from plansim.errors import InputError
from plansim.io import atomic_write_json, write_parquet_atomic

OUT_ROOT = Path("plansim-out")
RUN_MARKER = "run.json"
COMPLETE, INCOMPLETE = "complete", "incomplete"
# What plansim writes into an output folder, besides what run.json lists: --force removes these
# (a folder written before run.json existed, or one whose run stopped before listing its files).
_OWN_NAMES = frozenset({
    RUN_MARKER, schema.INPUTS_JSON, schema.SUMMARY_JSON, schema.REQUESTS_TABLE,
    schema.TIMESERIES_TABLE, schema.WORKERS_TABLE, schema.SESSIONS_TABLE, schema.TICKS_TABLE,
    schema.SCALING_EVENTS_JSON, schema.RETUNE_EVENTS_JSON, schema.PREDICTIONS_TABLE,
    schema.WINDOWS_TABLE, schema.WINDOW_RECORDS_DIR, schema.REPLAY_REPORT,
    f"{schema.PLANNER_REPORT}.html", f"{schema.PLANNER_REPORT}.log.jsonl.gz",
    schema.PLANNER_PERIOD_REPORTS_DIR, schema.RETUNE_REPORT, schema.PREDICTOR_REPORT,
    schema.WINDOWS_REPORT, schema.PLOTLY_JS, schema.CAPACITY_JSON, schema.POINTS_TABLE,
    schema.RECOMMENDED_DEPLOYMENT, schema.RECOMMENDED_PLANNER, schema.CAPACITY_REPORT,
    schema.CALIBRATION_JSON, schema.CALIBRATED_DEPLOYMENT, schema.CALIBRATION_TABLE,
    schema.CALIBRATION_REPORT,
})

# Options that say where and how a run is written, not what ran: inputs.json leaves them out, so
# that the same inputs write the same inputs.json whatever folder they go to (the folder is
# where its run.json is; nothing needs its path recorded).
WRITING_OPTIONS = frozenset({"out", "force", "no_report", "self_contained", "quiet"})


def records_option(name: str, value: Any) -> bool:
    """Whether inputs.json records option ``name`` with ``value``: one that says what ran (not
    in ``WRITING_OPTIONS``) and was given (not left unset, off or empty)."""
    return (name not in WRITING_OPTIONS and value is not None and value is not False
            and value != () and value != [])

ForceOption = Annotated[bool, typer.Option(
    "--force", help="Replace the run already in --out (only plansim's files are removed).")]


def new_out_dir(kind: str) -> Path:
    """A folder that does not exist yet: ``plansim-out/<kind>-<local time>[-N]``."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate = OUT_ROOT / f"{kind}-{stamp}"
    suffix = 2
    while candidate.exists():
        candidate = OUT_ROOT / f"{kind}-{stamp}-{suffix}"
        suffix += 1
    return candidate


def _own(name: str) -> bool:
    """Whether a folder entry is one plansim writes (its tables, reports, temporary files)."""
    return name in _OWN_NAMES or (name.startswith(".") and name.endswith(".tmp"))


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The folder's ``run.json``, or None when it has none (or an unreadable one)."""
    try:
        marker = orjson.loads((folder / RUN_MARKER).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return marker if isinstance(marker, dict) else None


@dataclass(slots=True)
class OutputFolder:
    """A validated output folder; see the module docstring."""

    path: Path
    command: str
    replace: tuple[str, ...] = ()  # the previous run's entries, removed when writing starts
    foreign: frozenset[str] = field(default_factory=frozenset)  # entries kept as they are

    @classmethod
    def claim(cls, out: Path | None, kind: str, command: str, *, force: bool = False,
              option: str = "--out") -> OutputFolder:
        """Check ``out`` (default: a new ``plansim-out/<kind>-<time>``) before any work."""
        path = out if out is not None else new_out_dir(kind)
        if path.exists() and not path.is_dir():
            raise InputError(f"{path} exists and is not a folder", field=option)
        _check_creatable(path, option)
        entries = sorted(os.listdir(path)) if path.is_dir() else []
        if not entries:
            return cls(path, command)
        if not force:
            marker = read_marker(path)
            if marker is not None or schema.INPUTS_JSON in entries:
                what = "an incomplete run" if (marker or {}).get("status") != COMPLETE else "a run"
                by = f" of {marker['command']}" if isinstance((marker or {}).get("command"),
                                                               str) else ""
                raise InputError(f"{path} already holds {what}{by}; use --force to replace it, "
                                 "or choose another folder", field=option)
            raise InputError(f"{path} is not empty; use --force to write into it (plansim's "
                             "files there are replaced, others kept), or choose another folder",
                             field=option)
        listed = (read_marker(path) or {}).get("files", [])
        listed = {str(name).split("/", 1)[0] for name in listed} if isinstance(listed,
                                                                               list) else set()
        replace = tuple(name for name in entries if _own(name) or name in listed)
        return cls(path, command, replace, frozenset(entries) - frozenset(replace))

    @classmethod
    @contextmanager
    def reopen(cls, path: Path, option: str = "DIR") -> Iterator[Path]:
        """Add files (re-rendered reports) to a finished run's folder: refused when its
        ``run.json`` says the run is incomplete; its file list is brought up to date after."""
        marker = read_marker(path)
        if marker is not None and marker.get("status") != COMPLETE:
            raise InputError(f"{path} holds an incomplete run (interrupted or failed; see "
                             f"{RUN_MARKER}); run it again", field=option)
        yield path
        if marker is not None:
            folder = cls(path, str(marker.get("command", "")))
            atomic_write_json(path / RUN_MARKER, {**marker, "files": folder._written()})

    @contextmanager
    def writing(self) -> Iterator[Path]:
        """Create the folder, clear the previous run, mark the run incomplete; on success mark
        it complete with its files. A failure before any file but the marker was written removes
        what this run created."""
        created = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        for name in self.replace:
            target = self.path / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
        atomic_write_json(self.path / RUN_MARKER, {"command": self.command, "status": INCOMPLETE})
        try:
            yield self.path
        except BaseException:
            if not self._written():  # nothing of this run but its marker: leave no trace
                if created:
                    shutil.rmtree(self.path, ignore_errors=True)
                else:
                    (self.path / RUN_MARKER).unlink(missing_ok=True)
            raise
        atomic_write_json(self.path / RUN_MARKER, {
            "command": self.command, "status": COMPLETE, "files": self._written()})

    def _written(self) -> list[str]:
        """This run's files, relative to the folder, sorted (the marker excluded)."""
        out = []
        for root, _, files in os.walk(self.path):
            for name in files:
                rel = Path(root, name).relative_to(self.path).as_posix()
                if rel != RUN_MARKER and rel.split("/", 1)[0] not in self.foreign:
                    out.append(rel)
        return sorted(out)


def _check_creatable(path: Path, option: str) -> None:
    """The nearest existing ancestor of ``path`` (or ``path``) is a folder we can write in."""
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{existing} is not a folder, so {path} cannot be created", field=option)
    try:
        fd, probe = tempfile.mkstemp(prefix=".plansim-probe-", dir=existing)
    except OSError as exc:
        raise InputError(f"cannot write in {existing}: {exc.strerror}", field=option) from None
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: Path, option: str) -> None:
    """Before any work: ``path`` can be written as a regular file (it is not a folder or a
    device, and its folder, or the nearest existing ancestor, is writable)."""
    if path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file"
        raise InputError(f"{path} is {kind}; give a file name", field=option)
    _check_creatable(path.parent, option)


def write_reports(out_dir: Path, *, self_contained: bool = False) -> None:
    """Render the folder's HTML reports and list them (``self_contained``: each embeds
    plotly.js instead of sharing the folder's ``plotly.min.js``)."""
    from plansim.reports import render_dir

    for path in render_dir(out_dir, self_contained=self_contained):
        if path.suffix == ".html":
            typer.echo(f"report        {path}")


def write_replay_outputs(out_dir: Path, result: Any, inputs: dict[str, Any]) -> None:
    """The tables of a ``ReplayResult``: ``inputs.json``, ``summary.json`` (without host-speed
    figures, so the same inputs and seed write byte-identical files), the request, time-series
    and worker tables, the sessions of a closed-loop replay, and, when a planner ran, its
    ticks, scaling events and retune records."""
    from plansim.sim.summary import without_host_keys

    atomic_write_json(out_dir / schema.INPUTS_JSON, inputs)
    atomic_write_json(out_dir / schema.SUMMARY_JSON, without_host_keys(result.summary))
    tables = result.tables
    write_parquet_atomic(out_dir / schema.REQUESTS_TABLE, tables["requests"])
    write_parquet_atomic(out_dir / schema.TIMESERIES_TABLE, tables["timeseries"])
    write_parquet_atomic(out_dir / schema.WORKERS_TABLE, tables["workers"])
    if "sessions" in tables:
        write_parquet_atomic(out_dir / schema.SESSIONS_TABLE, tables["sessions"])
    if result.ticks is not None:
        write_parquet_atomic(out_dir / schema.TICKS_TABLE, result.ticks)
        atomic_write_json(out_dir / schema.SCALING_EVENTS_JSON, result.scaling_events)
    if result.retune_events is not None:
        atomic_write_json(out_dir / schema.RETUNE_EVENTS_JSON, result.retune_events)
