"""The machine's processes as /proc shows them, for tests that check nothing outlives a command.

A zombie is dead for these purposes (it has exited; only its parent's wait is missing). Start
times key a process so that a recycled pid is never taken for the one a test saw.
"""

from __future__ import annotations

import os
import time


def _stat(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != b"Z"


def wait_dead(pids, timeout_s=5.0) -> bool:
    """Whether every process of ``pids`` is dead within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time) of every live process."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(name)
            if fields is not None and fields[0] != b"Z":
                out[int(name)] = (int(fields[1]), int(fields[19]))
    return out


def live_children(pid: int) -> set[int]:
    return {child for child, (ppid, _) in process_table().items() if ppid == pid}


def descendants(root: int, table: dict[int, tuple[int, int]]) -> dict[int, int]:
    """pid -> start time of every descendant of ``root`` in ``table``."""
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = start
                frontier.append(pid)
    return found
