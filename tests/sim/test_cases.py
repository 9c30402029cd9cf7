"""sim.cases: reading reference case files into deployments, and grading a summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plansim.errors import ConfigError
from plansim.sim.cases import case_deployment, compare_summary, load_cases, tolerance

REFERENCE = Path(__file__).parent / "reference"


def _write_cases(tmp_path: Path, *cases: dict) -> Path:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"cases": list(cases)}))
    return path


def test_disagg_case_maps_pools_engines_router_and_sla(tmp_path):
    path = _write_cases(
        tmp_path,
        {
            "name": "d",
            "trace": "t.jsonl",
            "trace_format": "mooncake",
            "trace_block_size": 512,
            "mode": "disagg",
            "num_prefill_workers": 2,
            "num_decode_workers": 6,
            "router_mode": "kv_router",
            "prefill_engine_args": {"engine": {"worker_type": "prefill"}},
            "decode_engine_args": {"engine": {"worker_type": "decode", "num_gpu_blocks": 2048}},
            "arrival_speedup_ratio": 1.5,
            "sla_ttft_ms": 500.0,
            "sla_itl_ms": 20.0,
            "expected": {"completed_requests": 3},
        },
    )
    (case,) = load_cases(path)
    assert case.trace == tmp_path / "t.jsonl"
    assert case.trace_block_size == 512
    assert case.router_mode == "kv_router"
    dep = case_deployment(case)
    assert dep.mode == "disagg"
    assert (dep.num_prefill_workers, dep.num_decode_workers) == (2, 6)
    assert dep.prefill_args.role == "prefill"
    assert dep.decode_args.role == "decode"
    assert dep.decode_args.num_gpu_blocks == 2048
    assert dep.router.mode == "kv_router"
    assert dep.arrival_speedup_ratio == 1.5
    assert (dep.sla.ttft_ms, dep.sla.tpot_ms, dep.sla.e2e_ms) == (500.0, 20.0, None)


def test_a_case_takes_router_config_keys_and_the_canonical_engine_config(tmp_path):
    path = _write_cases(
        tmp_path,
        {
            "name": "q",
            "trace": "t.jsonl",
            "num_workers": 2,
            "router_mode": "kv_router",
            "router_config": {
                "router_queue_threshold": 0.5,
                "router_queue_policy": "wspt",
                "overlap_score_weight": 2.0,
            },
            "engine_args": {
                "engine": {
                    "backend": "sglang",
                    "num_gpu_blocks": 2048,
                    "sglang": {"schedule_policy": "lpm"},
                }
            },
        },
    )
    dep = case_deployment(load_cases(path)[0])
    router = dep.router
    assert (router.router_queue_threshold, router.router_queue_policy) == (0.5, "wspt")
    assert router.prefill_load_scale == 2.0  # the deprecated spelling
    assert (dep.engine.engine_type, dep.engine.sglang.schedule_policy) == ("sglang", "lpm")


def test_npz_path_resolves_against_the_cases_file():
    case = next(c for c in load_cases(REFERENCE / "micro_cases.json") if c.name == "M8-npz")
    spec = case_deployment(case).engine.effective_timing
    assert Path(spec.npz_path) == REFERENCE / "profiles" / "sample_h200.npz"


def test_unknown_case_key_fails_naming_it(tmp_path):
    path = _write_cases(tmp_path, {"name": "x", "trace": "t", "num_wrokers": 2})
    with pytest.raises(ConfigError, match=r"cases\[0\]\.num_wrokers"):
        load_cases(path)


@pytest.mark.parametrize(
    ("key", "router", "rule"),
    [
        ("completed_requests", "round_robin", ("exact", 0.0)),
        ("duration_ms", "kv_router", ("rel", 0.01)),
        ("median_ttft_ms", "round_robin", ("rel", 0.05)),
        ("p90_itl_ms", "kv_router", ("rel", 0.10)),
        ("median_e2e_latency_ms", "kv_router", ("rel", 0.10)),
        ("mean_tpot_ms", "round_robin", ("rel", 0.05)),
        ("output_throughput_tok_s", "kv_router", ("rel", 0.10)),
        ("p99_ttft_ms", "round_robin", ("rel", 0.15)),
        ("prefix_cache_reused_ratio", "round_robin", ("abs", 0.03)),
        ("goodput_completed_requests", "round_robin", ("rel", 0.05)),
        ("mean_ttft_ms", "round_robin", ("info", 0.0)),
    ],
)
def test_tolerance_rules_of_issue_3(key, router, rule):
    assert tolerance(key, router) == rule


def test_compare_grades_each_expected_key(tmp_path):
    path = _write_cases(
        tmp_path,
        {
            "name": "x",
            "trace": "t",
            "router_mode": "round_robin",
            "expected": {
                "completed_requests": 10,
                "median_ttft_ms": 100.0,
                "prefix_cache_reused_ratio": 0.5,
                "p99_ttft_ms": 200.0,
                "mean_ttft_ms": 50.0,
            },
        },
    )
    (case,) = load_cases(path)
    checks = {
        c.key: c
        for c in compare_summary(
            {
                "completed_requests": 10,
                "median_ttft_ms": 106.0,
                "prefix_cache_reused_ratio": 0.48,
                "mean_ttft_ms": 99.0,
            },
            case,
        )
    }
    assert checks["completed_requests"].ok
    assert not checks["median_ttft_ms"].ok  # 6% > 5%
    assert checks["median_ttft_ms"].error == pytest.approx(0.06)
    assert checks["prefix_cache_reused_ratio"].ok  # 0.02 absolute
    assert not checks["p99_ttft_ms"].ok  # missing from our summary
    assert checks["mean_ttft_ms"].ok  # report only
