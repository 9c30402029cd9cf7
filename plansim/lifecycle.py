"""Worker lifecycle: every process plansim starts dies with plansim, every temporary file of a
command lives in one scratch folder that goes away with it, and an interruption ends the
command with one line.

- ``die_with_parent()``: called first thing in a worker process (``plansim.workers.pool``'s
  spawn-pool workers). A daemon thread watches the parent: when it is gone
  (the worker was re-parented), the worker kills the rest of its process group if it leads one
  (Stan processes a Prophet fit started), removes the scratch folder it was told about and
  exits. A parent-death signal is not used: Linux sends it when the *thread* that started the
  child ends, and the sweep threads that start pool workers end before the process does.
- ``parent_lost()``: for a worker whose pipe to its parent broke. A dying process closes its
  files before the kernel re-parents its children, so the worker sees the broken pipe first,
  while its watchdog still sees the old parent; a worker that simply returned then would end
  without removing the scratch folder (a killed sweep whose workers were all between tasks left
  it behind). ``parent_lost()`` waits for the re-parenting and ends the worker as the watchdog
  would.
- ``ProcessReaper``: for process trees plansim does not control (a local Ray instance: its
  raylet's agents outlive a killed driver by a minute). A small helper process snapshots the
  command's descendants every ``REAPER_PERIOD_S`` and, when the command's end of a pipe closes
  (however the command ended, SIGKILL included), kills every process of the last snapshot that
  still runs, then, round by round until none is left, the children those started before they
  died and every process holding a file open in its folders (a Ray agent whose raylet died
  just after starting it is re-parented out of the tree, and lived on for a minute).
- ``scratch_folder(parent)``: one folder for every temporary file of the command and its
  workers (``tempfile``, ``TMPDIR``), in the system's temporary folder, removed on every exit
  path the process lives through (and by the workers' watchdogs when it is killed).
- ``Terminated`` and ``handle_termination()``: SIGTERM and SIGHUP unwind the command like
  Ctrl-C (so every ``finally`` runs, workers are killed, temporary files removed); the CLI
  prints one line for each.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# How often a worker checks that its parent is alive, and the reaper snapshots descendants (s).
WATCHDOG_PERIOD_S = 0.2
REAPER_PERIOD_S = 0.1
# How long a worker whose pipe broke waits for its parent to be gone (s): a process that closed
# its files is all but gone; a live pool never closes a live worker's pipe.
PARENT_EXIT_WAIT_S = 5.0
# Removals of the scratch folder an orphaned worker tries while a task thread may still write.
_REMOVE_TRIES = 20
# The scratch folder of the command, for workers (their parent's folder outlives them).
SCRATCH_ENV = "PLANSIM_SCRATCH"
SCRATCH_PREFIX = ".plansim-scratch-"

_watched_pid: int | None = None
_watched_parent: int | None = None
_watched_scratch: str | None = None
_watch_lock = threading.Lock()
# Held by the one thread that ends an orphaned worker (the watchdog or the main thread).
_orphan_lock = threading.Lock()


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread so the command unwinds as on Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def handle_termination() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise ``Terminated`` in the main thread (outside
    the main thread: a no-op); the previous handlers are restored after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    saved = {signum: signal.signal(signum, _raise) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def die_with_parent(parent: int | None = None) -> None:
    """Make this worker process exit when its parent process (``parent``, the pid that started
    it, when known: a worker re-parented before it got here then exits at once) is gone;
    idempotent per process."""
    global _watched_pid, _watched_parent, _watched_scratch
    with _watch_lock:
        if _watched_pid == os.getpid():
            return
        _watched_pid = os.getpid()
    scratch = os.environ.get(SCRATCH_ENV)
    if parent is None:
        parent = os.getppid()
    _watched_parent, _watched_scratch = parent, scratch
    if os.getppid() != parent or parent == 1:  # the parent died before we got here
        _orphaned(scratch)
    watcher = threading.Thread(
        target=_watch_parent, args=(parent, scratch), daemon=True, name="plansim-parent-watchdog"
    )
    watcher.start()


def parent_lost(timeout_s: float = PARENT_EXIT_WAIT_S) -> None:
    """For a worker (after ``die_with_parent``) whose pipe to its parent broke: wait up to
    ``timeout_s`` for the parent to be gone, then end this process as an orphan (the rest of
    its group killed, the scratch folder removed). Returns only if the parent is still there
    (or this process is not a watched worker)."""
    if _watched_pid != os.getpid() or _watched_parent is None:
        return
    deadline = time.monotonic() + timeout_s
    while os.getppid() == _watched_parent:
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)
    _orphaned(_watched_scratch)


def _watch_parent(parent: int, scratch: str | None) -> None:
    while os.getppid() == parent:
        time.sleep(WATCHDOG_PERIOD_S)
    _orphaned(scratch)


def _orphaned(scratch: str | None) -> None:
    """Kill the rest of our group if we lead one, remove the dead parent's scratch folder,
    exit. The writers go first, so that none of them adds a file to the folder after it is
    removed; the removal is retried because a task thread of this process may still write."""
    _orphan_lock.acquire()  # never released: the holder ends the process
    if os.getpgid(0) == os.getpid():
        _kill_group_members()
    if scratch:
        for _ in range(_REMOVE_TRIES):
            shutil.rmtree(scratch, ignore_errors=True)
            if not os.path.lexists(scratch):
                break
            time.sleep(0.01)
    os._exit(1)


def _kill_group_members() -> None:
    """SIGKILL every other process of this process's group (``killpg`` would include us)."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                if os.getpgid(int(name)) == me:
                    os.kill(int(name), signal.SIGKILL)
            except OSError:  # gone meanwhile
                pass


def block_sigint_for_children() -> Any:
    """Block SIGINT in the calling thread so that the processes it starts inherit the block
    (Ctrl-C is their parent's to handle); returns the previous mask for ``SIG_SETMASK``.

    Python's resource tracker is started first: its start-up (Python 3.11) unblocks SIGINT in
    the calling thread when it is done, which would undo the block for every later child."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


@contextmanager
def scratch_folder(parent: Path | None = None) -> Iterator[Path]:
    """A new folder (in ``parent``, else the system's temporary folder) that every temporary
    file of this process and its workers goes into while the block runs; removed at its end,
    however it ends."""
    root = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=parent))
    saved = {name: os.environ.get(name) for name in ("TMPDIR", SCRATCH_ENV)}
    saved_tempdir = tempfile.tempdir
    for name in saved:
        os.environ[name] = str(root)
    tempfile.tempdir = str(root)
    try:
        yield root
    finally:
        tempfile.tempdir = saved_tempdir
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(root, ignore_errors=True)


class ProcessReaper:
    """Kills this process's descendants, then removes ``folders`` and the command's scratch
    folder, when this process ends, however it ends (see the module docstring). ``close()``
    stops the reaper without killing or removing anything."""

    def __init__(self, folders: Sequence[str] = ()) -> None:
        folders = [*folders, *filter(None, [os.environ.get(SCRATCH_ENV)])]
        read_end, self._write_end = os.pipe()
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                "-c",
                _REAPER_SOURCE,
                str(os.getpid()),
                str(REAPER_PERIOD_S),
                *folders,
            ],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        os.close(read_end)

    def close(self) -> None:
        """Tell the reaper the descendants ended normally; it exits without killing."""
        if self._write_end is None:
            return
        try:
            os.write(self._write_end, b"done\n")
        finally:
            os.close(self._write_end)
            self._write_end = None
        self._process.wait(timeout=10)


# The reaper runs in its own tiny interpreter (no plansim import, so it starts in milliseconds):
# it reads /proc to find the watched process's descendants, keyed by (pid, start time) so that
# a recycled pid is never killed.
_REAPER_SOURCE = r"""
import os, select, shutil, signal, sys, time
root, period = int(sys.argv[1]), float(sys.argv[2])
folders = [os.path.realpath(f) for f in sys.argv[3:]]

def table():
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                out[int(name)] = (int(fields[1]), int(fields[19]))  # ppid, start time
            except (OSError, IndexError, ValueError):
                pass
    return out

def descendants(procs, roots):
    found, frontier = {}, list(roots)
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in procs.items():
            if ppid == parent and pid not in found and pid != os.getpid():
                found[pid] = start
                frontier.append(pid)
    return found

# Whether the process has a file open in one of the folders: a process of ours that left the
# tree (a Ray agent whose raylet died just after starting it is re-parented away, and keeps its
# logs open in the Ray session folder).
def holds_a_folder(pid):
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if any(target == f or target.startswith(f + "/") for f in folders):
            return True
    return False

def kill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

seen = {}  # every descendant seen and still running (a re-parented one stays in it)
while True:
    ready, _, _ = select.select([0], [], [], period)
    if ready:
        if os.read(0, 64).startswith(b"done"):
            sys.exit(0)
        break
    procs = table()
    seen = {pid: start for pid, start in seen.items() if procs.get(pid, (0, None))[1] == start}
    seen.update(descendants(procs, [root]))
# Children born since the last snapshot, of processes still running (the root's own children
# are re-parented by now, but a raylet may not have died yet).
now = table()
seen.update(descendants(now, [pid for pid, start in seen.items()
                              if now.get(pid, (0, None))[1] == start]))
killed = {pid: start for pid, start in seen.items() if now.get(pid, (None, None))[1] == start}
kill(killed)
# Then, until a round finds none: children the killed ones started before they died, and the
# processes out of the tree that hold files in the folders.
for _ in range(20):
    if not folders:
        break
    time.sleep(period)  # let the killed processes go before their files
    now = table()
    found = descendants(now, list(killed))
    found.update({pid: start for pid, (_, start) in now.items()
                  if pid != os.getpid() and holds_a_folder(pid)})
    found = {pid: start for pid, start in found.items() if killed.get(pid) != start}
    if not found:
        break
    kill(found)
    killed.update(found)
for folder in folders:
    shutil.rmtree(folder, ignore_errors=True)
"""
