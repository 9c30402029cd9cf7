"""`plansim retune windows` on the bundled sample with the spawn pool: one ranked table per
window in window order, then the summary; the output folder holds one record per window, the
long table, the summary and the inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "sample.dynamo.jsonl.gz"


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    run = {
        "trace": str(SAMPLE),
        "deployment": {
            "mode": "agg",
            "num_workers": 2,
            "engine": {"num_gpu_blocks": 2048, "block_size": 64, "max_num_seqs": 16},
            "router": {"mode": "kv_router", "overlap_score_weight": 1.0},
            "sla": {"ttft_ms": 2000, "itl_ms": 50},
        },
        "planner": {
            "mode": "agg",
            "enable_load_scaling": False,
            "enable_throughput_scaling": False,
            "retune": {
                "interval_seconds": 20,
                "grace_seconds": 5,
                "max_parallel": 2,
                "router": {"overlap_score_weight": {"choices": [0.0, 4.0]}},
            },
        },
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(run))
    return path


def test_windows_prints_tables_in_order_and_writes_the_folder(run_file, tmp_path, run_cli):
    out = tmp_path / "out"
    # --no-timeout: the window's wall-clock limit (10 s here) is not under test (tests/retune/
    # test_sweep.py), and a loaded machine could hit it and leave a window unranked.
    code, stdout, err = run_cli(
        "retune",
        "windows",
        str(run_file),
        "--from",
        "1",
        "--to",
        "2",
        "--no-timeout",
        "--out",
        str(out),
    )
    assert code == 0, err
    printed = stdout.splitlines()
    headers = [line for line in printed if line.startswith("window ")]
    assert [h.split(":")[0] for h in headers] == ["window 1", "window 2"]
    assert any(line.startswith("summary: 2 windows") for line in printed)

    assert sorted(p.name for p in (out / "windows").iterdir()) == ["1.json", "2.json"]
    record = json.loads((out / "windows" / "1.json").read_text())
    # Startup point 1.0 (the current point) and the grid 0.0 and 4.0: three candidates.
    assert record["window"] == 1 and len(record["ranked"]) == 3
    assert (record["window_start_s"], record["window_end_s"]) == (20.0, 40.0)
    table = pd.read_parquet(out / "windows.parquet")
    assert list(table["window"]) == [1, 1, 1, 2, 2, 2]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["windows"] == 2
    assert sum(c["wins"] for c in summary["candidates"]) == summary["ranked_windows"]
    inputs = json.loads((out / "inputs.json").read_text())
    assert inputs["command"] == "plansim retune windows"
    assert inputs["windows"] == {"first": 1, "last": 2}
    assert inputs["no_timeout"] is True
    assert inputs["scoring_sla"]["tpot_ms"] == 50  # the planner's default ITL target: none set
    assert summary["reader_counts"]["requests"] == sum(
        json.loads((out / "windows" / f"{k}.json").read_text())["window_requests"] for k in (1, 2)
    )
    assert "reader:" not in stdout
    assert (out / "retune_windows_report.html").is_file()


def test_no_timeout_lifts_every_windows_wall_clock_limit(run_file):
    from plansim.commands.retune_windows import plans_of_run
    from plansim.retune_runs.runner import load_retune_run

    run = load_retune_run(run_file)
    # timeout_seconds defaults to half of interval_seconds (20 s).
    assert [p.timeout_s for p in plans_of_run(run, first=1, last=2)] == [10.0, 10.0]
    assert [p.timeout_s for p in plans_of_run(run, first=1, last=2, no_timeout=True)] == [
        None,
        None,
    ]


@pytest.mark.slow
def test_windows_killed_at_random_points_and_resumed_give_the_uninterrupted_answer(
    run_file, tmp_path, run_cli
):
    from killed_runs import RESUME_DIR, kill_and_resume

    args = [
        "retune",
        "windows",
        str(run_file),
        "--from",
        "1",
        "--to",
        "3",
        "--no-timeout",
        "--no-report",
        "-q",
    ]
    whole = tmp_path / "whole"
    code, _, err = run_cli(*args, "--out", str(whole))
    assert code == 0, err
    # Three windows of three candidates: nine replays and three window reports to record.
    out = tmp_path / "killed"
    at_kill, before = kill_and_resume([*args, "--out", str(out)], out, total=12, seed=33, kills=2)
    assert before > 0, (at_kill, before)

    def record(folder: Path, k: int) -> dict:
        data = json.loads((folder / "windows" / f"{k}.json").read_text())
        del data["sweep_wall_s"]  # how long the sweep took, not what it found
        return data

    assert [record(out, k) for k in (1, 2, 3)] == [record(whole, k) for k in (1, 2, 3)]
    for name in ("summary.json", "inputs.json"):
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "windows.parquet"), pd.read_parquet(whole / "windows.parquet")
    )
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert not (out / RESUME_DIR).exists()
