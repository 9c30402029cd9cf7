"""`plansim retune windows --backend ray` without Ray installed: one line saying how to install
it, exit status 2, before any trace is read; `--ray-address` only goes with `--backend ray`; an
unreachable cluster address is one line, at once."""

from __future__ import annotations

import sys

import pytest
import typer
import yaml

import plansim.cli
from plansim.commands.retune_windows import windows

RUN = {
    "trace": "not-read.dynamo.jsonl.gz",
    "deployment": {"mode": "agg", "num_workers": 2, "router": {"mode": "kv_router"}},
    "planner": {
        "mode": "agg",
        "enable_load_scaling": False,
        "enable_throughput_scaling": False,
        "retune": {"max_parallel": 2,
                   "router": {"overlap_score_weight": {"choices": [0.5, 1.0]}}},
    },
}


def _plansim(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """Run ``plansim retune windows ARGS`` through the CLI entry point (its error mapping)."""
    app = typer.Typer()
    retune = typer.Typer()
    retune.command("windows")(windows)
    app.add_typer(retune, name="retune")
    monkeypatch.setattr(plansim.cli, "app", app)
    monkeypatch.setattr(sys, "argv", ["plansim", "retune", "windows", *args])
    with pytest.raises(SystemExit) as exited:
        plansim.cli.main()
    return exited.value.code, capsys.readouterr().err


@pytest.fixture
def run_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(RUN))
    return path


def test_backend_ray_without_ray_is_one_install_line_and_exit_2(monkeypatch, capsys, run_file):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    code, err = _plansim(monkeypatch, capsys, str(run_file), "--backend", "ray")
    assert code == 2
    assert err.count("\n") == 1
    assert "pip install 'plansim[ray]'" in err and "--backend" in err


def test_ray_address_needs_backend_ray(monkeypatch, capsys, run_file):
    code, err = _plansim(monkeypatch, capsys, str(run_file), "--ray-address", "10.0.0.1:6379")
    assert code == 2
    assert err.count("\n") == 1 and "--ray-address" in err


def test_unreachable_ray_address_is_one_line_and_exit_2(monkeypatch, capsys, run_file):
    # Port 1 on loopback refuses connections: the command fails at once, not after Ray's
    # minutes of retries.
    code, err = _plansim(monkeypatch, capsys, str(run_file), "--backend", "ray",
                         "--ray-address", "127.0.0.1:1")
    assert code == 2
    assert err.count("\n") == 1 and "cannot reach the Ray cluster at 127.0.0.1:1" in err
