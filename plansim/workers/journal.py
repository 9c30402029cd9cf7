"""Long searches that survive a kill: a record of every finished task, kept as it completes, so
that a rerun of the same inputs runs only what is missing.

The contract, for any search built on ``Executor`` batches (``plansim capacity``, ``plansim
retune windows``, the fleet search):

- ``Journal.open(folder, inputs, resume=...)``: ``inputs`` is a JSON-able mapping of everything
  the run's results depend on (the workload's content digest, the validated configs, the
  options that change results, plansim's version); its digest names the run. Without
  ``resume``, or when ``folder`` holds no journal, the journal starts empty (``folder`` is
  written with the first record). With ``resume``, a journal of other inputs is an
  ``InputError`` naming the inputs that differ.
- A record is ``(key, value)``: ``key`` names one task's work within the run, and the caller
  guarantees that the same inputs and the same key give the same value (keys are what the
  search's own cache already trusts). ``record`` writes it as one file named by the digest of
  the run and the key, atomically (a temporary file renamed), as soon as the task is done;
  ``get`` reads it back, or ``MISSING``.
- Values are None, bool, int, float (NaN and infinities included), str, list, tuple, dict (any
  keys of these types), numpy scalars and arrays, and dataclasses and enums of ``plansim``
  modules, nested: they are written as tagged JSON and read back equal, floats bit for bit, so
  that a resumed run gives exactly what an uninterrupted one gives. No code is run to read a
  record (no pickle): a dataclass or enum is rebuilt only if it is one of plansim's.
- ``JournaledExecutor(executor, journal, key_of)`` is an ``Executor``: the tasks of a batch
  whose record exists are answered from it; the others run on ``executor``, and each result is
  recorded the moment it arrives (``Executor.run``'s ``on_result``). ``key_of(task)`` gives the
  task's key, or None for a task that must always run (one whose value names a file of the
  batch's folder). Failed tasks are not recorded.

Interrupted runs leave their journal behind; the output folder removes it once the run is
complete (``commands.output``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import math
import os
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from plansim.errors import InputError
from plansim.io import atomic_write_bytes, atomic_write_json
from plansim.workers.executor import (
    BatchOutcome,
    Executor,
    ResultCallback,
    Task,
    TaskContext,
    TaskResult,
)

MANIFEST = "inputs.json"
MISSING = object()
# The top-level inputs named when a journal's inputs differ, at most this many.
_NAMED_DIFFERENCES = 3


class Journal:
    """The records of one run in ``folder``; see the module docstring."""

    def __init__(
        self, folder: Path, digest: str, inputs: dict[str, Any], *, written: bool = False
    ) -> None:
        self.folder = folder
        self.digest = digest
        self._inputs = inputs
        self._written = written  # the folder and its manifest exist
        self._lock = threading.Lock()  # sweeps of several windows record at once
        self.reused = 0  # records read back by get()
        self.recorded = 0  # records written by record()

    @classmethod
    def open(
        cls, folder: str | os.PathLike[str], inputs: Mapping[str, Any], *, resume: bool
    ) -> Journal:
        folder = Path(folder)
        digest = inputs_digest(inputs)
        manifest = _read_json(folder / MANIFEST)
        if resume and isinstance(manifest, dict) and manifest.get("digest") == digest:
            return cls(folder, digest, dict(inputs), written=True)
        if resume and isinstance(manifest, dict) and isinstance(manifest.get("inputs"), dict):
            differ = [
                k
                for k in sorted(set(manifest["inputs"]) | set(inputs))
                if _canonical(manifest["inputs"].get(k)) != _canonical(inputs.get(k))
            ]
            named = ", ".join(differ[:_NAMED_DIFFERENCES]) or "plansim's records"
            raise InputError(
                f"the interrupted run in {folder.parent} had other inputs ({named} "
                "differ); rerun it with its own inputs, or use --force to start "
                "over",
                field="--resume",
            )
        shutil.rmtree(folder, ignore_errors=True)
        return cls(folder, digest, dict(inputs))

    def get(self, key: str) -> Any:
        """The value recorded for ``key``, or ``MISSING``."""
        record = _read_json(self._path(key))
        if not isinstance(record, dict) or record.get("key") != key or "value" not in record:
            return MISSING
        with self._lock:
            self.reused += 1
        return decode(record["value"])

    def record(self, key: str, value: Any) -> None:
        """Keep ``value`` as the result of ``key`` (atomically). The journal's folder and
        manifest are written with its first record, so that a run that records nothing leaves
        nothing."""
        data = orjson.dumps({"key": key, "value": encode(value)})
        with self._lock:
            if not self._written:
                atomic_write_json(
                    self.folder / MANIFEST, {"digest": self.digest, "inputs": self._inputs}
                )
                self._written = True
            self.recorded += 1
        atomic_write_bytes(self._path(key), data)

    def _path(self, key: str) -> Path:
        name = hashlib.sha256(f"{self.digest}\0{key}".encode()).hexdigest()[:40]
        return self.folder / f"{name}.json"


class JournaledExecutor:
    """An ``Executor`` that answers recorded tasks from ``journal`` and records the others as
    they finish on ``executor``; see the module docstring."""

    def __init__(
        self,
        executor: Executor,
        journal: Journal,
        key_of: Callable[[Task], str | None] = lambda task: task.key,
    ) -> None:
        self._executor = executor
        self._journal = journal
        self._key_of = key_of
        self.max_parallel = executor.max_parallel
        self.thread_safe = getattr(executor, "thread_safe", False)

    def run(
        self,
        tasks: Sequence[Task],
        context: TaskContext,
        timeout_s: float | None = None,
        on_result: ResultCallback | None = None,
    ) -> BatchOutcome:
        keys = {task.key: self._key_of(task) for task in tasks}
        known: dict[str, TaskResult] = {}
        for task in tasks:
            value = MISSING if keys[task.key] is None else self._journal.get(keys[task.key])
            if value is not MISSING:
                known[task.key] = TaskResult(task.key, True, value)
                if on_result is not None:
                    on_result(known[task.key])
        todo = [task for task in tasks if task.key not in known]
        if not todo:
            return BatchOutcome(tuple(known[task.key] for task in tasks))

        def keep(result: TaskResult) -> None:
            if result.ok and keys[result.key] is not None:
                self._journal.record(keys[result.key], result.value)
            if on_result is not None:
                on_result(result)

        outcome = self._executor.run(todo, context, timeout_s, on_result=keep)
        ran = outcome.by_key()
        results = tuple(
            known.get(task.key) or ran[task.key]
            for task in tasks
            if task.key in known or task.key in ran
        )
        return dataclasses.replace(outcome, results=results)

    def cancel(self) -> None:
        self._executor.cancel()

    def close(self) -> None:
        self._executor.close()


def inputs_digest(inputs: Mapping[str, Any]) -> str:
    """The SHA-256 of ``inputs`` as canonical JSON (sorted keys)."""
    return hashlib.sha256(_canonical(dict(inputs))).hexdigest()


def _canonical(value: Any) -> bytes:
    return orjson.dumps(
        value, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    )


# -- the value codec: tagged JSON, read back equal ---------------------------------------------


def encode(value: Any) -> Any:
    """``value`` as JSON that ``decode`` turns back into an equal value (module docstring)."""
    if isinstance(value, Enum):
        cls = type(value)
        return {"$enum": f"{cls.__module__}:{cls.__qualname__}", "value": encode(value.value)}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {"$dict": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, np.ndarray):
        return {
            "$array": value.dtype.str,
            "shape": list(value.shape),
            "values": [encode(v) for v in value.ravel().tolist()],
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        return {
            "$dataclass": f"{cls.__module__}:{cls.__qualname__}",
            "fields": {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    raise TypeError(f"a journal cannot record a {type(value).__name__}")


def decode(value: Any) -> Any:
    """The value ``encode`` wrote."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$float" in value:
        return float(value["$float"])
    if "$tuple" in value:
        return tuple(decode(v) for v in value["$tuple"])
    if "$dict" in value:
        return {decode(k): decode(v) for k, v in value["$dict"]}
    if "$enum" in value:
        return _plansim_type(value["$enum"], Enum)(decode(value["value"]))
    if "$array" in value:
        flat = [decode(v) for v in value["values"]]
        return np.array(flat, dtype=np.dtype(value["$array"])).reshape(value["shape"])
    if "$dataclass" in value:
        cls = _plansim_type(value["$dataclass"])
        return cls(**{name: decode(v) for name, v in value["fields"].items()})
    raise ValueError(f"not a journal value: {sorted(value)}")


def _plansim_type(name: str, base: type | None = None) -> type:
    """The class ``module:qualname`` names, if it is one of plansim's dataclasses (or, with
    ``base``, one of its subclasses of ``base``)."""
    module, _, qualname = name.partition(":")
    if module != "plansim" and not module.startswith("plansim."):
        raise ValueError(f"a journal rebuilds only plansim's types, not {name}")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    ok = isinstance(cls, type) and (
        issubclass(cls, base) if base is not None else dataclasses.is_dataclass(cls)
    )
    if not ok:
        raise ValueError(f"{name} is not a type a journal rebuilds")
    return cls


def _read_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
