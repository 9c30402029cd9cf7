"""plansim.lifecycle: workers die with their parent, one scratch folder per command, and
SIGTERM unwinds like Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from proctable import alive, live_children

from plansim.lifecycle import (
    SCRATCH_ENV,
    Terminated,
    handle_termination,
    scratch_folder,
)

# How long a dead parent's processes may take to go (the watchdogs poll every 0.2-0.25 s).
GONE_WITHIN_S = 10.0


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_scratch_folder_holds_every_temporary_file_and_goes_away(tmp_path):
    before = tempfile.gettempdir()
    with pytest.raises(RuntimeError), scratch_folder(tmp_path) as root:
        assert tempfile.gettempdir() == str(root) == os.environ["TMPDIR"]
        assert os.environ[SCRATCH_ENV] == str(root)
        Path(tempfile.mkdtemp()).joinpath("x").write_text("x")
        raise RuntimeError("the command failed")
    assert not root.exists() and list(tmp_path.iterdir()) == []
    assert tempfile.gettempdir() == before and SCRATCH_ENV not in os.environ


def test_sigterm_raises_terminated_and_the_handler_is_restored():
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated) as err, handle_termination():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # interrupted by the signal
    assert err.value.signum == signal.SIGTERM
    assert isinstance(err.value, KeyboardInterrupt)
    assert signal.getsignal(signal.SIGTERM) is previous


_PARENT = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c",
        "import time; from plansim.lifecycle import die_with_parent; die_with_parent(); "
        "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\\n"
    print(child.pid, flush=True)
    time.sleep(60)
""")


def test_a_worker_dies_when_its_parent_is_killed_and_removes_the_scratch(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, SCRATCH_ENV: str(scratch)},
    )
    worker = int(parent.stdout.readline())
    assert alive(worker)
    parent.kill()
    parent.wait()
    assert _wait_gone(worker)
    assert not scratch.exists()


_REAPED = textwrap.dedent("""
    import subprocess, sys, time
    from plansim.lifecycle import ProcessReaper
    reaper = ProcessReaper(folders=[sys.argv[1]])
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    time.sleep(1.0)  # several snapshots
    if sys.argv[2] == "close":
        reaper.close()
    print(sleeper.pid, flush=True)
    time.sleep(60)
""")


@pytest.mark.parametrize("closed", [False, True])
def test_reaper_kills_the_descendants_of_a_killed_process_unless_closed(tmp_path, closed):
    folder = tmp_path / "ray-session"
    folder.mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-c", _REAPED, str(folder), "close" if closed else "keep"],
        stdout=subprocess.PIPE,
        text=True,
    )
    sleeper = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    try:
        if closed:
            time.sleep(1.0)
            assert alive(sleeper) and folder.exists()
        else:
            assert _wait_gone(sleeper)
            assert _wait_gone_folder(folder)
    finally:
        if alive(sleeper):
            os.kill(sleeper, signal.SIGKILL)


# A process of the command outside its process tree: a child starts a grandchild that keeps a
# log open in the folder and exits, so the grandchild is re-parented away before the reaper
# starts (as a Ray agent is when its raylet dies just after starting it).
_ESCAPED = textwrap.dedent("""
    import os, subprocess, sys, time
    folder, pid_file = sys.argv[1], sys.argv[2]
    grandchild = ("import os, sys, time; log = open(os.path.join(sys.argv[1], 'agent.log'), 'w'); "
                  "open(sys.argv[2], 'w').write(str(os.getpid())); time.sleep(60)")
    subprocess.run([sys.executable, "-c",
                    "import subprocess, sys; subprocess.Popen(sys.argv[1:])",
                    sys.executable, "-c", grandchild, folder, pid_file], check=True)
    while not os.path.exists(pid_file) or not open(pid_file).read():
        time.sleep(0.01)
    from plansim.lifecycle import ProcessReaper
    reaper = ProcessReaper(folders=[folder])
    time.sleep(0.5)  # several snapshots, none of which can see the grandchild
    print(open(pid_file).read(), flush=True)
    time.sleep(60)
""")


def test_reaper_kills_a_process_out_of_the_tree_that_holds_a_file_in_its_folders(tmp_path):
    folder = tmp_path / "ray-session"
    folder.mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-c", _ESCAPED, str(folder), str(tmp_path / "agent.pid")],
        stdout=subprocess.PIPE,
        text=True,
    )
    escaped = int(parent.stdout.readline())
    assert escaped not in live_children(parent.pid)
    parent.kill()
    parent.wait()
    try:
        assert _wait_gone(escaped)
        assert _wait_gone_folder(folder)
    finally:
        if alive(escaped):
            os.kill(escaped, signal.SIGKILL)


def _wait_gone_folder(folder: Path) -> bool:
    deadline = time.monotonic() + GONE_WITHIN_S
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not folder.exists()
