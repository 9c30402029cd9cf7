"""`plansim fleet`: every bad input is one line with exit status 2 before any replay; a fleet
the inventory binds moves a model to the dearer GPU type, and the outputs (the fleets that do
not fit are in ``tests/fleet/test_fleet_search.py``)."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fleet"))
from fleet_cases import deployment, on_demand, write_fleet


def _run(run_cli, path: Path, out: Path, *extra: str):
    return run_cli("fleet", str(path), "--out", str(out), "--jobs", "1", "--quiet", *extra)


def _bad(run_cli, tmp_path: Path, path: Path) -> str:
    code, stdout, err = _run(run_cli, path, tmp_path / "out", "--no-report")
    assert code == 2, (stdout, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()
    return lines[0]


def test_an_unknown_gpu_system_names_the_supported_ones(tmp_path, run_cli):
    inventory = {**on_demand(4, 8), "h300": {"count": 4, "price_per_gpu_hour": 5.0}}
    line = _bad(run_cli, tmp_path, write_fleet(tmp_path, inventory))
    assert "inventory.h300" in line and "supported systems:" in line and "h200_sxm" in line


def test_a_searched_gpu_the_inventory_does_not_hold_is_named(tmp_path, run_cli):
    inventory = {"h200_sxm": {"count": 8, "price_per_gpu_hour": 3.5}}
    line = _bad(run_cli, tmp_path, write_fleet(tmp_path, inventory))
    assert "models.0.search.engine.timing_model.system" in line
    assert "needs h100_sxm GPUs, which the inventory does not hold" in line


def test_a_searched_gpu_of_which_the_inventory_holds_none_is_named(tmp_path, run_cli):
    line = _bad(run_cli, tmp_path, write_fleet(tmp_path, on_demand(0, 8)))
    assert "models.0.search.engine.timing_model.system" in line
    assert "needs h100_sxm GPUs" in line and "h100_sxm (0)" in line


def test_a_deployment_on_a_gpu_the_inventory_does_not_hold_is_named(tmp_path, run_cli):
    inventory = {"h200_sxm": {"count": 8, "price_per_gpu_hour": 3.5}}
    line = _bad(run_cli, tmp_path, write_fleet(tmp_path, inventory, models=("light",), search={}))
    assert "models.0.deployment" in line and "light needs h100_sxm GPUs" in line


def test_a_model_whose_search_space_holds_no_feasible_point(tmp_path, run_cli):
    # TP 2 on GPUs of which the inventory holds one each: one worker needs 2 GPUs.
    search = {"timing_model.system": ["h200_sxm", "h100_sxm"], "timing_model.tp_size": [2]}
    line = _bad(
        run_cli, tmp_path, write_fleet(tmp_path, on_demand(1, 1), models=("light",), search=search)
    )
    assert "models.0: light: no point of its search space is feasible" in line
    assert "one worker per pool needs 2 GPUs, more than the 1 its search may use" in line


def test_a_deployment_without_an_aic_timing_model_has_no_gpu_to_price(tmp_path, run_cli):
    plain = {
        "mode": "agg",
        "engine": {"timing_model": {"type": "fixed", "prefill_ms": 1, "decode_ms": 1}},
        "sla": {"ttft_ms": 100},
    }
    line = _bad(
        run_cli,
        tmp_path,
        write_fleet(
            tmp_path, on_demand(4, 4), models=("light",), search={}, deployments={"light": plain}
        ),
    )
    assert "no aic timing model" in line and "models.0.deployment" in line


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda f: f["models"][1].update(name="light"), "models.1.name: 'light' is used twice"),
        (lambda f: f["models"][0].update(name="a/b"), "models.0.name"),
        (lambda f: f["models"][0].update(target=1.5), "models.0.target"),
        (lambda f: f["inventory"]["h100_sxm"].update(count=-1), "inventory.h100_sxm.count"),
        (lambda f: f.update(budget_per_hour=0), "budget_per_hour"),
        (
            lambda f: f["models"][0].update(search={"engine.timing_model.tp_sise": [1]}),
            "models.0.search",
        ),
        (lambda f: f["models"][0].update(colour="red"), "models.0.colour: unknown key"),
        (lambda f: f["models"][0].update(format="csvx"), "models.0.format"),
    ],
)
def test_a_bad_key_in_the_fleet_file_is_one_line(tmp_path, run_cli, edit, expected):
    path = write_fleet(tmp_path, on_demand(4, 8))
    spec = yaml.safe_load(path.read_text())
    edit(spec)
    path.write_text(yaml.safe_dump(spec))
    assert expected in _bad(run_cli, tmp_path, path)


def test_a_planner_with_retune_is_refused(tmp_path, run_cli):
    dep = deployment(planner=True)
    dep["planner"]["retune"] = {"interval_seconds": 60, "search": {"router": {}}}
    line = _bad(
        run_cli,
        tmp_path,
        write_fleet(tmp_path, on_demand(4, 8), models=("light",), deployments={"light": dep}),
    )
    assert "models.0.deployment" in line and "retune" in line


def _front_best(report: dict) -> float:
    """The cheapest fleet per hour that fits, by enumerating every pick from the fronts."""
    counts = {s: e["count"] for s, e in report["inventory"].items()}
    best = None
    for picks in itertools.product(*(m["front"] for m in report["models"])):
        use = {s: sum(p["gpus"].get(s, 0) for p in picks) for s in counts}
        if all(use[s] <= counts[s] for s in counts):
            rate = sum(p["cost_per_hour"] for p in picks)
            best = rate if best is None else min(best, rate)
    return best


def test_a_binding_inventory_moves_the_model_whose_move_costs_least(tmp_path, run_cli):
    # Both models are cheapest on H100, and 4 H100s cannot hold both.
    out = tmp_path / "out"
    code, stdout, err = _run(run_cli, write_fleet(tmp_path, on_demand(4, 16)), out)
    assert code == 0, err
    report = json.loads((out / "fleet.json").read_text())
    alone = [m["cheapest_alone"] for m in report["models"]]
    assert all(a["gpus"].keys() == {"h100_sxm"} for a in alone)
    assert sum(a["gpus"]["h100_sxm"] for a in alone) > 4
    assert not report["independent"]["fits"]
    assert report["feasible"] and report["solver"]["proved_optimal"]
    assert report["cost_per_hour"] == pytest.approx(_front_best(report))
    # On demand, a deployment costs its GPUs at their system's price; the fleet, their sum.
    prices = {"h100_sxm": 2.2, "h200_sxm": 3.5}
    for m in report["models"]:
        assert m["choice"]["tier"] == "on_demand"
        assert m["choice"]["cost_per_hour"] == pytest.approx(
            sum(n * prices[s] for s, n in m["choice"]["gpus"].items())
        )
    assert report["cost_per_hour"] == pytest.approx(
        sum(m["choice"]["cost_per_hour"] for m in report["models"])
    )
    moved = [m for m in report["models"] if m["choice"]["moved"]]
    assert len(moved) == 1 and moved[0]["choice"]["gpus"].keys() == {"h200_sxm"}
    # The model moved is the one whose cheapest H200 deployment costs least over its H100 one.
    extra = {
        m["name"]: min(c["cost_per_hour"] for c in m["front"] if "h200_sxm" in c["gpus"])
        - m["cheapest_alone"]["cost_per_hour"]
        for m in report["models"]
    }
    assert moved[0]["name"] == min(extra, key=extra.get)
    assert moved[0]["choice"]["extra_cost_per_hour"] == pytest.approx(extra[moved[0]["name"]])
    for m in report["models"]:
        text = (out / "models" / m["name"] / "recommended_deployment.yaml").read_text()
        assert yaml.safe_load(text)["engine"]["timing_model"]["system"] == next(
            iter(m["choice"]["gpus"])
        )
    assert (out / "fleet_report.html").is_file() and (out / "points.parquet").is_file()
    # -q prints the result line alone: the fleet's cost and the solver's proof.
    assert len(stdout.splitlines()) == 1 and "proved optimal" in stdout
    run = json.loads((out / "run.json").read_text())
    assert (
        run["status"] == "complete" and "models/light/recommended_deployment.yaml" in run["files"]
    )


@pytest.mark.slow
def test_a_fleet_search_killed_at_random_points_and_resumed_gives_the_uninterrupted_answer(
    tmp_path, run_cli
):
    from killed_runs import RESUME_DIR, assert_resumed_as_whole, kill_and_resume

    # Planners and spot capacity: every kind of replay the fleet records (static and spot
    # searches, the fleet on one clock, each model autoscaled alone) is among the killed ones.
    spot = {"price_per_gpu_hour": 0.9, "preemptions_per_hour": 20.0}
    path = write_fleet(tmp_path, on_demand(16, 16, **spot), planner=True)
    args = ["fleet", str(path), "--quiet", "--no-report", "--jobs", "2"]
    whole = tmp_path / "whole"
    code, _, err = run_cli(*args, "--out", str(whole))
    assert code == 0, err
    expected = json.loads((whole / "fleet.json").read_text())
    replays = expected["replays"]
    assert replays["fleet"] == 1 and replays["spot"] > 0 and replays["alone"] > 0, replays
    out = tmp_path / "killed"
    at_kill, before = kill_and_resume(
        [*args, "--out", str(out)], out, replays["total"], seed=29, kills=2
    )
    assert before > 0, (at_kill, before)
    assert_resumed_as_whole(whole, out, "fleet.json", before)
    written = sorted(p.relative_to(whole).as_posix() for p in whole.rglob("*.yaml"))
    assert written == [
        "models/heavy/recommended_deployment.yaml",
        "models/light/recommended_deployment.yaml",
    ]
    for name in ["inputs.json", *written]:
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert not (out / RESUME_DIR).exists() and not (out / ".plansim.lock").exists()


def test_a_fleet_resume_refuses_a_complete_run_and_other_inputs(tmp_path, run_cli):
    path = write_fleet(tmp_path, on_demand(16, 16), models=("light",), search={})
    out = tmp_path / "out"
    code, _, err = _run(run_cli, path, out, "--no-report")
    assert code == 0, err
    code, _, err = _run(run_cli, path, out, "--no-report", "--resume")
    assert (code, err) == (
        2,
        f"plansim: --resume: {out} holds a complete run of plansim fleet, nothing of plansim "
        "fleet to resume; use --force to replace it, or choose another folder\n",
    )
    # A run killed after its first replay, resumed on another trace under the same name.
    from killed_runs import run_killed_at

    killed = tmp_path / "killed"
    args = ["fleet", str(path), "--quiet", "--no-report", "--jobs", "1", "--out", str(killed)]
    assert run_killed_at(args, killed, 1)
    trace = tmp_path / "light.jsonl"
    trace.write_text(trace.read_text().replace('"output_length":40', '"output_length":41'))
    code, _, err = run_cli(*args, "--resume")
    assert (code, err) == (
        2,
        f"plansim: --resume: the interrupted run in {killed} had other inputs (workload "
        "differ); rerun it with its own inputs, or use --force to start over\n",
    )
