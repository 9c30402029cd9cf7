"""Synthetic result tables in the documented schemas, for report tests (seeded, deterministic)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from plansim.io import atomic_write_json, write_parquet_atomic

XSS = "<script>alert(1)</script>"


def requests_table(
    n: int = 2000, span_s: float = 3600.0, seed: int = 0, model_id: str = "req"
) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0, span_s * 1000.0, n))
    ttft = rng.lognormal(np.log(200.0), 0.6, n)
    tpot = rng.lognormal(np.log(25.0), 0.3, n)
    osl = rng.integers(20, 400, n)
    isl = rng.integers(100, 4000, n)
    e2e = ttft + tpot * (osl - 1)
    status = np.where(np.arange(n) % 97 == 5, "rejected", "completed").astype(object)
    done = status == "completed"
    nan = np.full(n, np.nan)
    return pd.DataFrame(
        {
            "request_id": [f"{model_id}-{i}" for i in range(n)],
            "arrival_ms": arrival,
            "first_admit_ms": np.where(done, arrival + 1.0, nan),
            "first_token_ms": np.where(done, arrival + ttft, nan),
            "last_token_ms": np.where(done, arrival + e2e, nan),
            "ttft_ms": np.where(done, ttft, nan),
            "ttst_ms": np.where(done, tpot, nan),
            "e2e_latency_ms": np.where(done, e2e, nan),
            "tpot_ms": np.where(done, tpot, nan),
            "input_length": isl,
            "output_length": osl,
            "reused_input_tokens": (isl * 0.3).astype(np.int64),
            "prefill_worker": rng.integers(0, 2, n),
            "decode_worker": rng.integers(2, 6, n),
            "admission_count": np.ones(n, dtype=np.int64),
            "readmission_count": np.zeros(n, dtype=np.int64),
            "status": status,
            "reason": np.where(done, "", "never fits").astype(object),
        }
    )


def timeseries_table(
    span_s: int = 3600, pools: tuple[str, ...] = ("prefill", "decode")
) -> pd.DataFrame:
    t = np.arange(span_s, dtype=np.float64)
    frames = []
    for k, pool in enumerate(pools):
        wave = 0.5 + 0.5 * np.sin(2 * np.pi * t / span_s)
        ready = 2 + np.round(2 * wave).astype(int)
        frames.append(
            pd.DataFrame(
                {
                    "time_s": t,
                    "pool": pool,
                    "ready": ready,
                    "starting": (np.diff(ready, prepend=ready[0]) > 0).astype(int),
                    "draining": (np.diff(ready, prepend=ready[0]) < 0).astype(int),
                    "running": np.round(10 * wave + k).astype(int),
                    "waiting": np.round(np.maximum(0, 8 * wave - 5)).astype(int),
                    "queued_prefill_tokens": np.round(2000 * wave).astype(int),
                    "kv_usage": 0.2 + 0.6 * wave,
                    "prefix_reuse": 0.25 + 0.1 * wave,
                    "arrivals": np.round(1 + wave).astype(int),
                    "output_tok_s": 0.0 if pool == "prefill" else 500 + 800 * wave,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def workers_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "worker_id": [0, 1, 2, 3, 4, 5],
            "pool": ["prefill", "prefill", "decode", "decode", "decode", "decode"],
            "ready_at_ms": [0, 0, 0, 0, 0, 1_200_000],
            "removed_at_ms": [np.nan] * 5 + [3_000_000],
            "requests": [1000, 980, 500, 520, 490, 300],
            "input_tokens": [2_000_000, 1_960_000, 0, 0, 0, 0],
            "output_tokens": [0, 0, 100_000, 104_000, 98_000, 60_000],
            "reused_input_tokens": [600_000, 590_000, 0, 0, 0, 0],
        }
    )


def scaling_events() -> list[dict[str, Any]]:
    return [
        {
            "at_s": 600.0,
            "component": "decode",
            "from_count": 2,
            "to_count": 3,
            "reason": "scale_up",
            "applied": True,
        },
        {
            "at_s": 1500.0,
            "component": "decode",
            "from_count": 3,
            "to_count": 4,
            "reason": "scale_up",
            "applied": True,
        },
        {
            "at_s": 2900.0,
            "component": "decode",
            "from_count": 4,
            "to_count": 3,
            "reason": "scale_down",
            "applied": True,
        },
        {
            "at_s": 3100.0,
            "component": "prefill",
            "from_count": 2,
            "to_count": 1,
            "reason": "scale_down",
            "applied": False,
        },
    ]


def summary() -> dict[str, Any]:
    out: dict[str, Any] = {
        "num_requests": 2000,
        "completed_requests": 1979,
        "duration_ms": 3_601_000.0,
        "request_throughput_rps": 0.55,
        "output_throughput_tok_s": 115.2,
        "gpu_hours": 6.5,
        "prefix_cache_reused_ratio": 0.3,
    }
    for metric, base in (("ttft", 200.0), ("tpot", 25.0), ("itl", 25.0), ("e2e_latency", 5000.0)):
        for k, stat in enumerate(
            ("mean", "min", "max", "median", "p75", "p90", "p95", "p99", "std")
        ):
            out[f"{stat}_{metric}_ms"] = base * (1 + k / 10)
    return out


def inputs(model: str = "demo-model", trace: str = "trace.jsonl.gz") -> dict[str, Any]:
    return {
        "command": "plansim replay run",
        "trace_files": [trace],
        "request_count": 2000,
        "deployment": {"mode": "disagg", "model": model, "prefill_workers": 2, "decode_workers": 4},
        "sla": {"ttft_ms": 500.0, "itl_ms": 40.0},
        "seed": 7,
    }


REASONS_LOAD = ("no_change", "scale_up", "scale_down", "no_fpm_data", "scaling_in_progress")
REASONS_TP = ("scale", "set_lower_bound", "no_traffic_data")


def ticks_table(n: int = 240, interval_s: float = 30.0) -> pd.DataFrame:
    """Planner ticks; column names as the planner documents them (TickDiagnostics + snapshot)."""
    rng = np.random.default_rng(1)
    at = np.arange(n) * interval_s
    wave = 1.0 + 0.5 * np.sin(2 * np.pi * at / (n * interval_s))
    rps = 5 * wave + rng.normal(0, 0.2, n)
    return pd.DataFrame(
        {
            "at_s": at,
            "ready_prefill": np.round(1 + wave).astype(int),
            "ready_decode": np.round(2 + 2 * wave).astype(int),
            "scale_to_prefill": np.round(1 + wave).astype(float),
            "scale_to_decode": np.round(2 + 2 * wave).astype(float),
            "throughput_lower_bound_prefill": np.full(n, 2.0),
            "throughput_lower_bound_decode": np.round(1 + wave),
            "observed_rps": rps,
            "predicted_rps": np.roll(rps, 1),
            "observed_ttft_ms": 300 * wave,
            "observed_itl_ms": 20 * wave,
            "estimated_ttft_ms": 280 * wave,
            "estimated_itl_ms": 22 * wave,
            "engine_rps_prefill": np.full(n, 4.0),
            "engine_rps_decode": np.full(n, 2.5),
            "observed_isl": 3000 + rng.normal(0, 100, n),
            "observed_osl": 300 + rng.normal(0, 10, n),
            "predicted_isl": np.full(n, 3000.0),
            "predicted_osl": np.full(n, 300.0),
            "load_decision_reason_prefill": [REASONS_LOAD[i % 5] for i in range(n)],
            "load_decision_reason_decode": [REASONS_LOAD[(i // 3) % 5] for i in range(n)],
            "throughput_decision_reason": [REASONS_TP[(i // 7) % 3] for i in range(n)],
            "gpu_hours": np.cumsum(np.full(n, interval_s / 3600 * 4)),
            "engine_queues": [
                json.dumps(
                    [
                        {
                            "worker_id": 0,
                            "dp_rank": 0,
                            "queued_prefill_tokens": int(2000 * w),
                            "queued_decode_kv_tokens": 0,
                            "inflight_decode_kv_tokens": 0,
                        },
                        {
                            "worker_id": 2,
                            "dp_rank": 0,
                            "queued_prefill_tokens": 0,
                            "queued_decode_kv_tokens": int(5000 * w),
                            "inflight_decode_kv_tokens": int(90000 * w),
                        },
                    ]
                )
                for w in wave
            ],
            "max_kv_tokens": np.full(n, 262144.0),
        }
    )


def retune_events(windows: int = 4) -> list[dict[str, Any]]:
    out = []
    outcomes = ("applied", "no_improvement", "failed", "advisory")
    for k in range(windows):
        candidates = []
        for j in range(6):
            point = {
                "router": {"overlap_score_credit": 0.5 * j},
                "planner": {"load_predictor": "kalman" if j % 2 else "constant"},
            }
            score = None if (k == 2) else 100.0 + 3 * j - k
            candidates.append(
                {
                    "point": point,
                    "status": "ok" if score is not None else "failed",
                    "score": score,
                    "error": None if score is not None else "current point failed",
                    "is_current": j == 1,
                }
            )
        out.append(
            {
                "window": k,
                "window_start_s": 900.0 * k,
                "window_end_s": 900.0 * (k + 1),
                "launch_s": 900.0 * (k + 1) + 60.0,
                "decision_s": 900.0 * (k + 1) + 90.0,
                "outcome": outcomes[k % 4],
                "reason": "current point failed" if k == 2 else "",
                "candidates": candidates,
                "current_score": None if k == 2 else 103.0 - k,
                "best_score": None if k == 2 else 115.0 - k,
                "improvement_percentage": None if k == 2 else 11.6,
                "objective": "GoodputPerGPU",
                "changes": {"router": {"overlap_score_credit": 2.5}, "planner": {}}
                if k == 0
                else None,
                "router_parameters": {"decode": {"overlap_score_credit": 2.5}} if k == 0 else None,
                "planner_changes": {},
                "predictor_presweep": {
                    "candidates": [
                        {"load_predictor": "constant"},
                        {"load_predictor": "kalman"},
                        {"load_predictor": "arima"},
                    ],
                    "losses": [0.30 - 0.01 * k, 0.22, 0.25],
                    "winner": 1,
                },
                "sweep_wall_s": 12.5,
            }
        )
    return out


def predictions_table(
    n_buckets: int = 120, predictors: tuple[str, ...] = ("constant", "kalman")
) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    rows = []
    for series, level in (("num_req", 300.0), ("isl", 3000.0), ("osl", 250.0)):
        actual = level * (1 + 0.3 * np.sin(np.arange(n_buckets) / 10)) + rng.normal(
            0, level * 0.05, n_buckets
        )
        for k, predictor in enumerate(predictors):
            forecast = np.roll(actual, 1) * (1 + 0.02 * k)
            for b in range(n_buckets):
                rows.append((b, predictor, series, forecast[b], actual[b]))
    return pd.DataFrame(rows, columns=["bucket", "predictor", "series", "forecast", "actual"])


def predictor_summary(predictors: tuple[str, ...] = ("constant", "kalman")) -> dict[str, Any]:
    return {
        "interval_s": 60.0,
        # ranked by loss; the request-count MAPE falls down the list, so the two rankings
        # disagree (the last is best by MAPE)
        "predictors": [
            {
                "rank": k + 1,
                "predictor": p,
                "name": p,
                "params": {},
                "loss": 0.1 + 0.05 * k,
                # against the naive loss below: 1 - loss / 0.125
                "skill_vs_naive": 1.0 - (0.1 + 0.05 * k) / 0.125,
                "mape_request_count_pct": 8.0 - k,
                "rmse_request_count": 20.0 + k,
                "under_forecast_share": 0.1,
                "fit_time_mean_s": 0.001,
                "fit_time_max_s": 0.01,
                "failed_forecasts": 0,
                "wall_time_s": 0.5,
            }
            for k, p in enumerate(predictors)
        ],
        "naive": {
            "loss": 0.125,
            "mape_request_count_pct": 9.0,
            "rmse_request_count": 22.0,
            "under_forecast_share": 0.2,
        },
    }


def write_replay_folder(
    folder: Path,
    *,
    planner: bool = False,
    retune: bool = False,
    model: str = "demo-model",
    trace: str = "trace.jsonl.gz",
    request_id: str = "req",
) -> None:
    run_inputs = inputs(model=model, trace=trace)
    if planner:
        run_inputs["planner"] = {"report_interval_hours": 1.0, "ttft_ms": 500.0, "itl_ms": 40.0}
    atomic_write_json(folder / "inputs.json", run_inputs)
    atomic_write_json(folder / "summary.json", summary())
    write_parquet_atomic(folder / "requests.parquet", requests_table(model_id=request_id))
    write_parquet_atomic(folder / "timeseries.parquet", timeseries_table())
    write_parquet_atomic(folder / "workers.parquet", workers_table())
    if planner:
        write_parquet_atomic(folder / "ticks.parquet", ticks_table())
        atomic_write_json(folder / "scaling_events.json", scaling_events())
    if retune:
        atomic_write_json(folder / "retune_events.json", retune_events())


def write_predict_folder(
    folder: Path, predictors: tuple[str, ...] = ("constant", "kalman")
) -> None:
    atomic_write_json(folder / "summary.json", predictor_summary(predictors))
    write_parquet_atomic(folder / "predictions.parquet", predictions_table(predictors=predictors))


def window_records(n: int = 3) -> list[dict[str, Any]]:
    """``retune windows`` records: candidates a (current), b and c; b wins windows 0 and 2 by
    10%, a wins window 1 (b scores 5% below it); c is always 20% below."""
    records = []
    for k in range(n):
        current = 100.0 + 10.0 * k
        b = current * (1.10 if k % 2 == 0 else 0.95)
        rows = [("a", True, current), ("b", False, b), ("c", False, current * 0.8)]
        rows.sort(key=lambda r: (-r[2], not r[1]))
        records.append(
            {
                "window": k,
                "window_start_s": 900.0 * k,
                "window_end_s": 900.0 * (k + 1),
                "objective": "GoodputPerGPU",
                "outcome": "apply" if k % 2 == 0 else "no_improvement",
                "reason": None,
                "reader_counts": {"requests": 100, "censored": 0},
                "window_requests": 100,
                "current_score": current,
                "best_score": max(current, b),
                "improvement_percentage": (max(current, b) / current - 1) * 100,
                "ranked": [
                    {
                        "rank": rank,
                        "label": label,
                        "point": {"router": {"w": label}},
                        "is_current": is_current,
                        "status": "ok",
                        "score": score,
                        "vs_current_pct": (score / current - 1) * 100,
                        "error": None,
                    }
                    for rank, (label, is_current, score) in enumerate(rows, start=1)
                ],
            }
        )
    return records


def write_windows_folder(folder: Path, n: int = 3, label: str = "b") -> None:
    from plansim.io import atomic_write_json

    records = window_records(n)
    for record in records:
        for row in record["ranked"]:
            if row["label"] == "b":
                row["label"] = label
        atomic_write_json(folder / "windows" / f"{record['window']}.json", record)
    wins = {"a": n // 2, label: n - n // 2, "c": 0}
    atomic_write_json(
        folder / "summary.json",
        {
            "windows": n,
            "ranked_windows": n,
            "objective": "GoodputPerGPU",
            "outcomes": {"apply": n - n // 2, "no_improvement": n // 2},
            "candidates": [
                {
                    "label": name,
                    "is_current": name == "a",
                    "wins": wins[name],
                    "failed": 0,
                    "win_share": wins[name] / n,
                    "score": {
                        "n": n,
                        "mean": 100.0,
                        "min": 80.0,
                        "p25": 90.0,
                        "median": 100.0,
                        "p75": 110.0,
                        "max": 130.0,
                    },
                }
                for name in ("a", label, "c")
            ],
            "reader_counts": {"requests": 100 * n, "censored": 0},
        },
    )
    atomic_write_json(
        folder / "inputs.json",
        {
            "command": "plansim retune windows",
            "windows": [0, n - 1],
            "scoring_sla": {"ttft_ms": 500.0, "itl_ms": 20.0, "e2e_ms": None},
        },
    )


def write_capacity_folder(folder: Path, policy_name: str = "dynamo") -> Path:
    """A small real capacity run (in this process): a flat trace on fixed-time engines, one
    planner policy named ``policy_name``; writes ``capacity.json`` and ``points.parquet``."""
    from plansim.capacity import prepare, run
    from plansim.capacity.policies import Policy, default_policies
    from plansim.sim.deployment import build_deployment
    from plansim.traces.request_ids import ordinal_ids
    from plansim.traces.workload import Workload
    from plansim.workers.executor import InProcessExecutor

    n = 1200
    arrival = np.concatenate(
        [
            np.arange(0, 12_000, 40.0),
            np.arange(12_000, 24_000, 20.0),
            np.arange(24_000, 36_000, 40.0),
        ]
    )[:n]
    n = arrival.size
    workload = Workload(
        arrival_ms=arrival,
        isl_tokens=np.full(n, 100),
        osl_tokens=np.full(n, 10),
        request_id=ordinal_ids(0, n),
        hash_offsets=np.arange(n + 1),
        hash_ids=np.arange(n),
        trace_block_size=512,
    )
    deployment = build_deployment(
        {
            "num_workers": 2,
            "router": {"mode": "round_robin"},
            "sla": {"ttft_ms": 500},
            "engine": {
                "max_num_seqs": 1,
                "startup_time": 2,
                "timing_model": {"type": "fixed", "prefill_ms": 10, "decode_ms": 10},
            },
        }
    )
    base = default_policies(deployment, 16)[0][0]
    plan = prepare(
        deployment,
        0.95,
        segment_s=12.0,
        max_gpu_budget=16,
        default_policies=False,
        planner_configs=[Policy(policy_name, base.config, "default")],
    )
    result = run(plan, workload, executor=InProcessExecutor())
    atomic_write_json(folder / "capacity.json", result.to_json())
    write_parquet_atomic(folder / "points.parquet", result.points)
    return folder


def write_compare_run(folder: Path, good: int, gpu_hours: float, concurrency: int) -> Path:
    """A replay folder of 100 requests, ``good`` of them within the SLA."""
    folder.mkdir(parents=True)
    atomic_write_json(
        folder / "summary.json",
        {
            "num_requests": 100,
            "completed_requests": 100,
            "goodput_completed_requests": good,
            "gpu_hours": gpu_hours,
            "median_ttft_ms": 50.0,
            "p90_ttft_ms": 90.0,
            "p90_tpot_ms": 9.0,
            "p90_itl_ms": 7.0,
            "p90_e2e_latency_ms": 900.0,
            "output_throughput_tok_s": 10.0 * concurrency,
        },
    )
    atomic_write_json(
        folder / "inputs.json",
        {
            "command": "plansim replay synth",
            "sla": {"ttft_ms": 500.0, "tpot_ms": 20.0},
            "options": {"rate": 10.0, "max_concurrency": concurrency, "quiet": True},
        },
    )
    write_parquet_atomic(
        folder / "requests.parquet",
        pd.DataFrame(
            {
                "status": ["completed"] * 4,
                "ttft_ms": [10.0, 20.0, 30.0, 40.0 * concurrency],
                "tpot_ms": [5.0, 6.0, 7.0, 8.0],
                "e2e_latency_ms": [100.0, 200.0, 300.0, 400.0],
            }
        ),
    )
    return folder
