"""Planner quality: SLA attainment and GPU-hours of the planner vs static deployments.

Workloads:

- ``diurnal``: a seeded synthetic day compressed to 2 hours (``plansim.traces.synth``: Poisson
  arrivals, sinusoidal rate with peak / trough = 4, ISL lognormal mean 3000, OSL lognormal mean
  300) on aggregated workers with the default (polynomial) timing model;
- ``azure``: the Azure LLM inference code trace (57 min, bursty, ISL ~2000, OSL ~28) on the
  reference case S4's workers (NPZ timing profile sample_h200.npz).

Each is replayed with every static replica count from 1 up to the first count reaching 99%
goodput (or ``--max-static``), and with the planner of ``--planner-config`` (default
``examples/planner.yaml``: target ``sla``, throughput + load scaling) starting from
``--planner-start`` workers. Workers take ``--startup-s`` (60 s) to start in every run. Goodput
fraction = requests meeting both TTFT and ITL SLA / all requests; GPU-hours count every worker
from provisioning to removal, start-up included.

Target: the planner reaches >= 95% goodput with >= 25% fewer GPU-hours than the cheapest static
deployment reaching 95%.

    python bench/planner_quality.py [--workload diurnal|azure|both] [--quick] [--json OUT]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import orjson
import yaml

from plansim.planner_core import PlannerEngine, with_changes
from plansim.planner_io import read_planner_config
from plansim.sim import worker_capabilities
from plansim.sim.deployment import Deployment
from plansim.sim.host import replay
from plansim.traces import load_workload
from plansim.traces.synth import LengthSpec, SynthSpec, synthesize

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SLA = {"ttft_ms": 500.0, "itl_ms": 30.0}
TARGET_GOODPUT = 0.95
TARGET_SAVING = 0.25


def diurnal_workload(hours: float, mean_rps: float, seed: int):
    spec = SynthSpec(
        duration_s=hours * 3600,
        rate_rps=mean_rps,
        schedule="diurnal",
        peak_to_trough=4.0,
        isl=LengthSpec.lognormal(3000, 1500),
        osl=LengthSpec.lognormal(300, 150),
    )
    return synthesize(spec, seed)


def deployment(kind: str, workers: int, args) -> Deployment:
    engine: dict = {"startup_time": args.startup_s}
    speedup = 1.0
    if kind == "azure":
        engine["timing_model"] = {"type": "npz", "path": str(SHARED / "reference/profiles/sample_h200.npz")}
        speedup = args.azure_speedup
    return Deployment.model_validate({
        "mode": "agg", "num_workers": workers, "engine": engine, "router": {"mode": "round_robin"},
        "sla": SLA, "seed": 0, "arrival_speedup_ratio": speedup,
    })


def run(workload, dep: Deployment, planner=None) -> dict:
    start = time.perf_counter()
    result = replay(workload, dep, planner=planner)
    s = result.summary
    return {
        "goodput": s.get("goodput_completed_requests", 0) / s["num_requests"],
        "gpu_hours": s["gpu_hours"],
        "scaling_events": len(result.scaling_events),
        "p90_ttft_ms": s.get("p90_ttft_ms"),
        "p90_itl_ms": s.get("p90_itl_ms"),
        "wall_s": time.perf_counter() - start,
    }


def bench(kind: str, workload, args) -> dict:
    print(f"\n== {kind}: {len(workload)} requests ==", flush=True)
    print(f"{'run':<12}{'goodput':>9}{'GPU-h':>9}{'events':>8}{'p90 TTFT':>10}{'p90 ITL':>9}{'wall s':>8}")

    def show(name: str, r: dict) -> None:
        print(f"{name:<12}{r['goodput']:>9.3f}{r['gpu_hours']:>9.2f}{r['scaling_events']:>8}"
              f"{r['p90_ttft_ms']:>10.0f}{r['p90_itl_ms']:>9.1f}{r['wall_s']:>8.1f}", flush=True)

    statics = {}
    for n in range(args.min_static, 0 if args.skip_static else args.max_static + 1):
        statics[str(n)] = r = run(workload, deployment(kind, n, args))
        show(f"static {n}", r)
        if r["goodput"] >= 0.99:
            break
    config = read_planner_config(args.planner_config)
    if args.planner_set:
        config = with_changes(config, {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.planner_set)})
    dep = deployment(kind, args.planner_start, args)
    planner = PlannerEngine(config, worker_capabilities(dep))
    p = run(workload, dep, planner)
    show("planner", p)

    ok_static = [(r["gpu_hours"], int(n)) for n, r in statics.items() if r["goodput"] >= TARGET_GOODPUT]
    verdict: dict = {"statics": statics, "planner": p}
    if ok_static:
        cheapest_h, cheapest_n = min(ok_static)
        saving = 1 - p["gpu_hours"] / cheapest_h
        met = p["goodput"] >= TARGET_GOODPUT and saving >= TARGET_SAVING
        verdict.update(cheapest_static=cheapest_n, saving=saving, target_met=met)
        print(f"cheapest static >= 95%: {cheapest_n} workers, {cheapest_h:.2f} GPU-h; planner "
              f"{p['goodput']:.1%} goodput, {saving:+.1%} GPU-hours saved -> target "
              f"{'MET' if met else 'MISSED'}")
    else:
        verdict.update(target_met=False)
        print(f"no static count up to {args.max_static} reaches 95% goodput")
    return verdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=("diurnal", "azure", "both"), default="both")
    ap.add_argument("--planner-config", default=str(ROOT / "examples/planner.yaml"))
    ap.add_argument("--hours", type=float, default=2.0, help="diurnal workload length")
    ap.add_argument("--mean-rps", type=float, default=20.0, help="diurnal mean rate (peak = 1.6x)")
    ap.add_argument("--azure-speedup", type=float, default=1.0, help="arrival speed-up of the Azure trace")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--startup-s", type=float, default=60.0)
    ap.add_argument("--planner-start", type=int, default=2, help="workers when the planner starts")
    ap.add_argument("--min-static", type=int, default=1)
    ap.add_argument("--max-static", type=int, default=12)
    ap.add_argument("--planner-set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a planner config field (repeatable), e.g. itl_ms=20")
    ap.add_argument("--skip-static", action="store_true", help="planner run only")
    ap.add_argument("--quick", action="store_true", help="30-minute diurnal workload")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if args.quick:
        args.hours = 0.5
    out = {}
    if args.workload in ("diurnal", "both"):
        out["diurnal"] = bench("diurnal", diurnal_workload(args.hours, args.mean_rps, args.seed), args)
    if args.workload in ("azure", "both"):
        azure = load_workload(SHARED / "traces/AzureLLMInferenceTrace_code.csv", trace_block_size=512)
        out["azure"] = bench("azure", azure, args)
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return 0 if all(v.get("target_met") for v in out.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
