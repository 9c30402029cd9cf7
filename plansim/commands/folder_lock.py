"""One run per output folder, even when two start at once: an exclusive lock held for the whole
run.

The lock is the file ``.plansim.lock`` in the folder, holding who took it (command, pid, host,
start time), and an ``flock`` on it that the kernel drops when the holder dies, however it
dies. It is made under a temporary name, locked and filled, then linked into place, so it
appears already locked and with its holder named, and only one of two runs can link it.

``acquire`` refuses a folder whose lock is held (another run is writing there) and names the
holder; a lock file nobody holds is the stale lock of a run that was killed (SIGKILL, an OOM, a
power cut): it is named too, and taken over when the caller says so (``--force``, ``--resume``).
``FolderLock.release`` removes the file; a lock is released when the process ends in any case.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson

from plansim.errors import InputError

LOCK_NAME = ".plansim.lock"


@dataclass(slots=True)
class FolderLock:
    """A held lock: ``release()`` gives it up (idempotent). ``stale``: the holder of the stale
    lock this one took over, in words, or ``None``."""

    path: Path
    fd: int | None
    stale: str | None = None

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            if _same_file(self.fd, self.path):
                self.path.unlink()
        finally:
            os.close(self.fd)
            self.fd = None


def acquire(
    folder: Path,
    command: str,
    *,
    take_over: bool,
    option: str,
    stale_hint: str = "use --force to take it over",
) -> FolderLock:
    """Lock ``folder`` (which exists) for ``command``. Raises ``InputError`` naming ``option``
    when another run holds it, or when it holds a stale lock and ``take_over`` is false (the
    message ends with ``stale_hint``)."""
    path = folder / LOCK_NAME
    holder = {
        "command": command,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    while True:
        fd = _link_locked(path, holder)
        if fd is not None:
            return FolderLock(path, fd)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:  # released since: try again
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _describe(fd)
            os.close(fd)
            raise InputError(
                f"{folder} is in use by another run ({who}); wait for it to end, or "
                "choose another folder",
                field=option,
            ) from None
        if not _same_file(fd, path):  # its holder released it as we opened it: try again
            os.close(fd)
            continue
        who = _describe(fd)
        if not take_over:
            os.close(fd)
            raise InputError(
                f"{folder} holds the stale lock of a run that was killed ({who}); {stale_hint}",
                field=option,
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(holder), 0)
        return FolderLock(path, fd, stale=who)


def _link_locked(path: Path, holder: dict) -> int | None:
    """The descriptor of a new lock file at ``path``, locked and naming ``holder``; None when a
    lock file is there already."""
    fd, tmp = tempfile.mkstemp(prefix=".plansim-lock-", suffix=".tmp", dir=path.parent)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, orjson.dumps(holder))
        try:
            os.link(tmp, path)
        except FileExistsError:
            os.close(fd)
            return None
        return fd
    except BaseException:
        os.close(fd)
        raise
    finally:
        os.unlink(tmp)


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _describe(fd: int) -> str:
    """The holder a lock file names, in words."""
    try:
        info = orjson.loads(os.pread(fd, 4096, 0))
    except (OSError, orjson.JSONDecodeError):
        info = None
    if not isinstance(info, dict):
        return "holder unknown"
    host = info.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return (
        f"{info.get('command', 'plansim')}, pid {info.get('pid', '?')}{where}, started "
        f"{info.get('started', '?')}"
    )
