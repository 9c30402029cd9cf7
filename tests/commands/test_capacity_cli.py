"""`plansim capacity`: the output folder and table, and every bad input as one line with exit
status 2 before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from plansim.traces.request_ids import ordinal_ids
from plansim.traces.workload import Workload
from plansim.traces.writers import write_mooncake

# A request holds a worker 100 ms (one 10 ms prefill pass, nine decode passes); one request
# every 30 ms needs 4 workers.
DEPLOY = """\
mode: agg
num_workers: 2
engine: {max_num_seqs: 1, timing_model: {type: fixed, prefill_ms: 10, decode_ms: 10}}
router: {mode: round_robin}
sla: {ttft_ms: 500}
"""


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    n = 600
    blocks = np.full(n, 1, dtype=np.int64)
    workload = Workload(
        arrival_ms=np.arange(n) * 30.0,
        isl_tokens=np.full(n, 100),
        osl_tokens=np.full(n, 10),
        request_id=ordinal_ids(0, n),
        hash_offsets=np.concatenate([[0], np.cumsum(blocks)]),
        hash_ids=np.arange(n),
        trace_block_size=512,
    )
    trace = write_mooncake(workload, tmp_path / "trace.jsonl")
    config = tmp_path / "deploy.yaml"
    config.write_text(DEPLOY)
    return trace, config


def _run(run_cli, trace, config, out, *extra):
    return run_cli(
        "capacity",
        str(trace),
        "--config",
        str(config),
        "--out",
        str(out),
        "--jobs",
        "1",
        "--no-report",
        *extra,
    )


def test_writes_the_answer_table_and_every_output(tmp_path, files, run_cli):
    trace, config = files
    out = tmp_path / "out"
    code, stdout, err = _run(run_cli, trace, config, out, "--no-default-policies")
    assert code == 0, err
    report = json.loads((out / "capacity.json").read_text())
    for key in (
        "target",
        "static",
        "cheapest_static",
        "best_infeasible",
        "oracle_gpu_hours",
        "policies",
    ):
        assert key in report, key
    assert report["target"] == 0.95
    (static,) = report["static"]
    assert static["num_workers"] == 4 and static["replayed"] == [1, 2, 4, 3]
    assert {"deployment", "goodput_ratio", "gpu_hours"} <= set(static)
    assert report["cheapest_static"]["num_workers"] == 4
    assert report["best_infeasible"]["num_workers"] == 3
    assert report["oracle_gpu_hours"] <= report["cheapest_static"]["gpu_hours"]
    points = pd.read_parquet(out / "points.parquet")
    assert points[points["kind"] == "static"]["num_workers"].tolist() == [1, 2, 4, 3]
    recommended = (out / "recommended_deployment.yaml").read_text()
    assert "num_workers: 4" in recommended
    inputs = json.loads((out / "inputs.json").read_text())
    assert inputs["command"] == "plansim capacity"
    # What ran, not where or how it was written.
    assert inputs["options"]["jobs"] == 1
    assert not {"out", "quiet", "no_report"} & set(inputs["options"])
    lines = stdout.splitlines()
    assert lines[0].startswith("recommended   4 workers (base): goodput 100.0% >= 95.0% target")
    assert any(line.startswith("lower bound") for line in lines)
    assert not list(out.glob(".*.tmp"))


def test_an_unreachable_target_says_so_and_exits_0(tmp_path, files, run_cli):
    trace, config = files
    out = tmp_path / "out"
    code, stdout, err = _run(
        run_cli, trace, config, out, "--max-gpu-budget", "3", "--no-default-policies"
    )
    assert code == 0, err
    assert stdout.startswith("recommended   none: no deployment within 3 GPUs meets the 95.0%")
    assert "best infeasible  3 workers" in stdout
    report = json.loads((out / "capacity.json").read_text())
    assert report["cheapest_static"] is None and report["best_infeasible"]["num_workers"] == 3
    assert not (out / "recommended_deployment.yaml").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--target", "1.5"), "--target: must be in (0, 1], got 1.5"),
        (("--target", "0"), "--target: must be in (0, 1], got 0.0"),
        (("--search", "engine.nope=1,2"), "--search: engine.nope: not a deployment key"),
        (("--search", "num_workers=1,2"), "worker counts are what plansim capacity searches"),
        (("--search", "engine.max_num_seqs"), "--search: expected KEY=V1,V2,..."),
        (("--seeds", "0"), "--seeds: must be at least 1"),
        (
            ("--planner-start", "cheapest"),
            "--planner-start: must be one of deployment, static, got 'cheapest'",
        ),
        (("--segment-s", "0"), "--segment-s: must be > 0"),
        (("--max-gpu-budget", "0"), "--max-gpu-budget: must be at least 1"),
        (("--ray-address", "x:1"), "--ray-address: only with --backend ray"),
        (("--gpu-cost", "h200_sxm=3.5,b200_sxm"), "--gpu-cost: expected SYSTEM=PRICE_PER_GPU_HOUR"),
        (
            ("--gpu-cost", "h200_sxm=3.5"),
            "--gpu-cost: the agg pool of base has no aic timing model",
        ),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(tmp_path, files, run_cli, args, message):
    trace, config = files
    out = tmp_path / "out"
    code, _stdout, err = _run(run_cli, trace, config, out, *args)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_no_sla_is_one_line(tmp_path, files, run_cli):
    trace, _ = files
    config = tmp_path / "nosla.yaml"
    config.write_text(DEPLOY.replace("sla: {ttft_ms: 500}\n", ""))
    code, _, err = _run(run_cli, trace, config, tmp_path / "out")
    assert code == 2 and "needs an SLA" in err and len(err.strip().splitlines()) == 1


def test_an_empty_trace_is_one_line(tmp_path, files, run_cli):
    _, config = files
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, _, err = _run(run_cli, empty, config, tmp_path / "out", "--format", "mooncake")
    assert code == 2 and "empty" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_planner_config_that_does_not_fit_the_deployment_is_one_line(tmp_path, files, run_cli):
    trace, config = files
    planner = tmp_path / "planner.yaml"
    planner.write_text("mode: disagg\n")
    code, _, err = _run(run_cli, trace, config, tmp_path / "out", "--planner-config", str(planner))
    assert code == 2 and "planner.yaml" in err and "does not fit" in err


def test_the_output_folder_holds_one_run_and_force_replaces_it(tmp_path, files, run_cli):
    trace, config = files
    out = tmp_path / "out"
    assert _run(run_cli, trace, config, out, "--no-default-policies")[0] == 0
    marker = json.loads((out / "run.json").read_text())
    assert marker["status"] == "complete" and "capacity.json" in marker["files"]
    code, _, err = _run(run_cli, trace, config, out, "--no-default-policies")
    assert code == 2 and "already holds a run of plansim capacity" in err
    code, _, err = _run(
        run_cli, trace, config, out, "--no-default-policies", "--target", "0.1", "--force"
    )
    assert code == 0, err
    assert json.loads((out / "capacity.json").read_text())["target"] == 0.1


def test_a_ratio_just_under_the_target_never_prints_as_the_target():
    from plansim.commands.capacity import _pct

    assert _pct(0.94996, 0.95) == "94.99%"
    assert _pct(0.95, 0.95) == "95.00%"
    assert _pct(0.9726, 0.95) == "97.3%"


def test_fail_under_gates_ci_on_the_best_goodput_reached(tmp_path, files, run_cli):
    trace, config = files
    # Within 3 GPUs the best is 3 workers, below 95% (the test above): exit status 3 after
    # writing every file; a ratio the best reaches exits 0.
    code, stdout, err = _run(
        run_cli,
        trace,
        config,
        tmp_path / "miss",
        "--max-gpu-budget",
        "3",
        "--no-default-policies",
        "--fail-under",
        "0.95",
    )
    assert code == 3, err
    assert stdout.splitlines()[0].endswith("; no deployment reached 95.0% (exit status 3)")
    assert (tmp_path / "miss" / "capacity.json").is_file()
    report = json.loads((tmp_path / "miss" / "capacity.json").read_text())
    best = report["best_infeasible"]["goodput_ratio"]
    code, _, err = _run(
        run_cli,
        trace,
        config,
        tmp_path / "ok",
        "--max-gpu-budget",
        "3",
        "--no-default-policies",
        "--fail-under",
        f"{best:.4f}",
    )
    assert code == 0, err
    code, _, err = _run(run_cli, trace, config, tmp_path / "bad", "--fail-under", "1.5")
    assert (code, err) == (2, "plansim: --fail-under: must be in (0, 1], got 1.5\n")


def test_the_recommendation_keeps_the_input_s_spellings_and_is_written_for_dynamo(
    tmp_path, files, run_cli
):
    trace, _ = files
    config = tmp_path / "spelled.yaml"
    spelled = DEPLOY.replace("engine: {", "engine: {backend: vllm, num_gpu_blocks_override: 4096, ")
    config.write_text(spelled.replace("sla: {ttft_ms: 500}", "sla: {ttft_ms: 500, itl_ms: 100}"))
    out = tmp_path / "out"
    code, _, err = _run(run_cli, trace, config, out, "--no-default-policies")
    assert code == 0, err
    import yaml

    recommended = yaml.safe_load((out / "recommended_deployment.yaml").read_text())
    assert recommended["num_workers"] == 4
    engine = recommended["engine"]
    assert engine["backend"] == "vllm" and engine["num_gpu_blocks_override"] == 4096
    assert "engine_type" not in engine and "num_gpu_blocks" not in engine
    assert recommended["sla"] == {"ttft_ms": 500.0, "itl_ms": 100.0}
    # Dynamo 1.6.1's canonical engine config: the engine block, backend and worker_type set.
    args = json.loads((out / "recommended_engine_args.json").read_text())
    assert args["engine"]["backend"] == "vllm" and args["engine"]["num_gpu_blocks"] == 4096
    assert args["engine"]["worker_type"] == "aggregated" and args["engine"]["max_num_seqs"] == 1
    # The fixed timing model is plansim's own: left out, and said so.
    assert "timing_model" not in json.dumps(args) and "leaves out timing_model" in err
    planner = yaml.safe_load((out / "recommended_planner.yaml").read_text())
    assert (planner["mode"], planner["ttft_ms"], planner["itl_ms"]) == ("agg", 500.0, 100.0)
    assert "scaling_policy" not in planner


def _calibration(tmp_path: Path, draws: list[float]) -> Path:
    """A calibration.json whose fit is the deployment's own timing (speedup 1) and whose
    bootstrap draws are the speedup ratios ``draws``."""
    path = tmp_path / "calibration.json"
    path.write_text(
        json.dumps(
            {
                "schema": "plansim.calibration.v1",
                "family": "scaled",
                "deployment_keys": {"engine.speedup_ratio": 1.0},
                "draws": [{"engine.speedup_ratio": d} for d in draws],
            }
        )
    )
    return path


def test_a_calibration_widens_the_interval_and_checks_the_pessimistic_draw(
    tmp_path, files, run_cli
):
    trace, config = files
    plain, calibrated = tmp_path / "plain", tmp_path / "calibrated"
    assert _run(run_cli, trace, config, plain, "--no-default-policies")[0] == 0
    code, stdout, err = _run(
        run_cli,
        trace,
        config,
        calibrated,
        "--no-default-policies",
        "--calibration",
        str(_calibration(tmp_path, [1.0, 0.8])),
    )
    assert code == 0, err
    before = json.loads((plain / "capacity.json").read_text())["cheapest_static"]
    after = json.loads((calibrated / "capacity.json").read_text())["cheapest_static"]
    # The search itself runs on the deployment's timing: the same 4 workers hold 100%.
    assert after["num_workers"] == before["num_workers"] == 4
    assert before["interval"]["low"] == before["interval"]["high"] == 1.0
    # At speedup 0.8 a request holds its worker 125 ms, and each of the 4 round-robin workers
    # gets one every 120 ms: the k-th request of a worker waits 5k ms, its TTFT 12.5 + 5k ms
    # meets the 500 ms SLA for k = 0..97, 98 of each worker's 150 requests (392 of 600).
    assert after["pessimistic_goodput_ratio"] == pytest.approx(392 / 600)
    assert after["holds_at_pessimistic"] is False
    assert after["interval"]["timing_draws"] == 2 and after["interval"]["seeds"] == 1
    assert after["interval"]["low"] < before["interval"]["low"]
    assert after["interval"]["verdict"] != "above"
    assert "65.3% at the pessimistic draw (does not hold)" in stdout
    # Both chosen points (4 workers, and 3, the best infeasible) are replayed at both draws.
    timing = pd.read_parquet(calibrated / "points.parquet").query("kind == 'timing'")
    assert sorted(zip(timing["num_workers"], timing["timing_draw"])) == [
        (3, 0),
        (3, 1),
        (4, 0),
        (4, 1),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{}", "not a calibration.json of plansim calibrate"),
        (
            (
                '{"schema": "plansim.calibration.v1",'
                ' "deployment_keys": {"engine.speedup_ratio": 1},'
                ' "draws": [{"engine.decode_speedup_ratio": 1}]}'
            ),
            "draws: must be a non-empty list",
        ),
        (
            (
                '{"schema": "plansim.calibration.v1", "deployment_keys": {"engine.nope": 1},'
                ' "draws": [{"engine.nope": 1}]}'
            ),
            "engine.nope",
        ),
    ],
)
def test_a_bad_calibration_file_is_one_line_naming_it(tmp_path, files, run_cli, content, message):
    trace, config = files
    path = tmp_path / "calibration.json"
    path.write_text(content)
    code, _, err = _run(run_cli, trace, config, tmp_path / "out", "--calibration", str(path))
    assert code == 2, err
    assert message in err and "calibration.json" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_key_the_calibration_sets_cannot_be_searched(tmp_path, files, run_cli):
    trace, config = files
    code, _, err = _run(
        run_cli,
        trace,
        config,
        tmp_path / "out",
        "--calibration",
        str(_calibration(tmp_path, [1.0])),
        "--search",
        "engine.speedup_ratio=1,2",
    )
    assert code == 2 and "set by the calibration" in err


@pytest.mark.slow
def test_a_search_killed_at_random_points_and_resumed_gives_the_uninterrupted_answer(
    tmp_path, files, run_cli
):
    from killed_runs import RESUME_DIR, assert_resumed_as_whole, kill_and_resume

    trace, config = files
    # The planner knob search (three min_endpoint values) runs last: with 19 replays the seed's
    # kills come at 5 and 18 records, the second one within the knob search.
    args = [
        "capacity",
        str(trace),
        "--config",
        str(config),
        "--quiet",
        "--no-report",
        "--segment-s",
        "6",
        "--jobs",
        "2",
        "--search",
        "planner.min_endpoint=1,2,3",
    ]
    whole = tmp_path / "whole"
    code, _, err = run_cli(*args, "--out", str(whole))
    assert code == 0, err
    expected = json.loads((whole / "capacity.json").read_text())
    out = tmp_path / "killed"
    total = expected["replays"]["total"]
    assert expected["replays"]["tune"] == 3
    at_kill, before = kill_and_resume([*args, "--out", str(out)], out, total, seed=33, kills=2)
    assert before > 0, (at_kill, before)  # the completing run took over recorded work
    assert_resumed_as_whole(whole, out, "capacity.json", before)
    for name in ("inputs.json", "recommended_deployment.yaml"):
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert not (out / RESUME_DIR).exists() and not (out / ".plansim.lock").exists()


def test_resume_refuses_other_inputs_and_a_complete_run(tmp_path, files, run_cli):
    trace, config = files
    out = tmp_path / "out"
    code, _, err = _run(run_cli, trace, config, out, "--no-default-policies")
    assert code == 0, err
    code, _, err = _run(run_cli, trace, config, out, "--no-default-policies", "--resume")
    assert (code, err) == (
        2,
        (
            f"plansim: --resume: {out} holds a complete run of plansim "
            "capacity, nothing of plansim capacity to resume; use --force to "
            "replace it, or choose another folder\n"
        ),
    )
    # An interrupted run (its marker says so) with a record: other inputs are refused.
    marker = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**marker, "status": "incomplete"}))
    from plansim.workers.journal import Journal

    Journal.open(out / ".plansim-resume", {"seed": 1}, resume=False).record("k", 1)
    code, _, err = _run(run_cli, trace, config, out, "--no-default-policies", "--resume")
    assert code == 2 and err.startswith(
        f"plansim: --resume: the interrupted run in {out} had other inputs ("
    )
    code, _, err = _run(run_cli, trace, config, out, "--resume", "--force")
    assert (
        code == 2 and "--resume: give --resume to go on with an interrupted run or --force" in err
    )
