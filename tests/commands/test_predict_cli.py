"""`plansim predict compare`: output folder, ranked table, one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pandas as pd
import pytest


def _mooncake(path: Path, counts: list[int]) -> Path:
    """One bucket of 60 s per entry of ``counts``, requests spread inside it."""
    rows = []
    for bucket, n in enumerate(counts):
        for k in range(n):
            rows.append(
                {
                    "timestamp": bucket * 60_000 + k * (60_000 // (n + 1)),
                    "input_length": 1000 + 10 * bucket,
                    "output_length": 50 + k,
                    "hash_ids": [3 * len(rows) + t for t in range(3)],
                }
            )  # 1536 tokens
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    return path


COUNTS = [5, 8, 6, 9, 7, 10, 8, 11, 9, 12]


def test_compare_writes_predictions_summary_and_inputs(tmp_path, run_cli):
    trace = _mooncake(tmp_path / "t.jsonl", COUNTS)
    out = tmp_path / "out"
    code, stdout, err = run_cli(
        "predict",
        "compare",
        str(trace),
        "--interval",
        "60",
        "--predictors",
        "constant,kalman",
        "--grid",
        "kalman_r=1,100",
        "--jobs",
        "1",
        "--out",
        str(out),
        "--no-report",
    )
    assert code == 0, err
    assert not list(out.glob(".*.tmp"))
    predictions = pd.read_parquet(out / "predictions.parquet")
    assert {"bucket", "predictor", "series", "forecast", "actual"} <= set(predictions.columns)
    labels = ["constant", "kalman(kalman_r=1)", "kalman(kalman_r=100)"]
    assert sorted(predictions["predictor"].unique()) == sorted(labels)
    # The last bucket (9) is cut by the trace end and left out; the default warm-up is the
    # largest minimum points (Kalman's 5): buckets 5..8 are scored.
    assert sorted(predictions["bucket"].unique()) == [5, 6, 7, 8]
    constant = predictions[
        (predictions.predictor == "constant") & (predictions.series == "request_count")
    ].sort_values("bucket")
    assert constant["forecast"].tolist() == COUNTS[4:8]
    assert constant["actual"].tolist() == COUNTS[5:9]
    assert constant["time_s"].tolist() == [300.0, 360.0, 420.0, 480.0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["warmup_buckets"] == 5
    assert summary["buckets"] == 9
    assert [p["rank"] for p in summary["predictors"]] == [1, 2, 3]
    assert summary["best"] == summary["predictors"][0]["predictor"]
    losses = [p["loss"] for p in summary["predictors"]]
    assert losses == sorted(losses)
    inputs = json.loads((out / "inputs.json").read_text())
    assert inputs["requests"] == sum(COUNTS)
    assert [c["predictor"] for c in inputs["candidates"]] == labels
    for label in labels:
        assert label in stdout


def _error(run_cli, tmp_path, *args: str) -> str:
    trace = _mooncake(tmp_path / "t.jsonl", COUNTS)
    code, stdout, err = run_cli(
        "predict", "compare", str(trace), "--out", str(tmp_path / "o"), "--no-report", *args
    )
    assert code == 2, (stdout, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("interval", ["0", "-60"])
def test_non_positive_interval_is_rejected(tmp_path, run_cli, interval):
    line = _error(run_cli, tmp_path, "--interval", interval)
    assert "--interval" in line


def test_unknown_predictor_is_rejected(tmp_path, run_cli):
    line = _error(run_cli, tmp_path, "--interval", "60", "--predictors", "constant,lstm")
    assert "--predictors" in line and "lstm" in line


def test_unknown_parameter_is_rejected(tmp_path, run_cli):
    line = _error(run_cli, tmp_path, "--interval", "60", "--param", "kalman_q_levle=1")
    assert "kalman_q_levle" in line and "--param" in line


def test_bad_parameter_value_is_rejected(tmp_path, run_cli):
    line = _error(run_cli, tmp_path, "--interval", "60", "--grid", "kalman_r=1,x")
    assert "kalman_r" in line


def test_malformed_parameter_is_rejected(tmp_path, run_cli):
    line = _error(run_cli, tmp_path, "--interval", "60", "--param", "kalman_r")
    assert "NAME=VALUE" in line


def test_trace_shorter_than_warmup_plus_two_is_rejected(tmp_path, run_cli):
    # 10 one-minute buckets at 60 s; at 180 s there are 4, 3 complete: fewer than 5 + 2.
    line = _error(run_cli, tmp_path, "--interval", "180", "--predictors", "constant,kalman")
    assert "3 complete buckets" in line and "7" in line


def test_missing_trace_is_rejected(tmp_path, run_cli):
    code, _, err = run_cli("predict", "compare", str(tmp_path / "nope.jsonl"), "--interval", "60")
    assert code == 2
    assert len(err.strip().splitlines()) == 1


def test_the_ranking_note_names_the_request_count_winner_when_it_differs():
    import pandas as pd

    from plansim.commands.predict import ranking_note

    summary = pd.DataFrame(
        {
            "predictor": ["kalman", "arima"],
            "loss": [2.3, 2.7],
            "mape_request_count_pct": [178.6, 119.7],
        }
    )
    assert ranking_note(summary).endswith(
        "; the request-count MAPE alone would favour arima (119.7%)"
    )
    agree = summary.assign(mape_request_count_pct=[100.0, 119.7])
    assert "would favour" not in ranking_note(agree)


def test_skill_is_measured_against_the_naive_last_value_forecast(tmp_path, run_cli):
    trace = _mooncake(tmp_path / "t.jsonl", COUNTS)
    run_cli(
        "predict",
        "compare",
        str(trace),
        "--interval",
        "60",
        "--predictors",
        "constant,kalman",
        "--jobs",
        "1",
        "--out",
        str(tmp_path / "both"),
        "--no-report",
    )
    both = json.loads((tmp_path / "both" / "summary.json").read_text())
    rows = {p["predictor"]: p for p in both["predictors"]}
    # The naive forecast repeats the last bucket: the constant predictor; its skill is 0.
    assert both["naive"]["loss"] == rows["constant"]["loss"]
    assert rows["constant"]["skill_vs_naive"] == 0.0
    assert rows["kalman"]["skill_vs_naive"] == pytest.approx(
        1 - rows["kalman"]["loss"] / rows["constant"]["loss"]
    )
    # Without the constant candidate the naive forecast is backtested on the same buckets.
    code, stdout, err = run_cli(
        "predict",
        "compare",
        str(trace),
        "--interval",
        "60",
        "--predictors",
        "kalman",
        "--jobs",
        "1",
        "--out",
        str(tmp_path / "one"),
        "--no-report",
        "-q",
    )
    assert code == 0, err
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert one["naive"] == both["naive"]
    gain = rows["kalman"]["skill_vs_naive"]
    side = "less" if gain >= 0 else "more"
    assert stdout.startswith(
        f"best          kalman (loss {rows['kalman']['loss']:.4f}, "
        f"{abs(gain):.0%} {side} loss than the naive last-value forecast"
    )


def test_a_huge_request_count_error_is_warned_about_on_the_bottom_line():
    from plansim.commands.predict import verdict_line

    summary = {
        "interval_s": 60.0,
        "predictors": [
            {
                "predictor": "kalman",
                "loss": 2.287,
                "skill_vs_naive": 0.136,
                "mape_request_count_pct": 178.6,
            }
        ],
    }
    assert verdict_line(summary) == (
        "best          kalman (loss 2.2870, 14% less loss than the naive last-value forecast, "
        "request-count MAPE 179%); warning: forecasts miss by 179% of a bucket's requests: "
        "the 60 s buckets are too noisy to forecast (try a longer --interval)"
    )
    summary["predictors"][0]["mape_request_count_pct"] = 12.0
    assert "warning" not in verdict_line(summary)
