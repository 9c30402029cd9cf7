"""`plansim calibrate`: every output of a run, and every bad input as one line with exit status
2 before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from plansim.calibrate import MIN_REQUESTS
from plansim.sim.deployment import load_deployment
from plansim.traces.writers import write_dynamo, write_mooncake
from tests.calibrate.calibrate_traces import DEPLOYMENT, record, synthetic


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, Path]:
    """A trace plansim recorded on the default timing, and the deployment that served it."""
    folder = tmp_path_factory.mktemp("calibrate")
    trace = record(folder / "trace.jsonl.gz", synthetic(n=400), DEPLOYMENT)
    config = folder / "deploy.yaml"
    config.write_text(yaml.safe_dump(DEPLOYMENT))
    return trace, config


def _run(run_cli, trace, config, out, *extra):
    return run_cli(
        "calibrate",
        str(trace),
        "--config",
        str(config),
        "--out",
        str(out),
        "--jobs",
        "1",
        "--quiet",
        *extra,
    )


def test_writes_every_output_and_a_deployment_every_command_loads(tmp_path, recorded, run_cli):
    trace, config = recorded
    out = tmp_path / "out"
    code, stdout, err = _run(run_cli, trace, config, out, "--family", "scaled")
    assert code == 0, err
    for name in (
        "calibrated_deployment.yaml",
        "calibration.json",
        "calibration_requests.parquet",
        "inputs.json",
        "calibration_report.html",
    ):
        assert (out / name).is_file(), name
    report = json.loads((out / "calibration.json").read_text())
    assert report["family"] == "scaled" and report["schema"] == "plansim.calibration.v1"
    # The trace was recorded on the deployment as given: the scales stay at 1 and the
    # overhead near 0 (within their intervals), and the held-out windows are reproduced.
    values = {p["name"]: p for p in report["parameters"]}
    for name, true in (("prefill_scale", 1.0), ("decode_scale", 1.0)):
        assert values[name]["low"] <= true <= values[name]["high"], values[name]
        assert values[name]["value"] == pytest.approx(true, rel=0.03)
    assert values["request_overhead_ms"]["value"] < 1.0
    assert report["held_out"]["windows"] >= 1
    assert [w["held_out"] for w in report["windows"]][:3] == [False, True, False]
    assert len(report["draws"]) == 10
    deployment = load_deployment(out / "calibrated_deployment.yaml")
    assert deployment.num_workers == 2 and deployment.sla.ttft_ms == 400.0
    assert deployment.engine.speedup_ratio == pytest.approx(1.0 / values["prefill_scale"]["value"])
    table = pd.read_parquet(out / "calibration_requests.parquet")
    assert len(table) == 400 and table["recorded_ttft_ms"].notna().all()
    # -q prints the result line alone; without it, the table follows.
    assert stdout.splitlines() == ["family        scaled (chosen by held-out error)"]
    code, stdout, err = run_cli(
        "calibrate",
        str(trace),
        "--config",
        str(config),
        "--out",
        str(tmp_path / "again"),
        "--jobs",
        "1",
        "--family",
        "scaled",
        "--no-report",
    )
    assert code == 0, err
    assert stdout.startswith("family        scaled (chosen by held-out error)\n")
    assert any(line.startswith("held-out      TTFT p50") for line in stdout.splitlines())
    inputs = json.loads((out / "inputs.json").read_text())
    assert inputs["command"] == "plansim calibrate" and inputs["requests"] == 400


def _trace(tmp_path: Path, ttft: np.ndarray, total: np.ndarray, n: int = 400) -> Path:
    return write_dynamo(synthetic(n=n), tmp_path / "bad.jsonl.gz", ttft_ms=ttft, total_ms=total)


def _bad(tmp_path: Path, kind: str) -> tuple[Path, str]:
    n = 400
    ttft, total = np.full(n, 50.0), np.full(n, 300.0)
    if kind == "no latencies":
        return _trace(
            tmp_path, np.full(n, np.nan), np.full(n, np.nan)
        ), "no request has recorded latencies"
    if kind == "mooncake":
        return write_mooncake(synthetic(n=n), tmp_path / "bad.jsonl"), "records no latencies"
    if kind == "ttft after total":
        ttft[9] = 400.0
        return _trace(
            tmp_path, ttft, total
        ), "bad.jsonl.gz:10: ttft_ms: 400 ms is after total_time_ms"
    if kind == "negative":
        ttft[4] = -1.0
        return _trace(tmp_path, ttft, total), "bad.jsonl.gz:5: ttft_ms"
    if kind == "one of two":
        total[2] = np.nan
        return _trace(tmp_path, ttft, total), "bad.jsonl.gz:3: total_time_ms: missing while ttft_ms"
    assert kind == "too few"
    ttft[MIN_REQUESTS - 10 :] = total[MIN_REQUESTS - 10 :] = np.nan
    return _trace(tmp_path, ttft, total), f"only {MIN_REQUESTS - 10} requests have recorded"


@pytest.mark.parametrize(
    "kind", ["no latencies", "mooncake", "ttft after total", "negative", "one of two", "too few"]
)
def test_a_bad_trace_is_one_line_naming_the_file_and_writes_nothing(
    tmp_path, recorded, run_cli, kind
):
    _, config = recorded
    trace, message = _bad(tmp_path, kind)
    out = tmp_path / "out"
    code, stdout, err = _run(run_cli, trace, config, out)
    assert code == 2
    assert str(trace) in err and message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists() and stdout == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--family", "nope"), "--family: unknown calibration family 'nope'"),
        (("--windows", "2"), "--windows: must be at least 3, got 2"),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(tmp_path, recorded, run_cli, args, message):
    trace, config = recorded
    out = tmp_path / "out"
    code, _, err = _run(run_cli, trace, config, out, *args)
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_bad_deployment_is_one_line(tmp_path, recorded, run_cli):
    trace, _ = recorded
    config = tmp_path / "deploy.yaml"
    config.write_text("num_workers: 0\n")
    code, _, err = _run(run_cli, trace, config, tmp_path / "out")
    assert code == 2 and "deploy.yaml" in err and "num_workers" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
