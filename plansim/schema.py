"""Names and constants that producers (sim, retune, the predictor backtest, the commands) and the
reports share: output-folder file names, table columns, retune objectives and outcomes, and the
replay summary's keys with their labels and units.

Dependency-free (standard library only), so that the reports read tables without importing the
modules that wrote them, and every fact here is written once.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---------------------------------------------------------------- output folder files

INPUTS_JSON = "inputs.json"
SUMMARY_JSON = "summary.json"
REQUESTS_TABLE = "requests.parquet"
TIMESERIES_TABLE = "timeseries.parquet"
WORKERS_TABLE = "workers.parquet"
SESSIONS_TABLE = "sessions.parquet"  # closed-loop replays: one row per session
TICKS_TABLE = "ticks.parquet"
SCALING_EVENTS_JSON = "scaling_events.json"
BASELINE_JSON = "baseline.json"  # a planner replay: its starting counts replayed static
RETUNE_EVENTS_JSON = "retune_events.json"
PREDICTIONS_TABLE = "predictions.parquet"
WINDOWS_TABLE = "windows.parquet"  # retune windows: one row per (window, candidate)
WINDOW_RECORDS_DIR = "windows"  # retune windows: one <k>.json record per window
CAPACITY_JSON = "capacity.json"  # plansim capacity: the answer
POINTS_TABLE = "points.parquet"  # plansim capacity: one row per replay
RECOMMENDED_DEPLOYMENT = "recommended_deployment.yaml"  # plansim capacity: the answer to run
# plansim capacity: the Dynamo planner config for the answer (the tuned one with --tune-planner)
RECOMMENDED_PLANNER = "recommended_planner.yaml"
# plansim capacity: the answer's engine args as Dynamo takes them (canonical 1.6.1 form).
RECOMMENDED_ENGINE_ARGS = "recommended_engine_args.json"  # the agg pool's, or the shared one
RECOMMENDED_PREFILL_ENGINE_ARGS = "recommended_prefill_engine_args.json"
RECOMMENDED_DECODE_ENGINE_ARGS = "recommended_decode_engine_args.json"
TRACE_EVENTS_JSON = "trace_events.json.gz"  # replay --trace-events: Chrome/Perfetto timeline
FLEET_JSON = "fleet.json"  # plansim fleet: the answer
FLEET_MODELS_DIR = "models"  # plansim fleet: one <model>/recommended_deployment.yaml each
CALIBRATION_JSON = "calibration.json"  # plansim calibrate: the fit, its errors and intervals
CALIBRATED_DEPLOYMENT = "calibrated_deployment.yaml"  # plansim calibrate: the deployment fitted
CALIBRATION_TABLE = "calibration_requests.parquet"  # plansim calibrate: recorded vs replayed
# Reports (plansim.reports.folder writes them) and the plotly.js they share.
REPLAY_REPORT = "report.html"
PLANNER_REPORT = "planner_report"  # .html and .log.jsonl.gz (the tick log)
PLANNER_PERIOD_REPORTS_DIR = "planner_reports"  # one planner_report_NNN pair per period
RETUNE_REPORT = "retune_report.html"
PREDICTOR_REPORT = "predictor_report.html"
WINDOWS_REPORT = "retune_windows_report.html"
CAPACITY_REPORT = "capacity_report.html"
COMPARE_JSON = "compare.json"  # plansim compare: the runs side by side
COMPARE_REPORT = "compare_report.html"
FLEET_REPORT = "fleet_report.html"
CALIBRATION_REPORT = "calibration_report.html"
PLOTLY_JS = "plotly.min.js"

# ---------------------------------------------------------------- retune

# Objectives where a lower score is better; every other objective is maximised.
MINIMIZED_OBJECTIVES = frozenset({"TTFT", "E2ELatency"})
# What a score of each objective is, in one phrase with its unit (retune.scoring defines them).
OBJECTIVE_UNITS = {
    "Goodput": "SLA-good output tok/s",
    "GoodputPerGPU": "SLA-good output tok/s per GPU",
    "Throughput": "output tok/s",
    "ThroughputPerGPU": "output tok/s per GPU",
    "ThroughputPerUser": "output tok/s per request",
    "TTFT": "ms mean TTFT",
    "E2ELatency": "ms mean end-to-end latency",
}
DEFAULT_MIN_IMPROVEMENT_PERCENTAGE = 2.0
RETUNE_OUTCOMES = ("applied", "advisory", "no_improvement", "failed", "timeout")
# retune windows: windows.parquet columns, in window then rank order.
WINDOW_CANDIDATE_COLUMNS = (
    "window",
    "rank",
    "label",
    "is_current",
    "status",
    "score",
    "vs_current_pct",
    "error",
)


def objective_unit(objective: str | None) -> str:
    """The unit phrase of ``objective``'s scores ("" for an unknown or missing objective)."""
    return OBJECTIVE_UNITS.get(str(objective), "")


def is_minimized(objective: str | None) -> bool:
    return str(objective) in MINIMIZED_OBJECTIVES


# ---------------------------------------------------------------- predictor backtest

# Series of the bucket table and of the backtest's prediction rows.
BACKTEST_SERIES = ("request_count", "avg_isl", "avg_osl")
BACKTEST_PREDICTION_COLUMNS = (
    "bucket",
    "predictor",
    "series",
    "forecast",
    "actual",
    "fit_time_s",
    "failed",
)
BACKTEST_SUMMARY_COLUMNS = (
    "rank",
    "predictor",
    "name",
    "params",
    "loss",
    "mape_request_count_pct",
    "rmse_request_count",
    "under_forecast_share",
    "fit_time_mean_s",
    "fit_time_max_s",
    "failed_forecasts",
    "wall_time_s",
)
# A request-count forecast below this share of the actual count is an under-forecast.
UNDER_FORECAST_RATIO = 0.8
# A request-count MAPE above this (percent) is warned about: forecasts that miss by more than
# half of each bucket's traffic forecast noise (the buckets are too short).
HIGH_MAPE_PCT = 50.0
# The retune pre-sweep loss weights (planner_core.predictors.loss applies them).
PRESWEEP_WEIGHTS = {
    "input_tokens": 0.4,
    "output_tokens": 0.4,
    "avg_isl": 0.1,
    "avg_osl": 0.1,
}
PRESWEEP_LOSS_SENTENCE = (
    "Pre-sweep loss: the error retune uses to pick a predictor, "
    f"{PRESWEEP_WEIGHTS['input_tokens']:g} x input-token + "
    f"{PRESWEEP_WEIGHTS['output_tokens']:g} x output-token + "
    f"{PRESWEEP_WEIGHTS['avg_isl']:g} x average-ISL + {PRESWEEP_WEIGHTS['avg_osl']:g} x "
    "average-OSL error, each |log1p(forecast) - log1p(actual)|, averaged over the scored "
    "buckets; lower is better, and 0.1 is about a 10% miss."
)

# ---------------------------------------------------------------- replay summary keys


RATIO = "ratio"  # the unit of a share in 0..1, shown as a percentage
DURATION_MS = "duration_ms"  # milliseconds shown as a duration (s, min or h)
DURATION_S = "duration_s"  # seconds shown as a duration


@dataclass(frozen=True, slots=True)
class SummaryKey:
    """A replay summary key: its ``group`` (one of ``SUMMARY_GROUPS``), a human ``label`` and
    its ``unit`` ("" for a count, ``RATIO`` for a share in 0..1)."""

    key: str
    group: str
    label: str
    unit: str


# Group name -> title, in the order a report shows them.
SUMMARY_GROUPS = {
    "counts": "Requests and tokens",
    "throughput": "Throughput",
    "cost": "Cost",
    "cache": "Prefix cache",
    "sessions": "Sessions and release (closed loop, concurrency cap)",
    "host": "Host (wall clock)",
}

SUMMARY_KEYS: tuple[SummaryKey, ...] = (
    SummaryKey("num_requests", "counts", "Requests in the trace", ""),
    SummaryKey("completed_requests", "counts", "Completed requests", ""),
    SummaryKey("goodput_completed_requests", "counts", "Requests within the SLA", ""),
    SummaryKey("total_input_tokens", "counts", "Input tokens (completed)", "tokens"),
    SummaryKey("total_output_tokens", "counts", "Output tokens (completed)", "tokens"),
    SummaryKey("duration_ms", "counts", "Duration (first arrival to last token)", DURATION_MS),
    SummaryKey("processed_tokens", "counts", "Tokens processed (input + output)", "tokens"),
    SummaryKey("request_throughput_rps", "throughput", "Completed requests per second", "req/s"),
    SummaryKey("goodput_request_throughput_rps", "throughput", "Goodput requests", "req/s"),
    SummaryKey("input_throughput_tok_s", "throughput", "Input tokens per second", "tok/s"),
    SummaryKey("output_throughput_tok_s", "throughput", "Output tokens per second", "tok/s"),
    SummaryKey("goodput_output_throughput_tok_s", "throughput", "Goodput output tokens", "tok/s"),
    SummaryKey("total_throughput_tok_s", "throughput", "Input + output tokens per second", "tok/s"),
    SummaryKey("gpu_hours", "cost", "GPU-hours", "GPU-h"),
    SummaryKey("prefill_worker_seconds", "cost", "Prefill worker time", DURATION_S),
    SummaryKey("decode_worker_seconds", "cost", "Decode (or aggregated) worker time", DURATION_S),
    SummaryKey("prefill_gpus_per_worker", "cost", "GPUs per prefill worker", "GPUs"),
    SummaryKey("decode_gpus_per_worker", "cost", "GPUs per decode (or aggregated) worker", "GPUs"),
    SummaryKey(
        "prefix_cache_reused_ratio", "cache", "Input tokens found in the prefix cache", RATIO
    ),
    SummaryKey("num_sessions", "sessions", "Sessions", ""),
    SummaryKey("completed_sessions", "sessions", "Sessions with every turn completed", ""),
    SummaryKey(
        "unreleased_requests",
        "sessions",
        "Requests never released (they wait on a rejected request)",
        "",
    ),
    SummaryKey("wall_time_ms", "host", "Replay wall time", DURATION_MS),
    SummaryKey("processed_tokens_per_s", "host", "Tokens processed per wall second", "tok/s"),
    SummaryKey("processed_output_tokens_per_s", "host", "Output tokens per wall second", "tok/s"),
)
SUMMARY_KEY_BY_NAME = {k.key: k for k in SUMMARY_KEYS}

# Distribution keys are ``<stat>_<metric>`` (sim.summary writes them; ``max_itl_ms`` too).
SUMMARY_STATS = ("mean", "min", "median", "p75", "p90", "p95", "p99", "max", "std")
SUMMARY_DISTRIBUTIONS = {
    "ttft_ms": ("TTFT (time to first token)", "ms"),
    "ttst_ms": ("TTST (time to second token)", "ms"),
    "tpot_ms": ("TPOT (mean token gap per request)", "ms"),
    "itl_ms": ("ITL (every token gap)", "ms"),
    "e2e_latency_ms": ("End-to-end latency", "ms"),
    "output_token_throughput_per_user": ("Output tokens per second per request", "tok/s"),
    "session_total_ms": ("Session total time (first release to last token)", "ms"),
    "release_wait_ms": ("Wait at the concurrency cap (release to arrival)", "ms"),
}


# The goodput SLA's keys: bounds on each request's TTFT, TPOT (its mean token gap; the reference
# spells it ``itl_ms``) and end-to-end latency, in ms.
GOODPUT_SLA_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
# The planner's own latency targets (Dynamo's key names): TTFT and ITL, in ms.
PLANNER_TARGET_KEYS = ("ttft_ms", "itl_ms")


def sla_text(sla: dict[str, float] | None) -> str:
    """Latency bounds in words: ``"TTFT ≤ 500 ms and TPOT ≤ 20 ms"``; "" when none is set.
    ``sla`` maps ``ttft_ms``/``tpot_ms``/``e2e_ms`` (the goodput SLA) or ``itl_ms`` (a planner
    target) to bounds (missing or None: not checked)."""
    names = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E"))
    parts = [f"{label} ≤ {sla[key]:g} ms" for key, label in names if (sla or {}).get(key)]
    return " and ".join(parts)


def all_rejected_text(
    requests: int, reason: str, smallest_prompt_tokens: int, deployment: dict
) -> str:
    """Why a replay in which every one of its ``requests`` was rejected did nothing, in words:
    the engines' most frequent ``reason``, and the smallest prompt's KV blocks against those of
    one rank of the pool prompts go to (``deployment``: the validated deployment as JSON, as
    ``inputs.json`` records it)."""
    disagg = deployment.get("mode") == "disagg"
    engine = (deployment.get("prefill_engine") if disagg else None) or deployment.get("engine")
    engine = engine if isinstance(engine, dict) else {}
    block, blocks = engine.get("block_size"), engine.get("num_gpu_blocks")
    need = ""
    if isinstance(block, int) and isinstance(blocks, int) and block > 0:
        needed = -(-smallest_prompt_tokens // block)
        need = (
            f": the smallest prompt, {smallest_prompt_tokens:,} tokens, needs {needed:,} KV "
            f"blocks of {block} token{'' if block == 1 else 's'}, and a "
            f"{'prefill' if disagg else 'worker'} rank has {blocks:,} (num_gpu_blocks)"
        )
    return f"all {requests:,} requests were rejected ({reason}){need}"
