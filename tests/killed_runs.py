"""Kill a long search at random points and resume it (the ``--resume`` tests of ``plansim
capacity`` and ``plansim retune windows``)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

RESUME_DIR = ".plansim-resume"


def records(out: Path) -> int:
    """Replays (and window reports) recorded in ``out`` so far (its manifest not counted)."""
    folder = out / RESUME_DIR
    if not folder.is_dir():
        return 0
    return sum(1 for p in folder.iterdir() if p.suffix == ".json" and p.name != "inputs.json")


def run_killed_at(args: list[str], out: Path, at_records: int, timeout_s: float = 300) -> bool:
    """Run ``plansim ARGS`` and SIGKILL its whole process group once ``out`` holds
    ``at_records`` records; True if it was killed, False if it ended first (exit 0)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "plansim", *args],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None and records(out) < at_records:
            assert time.monotonic() < deadline, "the run never got there"
            time.sleep(0.01)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        err = proc.stderr.read()
        assert proc.returncode == 0, err
        return False
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stderr.close()


def kill_and_resume(
    args: list[str], out: Path, total: int, seed: int, kills: int = 3
) -> tuple[list[int], int]:
    """Run ``args`` (its ``--out`` is ``out``), killing it at ``kills`` random numbers of records
    below ``total`` (increasing; the first run without ``--resume``, later ones with it), then
    resume it to its end. Returns the records present at each kill and the number the
    completing run started with."""
    rng = random.Random(seed)
    points = sorted(rng.sample(range(total), kills))
    at_kill = []
    for k, point in enumerate(points):
        killed = run_killed_at(args + (["--resume"] if k else []), out, point)
        assert killed, f"the run ended before {point} of {total} records"
        at_kill.append(records(out))
        if (out / "run.json").exists():  # killed while searching: said so
            assert json.loads((out / "run.json").read_text())["status"] == "incomplete"
    before = records(out)
    done = subprocess.run(
        [sys.executable, "-m", "plansim", *args, "--resume"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return at_kill, before


def assert_resumed_as_whole(whole: Path, out: Path, report: str, before: int) -> None:
    """The resumed run in ``out`` gave the uninterrupted run's answer (``whole``): its JSON
    ``report`` but for ``host`` (how the replays ran), which counts the ``before`` replays the
    killed runs recorded, and the same points table."""
    import pandas as pd

    expected = json.loads((whole / report).read_text())
    got = json.loads((out / report).read_text())
    # The completing run replayed only what the killed ones had not recorded.
    assert got["host"]["resumed_replays"] == before
    for answer in (expected, got):
        del answer["host"]
    assert got == expected
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "points.parquet"), pd.read_parquet(whole / "points.parquet")
    )
