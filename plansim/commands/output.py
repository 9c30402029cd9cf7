"""The output layer: where every command's files go, checked before any work starts.

An output folder holds exactly one run. ``OutputFolder.claim(--out, ...)`` validates it first:
not a file, creatable, writable, and either empty or (with ``--force``) holding a previous
plansim run whose files are then replaced, never mixed with the new ones, or (with
``--resume``) holding an interrupted run of the same command to go on with. It creates the
folder and takes its lock (``folder_lock``) for the whole run, so that of two runs started at
once into one folder the second is refused, and a killed run's stale lock is named (``--force``
and ``--resume`` take it over). ``folder.writing()`` wraps the writing phase: it removes the
previous run's files, writes ``run.json`` with ``"status": "incomplete"`` first and rewrites it
with ``"complete"`` and the list of files last, so an interrupted or failed run is marked as such,
and releases the lock. A run that fails before writing anything leaves no folder behind (a
killed one leaves its stale lock).

``check_output_file(path, option)`` does the same up-front check for a single output file
(``trace convert``/``synth``). Files themselves are written atomically (``plansim.io``).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from plansim import schema
from plansim.commands.folder_lock import LOCK_NAME, FolderLock, acquire
from plansim.errors import InputError
from plansim.io import atomic_write_json, write_parquet_atomic

log = logging.getLogger("plansim.commands")

OUT_ROOT = Path("plansim-out")
RUN_MARKER = "run.json"
COMPLETE, INCOMPLETE = "complete", "incomplete"
# A long run's records of its finished replays (``plansim.workers.journal``), kept while it
# runs so that ``--resume`` after a kill replays only what is missing; removed once it is done.
RESUME_DIR = ".plansim-resume"
# Folders claimed in this process and not yet released by ``run_folders``.
_claimed: list[OutputFolder] = []
# Warning lines held while a command checks its inputs (``held_warnings``); None: print them.
_held: list[str] | None = None
# What plansim writes into an output folder, besides what run.json lists: --force removes these
# (a folder written before run.json existed, or one whose run stopped before listing its files).
_OWN_NAMES = frozenset(
    {
        RUN_MARKER,
        schema.INPUTS_JSON,
        schema.SUMMARY_JSON,
        schema.REQUESTS_TABLE,
        schema.TIMESERIES_TABLE,
        schema.WORKERS_TABLE,
        schema.SESSIONS_TABLE,
        schema.TICKS_TABLE,
        schema.SCALING_EVENTS_JSON,
        schema.RETUNE_EVENTS_JSON,
        schema.PREDICTIONS_TABLE,
        schema.WINDOWS_TABLE,
        schema.WINDOW_RECORDS_DIR,
        schema.REPLAY_REPORT,
        f"{schema.PLANNER_REPORT}.html",
        f"{schema.PLANNER_REPORT}.log.jsonl.gz",
        schema.PLANNER_PERIOD_REPORTS_DIR,
        schema.RETUNE_REPORT,
        schema.PREDICTOR_REPORT,
        schema.WINDOWS_REPORT,
        schema.PLOTLY_JS,
        schema.CAPACITY_JSON,
        schema.POINTS_TABLE,
        schema.RECOMMENDED_DEPLOYMENT,
        schema.RECOMMENDED_PLANNER,
        schema.CAPACITY_REPORT,
        schema.BASELINE_JSON,
        schema.COMPARE_JSON,
        schema.COMPARE_REPORT,
        schema.RECOMMENDED_ENGINE_ARGS,
        schema.RECOMMENDED_PREFILL_ENGINE_ARGS,
        schema.RECOMMENDED_DECODE_ENGINE_ARGS,
        schema.TRACE_EVENTS_JSON,
        RESUME_DIR,
        schema.FLEET_JSON,
        schema.FLEET_MODELS_DIR,
        schema.FLEET_REPORT,
        schema.CALIBRATION_JSON,
        schema.CALIBRATED_DEPLOYMENT,
        schema.CALIBRATION_TABLE,
        schema.CALIBRATION_REPORT,
        RESUME_DIR,
    }
)

# Options that say where and how a run is written, not what ran: inputs.json leaves them out, so
# that the same inputs write the same inputs.json whatever folder they go to (the folder is
# where its run.json is; nothing needs its path recorded).
WRITING_OPTIONS = frozenset(
    {
        "out",
        "force",
        "resume",
        "no_report",
        "self_contained",
        "quiet",
        "json_output",
        "trace_events",
        "no_baseline",
    }
)


def records_option(name: str, value: Any) -> bool:
    """Whether inputs.json records option ``name`` with ``value``: one that says what ran (not
    in ``WRITING_OPTIONS``) and was given (not left unset, off or empty)."""
    return (
        name not in WRITING_OPTIONS
        and value is not None
        and value is not False
        and value != ()
        and value != []
    )


def out_option(kind: str) -> Any:
    """The ``--out`` option of a command whose default folder is ``new_out_dir(kind)``."""
    return Annotated[
        Path | None,
        typer.Option(
            help=f"Output folder (default: a new plansim-out/{kind}-<time>).", show_default=False
        ),
    ]


ForceOption = Annotated[
    bool,
    typer.Option(
        "--force", help="Replace the run already in --out (only plansim's files are removed)."
    ),
]
ResumeOption = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Go on with the run interrupted in --out (killed, or stopped): the "
        "replays it recorded are not replayed again, and the answer is the one "
        "an uninterrupted run gives. The inputs must be the same.",
    ),
]


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


@contextmanager
def held_warnings() -> Iterator[None]:
    """Hold the warning lines (``warning_line``) of the block until its command starts its work
    (``start_work``) or ends: a command refused for a mistake in its inputs (``InputError``,
    exit status 2) prints one line, the mistake, not the warnings its checks gave before it
    (the CLI runs each command in this block)."""
    global _held
    _held = []
    try:
        yield
    except InputError:
        _held = None
        raise
    finally:
        start_work()


def warning_line(line: str) -> None:
    """Print ``line`` on stderr, or hold it while the command checks its inputs."""
    if _held is not None:
        _held.append(line)
    else:
        print(line, file=sys.stderr)


def start_work() -> None:
    """Every input of the command is checked and its work begins: print the warnings held so
    far, and later ones as they come."""
    global _held
    held, _held = _held, None
    for line in held or ():
        print(line, file=sys.stderr)


@contextmanager
def run_folders() -> Iterator[None]:
    """Release every output folder claimed while the block runs when it ends, however it ends:
    a command that fails before writing leaves neither its lock nor an empty folder (the CLI
    runs each command in this block)."""
    mark = len(_claimed)
    try:
        yield
    finally:
        while len(_claimed) > mark:
            _claimed.pop().release()


@dataclass(slots=True)
class OutputFolder:
    """A validated output folder, locked for this run; see the module docstring."""

    path: Path
    command: str
    replace: tuple[str, ...] = ()  # the previous run's entries, removed when writing starts
    foreign: frozenset[str] = field(default_factory=frozenset)  # entries kept as they are
    lock: FolderLock | None = None
    created: tuple[Path, ...] = ()  # folders claim made, deepest first (removed if left empty)
    resumed: bool = False  # it holds an interrupted run of this command, to go on with

    @classmethod
    def claim(
        cls,
        out: Path | None,
        kind: str,
        command: str,
        *,
        force: bool = False,
        resume: bool | None = None,
        option: str = "--out",
    ) -> OutputFolder:
        """Check and lock ``out`` (default: a new ``plansim-out/<kind>-<time>``) before any
        work. ``resume`` (None for a command without ``--resume``): ``out`` may hold an
        interrupted run of ``command``, whose records (``RESUME_DIR``) are kept; any other run
        there is refused."""
        path = out if out is not None else new_out_dir(kind)
        if force and resume:
            raise InputError(
                "give --resume to go on with an interrupted run or --force to replace it, not both",
                field="--resume",
            )
        if path.exists() and not path.is_dir():
            raise InputError(f"{path} exists and is not a folder", field=option)
        _check_creatable(path, option)
        created = _make_folders(path)
        try:
            hint = (
                "use --force to take it over"
                if resume is None
                else "use --resume to go on with its run, or --force to start over"
            )
            lock = acquire(
                path, command, take_over=force or bool(resume), option=option, stale_hint=hint
            )
        except BaseException:
            _remove_empty(created)
            raise
        folder = cls(path, command, lock=lock, created=created)
        try:
            folder._check_entries(force, resume, option)
        except BaseException:
            folder.release()
            raise
        if lock.stale is not None:
            log.warning(
                "%s: took over the stale lock of a run that was killed (%s)", path, lock.stale
            )
        _claimed.append(folder)
        return folder

    def _check_entries(self, force: bool, resume: bool | None, option: str) -> None:
        """What the folder may already hold: nothing, or (``force``) anything, or (``resume``)
        an interrupted run of this command; sets what writing replaces and keeps."""
        path = self.path
        entries = [name for name in sorted(os.listdir(path)) if not _lock_file(name)]
        if not entries:
            return
        marker = read_marker(path)
        command = (marker or {}).get("command")
        by = f" of {command}" if isinstance(command, str) else ""
        if resume:
            if marker is None:
                raise InputError(
                    f"{path} holds no interrupted run of {self.command} to resume; "
                    "use --force to write into it, or choose another folder",
                    field="--resume",
                )
            if marker.get("status") == COMPLETE or command != self.command:
                what = "a complete run" if marker.get("status") == COMPLETE else "a run"
                raise InputError(
                    f"{path} holds {what}{by}, nothing of {self.command} to resume; "
                    "use --force to replace it, or choose another folder",
                    field="--resume",
                )
            self.resumed = True
        elif not force:
            if marker is not None or schema.INPUTS_JSON in entries:
                incomplete = (marker or {}).get("status") != COMPLETE
                what = "an incomplete run" if incomplete else "a run"
                again = (
                    "use --resume to go on with it, --force to replace it"
                    if incomplete and resume is not None and command == self.command
                    else "use --force to replace it"
                )
                raise InputError(
                    f"{path} already holds {what}{by}; {again}, or choose another folder",
                    field=option,
                )
            raise InputError(
                f"{path} is not empty; use --force to write into it (plansim's "
                "files there are replaced, others kept), or choose another folder",
                field=option,
            )
        listed = (marker or {}).get("files", [])
        listed = (
            {str(name).split("/", 1)[0] for name in listed} if isinstance(listed, list) else set()
        )
        replace = tuple(
            name
            for name in entries
            if (_own(name) or name in listed) and not (self.resumed and name == RESUME_DIR)
        )
        self.replace = replace
        self.foreign = frozenset(entries) - frozenset(replace) - {RESUME_DIR}

    def release(self) -> None:
        """Give up the folder's lock and remove the folders ``claim`` made if they are still
        empty; idempotent (called when writing ends, and when the command ends)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        _remove_empty(self.created)
        self.created = ()

    @classmethod
    @contextmanager
    def reopen(cls, path: Path, option: str = "DIR") -> Iterator[Path]:
        """Add files (re-rendered reports) to a finished run's folder: refused when a run is
        writing there or its ``run.json`` says the run is incomplete; its file list is brought
        up to date after."""
        lock = (
            acquire(path, "plansim report", take_over=True, option=option)
            if path.is_dir()
            else None
        )
        try:
            marker = read_marker(path)
            if marker is not None and marker.get("status") != COMPLETE:
                raise InputError(
                    f"{path} holds an incomplete run (interrupted or failed; see "
                    f"{RUN_MARKER}); run it again",
                    field=option,
                )
            yield path
            if marker is not None:
                folder = cls(path, str(marker.get("command", "")))
                atomic_write_json(path / RUN_MARKER, {**marker, "files": folder._written()})
        finally:
            if lock is not None:
                lock.release()

    @contextmanager
    def writing(self) -> Iterator[Path]:
        """Clear the previous run, mark the run incomplete; on success drop the run's resume
        records and mark it complete with its files. A failure before any file but the marker
        was written removes what this run created. The lock is released when the block ends."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            for name in self.replace:
                target = self.path / name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                else:
                    target.unlink(missing_ok=True)
            atomic_write_json(
                self.path / RUN_MARKER, {"command": self.command, "status": INCOMPLETE}
            )
            try:
                yield self.path
            except BaseException:
                if not self._written():  # nothing of this run but its marker: leave no trace
                    (self.path / RUN_MARKER).unlink(missing_ok=True)
                raise
            shutil.rmtree(self.path / RESUME_DIR, ignore_errors=True)
            atomic_write_json(
                self.path / RUN_MARKER,
                {"command": self.command, "status": COMPLETE, "files": self._written()},
            )
        finally:
            self.release()

    def _written(self) -> list[str]:
        """This run's files, relative to the folder, sorted (the marker and lock excluded)."""
        out = []
        for root, _, files in os.walk(self.path):
            for name in files:
                rel = Path(root, name).relative_to(self.path).as_posix()
                if (
                    rel != RUN_MARKER
                    and not _lock_file(rel)
                    and rel.split("/", 1)[0] not in self.foreign
                ):
                    out.append(rel)
        return sorted(out)


def _lock_file(name: str) -> bool:
    """Whether a folder entry is the run lock or one being made (``folder_lock``)."""
    return name == LOCK_NAME or (name.startswith(".plansim-lock-") and name.endswith(".tmp"))


def _make_folders(path: Path) -> tuple[Path, ...]:
    """Create ``path`` and its missing parents; the ones created, deepest first."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    path.mkdir(parents=True, exist_ok=True)
    return tuple(missing)


def _remove_empty(folders: tuple[Path, ...]) -> None:
    """Remove each of ``folders`` (deepest first) while it is empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


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


def write_reports(out_dir: Path, *, self_contained: bool = False) -> list[Path]:
    """Render the folder's HTML reports and list them (``self_contained``: each embeds
    plotly.js instead of sharing the folder's ``plotly.min.js``); returns the reports."""
    from plansim.commands import console
    from plansim.reports import render_dir

    reports = [p for p in render_dir(out_dir, self_contained=self_contained) if p.suffix == ".html"]
    console.echo(*(f"report        {path}" for path in reports))
    return reports


def replay_inputs(
    command: str,
    options: dict[str, Any] | None,
    traces: list[Any],
    workload: Any,
    deployment: Any,
    planner_raw: Any,
    trace_format: str,
    trace_block_size: int | None,
) -> dict[str, Any]:
    """``inputs.json`` of a replay: the command and the options given (None: no options, a call
    from Python), the traces and how they were read, the validated deployment, the planner
    mapping, the SLA and seed."""
    return {
        "command": command,
        **({"options": options} if options is not None else {}),
        "traces": [str(p) for p in traces],
        "trace_format": trace_format,
        "trace_block_size": workload.trace_block_size
        if trace_block_size is None
        else trace_block_size,
        "requests": len(workload),
        "skipped": dict(workload.skipped),
        "deployment": deployment.model_dump(mode="json"),
        "planner": dict(planner_raw) if planner_raw is not None else None,
        "sla": deployment.sla.model_dump(mode="json"),
        "seed": deployment.seed,
    }


def open_journal(
    folder: OutputFolder, inputs: dict[str, Any], workload_digest: str, ignore: tuple[str, ...] = ()
) -> Any:
    """The ``workers.journal.Journal`` of a long run in ``folder`` (its ``RESUME_DIR``): the
    interrupted run's records when the folder was claimed with ``--resume``, else an empty one.
    Its inputs are the run's ``inputs`` (as inputs.json records them, less the ``options``
    named in ``ignore``, which do not change results), its workload's content
    (``Workload.content_digest``) and plansim's version; a resumed run with other inputs is
    refused."""
    from importlib.metadata import version

    from plansim.workers.journal import Journal

    options = {k: v for k, v in inputs.get("options", {}).items() if k not in ignore}
    return Journal.open(
        folder.path / RESUME_DIR,
        {
            **inputs,
            "options": options,
            "workload": workload_digest,
            # The installed distribution's (as --version): the package itself sits above commands.
            "plansim": version("plansim"),
        },
        resume=folder.resumed,
    )


def warn_if_all_rejected(result: Any, inputs: dict[str, Any]) -> None:
    """One warning line when every request of a replay (a ``ReplayResult``) was rejected, with
    the reason (``schema.all_rejected_text``; ``inputs`` as written to inputs.json): such a run
    finishes at once and would otherwise look like a success."""
    requests = result.tables["requests"]
    n = len(requests["status"])
    if n == 0 or not (requests["status"] == "rejected").all():
        return
    reasons = Counter(str(r) for r in requests["reason"])
    log.warning(
        schema.all_rejected_text(
            n,
            reasons.most_common(1)[0][0],
            int(requests["input_length"].min()),
            inputs["deployment"],
        )
    )


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
