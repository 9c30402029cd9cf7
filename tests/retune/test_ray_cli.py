"""`plansim retune windows --backend ray` without Ray installed: one line saying how to install
it, exit status 2, before any trace is read; `--ray-address` only goes with `--backend ray`; an
unreachable cluster address is one line, at once."""

from __future__ import annotations

import sys

import pytest
import yaml

RUN = {
    "trace": "not-read.dynamo.jsonl.gz",
    "deployment": {"mode": "agg", "num_workers": 2, "router": {"mode": "kv_router"}},
    "planner": {
        "mode": "agg",
        "enable_load_scaling": False,
        "enable_throughput_scaling": False,
        "retune": {"max_parallel": 2, "router": {"overlap_score_weight": {"choices": [0.5, 1.0]}}},
    },
}


@pytest.fixture
def run_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(RUN))
    return path


def test_backend_ray_without_ray_is_one_install_line_and_exit_2(monkeypatch, run_file, run_cli):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    code, _, err = run_cli("retune", "windows", str(run_file), "--backend", "ray")
    assert code == 2
    assert err.count("\n") == 1
    assert "pip install 'plansim[ray]'" in err and "--backend" in err


def test_ray_address_needs_backend_ray(run_file, run_cli):
    code, _, err = run_cli("retune", "windows", str(run_file), "--ray-address", "10.0.0.1:6379")
    assert code == 2
    assert err.count("\n") == 1 and "--ray-address" in err


def test_unreachable_ray_address_is_one_line_and_exit_2(run_file, run_cli):
    # Port 1 on loopback refuses connections: the command fails at once, not after Ray's
    # minutes of retries.
    code, _, err = run_cli(
        "retune", "windows", str(run_file), "--backend", "ray", "--ray-address", "127.0.0.1:1"
    )
    assert code == 2
    assert err.count("\n") == 1 and "cannot reach the Ray cluster at 127.0.0.1:1" in err
