"""``plansim.commands.progress``: one display on stderr with done/total, rate and time left, on
only on a terminal and without ``--quiet``; what a command prints stays on stdout."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plansim.commands import progress as progress_module
from plansim.commands.progress import Progress

ROOT = Path(__file__).parents[2]
MICRO_TRACE = ROOT / "tests" / "sim" / "reference" / "micro" / "M7-round-robin.jsonl"
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal, keeping what is written to it."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")  # rich's width, for a display on one line


def _frames(text: str) -> list[str]:
    """The display's redraws, without terminal control codes."""
    return [f.strip() for f in _CONTROL.sub("", text).split("\r") if f.strip()]


def _on_terminal(*command: str) -> tuple[int, str, str]:
    """Run ``command`` with stderr on a pseudo-terminal and stdout a pipe: (status, stdout,
    what the terminal showed)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "160", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, env=env)
    os.close(follower)
    shown = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closes with the process
            break
        if not chunk:
            break
        shown.append(chunk)
    os.close(leader)
    stdout = proc.stdout.read().decode()
    return proc.wait(), stdout, b"".join(shown).decode(errors="replace")


def test_off_when_stderr_is_not_a_terminal(capsys):
    with Progress("replay", total=4, unit="windows") as bar:
        assert not bar.on
        bar.advance()
        bar.echo("window 0 decided")
    captured = capsys.readouterr()
    assert captured.out == "window 0 decided\n" and captured.err == ""


def test_off_with_quiet_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Terminal())
    with Progress("replay", total=4, unit="windows", quiet=True) as bar:
        assert not bar.on
        bar.advance()
    assert sys.stderr.getvalue() == ""


def test_on_a_terminal_it_shows_done_of_total_the_rate_and_time_left(monkeypatch, capsys):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with Progress("retune", total=4, unit="windows") as bar:
        assert bar.on
        for _ in range(3):
            time.sleep(0.05)
            bar.advance()
        bar.echo("window 2 decided")
    frames = _frames(terminal.getvalue())
    assert frames[0].startswith("retune") and "0/4 windows" in frames[0]
    last = frames[-1]
    assert " 75% 3/4 windows " in last
    assert re.search(r" windows [0-9.]+/s ", last)  # three windows in about 0.15 s
    assert re.search(r"0:00:00 elapsed, 0:00:0[0-9] left$", last)
    assert capsys.readouterr().out == "window 2 decided\n"  # the result, not the terminal


def test_an_unknown_total_shows_no_time_left_and_an_estimate_grows_to_what_is_done(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with Progress("capacity", total=None, unit="replays") as bar:
        bar.update(5, description="capacity round 2")
    assert _frames(terminal.getvalue())[-1].endswith("5/? replays  0:00:00 elapsed")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with Progress("retune", total=2, unit="windows") as bar:
        for _ in range(3):
            bar.advance()
    assert "100% 3/3 windows" in _frames(terminal.getvalue())[-1]


def test_numbers_and_clock_times_are_brief():
    assert [progress_module._number(v) for v in (3.0, 1234.0, 0.393, 617.4, 12.34)] == [
        "3",
        "1,234",
        "0.393",
        "617",
        "12.3",
    ]
    assert [progress_module._clock(s) for s in (None, 0.4, 75.0, 3725.0)] == [
        "-:--:--",
        "0:00:00",
        "0:01:15",
        "1:02:05",
    ]


def test_replay_run_shows_the_display_on_stderr_and_keeps_stdout_the_result(tmp_path):
    base = [
        sys.executable,
        "-m",
        "plansim",
        "replay",
        "run",
        str(MICRO_TRACE),
        "--trace-block-size",
        "512",
        "--num-workers",
        "3",
        "--no-report",
    ]
    code, shown_out, shown = _on_terminal(*base, "--out", str(tmp_path / "a"))
    assert code == 0, shown
    assert "replay" in shown and "virtual s" in _frames(shown)[-1]
    code, quiet_out, quiet = _on_terminal(*base, "--out", str(tmp_path / "b"), "--quiet")
    assert code == 0 and quiet == ""
    # Quiet: no display and, on stdout, only the result line the summary ends with.
    assert "TTFT" in shown_out and "TTFT" not in quiet_out
    last = shown_out.splitlines()[-1]
    assert quiet_out.splitlines() == [last.replace(str(tmp_path / "a"), str(tmp_path / "b"))]


@pytest.mark.parametrize(
    "command",
    [
        ["replay", "run"],
        ["replay", "synth"],
        ["capacity"],
        ["retune", "sweep"],
        ["retune", "window"],
        ["retune", "windows"],
        ["predict", "compare"],
        ["profile", "aic"],
    ],
)
def test_every_long_command_takes_quiet(command, run_cli):
    code, stdout, _ = run_cli(*command, "--help")
    shown = " ".join(stdout.replace("│", " ").split())  # the help as words, unwrapped
    assert code == 0 and "--quiet" in shown and progress_module.QUIET_HELP in shown
