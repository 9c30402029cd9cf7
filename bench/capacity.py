"""Capacity search speed and answers: replays per answer and wall time of ``plansim.capacity``
on the shared traces, aggregated and disaggregated.

Cases (the shared traces, ``../shared/traces`` beside the clone or else the suite's copies in
``tests/data/traces``):

| case | trace | deployment |
|---|---|---|
| ``mooncake-agg`` / ``mooncake-disagg`` | Mooncake FAST'25 synthetic (17 min, 3.9 req/s, ISL ~15k) | aggregated workers / prefill + decode pools |
| ``azure-agg`` / ``azure-disagg`` | Azure LLM inference 2023, code (57 min, 2.6 req/s, ISL ~2k, OSL ~28) | the same |

Every case: the default polynomial timing model, KV router, ``startup_time`` 60 s, goodput SLA
TTFT 800 ms / TPOT 15 ms (the planner benchmark's), target 95%, GPU budget 32, segments of
10 minutes, both planner scaling policies (``dynamo``, ``sla_goodput``) starting from 2 workers
per pool (``--planner-start static``: from the cheapest static deployment), on a spawn pool of
``--jobs`` workers.

Printed per case: replays by kind and rounds, wall time, the static replays against the
``2 log2(max count)`` per pool the issue allows, the cheapest static deployment, the best
infeasible point, the hindsight lower bound (and its schedule replayed) and each policy with
its saving against static, its share of the hindsight saving and its gap to the bound.

Targets (issue 30): with ``--tune-planner``, the tuned Dynamo planner (``dynamo-tuned``) holds
>= 95% goodput; ``sla_goodput`` holds >= 95% at no more GPU-hours than the cheapest static
deployment, and takes at least half of the hindsight saving where the bound is 10% or more
below static (moonshot: within 5% of the bound). Each line says MET or MISSED.

    python bench/capacity.py [--case mooncake-agg,azure-disagg,...] [--jobs 2] [--tune-planner] [--json OUT]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import orjson

from plansim.capacity import prepare, run
from plansim.sim.deployment import build_deployment
from plansim.traces import load_workload
from plansim.workers.pool import SpawnPool

ROOT = Path(__file__).resolve().parents[1]
TRACES = next(
    (d for d in (ROOT.parent / "shared/traces", ROOT / "tests/data/traces") if d.is_dir()),
    ROOT.parent / "shared/traces",
)
TRACE_FILES = {
    "mooncake": "mooncake_synthetic_trace.jsonl",
    "azure": "AzureLLMInferenceTrace_code.csv",
}
SLA = {"ttft_ms": 800.0, "tpot_ms": 15.0}
CASES = ("mooncake-agg", "mooncake-disagg", "azure-agg", "azure-disagg")
BOUND_SAVING = 0.10


def trace_path(name: str) -> Path:
    plain = TRACES / name
    return plain if plain.exists() else TRACES / f"{name}.gz"


def deployment(mode: str):
    engine = {"startup_time": 60.0}
    pools = (
        {"num_workers": 2} if mode == "agg" else {"num_prefill_workers": 2, "num_decode_workers": 2}
    )
    return build_deployment(
        {
            "mode": mode,
            **pools,
            "engine": engine,
            "router": {"mode": "kv_router"},
            "sla": SLA,
            "seed": 0,
        }
    )


def bench_case(name: str, args: argparse.Namespace) -> dict:
    trace, mode = name.split("-")
    workload = load_workload(trace_path(TRACE_FILES[trace]), trace_block_size=512)
    plan = prepare(
        deployment(mode),
        args.target,
        max_gpu_budget=args.max_gpu_budget,
        segment_s=args.segment_s,
        seeds=args.seeds,
        tune_planner=args.tune_planner,
        planner_start=args.planner_start,
    )
    start = time.perf_counter()
    with SpawnPool(args.jobs) as pool:
        result = run(plan, workload, executor=pool)
    wall_s = time.perf_counter() - start
    report = result.to_json()
    (variant,) = plan.variants
    limits = variant.layout.max_counts(args.max_gpu_budget)
    allowed = [2 * math.log2(max(n, 2)) for n in limits]
    static = report["replays"].get("static", 0)
    print(
        f"\n== {name}: {len(workload)} requests, {report['requests']} scored, "
        f"{len(report['oracle']['segments']) if report['oracle'] else 0} segments =="
    )
    kinds = ", ".join(
        f"{k} {n}" for k, n in report["replays"].items() if k not in ("total", "rounds")
    )
    print(
        f"replays       {report['replays']['total']} ({kinds}) in "
        f"{report['replays']['rounds']} rounds, {wall_s:.1f} s wall on {args.jobs} workers"
    )
    print(
        f"static        {static} replays (allowed about "
        f"{' + '.join(f'{a:.1f}' for a in allowed)} = {sum(allowed):.1f} for max counts "
        f"{'/'.join(map(str, limits))}): {report['static'][0]['replayed']}"
    )
    best = report["cheapest_static"]
    if best is not None:
        print(
            f"cheapest      {_counts(best)}: goodput {best['goodput_ratio']:.2%}, "
            f"{best['gpu_hours']:.3f} GPU-h"
        )
    else:
        print(f"cheapest      none within {args.max_gpu_budget} GPUs")
    bad = report["best_infeasible"]
    if bad is not None:
        print(
            f"infeasible    best {_counts(bad)}: goodput {bad['goodput_ratio']:.2%}, "
            f"{bad['gpu_hours']:.3f} GPU-h"
        )
    oracle = report["oracle"]
    if oracle and oracle["cost"] is not None:
        schedule = " ".join(_counts(s) for s in oracle["segments"])
        saving = f", {1 - oracle['cost'] / best['gpu_hours']:.1%} below static" if best else ""
        print(
            f"lower bound   {oracle['cost']:.3f} GPU-h{saving} (exact {oracle['exact']}, "
            f"{oracle['rounds']} rounds; schedule {schedule})"
        )
        replayed = oracle.get("schedule_replay")
        if replayed:
            print(
                f"  replayed    {replayed['gpu_hours']:.3f} GPU-h at "
                f"{replayed['goodput_ratio']:.2%} goodput"
            )
    bound_saving = (
        oracle
        and oracle["cost"] is not None
        and best is not None
        and oracle["cost"] <= (1 - BOUND_SAVING) * best["gpu_hours"]
    )
    for p in report["policies"]:
        gap = p["gap_to_oracle_pct"]
        saving, share = p["saving_vs_static_pct"], p["share_of_hindsight_saving"]
        money = (
            "misses the target, no saving"
            if not p["meets_target"]
            else f"saving {'-' if saving is None else f'{saving:+.1f}%'} vs static, "
            f"{'-' if share is None else f'{share:.0%}'} of the hindsight saving"
        )
        verdict = ""
        if p["name"] == "dynamo-tuned":
            verdict = " -> target " + ("MET" if p["meets_target"] else "MISSED")
        elif p["name"] == "sla_goodput":
            met = p["meets_target"] and best is not None and p["gpu_hours"] <= best["gpu_hours"]
            if bound_saving:
                met = met and (share or 0.0) >= 0.5
            verdict = " -> target " + ("MET" if met else "MISSED")
        print(
            f"policy        {p['name']:<12} goodput {p['goodput_ratio']:.2%}, "
            f"{p['gpu_hours']:.3f} GPU-h, {p['scaling_events']} events, {money}, gap to bound "
            f"{'-' if gap is None else f'{gap:+.1f}%'}{verdict}"
        )
    tuning = report.get("planner_tuning")
    if tuning is not None:
        print(f"tuning        {len(tuning['trials'])} settings replayed, answer {tuning['answer']}")
    for note in report["notes"]:
        print(f"note          {note}")
    return {"wall_s": wall_s, "jobs": args.jobs, "load_average": os.getloadavg(), "report": report}


def _counts(point: dict) -> str:
    if "num_workers" in point:
        return f"{point['num_workers']} workers"
    return f"{point['num_prefill_workers']}P+{point['num_decode_workers']}D"


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--case", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}"
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--max-gpu-budget", type=int, default=32)
    ap.add_argument("--segment-s", type=float, default=600.0)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument(
        "--planner-start",
        choices=("deployment", "static"),
        default="deployment",
        help="where the planners start: the bench's 2 workers per pool, or the cheapest "
        "static deployment (plansim capacity --planner-start)",
    )
    ap.add_argument(
        "--tune-planner",
        action="store_true",
        help="also tune the dynamo policy's knobs (dynamo-tuned)",
    )
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    names = [c for c in args.case.split(",") if c]
    unknown = [c for c in names if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}")
    print(f"load average {os.getloadavg()[0]:.1f} at start")
    out = {name: bench_case(name, args) for name in names}
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
