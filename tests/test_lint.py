"""The tree is clean under the linter and the formatter pyproject.toml configures (ruff, pinned
in the test extra): the suite runs both, so a change that breaks either fails the test command."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ruff import find_ruff_bin

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [find_ruff_bin(), *args, "--no-cache", str(ROOT)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def test_the_linter_finds_nothing():
    done = _ruff("check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_file_is_formatted():
    done = _ruff("format", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
