"""plansim.reports.compare and `plansim compare`: runs side by side, the Pareto front of goodput
against GPU-hours across them, what differs between them."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import reports_synthetic as syn
from reports_figures import chart_names, figures

from plansim.errors import InputError
from plansim.reports.compare import comparison, front, read_runs, render_compare
from plansim.reports.tables import pareto_front


@pytest.fixture
def runs(tmp_path):
    # a: 90% for 1 GPU-h; b: 95% for 2; c: 85% for 1.5 (a beats it); d: 95% for 2.5 (b does)
    specs = {"a": (90, 1.0, 1), "b": (95, 2.0, 2), "c": (85, 1.5, 4), "d": (95, 2.5, 8)}
    return [syn.write_compare_run(tmp_path / name, *spec) for name, spec in specs.items()]


def test_the_front_holds_the_runs_no_other_beats_on_goodput_and_gpu_hours(runs):
    assert pareto_front([1.0, 2.0, 1.5, 2.5], [0.9, 0.95, 0.85, 0.95]) == [0, 1]
    read = read_runs(runs)
    assert [read[i].label for i in front(read)] == ["a", "b"]
    data = comparison(read)
    assert data["pareto_front"] == ["a", "b"]
    # What a sweep varies, not what every run shares or how it was written.
    assert data["differs"] == ["max_concurrency"]
    rows = {r["label"]: r for r in data["runs"]}
    assert rows["c"]["differs"] == {"max_concurrency": 4}
    assert (rows["c"]["goodput_ratio"], rows["c"]["gpu_hours"], rows["c"]["pareto"]) == (
        0.85,
        1.5,
        False,
    )
    assert rows["a"]["p50_ttft_ms"] == 50.0 and rows["a"]["p90_tpot_ms"] == 9.0


def test_the_page_draws_the_front_and_each_replay_s_latency_cdfs(runs):
    html = render_compare(read_runs(runs))
    assert chart_names(html) == ["compare_pareto", "compare_latency_cdf"]
    pareto = figures(html)["compare_pareto"]["data"]
    line = next(t for t in pareto if t["name"] == "Pareto front")
    assert line["text"] == ["a", "b"]
    cdf = figures(html)["compare_latency_cdf"]["data"]
    assert sorted({t["name"] for t in cdf}) == ["a", "b", "c", "d"]
    assert "Goodput is scored against TTFT ≤ 500 ms and TPOT ≤ 20 ms in every run." in html


def test_a_capacity_run_adds_one_run_per_deployment_and_policy(tmp_path, runs):
    capacity = syn.write_capacity_folder(tmp_path / "cap")
    read = read_runs([runs[0], capacity])
    points = pd.read_parquet(capacity / "points.parquet")
    static = points[points["kind"] == "static"].drop_duplicates("num_workers")
    assert len(read) == 1 + len(static) + 1  # the replay, each static count, the policy
    assert read[-1].label == "cap: policy dynamo" and read[-1].kind == "capacity policy"


def test_a_folder_of_another_kind_is_named(tmp_path):
    with pytest.raises(InputError, match="not a replay, retune sweep or capacity output folder"):
        read_runs([tmp_path])


def test_compare_writes_its_folder_and_the_report_re_renders(runs, tmp_path, run_cli):
    out = tmp_path / "out"
    code, stdout, err = run_cli("compare", *map(str, runs), "--out", str(out))
    assert code == 0, err
    lines = stdout.splitlines()
    assert lines[0].split() == [
        "run",
        "max_concurrency",
        "goodput",
        "GPU-h",
        "p90",
        "TTFT",
        "p90",
        "TPOT",
        "front",
    ]
    assert lines[1].split() == ["a", "1", "90.0%", "1.0000", "90.0", "9.00", "*"]
    assert lines[-1] == f"4 runs compared; on the Pareto front: a, b: {out}"
    assert json.loads((out / "compare.json").read_text())["pareto_front"] == ["a", "b"]
    assert (out / "compare_report.html").is_file()
    (out / "compare_report.html").unlink()
    code, _, err = run_cli("report", str(out))
    assert code == 0, err
    assert (out / "compare_report.html").is_file()


def test_runs_scored_against_different_slas_are_named_in_one_warning(runs, tmp_path, run_cli):
    inputs = runs[1] / "inputs.json"
    data = json.loads(inputs.read_text())
    data["sla"] = {"ttft_ms": 1000.0, "tpot_ms": 20.0}
    inputs.write_text(json.dumps(data))
    code, _, err = run_cli("compare", *map(str, runs), "--out", str(tmp_path / "out"))
    assert code == 0, err
    (line,) = [x for x in err.splitlines() if "warning" in x]
    assert line == (
        "plansim: warning: the runs score goodput against different SLAs "
        "(a, c, d: TTFT ≤ 500 ms and TPOT ≤ 20 ms; b: TTFT ≤ 1000 ms and TPOT ≤ 20 ms): their "
        "goodput and the Pareto front do not compare like with like"
    )


def test_runs_scored_against_one_sla_get_no_warning(runs, tmp_path, run_cli):
    code, _, err = run_cli("compare", *map(str, runs), "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert "warning" not in err
