"""`plansim retune sweep|window` end to end on a tiny generated Dynamo trace."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import orjson
import pytest

ORIGIN_MS = 1_764_000_000_000
BLOCK = 64


def write_trace(path: Path, *, seconds: int = 80, rate: int = 2) -> Path:
    """``rate`` requests per second for ``seconds``, in 4 prefix groups, each finishing 400 ms
    after arrival; plus one request at 10 s that finishes at 50 s (after window 0's cutoff)."""
    rows = []
    n = seconds * rate
    for i in range(n):
        arrival = ORIGIN_MS + i * 1000 // rate
        total = 40_000 if i == 10 * rate else 400
        isl = 256 + 64 * (i % 5)
        group = i % 4
        hashes = [group * 1000 + 1, group * 1000 + 2] + [
            10_000 + i * 10 + b for b in range(isl // BLOCK - 2)
        ]
        rows.append(
            {
                "schema": "dynamo.request.trace.v1",
                "event_type": "request_end",
                "event_time_unix_ms": arrival + total,
                "request": {
                    "request_id": f"r{i}",
                    "output_tokens": 20 + i % 7,
                    "request_received_ms": arrival,
                    "total_time_ms": total,
                    "replay": {
                        "trace_block_size": BLOCK,
                        "input_length": isl,
                        "input_sequence_hashes": hashes,
                    },
                },
            }
        )
    with gzip.open(path, "wb") as fh:
        fh.write(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


RUN = """
trace: trace.jsonl.gz
deployment:
  mode: agg
  num_workers: 2
  engine: {{block_size: 64, num_gpu_blocks: 512, max_num_seqs: 16}}
  router: {{mode: kv_router, overlap_score_weight: 1.0}}
  sla: {{ttft_ms: 500, itl_ms: 50}}
planner:
  mode: agg
  enable_load_scaling: false
  enable_throughput_scaling: false
  retune:
    interval_seconds: 30
    grace_seconds: 5
    max_parallel: 2
    {extra}
    router:
      overlap_score_weight: {{choices: [0.0, 1.0, 4.0]}}
"""


def make_run(tmp_path: Path, extra: str = "") -> Path:
    write_trace(tmp_path / "trace.jsonl.gz")
    path = tmp_path / "run.yaml"
    path.write_text(RUN.format(extra=extra))
    return path


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """Sweep folders go here, so the test can see that none is left behind."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.slow
def test_sweep_prints_one_line_per_window_and_writes_the_decisions(tmp_path, private_tmp, run_cli):
    run = make_run(tmp_path)
    out = tmp_path / "out"
    code, stdout, err = run_cli("retune", "sweep", str(run), "--out", str(out), "--no-report")
    assert code == 0, err
    events = json.loads((out / "retune_events.json").read_text())
    # The same replay without retune, for the goodput and GPU-hours before and after.
    baseline = json.loads((out / "baseline.json").read_text())
    assert baseline["label"] == "without retune"
    assert stdout.splitlines()[-1].endswith(" (without → with retune): " + str(out))
    window_lines = [line for line in stdout.splitlines() if line.startswith("window ")]
    assert len(window_lines) == len(events) >= 2
    assert [e["window"] for e in events] == list(range(len(events)))
    first = events[0]
    assert (first["window_start_s"], first["window_end_s"], first["cutoff_s"]) == (0.0, 30.0, 35.0)
    assert first["launch_s"] >= 35.0 and first["decision_s"] > first["launch_s"]
    # The request at 10 s finishes at 50 s, after L_0 = 35 s: censored out of window 0.
    assert first["reader_counts"].get("censored") == 1
    assert first["window_requests"] == 59
    assert all(e["outcome"] in ("applied", "no_improvement") for e in events)
    for name in (
        "inputs.json",
        "summary.json",
        "requests.parquet",
        "timeseries.parquet",
        "workers.parquet",
        "scaling_events.json",
    ):
        assert (out / name).is_file(), name
    assert list(private_tmp.iterdir()) == []  # every sweep folder was removed


@pytest.mark.slow
def test_window_prints_the_ranked_candidates(tmp_path, private_tmp, run_cli):
    run = make_run(tmp_path)
    out = tmp_path / "out"
    # --no-timeout: the wall-clock limit is not under test here (a loaded machine could hit it).
    code, stdout, err = run_cli(
        "retune", "window", str(run), "--window", "1", "--no-timeout", "--out", str(out)
    )
    assert code == 0, err
    rows = [line for line in stdout.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 3  # current (1.0), then 0.0 and 4.0
    assert sum("(current)" in row for row in rows) == 1
    assert "decision:" in stdout
    assert "reader:" not in stdout  # the reader's counts are in summary.json and the log
    assert stdout.startswith("scores: GoodputPerGPU in SLA-good output tok/s per GPU")
    assert list(private_tmp.iterdir()) == []
    # the folder of `retune windows` for one window, with its report
    assert sorted(p.name for p in (out / "windows").iterdir()) == ["1.json"]
    for name in (
        "windows.parquet",
        "summary.json",
        "inputs.json",
        "retune_windows_report.html",
        "plotly.min.js",
    ):
        assert (out / name).is_file(), name
    inputs = json.loads((out / "inputs.json").read_text())
    assert inputs["command"] == "plansim retune window"
    assert inputs["windows"] == {"first": 1, "last": 1}


def test_a_bad_retune_field_is_one_line_naming_it(tmp_path, run_cli):
    run = make_run(tmp_path, extra="timeout_seconds: 31")
    code, _stdout, err = run_cli("retune", "sweep", str(run), "--out", str(tmp_path / "o"))
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "run.yaml:17: retune.timeout_seconds: " in err


def test_an_unsearchable_router_knob_is_rejected(tmp_path, run_cli):
    run = make_run(tmp_path)
    run.write_text(
        run.read_text().replace("overlap_score_weight: {choices", "host_cache_hit_weight: {choices")
    )
    code, _, err = run_cli(
        "retune", "window", str(run), "--window", "0", "--out", str(tmp_path / "o")
    )
    assert code == 2 and "retune.router.host_cache_hit_weight" in err


def test_a_trace_that_is_not_a_dynamo_request_trace_is_rejected(tmp_path, run_cli):
    run = make_run(tmp_path)
    (tmp_path / "trace.jsonl").write_text(
        '{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]}\n'
    )
    run.write_text(run.read_text().replace("trace.jsonl.gz", "trace.jsonl"))
    code, _, err = run_cli(
        "retune", "window", str(run), "--window", "0", "--out", str(tmp_path / "o")
    )
    assert code == 2 and "trace.jsonl" in err
    assert "retune windows are read from dynamo traces" in err


@pytest.mark.slow
def test_the_example_run_file_scores_a_window_of_the_bundled_sample(tmp_path, run_cli):
    example = Path(__file__).parents[2] / "examples" / "retune.yaml"
    code, stdout, err = run_cli(
        "retune",
        "window",
        str(example),
        "--window",
        "0",
        "--out",
        str(tmp_path / "out"),
        "--no-report",
    )
    assert code == 0, err
    rows = [line for line in stdout.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 8  # 4 weights x 2 temperatures; the startup point is one of them
    assert "decision:" in stdout


def test_retune_window_counts_tasks_batch_by_batch_and_result_by_result():
    from plansim.commands.retune import _Counted

    class Pool:
        max_parallel = 2

        def run(self, tasks, context, timeout_s=None, *, on_result=None):
            for task in tasks:
                on_result(task)
            return "outcome"

    class Bar:
        def __init__(self):
            self.shown = []

        def update(self, completed, total=None):
            self.shown.append((completed, total))

        def advance(self):
            done, total = self.shown[-1]
            self.shown.append((done + 1, total))

    bar = Bar()
    counted = _Counted(Pool(), bar)
    assert counted.run(["read"], None) == "outcome"
    counted.run(["a", "b", "c"], None)
    # The total grows by each batch before it runs; each result advances what is done.
    assert bar.shown == [(0, 1), (1, 1), (1, 4), (2, 4), (3, 4), (4, 4)]


@pytest.mark.slow
def test_a_sweep_killed_at_random_points_and_resumed_decides_as_an_uninterrupted_one(
    tmp_path, run_cli
):
    from killed_runs import RESUME_DIR, kill_and_resume

    # The sweeps' wall-clock limit is the interval (30 s) so that a loaded machine does not
    # cut one window's sweep in one run and not in the other.
    run = make_run(tmp_path, "timeout_seconds: 30")
    args = ["retune", "sweep", str(run), "--no-report", "--quiet"]
    whole = tmp_path / "whole"
    code, _, err = run_cli(*args, "--out", str(whole))
    assert code == 0, err
    # Two windows of three candidates: six replays and two window reports to record.
    out = tmp_path / "killed"
    at_kill, before = kill_and_resume([*args, "--out", str(out)], out, total=8, seed=33, kills=2)
    assert before > 0, (at_kill, before)

    def decisions(folder: Path) -> list[dict]:
        events = json.loads((folder / "retune_events.json").read_text())
        for event in events:
            del event["sweep_wall_s"]  # how long the sweep took, not what it found
        return events

    assert decisions(out) == decisions(whole)
    for name in ("summary.json", "inputs.json", "requests.parquet", "ticks.parquet"):
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert not (out / RESUME_DIR).exists()
