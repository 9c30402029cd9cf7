"""``plansim.runtime``: the command process's settings (collection during start-up, the exit)."""

from __future__ import annotations

import gc
import subprocess
import sys

from plansim.runtime import long_lived


def test_long_lived_collects_nothing_inside_and_freezes_what_it_built():
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        with long_lived():
            assert not gc.isenabled()
            with long_lived():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the inner block restores the outer block's state
            built = [[] for _ in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(built)
    finally:
        gc.unfreeze()


def test_long_lived_restores_collection_when_the_block_fails():
    try:
        try:
            with long_lived():
                raise ValueError("bad input")
        except ValueError:
            pass
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def _exit_now(tmp_path, body: str) -> subprocess.CompletedProcess:
    script = f"""
import atexit, sys, threading, time
from pathlib import Path
from plansim.runtime import exit_now
out = Path({str(tmp_path)!r})
atexit.register(lambda: (out / "atexit").write_text("ran"))
sys.stdout.write("no newline yet")
{body}
exit_now(3)
"""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)


def test_exit_now_runs_the_exit_handlers_and_flushes_before_ending(tmp_path):
    done = _exit_now(tmp_path, "")
    assert done.returncode == 3
    assert done.stdout == "no newline yet"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_exit_now_lets_a_running_thread_finish(tmp_path):
    # A non-daemon thread still working: the ordinary exit joins it before the handlers run.
    done = _exit_now(
        tmp_path,
        """
def work():
    time.sleep(0.3)
    (out / "thread").write_text("finished")
threading.Thread(target=work).start()
""",
    )
    assert done.returncode == 3
    assert (tmp_path / "thread").read_text() == "finished"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_the_executable_collects_the_young_generation_every_10000_allocations_not_700():
    script = """
import atexit, gc, sys
atexit.register(lambda: sys.stderr.write(f"threshold {gc.get_threshold()}"))
sys.argv = ["plansim", "--help"]
from plansim.cli import main, run
before = gc.get_threshold()
try:
    main()  # in-process callers keep their own collection settings
except SystemExit:
    pass
assert gc.get_threshold() == before, gc.get_threshold()
run()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith("threshold (10000, 10, 10)")
