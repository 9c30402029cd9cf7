"""`plansim report DIR`: re-renders a folder; nothing to render is one line and exit status 2."""

from __future__ import annotations

import subprocess
import sys

from reports_synthetic import write_replay_folder


def _plansim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plansim", *args], capture_output=True, text=True, timeout=120
    )


def test_report_rerenders_an_output_folder(tmp_path):
    write_replay_folder(tmp_path)
    done = _plansim("report", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"report        {tmp_path / 'report.html'}",
        f"1 report(s) in {tmp_path}",
    ]
    assert (tmp_path / "report.html").stat().st_size > 0
    assert (tmp_path / "plotly.min.js").is_file()


def test_self_contained_flag_embeds_plotly_js(tmp_path):
    write_replay_folder(tmp_path)
    done = _plansim("report", str(tmp_path), "--self-contained")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "plotly.min.js").exists()
    assert (tmp_path / "report.html").stat().st_size > 3_000_000  # plotly.js is ~4.8 MB


def test_nothing_to_render_is_one_line_and_status_2(tmp_path):
    done = _plansim("report", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"plansim: {tmp_path}: nothing to render")
    assert "Traceback" not in done.stderr


def test_report_rerenders_a_retune_windows_folder(tmp_path):
    from reports_synthetic import write_windows_folder

    write_windows_folder(tmp_path)
    done = _plansim("report", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == [
        "report",
        str(tmp_path / "retune_windows_report.html"),
    ]
