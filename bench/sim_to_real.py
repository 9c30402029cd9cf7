"""plansim against real GPUs: replay published vLLM runs and print the error of every stage.

    python bench/sim_to_real.py ../shared/reference/real_runs.json [--timing roofline|aic]
        [--reading resolved|profile|both] [--questions repeat|fresh] [--no-calibrate]
        [--no-async-scheduling]

For each run (``plansim.sim.real_runs``) and prefix-group reading, the workload the run's client
sent (``plansim.traces.shared_prefix``: its stages back to back) is replayed on one worker of
the run's model, TP and engine limits (block size 16, prefix caching, chunked prefill, the
run's ``max_num_seqs`` / ``max_num_batched_tokens`` / ``max_model_len``), with KV capacity from
the GPU memory left at ``--gpu-memory-utilization`` and a host tier of ``--cpu-offload-gib``.
Each stage prints measured vs simulated TTFT (mean, median, p90), TPOT (mean, p90; measured
TPOT undoes the recorder's double count, ``real_runs.measured_gap_ms``), E2E (mean, p90),
requests/s and each absolute percentage error.

Calibration (on unless ``--no-calibrate``), a summary-level fit on stage 0 of a run, then the
later stages predicted with it:

1. ``decode_speedup_ratio`` (divides decode time) so the simulated mean TPOT matches the
   measured one (multiplicative fixed-point steps, each a replay of stage 0);
2. ``first_token_steps``: the measured median TTFT less the simulated one, in simulated
   decode steps (mean TPOT): what lies outside plansim's engine (the API server's
   tokenisation, detokenisation and streaming). The median, since a stage's mean TTFT carries
   its few outliers (slow first requests: a mean above the p90), which an offset would add to
   every request of the next stage. Each later stage's TTFT and E2E get ``first_token_steps``
   of its own simulated step.

The engine runs with vLLM's async scheduling (``async_scheduling``: on by default in the
vLLM v0.15 of these runs; ``--no-async-scheduling`` turns it off): a request arriving while a
step runs waits for the step scheduled meanwhile.

Stages whose measurement lost requests (timeouts) are left out of the error medians and
printed apart as a saturation check: the measured lost share next to the simulated share of
requests over ``--timeout-s``. The last lines:

    sim-to-real: N stages, median |error| TTFT a%, TPOT b%, E2E c%
    sim-to-real calibrated on stage 0: N later stages, median |error| TTFT a%, TPOT b%, E2E c%

(the resolved reading's; the profile reading's lines, tagged, come before them).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plansim import api
from plansim.errors import InputError
from plansim.sim.deployment import build_deployment
from plansim.sim.real_runs import (
    READINGS,
    RealRun,
    StageStats,
    load_runs,
    measured_stats,
    simulated_stats,
)
from plansim.sim.timing.roofline import (
    GIB,
    GPUS,
    ModelShape,
    kv_capacity_tokens,
    load_model_config,
)
from plansim.traces.shared_prefix import shared_prefix_workload, stage_starts_s

HERE = Path(__file__).resolve().parent
MODEL_CONFIGS = HERE.parent / "tests" / "data" / "model_configs"
# Published GPU names -> the roofline's GPU table (and AIConfigurator's system names).
GPU_NAMES = (("H100", "h100_sxm"), ("H200", "h200_sxm"), ("A100", "a100_sxm"), ("L40S", "l40s"))
FIT_STEPS = 6
SIXTEEN_BIT = ("fp16", "bf16", "float16", "bfloat16")
METRICS = (
    ("ttft_mean", "TTFT mean"),
    ("ttft_median", "TTFT median"),
    ("ttft_p90", "TTFT p90"),
    ("tpot_mean", "TPOT mean"),
    ("tpot_p90", "TPOT p90"),
    ("e2e_mean", "E2E mean"),
    ("e2e_p90", "E2E p90"),
    ("requests_per_s", "requests/s"),
)


@dataclass(frozen=True, slots=True)
class Options:
    timing: str
    model_configs: Path
    questions: str
    block_size: int
    gpu_memory_utilization: float
    cpu_offload_gib: float
    timeout_s: float
    timestamps_per_token: float
    seed: int
    async_scheduling: bool = True
    spacing: str = "exponential"


def gpu_name(run: RealRun) -> str:
    for marker, name in GPU_NAMES:
        if marker in run.gpu:
            return name
    raise InputError(f"no GPU figures for {run.gpu!r}", field=f"{run.id}.gpu")


def model_config_path(run: RealRun, opts: Options) -> Path:
    path = opts.model_configs / run.model.replace("/", "--", 1) / "config.json"
    if not path.is_file():
        raise InputError(
            f"no config.json for {run.model} under {opts.model_configs}", field=f"{run.id}.model"
        )
    return path


def timing_model(run: RealRun, opts: Options) -> dict[str, Any]:
    config = model_config_path(run, opts)
    if opts.timing == "roofline":
        return {"type": "roofline", "path": str(config), "gpu": gpu_name(run), "tp_size": run.tp}
    return {
        "type": "aic",
        "model": str(config.parent),
        "system": gpu_name(run),
        "backend": "vllm",
        "tp_size": run.tp,
    }


def deployment_raw(run: RealRun, opts: Options, *, decode_speedup: float = 1.0) -> dict[str, Any]:
    """The one-worker deployment of ``run`` (see the module docstring)."""
    if run.dtype not in SIXTEEN_BIT:
        raise InputError(
            f"only 16-bit runs are modelled, got {run.dtype!r}", field=f"{run.id}.dtype"
        )
    config = model_config_path(run, opts)
    try:
        shape = ModelShape.from_hf_config(load_model_config(config))
    except (OSError, ValueError) as exc:  # a JSON syntax error is a ValueError too
        message = " ".join(str(exc).split())
        raise InputError(
            message if str(config) in message else f"{config}: {message}", field=f"{run.id}.model"
        ) from None
    kv_bytes = shape.kv_bytes_per_token()
    engine: dict[str, Any] = {
        "backend": "vllm",
        "block_size": opts.block_size,
        "max_num_seqs": run.server.max_num_seqs,
        "max_num_batched_tokens": run.server.max_num_batched_tokens,
        "max_model_len": run.server.max_model_len,
        "enable_prefix_caching": True,
        "enable_chunked_prefill": True,
        "decode_speedup_ratio": decode_speedup,
        "async_scheduling": opts.async_scheduling,
        "timing_model": timing_model(run, opts),
    }
    if opts.timing == "roofline":
        kv_tokens = kv_capacity_tokens(
            shape, GPUS[gpu_name(run)], tp=run.tp, memory_utilization=opts.gpu_memory_utilization
        )
        engine["num_gpu_blocks"] = kv_tokens // opts.block_size
    else:  # the aic model sizes the KV cache with its memory model at this fraction
        engine["gpu_memory_utilization"] = opts.gpu_memory_utilization
    if opts.cpu_offload_gib > 0:
        engine["kv_cache_bytes_per_token"] = kv_bytes
        engine["native_host_offload"] = {
            "num_host_blocks": max(
                1, int(opts.cpu_offload_gib * GIB // (kv_bytes * opts.block_size))
            )
        }
    return {
        "mode": "agg",
        "num_workers": 1,
        "router": {"mode": "round_robin"},
        "engine": engine,
        "seed": opts.seed,
    }


def replay_stages(
    run: RealRun,
    opts: Options,
    reading: str,
    stages: int | None = None,
    *,
    decode_speedup: float = 1.0,
) -> list[StageStats]:
    """Simulated statistics of the run's first ``stages`` stages (all when None), replayed
    back to back."""
    rate_stages = run.rate_stages()[:stages]
    # A stage starts once the one before has drained (the client waits for it): a gap of the
    # client's timeout is long enough unless the stage is over it anyway.
    workload = shared_prefix_workload(
        run.workload_spec(reading, opts.questions),
        rate_stages,
        block_size=opts.block_size,
        seed=opts.seed,
        spacing=opts.spacing,
        gap_s=opts.timeout_s,
    )
    deployment = build_deployment(
        deployment_raw(run, opts, decode_speedup=decode_speedup), source=run.id
    )
    result = api.replay(workload, api.setup(deployment, source=run.id))
    starts = stage_starts_s(rate_stages, opts.timeout_s)
    return [
        simulated_stats(result.requests, starts[i], starts[i + 1], timeout_s=opts.timeout_s)
        for i in range(len(rate_stages))
    ]


def calibrate(run: RealRun, opts: Options, reading: str) -> tuple[float, float]:
    """``(decode_speedup_ratio, first_token_steps)`` fitted on stage 0 (module docstring)."""
    target = measured_stats(run, 0, opts.timestamps_per_token)
    decode_speedup = 1.0
    for _ in range(FIT_STEPS):
        sim = replay_stages(run, opts, reading, 1, decode_speedup=decode_speedup)[0]
        decode_speedup *= sim.tpot_mean / target.tpot_mean
    sim = replay_stages(run, opts, reading, 1, decode_speedup=decode_speedup)[0]
    return decode_speedup, (target.ttft_median - sim.ttft_median) / sim.tpot_mean


def _fmt(value: float) -> str:
    return (
        "n/a"
        if not np.isfinite(value)
        else (f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}")
    )


def print_stage(label: str, measured: StageStats, simulated: StageStats) -> dict[str, float]:
    errors = simulated.errors(measured)
    print(f"  {label}")
    print(f"    {'':12} {'measured':>10} {'simulated':>10} {'|error|':>8}")
    for key, name in METRICS:
        print(
            f"    {name:12} {_fmt(getattr(measured, key)):>10} "
            f"{_fmt(getattr(simulated, key)):>10} {errors[key]:7.1f}%"
        )
    return errors


def saturated(stats: StageStats, rate_rps: float) -> bool:
    """Requests lost, or fewer than 95 % of the offered rate served."""
    return stats.lost > 0 or stats.requests_per_s < 0.95 * rate_rps


def saturation_line(
    run: RealRun, stage: int, reading: str, measured: StageStats, sim: StageStats, opts: Options
) -> str:
    rate = run.stages[stage].rate
    verdict = "plansim saturates too" if saturated(sim, rate) else "plansim does not saturate"
    return (
        f"  {run.id} stage {stage} ({rate:g} rps) [{reading}]: measured lost "
        f"{measured.lost:.1%} ({measured.requests_per_s:.2f} requests/s), simulated over "
        f"{opts.timeout_s:g} s {sim.lost:.1%} ({sim.requests_per_s:.2f} requests/s): "
        f"{verdict}"
    )


def median_line(prefix: str, what: str, rows: list[dict[str, float]]) -> str:
    if not rows:
        return f"{prefix}: 0 {what}"
    med = {
        k: float(np.median([r[k] for r in rows])) for k in ("ttft_mean", "tpot_mean", "e2e_mean")
    }
    return (
        f"{prefix}: {len(rows)} {what}, median |error| TTFT {med['ttft_mean']:.1f}%, "
        f"TPOT {med['tpot_mean']:.1f}%, E2E {med['e2e_mean']:.1f}%"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", help="a runs file (shared/reference/real_runs.json)")
    parser.add_argument("--timing", choices=("roofline", "aic"), default="roofline")
    parser.add_argument(
        "--reading",
        choices=(*READINGS, "both"),
        default="both",
        help="prefix-group reading: the client's resolved config or the profile",
    )
    parser.add_argument(
        "--questions",
        choices=("repeat", "fresh"),
        default="repeat",
        help="whether a user's whole prompt repeats (the generator's rule)",
    )
    parser.add_argument("--no-calibrate", action="store_true")
    parser.add_argument("--model-configs", type=Path, default=MODEL_CONFIGS)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--cpu-offload-gib", type=float, default=8.0)
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=300.0,
        help="client timeout: longer simulated requests count as lost",
    )
    parser.add_argument(
        "--recorded-timestamps-per-token",
        type=float,
        default=2.0,
        help="how many times the recorder stamped each token (module docstring)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--spacing",
        choices=("exponential", "even"),
        default="exponential",
        help="arrival gaps of a constant stage: inference-perf's exponential "
        "draws scaled to the stage, or 1 / rate apart",
    )
    parser.add_argument(
        "--no-async-scheduling",
        action="store_true",
        help="schedule each pass after the previous one ends (vLLM before its "
        "async scheduling became the default)",
    )
    parser.add_argument("--only", nargs="*", default=None, help="run ids (or parts of them)")
    args = parser.parse_args(argv)
    opts = Options(
        args.timing,
        args.model_configs,
        args.questions,
        args.block_size,
        args.gpu_memory_utilization,
        args.cpu_offload_gib,
        args.timeout_s,
        args.recorded_timestamps_per_token,
        args.seed,
        async_scheduling=not args.no_async_scheduling,
        spacing=args.spacing,
    )
    readings = READINGS if args.reading == "both" else (args.reading,)
    try:
        runs = [
            r
            for r in load_runs(args.runs)
            if not args.only or any(part in r.id for part in args.only)
        ]
        return run_all(runs, readings, opts, calibrated=not args.no_calibrate)
    except InputError as exc:
        print(f"sim_to_real: {exc}", file=sys.stderr)
        return 2


def run_all(
    runs: list[RealRun], readings: tuple[str, ...], opts: Options, *, calibrated: bool
) -> int:
    uncal: dict[str, list[dict[str, float]]] = {r: [] for r in readings}
    cal: dict[str, list[dict[str, float]]] = {r: [] for r in readings}
    saturation: list[str] = []
    for run in runs:
        for reading in readings:
            spec = run.workload_spec(reading, opts.questions)
            t0 = time.perf_counter()
            sims = replay_stages(run, opts, reading)
            print(
                f"{run.id} [{reading}: {spec.num_groups} groups x {spec.prompts_per_group} "
                f"prompts, {spec.prompt_tokens} prompt + {spec.output_tokens} output tokens, "
                f"timing {opts.timing}, {time.perf_counter() - t0:.1f} s]"
            )
            for i, sim in enumerate(sims):
                measured = measured_stats(run, i, opts.timestamps_per_token)
                label = f"stage {i}: {run.stages[i].rate:g} rps, uncalibrated"
                if run.overloaded(i):
                    saturation.append(saturation_line(run, i, reading, measured, sim, opts))
                    continue
                uncal[reading].append(print_stage(label, measured, sim))
            if calibrated and len(run.stages) > 1 and not run.overloaded(0):
                decode_speedup, steps = calibrate(run, opts, reading)
                fitted = replay_stages(run, opts, reading, decode_speedup=decode_speedup)
                fitted = [f.delayed(steps * f.tpot_mean) for f in fitted]
                print(
                    f"  calibrated on stage 0: decode_speedup_ratio {decode_speedup:.3f}, "
                    f"first_token_steps {steps:.2f}"
                )
                for i in range(1, len(fitted)):
                    if run.overloaded(i):
                        continue
                    cal[reading].append(
                        print_stage(
                            f"stage {i}: {run.stages[i].rate:g} rps, calibrated",
                            measured_stats(run, i, opts.timestamps_per_token),
                            fitted[i],
                        )
                    )
    if saturation:
        print("saturation check (overloaded stages, left out of the medians):")
        print("\n".join(saturation))
    # The primary reading (the config the client resolved, when replayed) prints last, untagged.
    for reading in sorted(readings, key=lambda r: r == "resolved"):
        tag = "" if reading == "resolved" or len(readings) == 1 else f" [{reading} reading]"
        print(median_line(f"sim-to-real{tag}", "stages", uncal[reading]))
        if calibrated:
            print(
                median_line(f"sim-to-real calibrated on stage 0{tag}", "later stages", cal[reading])
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
