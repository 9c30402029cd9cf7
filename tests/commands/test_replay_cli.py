"""`plansim replay run`: output folder contents, summary table, and one-line config errors."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REFERENCE = Path(__file__).parents[1] / "sim" / "reference"
MICRO_TRACE = REFERENCE / "micro" / "M7-round-robin.jsonl"  # 6 requests, 3 workers
EXAMPLES = Path(__file__).parents[2] / "examples"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_happy_path_writes_every_output_file(tmp_path, run_cli):
    config = _write(
        tmp_path / "deploy.yaml",
        "mode: agg\nnum_workers: 2\nrouter: {mode: round_robin}\n"
        "sla: {ttft_ms: 1000, itl_ms: 50}\n",
    )
    out = tmp_path / "out"
    code, stdout, err = run_cli(
        "replay",
        "run",
        str(MICRO_TRACE),
        "--config",
        str(config),
        "--num-workers",
        "3",
        "--trace-block-size",
        "512",
        "--out",
        str(out),
        "--no-report",
        "--quiet",
    )
    assert code == 0, err
    for name in (
        "inputs.json",
        "summary.json",
        "requests.parquet",
        "timeseries.parquet",
        "workers.parquet",
    ):
        assert (out / name).is_file(), name
    assert not (out / "scaling_events.json").exists()  # no planner
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporaries
    summary = json.loads((out / "summary.json").read_text())
    assert summary["num_requests"] == 6
    assert summary["completed_requests"] == 6
    assert summary["goodput_completed_requests"] == 6  # all six TTFTs < 50 ms in the reference
    assert "wall_time_ms" not in summary  # host speed is printed, not written
    inputs = json.loads((out / "inputs.json").read_text())
    assert inputs["requests"] == 6
    assert inputs["deployment"]["num_workers"] == 3  # the flag overrides the file's 2
    assert inputs["options"]["num_workers"] == 3
    assert len(pd.read_parquet(out / "requests.parquet")) == 6
    workers = pd.read_parquet(out / "workers.parquet")
    assert len(workers) == 3
    assert "TTFT" in stdout and "GPU-hours" in stdout and "goodput" in stdout
    assert str(out) in stdout
    assert err == ""  # --quiet: no progress bar


def test_same_inputs_write_byte_identical_files(tmp_path, run_cli):
    # Into another folder, and with options that only say how the run is written: inputs.json
    # records what ran, so it is identical too.
    outs = []
    for name, writing in (("a", ()), ("b", ("--force", "--self-contained"))):
        out = tmp_path / name
        code, _, err = run_cli(
            "replay",
            "run",
            str(MICRO_TRACE),
            "--num-workers",
            "3",
            "--trace-block-size",
            "512",
            "--out",
            str(out),
            "--no-report",
            "--quiet",
            *writing,
        )
        assert code == 0, err
        outs.append(out)
    assert json.loads((outs[0] / "inputs.json").read_text())["options"] == {
        "num_workers": 3,
        "trace_block_size": 512,
        "trace_format": "auto",
    }
    for name in (
        "inputs.json",
        "summary.json",
        "requests.parquet",
        "timeseries.parquet",
        "workers.parquet",
    ):
        first, second = ((o / name).read_bytes() for o in outs)
        assert first == second, name


def test_planner_block_adds_ticks_and_scaling_events(tmp_path, run_cli):
    # one request a second for 45 s; the example planner ticks every 10 s of virtual time
    trace = _write(
        tmp_path / "steady.jsonl",
        "".join(
            json.dumps(
                {
                    "timestamp": 1000 * i,
                    "input_length": 600,
                    "output_length": 20,
                    "hash_ids": [2 * i, 2 * i + 1],
                }
            )
            + "\n"
            for i in range(45)
        ),
    )
    config = _write(tmp_path / "deploy.yaml", (EXAMPLES / "deploy-planner.yaml").read_text())
    out = tmp_path / "out"
    code, _, err = run_cli(
        "replay",
        "run",
        str(trace),
        "--config",
        str(config),
        "--out",
        str(out),
        "--no-report",
        "--quiet",
    )
    assert code == 0, err
    ticks = pd.read_parquet(out / "ticks.parquet")
    assert len(ticks) >= 4  # at 10, 20, 30 and 40 s
    assert isinstance(json.loads((out / "scaling_events.json").read_text()), list)
    assert json.loads((out / "inputs.json").read_text())["planner"]["mode"] == "agg"


def test_bad_planner_config_exits_2_naming_the_key(tmp_path, run_cli):
    planner = _write(tmp_path / "planner.yaml", "mode: agg\nmin_endpoint: -1\n")
    code, _, err = run_cli(
        "replay",
        "run",
        str(MICRO_TRACE),
        "--planner-config",
        str(planner),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 2
    assert "min_endpoint" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("planner_text", "field"),
    [
        ("mode: agg\noptimization_target: sla\nscaling_policy: fastest\n", "3: scaling_policy: "),
        (
            "mode: agg\noptimization_target: sla\nscaling_policy: sla_goodput\n"
            "scaling_policy_params: {knee_gain: -1}\n",
            "4: scaling_policy_params.knee_gain: ",
        ),
    ],
)
def test_bad_scaling_policy_exits_2_naming_the_field(tmp_path, planner_text, field, run_cli):
    planner = _write(tmp_path / "planner.yaml", planner_text)
    code, _, err = run_cli(
        "replay",
        "run",
        str(MICRO_TRACE),
        "--planner-config",
        str(planner),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert f"planner.yaml:{field}" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("retune_block", "field"),
    [
        ("  interval_seconds: 60\n  timeout_seconds: 61\n", "6: retune.timeout_seconds: "),
        (
            "  router:\n    overlap_score_weight: {choices: 3}\n",
            "6: retune.router.overlap_score_weight.choices: ",
        ),
    ],
)
def test_bad_retune_block_exits_2_naming_the_retune_field(tmp_path, retune_block, field, run_cli):
    planner = _write(
        tmp_path / "planner.yaml",
        "mode: agg\nenable_load_scaling: false\n"
        "enable_throughput_scaling: false\nretune:\n" + retune_block,
    )
    code, _, err = run_cli(
        "replay",
        "run",
        str(MICRO_TRACE),
        "--planner-config",
        str(planner),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert f"planner.yaml:{field}" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("config_text", "flags", "key"),
    [
        ("num_wrokers: 2\n", [], "num_wrokers"),
        ("engine: {block_size: 0}\n", [], "engine.block_size"),
        ("router: {mode: fastest}\n", [], "router.mode"),
        ("", ["--num-workers", "0"], "--num-workers"),
        ("", ["--arrival-speedup-ratio", "-1"], "--arrival-speedup-ratio"),
        ("", ["--router-mode", "fastest"], "--router-mode"),
        ("", ["--router-param", "router_temperature=-1"], "--router-param router_temperature"),
        ("", ["--router-param", "warp_factor=9"], "--router-param"),
        ("", ["--router-param", "router_temperature"], "--router-param"),
    ],
)
def test_bad_config_exits_2_with_one_line_naming_the_key(
    tmp_path, config_text, flags, key, run_cli
):
    config = _write(tmp_path / "deploy.yaml", config_text)
    code, _stdout, err = run_cli(
        "replay",
        "run",
        str(MICRO_TRACE),
        "--config",
        str(config),
        "--out",
        str(tmp_path / "out"),
        *flags,
    )
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert key in lines[0]
    assert not (tmp_path / "out").exists()  # nothing written before validation passed


def test_a_user_timing_model_returning_nan_exits_2_with_one_line_and_writes_nothing(
    tmp_path, run_cli, monkeypatch
):
    monkeypatch.syspath_prepend(str(REFERENCE.parent))  # tests/sim: simkit_timing
    config = _write(
        tmp_path / "deploy.yaml",
        "engine: {timing_model: {type: python, callable: 'simkit_timing:NanDecode'}}\n",
    )
    code, _, err = run_cli(
        "replay",
        "run",
        str(MICRO_TRACE),
        "--config",
        str(config),
        "--out",
        str(tmp_path / "out"),
        "--no-report",
        "-q",
    )
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "timing_model.callable" in lines[0] and "decode_ms returned nan" in lines[0]
    assert not (tmp_path / "out").exists()


def test_router_param_sets_any_declared_knob(tmp_path, run_cli):
    import json

    code, _, err = run_cli(
        "replay",
        "run",
        str(MICRO_TRACE),
        "--router-mode",
        "kv_router",
        "--router-param",
        "router_temperature=0.25",
        "--no-report",
        "-q",
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 0, err
    inputs = json.loads((tmp_path / "out" / "inputs.json").read_text())
    assert inputs["deployment"]["router"]["router_temperature"] == 0.25


def test_missing_config_file_exits_2_naming_it(tmp_path, run_cli):
    missing = tmp_path / "nope.yaml"
    code, _, err = run_cli("replay", "run", str(MICRO_TRACE), "--config", str(missing))
    assert code == 2
    assert str(missing) in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", ["deploy.yaml", "deploy-disagg.yaml", "deploy-planner.yaml"])
def test_example_deployments_validate(name):
    from plansim.sim.deployment import load_deployment

    deployment = load_deployment(EXAMPLES / name)
    assert deployment.router.mode == "kv_router"
    assert deployment.sla.ttft_ms is not None


def _summary_of(tmp_path, run_cli, deployment: str) -> str:
    """The terminal summary of the micro trace replayed on ``deployment`` (YAML text)."""
    config = _write(tmp_path / "deploy.yaml", deployment)
    code, stdout, err = run_cli(
        "replay",
        "run",
        str(MICRO_TRACE),
        "--config",
        str(config),
        "--trace-block-size",
        "512",
        "--out",
        str(tmp_path / "out"),
        "--no-report",
    )
    assert code == 0, err
    return stdout


def test_the_summary_names_the_goodput_sla(tmp_path, run_cli):
    stdout = _summary_of(
        tmp_path,
        run_cli,
        "mode: agg\nnum_workers: 3\n"
        "router: {mode: round_robin}\nsla: {ttft_ms: 1000, itl_ms: 50}\n",
    )
    goodput = next(line for line in stdout.splitlines() if line.startswith("goodput"))
    # The file's itl_ms is the reference's spelling of the TPOT bound, and named as such.
    assert "6 of 6 requests (100.0%) met TTFT ≤ 1000 ms and TPOT ≤ 50 ms" in goodput


def test_latencies_without_samples_are_na(tmp_path, run_cli):
    # one KV block of one token: no request of the trace ever fits, all are rejected
    stdout = _summary_of(
        tmp_path,
        run_cli,
        "mode: agg\nnum_workers: 1\n"
        "engine: {block_size: 1, num_gpu_blocks: 1}\nsla: {ttft_ms: 1000}\n",
    )
    assert "(0 completed, 6 rejected" in stdout
    for label in ("TTFT", "TPOT", "ITL", "E2E"):
        row = next(line.split() for line in stdout.splitlines() if line.strip().startswith(label))
        assert row[1:5] == ["n/a"] * 4, row


def test_a_replay_that_rejects_every_request_says_why_on_stderr_and_in_the_headline(
    tmp_path, run_cli
):
    config = _write(
        tmp_path / "deploy.yaml", "num_workers: 1\nengine: {block_size: 1, num_gpu_blocks: 1}\n"
    )
    out = tmp_path / "out"
    code, _, err = run_cli(
        "replay", "run", str(MICRO_TRACE), "--config", str(config), "--out", str(out), "--quiet"
    )
    assert code == 0, err
    # The smallest of the six prompts has 800 tokens: 800 blocks of one token against one.
    why = (
        "all 6 requests were rejected (prompt_exceeds_kv_pool): the smallest prompt, 800 "
        "tokens, needs 800 KV blocks of 1 token, and a worker rank has 1 (num_gpu_blocks)"
    )
    assert err.splitlines() == [f"plansim: warning: {why}"]
    html = (out / "report.html").read_text()
    assert "All rejected" in html and why in html


def test_a_folder_another_run_holds_is_refused_in_one_line(tmp_path, run_cli):
    from plansim.commands.output import OutputFolder

    out = tmp_path / "out"
    held = OutputFolder.claim(out, "replay", "plansim replay run")
    try:
        code, _, err = run_cli("replay", "run", str(MICRO_TRACE), "--out", str(out))
    finally:
        held.release()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith(
        f"plansim: --out: {out} is in use by another run (plansim replay run, "
        f"pid {os.getpid()}, started "
    )
    assert not out.exists()  # the refused run wrote nothing, the holder nothing yet


def test_two_replays_started_at_once_into_one_folder_one_is_refused(tmp_path):
    out = tmp_path / "out"
    sample = EXAMPLES / "traces" / "sample.dynamo.jsonl.gz"  # a few seconds of replay
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "plansim",
                "replay",
                "run",
                str(sample),
                "--num-workers",
                str(n),
                "--out",
                str(out),
                "--no-report",
                "--quiet",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in (2, 3)
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2], errs
    winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
    lines = errs[loser].splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"plansim: --out: {out} "), lines
    # The folder holds the winner's run, whole.
    inputs = json.loads((out / "inputs.json").read_text())
    assert inputs["options"]["num_workers"] == (2, 3)[winner]
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def test_replay_synth_with_a_concurrency_cap_needs_no_file(tmp_path, run_cli):
    out = tmp_path / "o"
    code, text, err = run_cli(
        "replay",
        "synth",
        "--rate",
        "20",
        "--duration",
        "5",
        "--isl",
        "fixed",
        "--isl-mean",
        "200",
        "--osl",
        "fixed",
        "--osl-mean",
        "4",
        "--max-concurrency",
        "2",
        "--no-report",
        "--out",
        str(out),
    )
    assert code == 0, err
    assert "cap wait" in text
    req = pd.read_parquet(out / "requests.parquet")
    starts = np.sort(req["arrival_ms"].to_numpy())
    ends = np.sort(req["last_token_ms"].to_numpy())
    # With two slots, the k-th request (k >= 2) enters no earlier than the (k-2)-th finished.
    assert np.all(starts[2:] >= ends[: len(ends) - 2] - 1e-9)
    assert (req["arrival_ms"] >= req["release_ms"]).all()
    inputs = json.loads((out / "inputs.json").read_text())
    assert inputs["command"] == "plansim replay synth"
    assert inputs["deployment"]["max_concurrency"] == 2


def test_closed_loop_trace_writes_sessions_and_open_loop_flag_drops_them(tmp_path, run_cli):
    trace = tmp_path / "s.jsonl"
    trace.write_text(
        json.dumps(
            {
                "session_id": "a",
                "timestamp": 0,
                "input_length": 300,
                "output_length": 2,
                "hash_ids": [1],
            }
        )
        + "\n"
        + json.dumps(
            {
                "session_id": "a",
                "delay": 50,
                "input_length": 600,
                "output_length": 2,
                "hash_ids": [1, 2],
            }
        )
        + "\n"
    )
    code, text, err = run_cli(
        "replay", "run", str(trace), "--no-report", "--out", str(tmp_path / "c")
    )
    assert code == 0, err
    assert "sessions      1 (1 completed)" in text
    assert (tmp_path / "c" / "sessions.parquet").exists()
    code, _, err = run_cli(
        "replay",
        "run",
        str(trace),
        "--open-loop",
        "--no-report",
        "--quiet",
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 0, err
    assert not (tmp_path / "o" / "sessions.parquet").exists()


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        (
            [
                {
                    "session_id": "a",
                    "delay": 5,
                    "input_length": 10,
                    "output_length": 1,
                    "hash_ids": [1],
                }
            ],
            "s.jsonl:1: delay",
        ),
        (
            [
                {
                    "session_id": "a",
                    "timestamp": 0,
                    "input_length": 10,
                    "output_length": 1,
                    "hash_ids": [1],
                },
                {
                    "session_id": "a",
                    "delay": -3,
                    "input_length": 10,
                    "output_length": 1,
                    "hash_ids": [1],
                },
            ],
            "s.jsonl:2: delay",
        ),
    ],
)
def test_bad_session_rows_are_one_line_exit_2(tmp_path, run_cli, rows, needle):
    trace = tmp_path / "s.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = run_cli(
        "replay", "run", str(trace), "--no-report", "--quiet", "--out", str(tmp_path / "o")
    )
    assert code == 2 and err.count("\n") == 1 and needle in err
    assert not (tmp_path / "o").exists()


def test_max_concurrency_must_be_positive(tmp_path, run_cli):
    code, _, err = run_cli(
        "replay",
        "synth",
        "--rate",
        "1",
        "--duration",
        "1",
        "--max-concurrency",
        "0",
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 2 and "--max-concurrency" in err


def test_planner_counts_closed_loop_arrivals_as_they_enter(tmp_path, run_cli):
    # Three sessions of 60 turns; each turn follows the previous one's end by 2 s.
    rows = [
        {
            "session_id": f"s{i % 3}",
            "input_length": 600,
            "output_length": 20,
            "hash_ids": [2 * i, 2 * i + 1],
            **({"timestamp": 0} if i < 3 else {"delay": 2000}),
        }
        for i in range(180)
    ]
    trace = _write(tmp_path / "sessions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    config = _write(tmp_path / "deploy.yaml", (EXAMPLES / "deploy-planner.yaml").read_text())
    out = tmp_path / "out"
    code, _, err = run_cli(
        "replay",
        "run",
        str(trace),
        "--config",
        str(config),
        "--out",
        str(out),
        "--no-report",
        "--quiet",
    )
    assert code == 0, err
    ticks = pd.read_parquet(out / "ticks.parquet").set_index("at_s")
    arrival_s = pd.read_parquet(out / "requests.parquet")["arrival_ms"] / 1000.0
    # The throughput tick at 60 s saw the requests that entered in its 60 s window.
    assert ticks.loc[60.0, "observed_num_req"] == (arrival_s <= 60).sum()


@pytest.mark.parametrize("command", ["run", "synth"])
def test_every_replay_option_has_help(command, run_cli):
    import typer

    from plansim.commands.replay import app

    code, out, _ = run_cli("replay", command, "--help")
    assert code == 0 and "--max-concurrency" in out
    params = typer.main.get_command(app).commands[command].params
    assert {"max_concurrency", "num_workers", "out"} <= {p.name for p in params}
    for param in params:
        assert getattr(param, "help", None), f"{command}: {param.name} has no help"


def _micro(run_cli, out: Path, *flags: str) -> tuple[int, str, str]:
    return run_cli(
        "replay",
        "run",
        str(MICRO_TRACE),
        "--format",
        "mooncake",
        "--trace-block-size",
        "512",
        "--num-workers",
        "3",
        "--out",
        str(out),
        "--no-report",
        *flags,
    )


def test_the_tpot_bound_has_the_reference_s_spelling_too(tmp_path, run_cli):
    summaries = []
    for k, flag in enumerate(("--sla-tpot-ms", "--sla-itl-ms")):
        code, stdout, err = _micro(run_cli, tmp_path / str(k), flag, "7", "--sla-ttft-ms", "1000")
        assert code == 0, err
        assert "met TTFT ≤ 1000 ms and TPOT ≤ 7 ms" in stdout
        summaries.append((tmp_path / str(k) / "summary.json").read_text())
        inputs = json.loads((tmp_path / str(k) / "inputs.json").read_text())
        assert inputs["sla"] == {"ttft_ms": 1000.0, "tpot_ms": 7.0, "e2e_ms": None}
    assert summaries[0] == summaries[1]
    # The flag wins over the file's bound in either spelling.
    config = _write(tmp_path / "d.yaml", "sla: {ttft_ms: 1000, itl_ms: 50}\n")
    code, stdout, err = _micro(run_cli, tmp_path / "f", "-c", str(config), "--sla-tpot-ms", "7")
    assert code == 0, err
    assert "met TTFT ≤ 1000 ms and TPOT ≤ 7 ms" in stdout


def test_both_spellings_of_the_tpot_bound_in_one_file_are_refused(tmp_path, run_cli):
    config = _write(tmp_path / "d.yaml", "sla:\n  tpot_ms: 20\n  itl_ms: 30\n")
    code, _, err = _micro(run_cli, tmp_path / "o", "-c", str(config))
    assert code == 2
    assert err == (
        f"plansim: {config}:3: sla.itl_ms: the older spelling of tpot_ms, which is "
        "given too (give one)\n"
    )


def test_the_terminal_prints_tpot_and_itl_and_says_which_the_sla_scores(tmp_path, run_cli):
    code, stdout, err = _micro(run_cli, tmp_path / "o", "--sla-tpot-ms", "50")
    assert code == 0, err
    rows = {line.split()[0]: line for line in stdout.splitlines() if line.startswith("  ")}
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert rows["TPOT"].split()[2] == f"{summary['p90_tpot_ms']:.2f}"
    assert rows["ITL"].split()[2] == f"{summary['p90_itl_ms']:.2f}"
    assert rows["TPOT"].endswith("each request's mean token gap (what the SLA scores)")
    assert rows["ITL"].endswith("every token gap")


def test_extra_engine_args_take_dynamo_s_inline_json(tmp_path, run_cli):
    code, _, err = _micro(run_cli, tmp_path / "o", "--extra-engine-args", '{"block_size": 32}')
    assert code == 0, err
    inputs = json.loads((tmp_path / "o" / "inputs.json").read_text())
    assert inputs["deployment"]["engine"]["block_size"] == 32
    code, _, err = _micro(run_cli, tmp_path / "bad", "--extra-engine-args", '{"block_sise": 32}')
    assert code == 2
    assert err == (
        "plansim: --extra-engine-args: block_sise: unknown key; did you mean 'block_size'?\n"
    )


def test_a_planner_run_is_compared_with_its_starting_counts_held_static(tmp_path, run_cli):
    out = tmp_path / "o"
    sample = str(EXAMPLES / "traces" / "sample.dynamo.jsonl.gz")
    code, stdout, err = run_cli(
        "replay",
        "run",
        sample,
        "-c",
        str(EXAMPLES / "deploy.yaml"),
        "--planner-config",
        str(EXAMPLES / "planner.yaml"),
        "--out",
        str(out),
        "--no-report",
    )
    assert code == 0, err
    baseline = json.loads((out / "baseline.json").read_text())
    static = tmp_path / "static"
    run_cli(
        "replay",
        "run",
        str(EXAMPLES / "traces" / "sample.dynamo.jsonl.gz"),
        "-c",
        str(EXAMPLES / "deploy.yaml"),
        "--out",
        str(static),
        "--no-report",
    )
    # The baseline is the same deployment replayed without its planner, byte for byte.
    assert baseline["label"] == "static 4 workers" and baseline["counts"] == {"num_workers": 4}
    assert baseline["summary"] == json.loads((static / "summary.json").read_text())
    line = next(x for x in stdout.splitlines() if x.startswith("vs baseline"))
    assert line.startswith(
        "vs baseline   static 4 workers: 0.6696 GPU-hours (-42.8%), goodput 80.7% (-20.8 points)"
    )
    code, _, _ = run_cli(
        "replay",
        "run",
        str(EXAMPLES / "traces" / "sample.dynamo.jsonl.gz"),
        "-c",
        str(EXAMPLES / "deploy.yaml"),
        "--planner-config",
        str(EXAMPLES / "planner.yaml"),
        "--out",
        str(tmp_path / "n"),
        "--no-report",
        "--no-baseline",
    )
    assert code == 0 and not (tmp_path / "n" / "baseline.json").exists()


def test_trace_events_hold_every_pass_of_every_worker(tmp_path, run_cli):
    import gzip

    code, _, err = _micro(run_cli, tmp_path / "o", "--trace-events")
    assert code == 0, err
    trace = json.loads(gzip.decompress((tmp_path / "o" / "trace_events.json.gz").read_bytes()))
    passes = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert names == {"agg worker 0", "agg worker 1", "agg worker 2"}
    # Every output token but a request's first comes from a decode (or mixed) pass of one
    # request or more, and every prompt token from a prefill or mixed pass.
    requests = pd.read_parquet(tmp_path / "o" / "requests.parquet")
    assert (
        sum(e["args"]["prefill_tokens"] for e in passes)
        == (requests["input_length"] - requests["reused_input_tokens"]).sum()
    )
    assert (
        sum(e["args"]["decode_requests"] for e in passes) == (requests["output_length"] - 1).sum()
    )
    # A worker runs one pass at a time.
    for pid in {e["pid"] for e in passes}:
        mine = sorted((e["ts"], e["ts"] + e["dur"]) for e in passes if e["pid"] == pid)
        assert all(a[1] <= b[0] + 1e-3 for a, b in itertools.pairwise(mine))
    # The timeline changes nothing of the replay.
    _micro(run_cli, tmp_path / "plain")
    assert (tmp_path / "o" / "summary.json").read_text() == (
        tmp_path / "plain" / "summary.json"
    ).read_text()
