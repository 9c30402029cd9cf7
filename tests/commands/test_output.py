"""plansim.commands.output: output folders checked and locked before work, one run per folder
even when two start at once, run.json written first as incomplete and last as complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plansim.commands.output import OutputFolder, check_output_file
from plansim.errors import InputError


def _marker(folder):
    return json.loads((folder / "run.json").read_text())


def test_claim_locks_the_folder_and_writing_marks_the_run_complete_with_its_files(tmp_path):
    out = tmp_path / "a" / "b"
    folder = OutputFolder.claim(out, "replay", "plansim replay run")
    assert [p.name for p in out.iterdir()] == [".plansim.lock"]  # the lock, nothing else
    with folder.writing() as path:
        assert _marker(path) == {"command": "plansim replay run", "status": "incomplete"}
        (path / "summary.json").write_text("{}")
        (path / "windows").mkdir()
        (path / "windows" / "0.json").write_text("{}")
    assert _marker(out) == {
        "command": "plansim replay run",
        "status": "complete",
        "files": ["summary.json", "windows/0.json"],
    }
    assert not (out / ".plansim.lock").exists()  # released when writing ends


def test_a_claim_released_before_writing_leaves_no_folder(tmp_path):
    folder = OutputFolder.claim(tmp_path / "a" / "b", "replay", "plansim replay run")
    folder.release()
    folder.release()  # idempotent
    assert list(tmp_path.iterdir()) == []


def test_a_second_run_into_a_locked_folder_is_refused_naming_the_first(tmp_path):
    out = tmp_path / "out"
    first = OutputFolder.claim(out, "replay", "plansim replay run")
    for force in (False, True):  # --force never takes a live run's folder
        with pytest.raises(InputError) as err:
            OutputFolder.claim(out, "capacity", "plansim capacity", force=force)
        assert str(err.value).startswith(
            f"--out: {out} is in use by another run (plansim replay run, pid {os.getpid()}, "
            "started "
        )
        assert str(err.value).endswith("; wait for it to end, or choose another folder")
    with first.writing() as path:
        (path / "summary.json").write_text("{}")
    with pytest.raises(InputError, match="already holds a run of plansim replay run"):
        OutputFolder.claim(out, "replay", "plansim replay run")


def test_a_stale_lock_of_a_killed_run_is_named_and_force_takes_it_over(tmp_path, caplog):
    out = tmp_path / "out"
    # A run that took the folder and was killed before writing: its lock file is left, and no
    # process holds it.
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import os, signal, sys; from pathlib import Path; "
                "from plansim.commands.output import OutputFolder; "
                "OutputFolder.claim(Path(sys.argv[1]), 'replay', "
                "'plansim replay run'); print(os.getpid(), flush=True); "
                "os.kill(os.getpid(), signal.SIGKILL)"
            ),
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    pid = int(child.stdout)
    with pytest.raises(InputError) as err:
        OutputFolder.claim(out, "replay", "plansim replay run")
    assert str(err.value).startswith(
        f"--out: {out} holds the stale lock of a run that was killed (plansim replay run, pid "
        f"{pid}, started "
    )
    assert str(err.value).endswith("; use --force to take it over")
    with OutputFolder.claim(out, "replay", "plansim replay run", force=True).writing() as path:
        (path / "summary.json").write_text("{}")
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        f"{out}: took over the stale lock of a run that was killed"
    ]
    assert sorted(p.name for p in out.iterdir()) == ["run.json", "summary.json"]


def test_two_claims_racing_for_one_folder_give_it_to_one(tmp_path):
    out = tmp_path / "out"
    script = (
        "import sys, time; from pathlib import Path; "
        "from plansim.commands.output import OutputFolder; from plansim.errors import "
        "InputError\n"
        "start = float(sys.argv[2])\n"
        "while time.time() < start: pass\n"
        "try:\n    f = OutputFolder.claim(Path(sys.argv[1]), 'replay', 'r')\n"
        "except InputError as e:\n    print('refused', e); sys.exit(2)\n"
        "print('claimed', flush=True); sys.stdin.read()\n"
    )
    for round_ in range(5):
        target = out / str(round_)
        start = f"{time.time() + 2.0}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(target), start],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        lines = [p.stdout.readline() for p in procs]
        for p in procs:
            p.communicate("")
        assert sorted(line.split()[0] for line in lines) == ["claimed", "refused", "refused"]
        assert all("is in use by another run" in line for line in lines if "refused" in line)


def test_a_failure_after_some_files_leaves_the_run_marked_incomplete(tmp_path):
    folder = OutputFolder.claim(tmp_path / "out", "replay", "plansim replay run")
    with pytest.raises(KeyboardInterrupt), folder.writing() as path:
        (path / "inputs.json").write_text("{}")
        raise KeyboardInterrupt
    assert _marker(tmp_path / "out")["status"] == "incomplete"


def test_a_failure_before_any_file_leaves_nothing(tmp_path):
    folder = OutputFolder.claim(tmp_path / "out", "replay", "plansim replay run")
    with pytest.raises(OSError), folder.writing():
        raise OSError(28, "No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_holding_a_run_is_refused_without_force(tmp_path):
    out = tmp_path / "out"
    with OutputFolder.claim(out, "replay", "plansim replay run").writing() as path:
        (path / "ticks.parquet").write_text("planner run")
    with pytest.raises(InputError) as err:
        OutputFolder.claim(out, "replay", "plansim replay run")
    assert str(err.value) == (
        f"--out: {out} already holds a run of plansim replay run; use "
        "--force to replace it, or choose another folder"
    )


def test_force_replaces_the_previous_run_and_keeps_other_files(tmp_path):
    out = tmp_path / "out"
    with OutputFolder.claim(out, "replay", "plansim replay run").writing() as path:
        (path / "ticks.parquet").write_text("planner run")
        (path / "planner_report.html").write_text("planner report")
    (out / "notes.txt").write_text("mine")
    with OutputFolder.claim(out, "replay", "plansim replay run", force=True).writing() as path:
        (path / "requests.parquet").write_text("second run")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "requests.parquet", "run.json"]
    assert _marker(out)["files"] == ["requests.parquet"]


def test_a_folder_of_other_files_is_refused_without_force(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="is not empty; use --force to write into it"):
        OutputFolder.claim(tmp_path, "replay", "plansim replay run")


def test_out_that_is_a_file_or_under_a_file_or_unwritable_is_refused(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(InputError, match=r"^--out: .*a_file exists and is not a folder$"):
        OutputFolder.claim(a_file, "replay", "c")
    with pytest.raises(InputError, match=r"a_file is not a folder, so .*a_file/sub cannot be"):
        OutputFolder.claim(a_file / "sub", "replay", "c")
    # /sys refuses new files, even to root
    with pytest.raises(InputError, match=r"^--out: cannot write in /sys: Permission denied$"):
        OutputFolder.claim(Path("/sys/plansim-out"), "replay", "c")


def test_output_file_must_be_a_regular_file_in_a_writable_folder(tmp_path):
    check_output_file(tmp_path / "new" / "trace.jsonl", "--output")
    with pytest.raises(InputError, match=r"is a folder; give a file name"):
        check_output_file(tmp_path, "--output")
    with pytest.raises(InputError, match=r"^--output: /dev/full is not a regular file"):
        check_output_file(Path("/dev/full"), "--output")


def test_reopen_refuses_an_incomplete_run_and_lists_new_files(tmp_path):
    out = tmp_path / "out"
    with OutputFolder.claim(out, "replay", "plansim replay run").writing() as path:
        (path / "requests.parquet").write_text("x")
    with OutputFolder.reopen(out):
        (out / "report.html").write_text("report")
    assert _marker(out)["files"] == ["report.html", "requests.parquet"]
    (out / "run.json").write_text('{"command": "plansim replay run", "status": "incomplete"}')
    with pytest.raises(InputError, match="holds an incomplete run"), OutputFolder.reopen(out):
        pass


def _schema_output_names() -> list[str]:
    """Every folder entry a run can write, as ``plansim.schema`` names them (the planner report
    is a name stem: its .html and its tick log)."""
    from plansim import schema

    names = []
    for attr, value in vars(schema).items():
        if not isinstance(value, str) or not attr.isupper():
            continue
        if attr == "PLANNER_REPORT":
            names += [f"{value}.html", f"{value}.log.jsonl.gz"]
        elif attr.endswith(("_JSON", "_TABLE", "_REPORT", "_DIR", "_JS", "_DEPLOYMENT")):
            names.append(value)
    return sorted(names)


def test_force_replaces_every_file_schema_names_even_when_the_run_never_listed_them(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    # An interrupted run: its marker is incomplete and lists no files.
    (out / "run.json").write_text('{"command": "plansim replay run", "status": "incomplete"}')
    names = _schema_output_names()
    assert "sessions.parquet" in names and "capacity.json" in names
    for name in names:
        (out / name).write_text("previous run")
    (out / "notes.txt").write_text("mine")
    with OutputFolder.claim(out, "replay", "plansim replay run", force=True).writing() as path:
        (path / "summary.json").write_text("{}")
    assert sorted(entry.name for entry in out.iterdir()) == [
        "notes.txt",
        "run.json",
        "summary.json",
    ]
