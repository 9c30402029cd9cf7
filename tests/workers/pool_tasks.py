"""Module-level task functions for the spawn-pool tests (a spawned worker imports them)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time


def square(context, x):
    return x * x


def pid_and_value(context, x):
    return os.getpid(), x * x


def sleep_then(context, seconds, value):
    time.sleep(seconds)
    return value


def die(context):
    os._exit(9)


def fail(context):
    raise ValueError("no good\nsecond line")


def worker_facts(context):
    import tempfile

    return {
        "niceness": os.getpriority(os.PRIO_PROCESS, 0),
        "own_group": os.getpgid(0) == os.getpid(),
        "tempdir": tempfile.gettempdir(),
        "start_method_spawn": "fork" not in sys.argv[0],
        "young_threshold": gc.get_threshold()[0],
    }


def start_child_and_hang(context, pid_file):
    """Start a grandchild (like Prophet's Stan process), record its pid, then hang."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(pid_file, "w") as fh:
        fh.write(str(child.pid))
    time.sleep(600)


def start_writer(context, folder):
    """Start a grandchild that keeps writing a file under ``folder`` (as a Stan fit writes its
    output); returns its pid."""
    code = (
        "import os, sys\nwhile True:\n    os.makedirs(sys.argv[1], exist_ok=True)\n"
        "    open(os.path.join(sys.argv[1], 'out.csv'), 'w').close()\n"
    )
    return subprocess.Popen([sys.executable, "-c", code, os.path.join(folder, "fit")]).pid


def never_acknowledges(conn, parent):
    """A stand-in worker loop that never reads its pipe (a worker that dies before taking its
    task, every time)."""
    from plansim.lifecycle import die_with_parent

    die_with_parent(parent)
    time.sleep(600)


class ExitsWhenUnpickled:
    """An argument whose unpickling ends the process (like a task that crashes its worker while
    its arguments are being read)."""

    def __reduce__(self):
        return os._exit, (9,)


class RaisesWhenUnpickled:
    """An argument whose unpickling raises (like a task naming a module the worker lacks)."""

    def __reduce__(self):
        return _raise_import_error, ()


def _raise_import_error():
    raise ImportError("no module named 'elsewhere'")
