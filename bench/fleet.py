"""Fleet planning on the shared traces: three models, two GPU types, one inventory (issue 29).

The three one-hour traces are the shared traces (``../shared/traces`` beside the clone, else the
suite's copies in ``tests/data/traces``) laid end to end until an hour is full (each copy's
hash ids shifted, so copies share no prefixes), written as Mooncake JSONL:

| model | trace | engine | SLA (TTFT / ITL) |
|---|---|---|---|
| ``chat`` | the synthetic sessions, open loop (16k requests, ISL ~3.5k, OSL ~280) | Qwen3-32B | 2000 / 40 ms |
| ``code`` | Azure LLM inference 2023, code (8.9k requests, ISL ~2k, OSL ~28) | Qwen3-32B | 1000 / 50 ms |
| ``docs`` | Mooncake FAST'25 synthetic (14k requests, ISL ~15k, OSL ~155) | Qwen3-8B | 3000 / 40 ms |

Every model: vLLM timed by AIConfigurator (``aic``), KV router, start-up 120 s, a planner block
(Dynamo's ``dynamo`` policy, throughput loop every 60 s, Kalman predictor), target 95 %, the
search ``engine.timing_model.system = h200_sxm, h100_sxm`` x ``engine.timing_model.tp_size =
1, 2``, at most 32 GPUs a deployment. Inventory: H200 at 3.5 per GPU-hour, H100 at 2.2 with spot
capacity at 0.9 (0.05 preemptions per GPU-hour).

Two runs of ``plansim.fleet`` on a spawn pool of ``--jobs`` workers, progress printed after
every round of replays:

1. **loose**: 64 GPUs of each type. Target: the fleet's cost per hour equals the sum of the
   models' cheapest answers on their own, and every model runs its cheapest answer.
2. **binding**: as many H100s as the models' cheapest answers hold together, less
   ``--squeeze`` (default 1). Targets: the fleet fits; it costs at most the best
   per-model-independent assignment that fits (each model its own cheapest deployment on the
   GPU type it is given, over every way of giving types to models; and the greedy one: models
   in order, each its cheapest deployment that fits what is left); and every model's
   recommended deployment, replayed on its own (``plansim replay`` of the file, and for a spot
   pick also with the spot preemptions the fleet measured it with), meets its target.

Printed: per run the wall time against 15 minutes, the replays, the solver, each model's
choice and its cheapest answer alone, the GPUs used, the autoscaled fleet (refused scale-ups
and their SLA cost); the target checks with PASS/FAIL.

    python bench/fleet.py [--jobs 2] [--squeeze 1] [--run loose,binding] [--json OUT]
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
import yaml

from plansim import api, fleet
from plansim.capacity.export import deployment_file
from plansim.fleet.ledger import Ledger, pool_supplies
from plansim.fleet.plan import SPOT as SPOT_TIER
from plansim.sim.deployment import build_deployment, with_overrides
from plansim.sim.summary import good_mask
from plansim.traces import load_workload
from plansim.workers.pool import SpawnPool

ROOT = Path(__file__).resolve().parents[1]
TRACES = next(
    (d for d in (ROOT.parent / "shared/traces", ROOT / "tests/data/traces") if d.is_dir()),
    ROOT.parent / "shared/traces",
)
HOUR_S = 3600.0
LIMIT_S = 15 * 60.0
PRICES = {"h200_sxm": 3.5, "h100_sxm": 2.2}
SPOT = {"price_per_gpu_hour": 0.9, "preemptions_per_hour": 0.05}
MODELS = {
    "chat": ("sessions_synthetic.jsonl", "Qwen/Qwen3-32B", {"ttft_ms": 2000.0, "itl_ms": 40.0}),
    "code": (
        "AzureLLMInferenceTrace_code.csv",
        "Qwen/Qwen3-32B",
        {"ttft_ms": 1000.0, "itl_ms": 50.0},
    ),
    "docs": (
        "mooncake_synthetic_trace.jsonl",
        "Qwen/Qwen3-8B",
        {"ttft_ms": 3000.0, "itl_ms": 40.0},
    ),
}
SEARCH = {
    "engine.timing_model.system": ["h200_sxm", "h100_sxm"],
    "engine.timing_model.tp_size": [1, 2],
}
TARGET = 0.95


def trace_path(name: str) -> Path:
    plain = TRACES / name
    return plain if plain.exists() else TRACES / f"{name}.gz"


def one_hour(source: Path, out: Path) -> int:
    """``source`` laid end to end until an hour is full, as Mooncake JSONL; returns the rows."""
    w = load_workload([source], trace_block_size=512)
    if w.graph is not None:
        w = w.open_loop()
    arrival = w.arrival_ms - w.arrival_ms[0]
    period = float(arrival[-1]) + float(np.median(np.diff(arrival)))
    shift = int(w.hash_ids.max()) + 1
    rows = 0
    with out.open("w") as f:
        for copy in itertools.count():
            if copy * period >= HOUR_S * 1000:
                break
            for i in range(len(w)):
                at = copy * period + float(arrival[i])
                if at >= HOUR_S * 1000:
                    break
                hashes = w.hash_ids[w.hash_offsets[i] : w.hash_offsets[i + 1]] + copy * shift
                f.write(
                    orjson.dumps(
                        {
                            "timestamp": round(at, 3),
                            "input_length": int(w.isl_tokens[i]),
                            "output_length": int(w.osl_tokens[i]),
                            "hash_ids": hashes.tolist(),
                        }
                    ).decode()
                    + "\n"
                )
                rows += 1
    return rows


def write_inputs(folder: Path) -> None:
    for name, (source, model, sla) in MODELS.items():
        rows = one_hour(trace_path(source), folder / f"{name}.jsonl")
        print(f"trace         {name}: {rows} requests in one hour (from {source})")
        deployment = {
            "mode": "agg",
            "num_workers": 2,
            "engine": {
                "timing_model": {"type": "aic", "model": model, "system": "h100_sxm"},
                "startup_time": 120.0,
            },
            "router": {"mode": "kv_router"},
            "sla": sla,
            "planner": {
                "mode": "agg",
                "scaling_policy": "dynamo",
                "optimization_target": "sla",
                "enable_throughput_scaling": True,
                "enable_load_scaling": False,
                "throughput_adjustment_interval_seconds": 60,
                "ttft_ms": sla["ttft_ms"],
                "itl_ms": sla["itl_ms"],
                "load_predictor": "kalman",
                "max_gpu_budget": 32,
            },
        }
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(deployment, sort_keys=False))


def fleet_file(folder: Path, name: str, h100: int) -> Path:
    spec = {
        "inventory": {
            "h200_sxm": {"count": 64, "price_per_gpu_hour": PRICES["h200_sxm"]},
            "h100_sxm": {"count": h100, "price_per_gpu_hour": PRICES["h100_sxm"], "spot": SPOT},
        },
        "models": [
            {
                "name": m,
                "trace": f"{m}.jsonl",
                "deployment": f"{m}.yaml",
                "search": SEARCH,
                "target": TARGET,
                "max_gpu_budget": 32,
            }
            for m in MODELS
        ],
    }
    path = folder / f"fleet-{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished children (the pool's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_fleet(path: Path, jobs: int) -> tuple[fleet.FleetResult, list, float, float]:
    """The fleet of ``path`` on a spawn pool: the result, the workloads, wall and CPU seconds
    (the CPU seconds count the traces' loading too)."""
    cpu = _cpu_s()
    plan = fleet.prepare(fleet.load_fleet(path), source=str(path))
    workloads = [load_workload(list(m.traces), trace_block_size=512) for m in plan.models]
    start = time.perf_counter()

    def progress(stats) -> None:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(stats.replays.items()))
        print(
            f"  round {stats.rounds:>2}: {stats.total:>3} replays ({kinds}), "
            f"{time.perf_counter() - start:.0f} s, load {os.getloadavg()[0]:.1f}",
            flush=True,
        )

    with SpawnPool(jobs) as pool:
        result = fleet.run(plan, workloads, executor=pool, on_round=progress)
    return result, workloads, time.perf_counter() - start, _cpu_s() - cpu


def show(label: str, result: fleet.FleetResult, wall_s: float, cpu_s: float) -> None:
    report = result.to_json()
    solver = report["solver"]
    replays = report["replays"]
    kinds = ", ".join(f"{k} {n}" for k, n in replays.items() if k not in ("total", "rounds"))
    print(
        f"{label:<13} wall {wall_s:.0f} s ({'under' if wall_s < LIMIT_S else 'OVER'} "
        f"15 min, load {os.getloadavg()[0]:.1f}), CPU {cpu_s:.0f} s (/ 2 cores = "
        f"{cpu_s / 2:.0f} s), {replays['total']} replays ({kinds}) in {replays['rounds']} "
        "rounds"
    )
    print(
        f"{'':<13} fits {report['feasible']}, {report['cost_per_hour']:.3f} per hour, "
        f"{report['cost']:.3f} over the traces; {solver['name']}: status "
        f"{solver['status']}, proved optimal {solver['proved_optimal']}, "
        f"{solver['nodes']} nodes"
    )
    for m in report["models"]:
        c, alone = m["choice"], m["cheapest_alone"]
        print(
            f"{'':<13} {m['name']}: {c['variant']} x{c.get('num_workers')} on {c['tier']} "
            f"({c['gpus']}), goodput {c['goodput_ratio']:.2%}, {c['cost_per_hour']:.3f}/h; "
            f"alone {alone['variant']} x{alone.get('num_workers')} on {alone['tier']}, "
            f"{alone['cost_per_hour']:.3f}/h{'  MOVED' if c['moved'] else ''}"
        )
    for system, e in report["inventory"].items():
        print(f"{'':<13} {system}: {e['used']} of {e['count']} GPUs ({e['used_spot']} spot)")
    auto = report["autoscaled"]
    if auto is not None:
        print(
            f"{'':<13} autoscaled: {auto['gpu_hours']:.2f} GPU-h, {auto['cost']:.3f}, "
            f"{auto['refused_scale_ups']} refused scale-ups, "
            f"{auto['sla_cost_good_requests']} good requests lost to them"
        )
        for e in auto["models"]:
            print(
                f"{'':<15} {e['name']}: goodput {e['goodput_ratio']:.2%} (alone "
                f"{e['alone']['goodput_ratio']:.2%}), {e['gpu_hours']:.2f} GPU-h, "
                f"{e['scaling_events']} events, {e['refused_scale_ups']} refused, "
                f"{e['preemptions']} preempted, {e['migrated_requests']} migrated"
            )
    for note in report["notes"]:
        print(f"{'':<13} note: {note}")


def check(name: str, ok: bool, detail: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    return ok


def independent_best(result: fleet.FleetResult) -> tuple[float | None, float | None]:
    """The best per-model-independent assignment that fits (each model its cheapest candidate
    on the GPU type it is given, over every giving of types), and the greedy one (models in
    order, each its cheapest candidate that fits what is left); None when none fits."""
    counts = result.plan.inventory.counts
    models = result.chosen.models
    per_type = []
    for outcome in models:
        best = {}
        for c in outcome.candidates:
            if c.meets_target and len(c.usage) == 1:
                system = c.usage[0][0]
                if system not in best or (c.cost_per_hour, c.cost) < (
                    best[system].cost_per_hour,
                    best[system].cost,
                ):
                    best[system] = c
        per_type.append(best)
    best_rate = None
    for systems in itertools.product(*(sorted(b) for b in per_type)):
        picks = [per_type[k][s] for k, s in enumerate(systems)]
        if all(sum(p.uses(s) for p in picks) <= n for s, n in counts.items()):
            rate = sum(p.cost_per_hour for p in picks)
            best_rate = rate if best_rate is None else min(best_rate, rate)
    left = dict(counts)
    greedy = 0.0
    for outcome in models:
        fits = [c for c in outcome.front if all(c.uses(s) <= n for s, n in left.items())]
        if not fits:
            return best_rate, None
        pick = fits[0]
        greedy += pick.cost_per_hour
        for s, n in pick.usage:
            left[s] -= n
    return best_rate, greedy


def replayed_alone(result: fleet.FleetResult, workloads: list) -> list[tuple[str, float, bool]]:
    """Each model's recommended deployment file replayed on its own: (label, goodput, meets)."""
    out = []
    for m, pick, workload in zip(result.plan.models, result.picks, workloads):
        recommended = with_overrides(m.deployment, pick.deployment())
        deployment = build_deployment(deployment_file(recommended, None))
        runs = [("file", None)]
        if pick.tier == SPOT_TIER:
            variant = next(v for v in m.variants if v.label == pick.variant)
            pools = dict(pool_supplies(result.plan.inventory, m, variant, SPOT_TIER))
            ledger = Ledger(None, None, result.plan.seed)
            runs.append(("file on spot", ledger.member(m.index, pools)))
        for how, supply in runs:
            replay = api.replay(workload, api.setup(deployment), supply=supply)
            good = int(good_mask(replay.requests, deployment.sla).sum())
            ratio = good / len(workload)
            out.append((f"{m.name} ({how})", ratio, ratio >= m.target - 1e-12))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--squeeze",
        type=int,
        default=1,
        help="H100s below the cheapest answers' total in the binding run",
    )
    ap.add_argument("--run", default="loose,binding")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    runs = args.run.split(",")
    print(f"load average {os.getloadavg()[0]:.1f} at start, {args.jobs} workers")
    out: dict = {}
    ok = True
    with tempfile.TemporaryDirectory(prefix="plansim-bench-fleet-") as tmp:
        folder = Path(tmp)
        write_inputs(folder)
        loose, _, wall, cpu = run_fleet(fleet_file(folder, "loose", 64), args.jobs)
        show("loose", loose, wall, cpu)
        report = loose.to_json()
        out["loose"] = {"wall_s": wall, "cpu_s": cpu, "report": report}
        alone_sum = report["independent"]["cost_per_hour"]
        ok &= check(
            "loose: the fleet costs the sum of the cheapest answers",
            alone_sum is not None
            and abs(report["cost_per_hour"] - alone_sum) < 1e-9
            and not any(m["choice"]["moved"] for m in report["models"]),
            f"{report['cost_per_hour']:.3f} per hour, the sum {alone_sum}",
        )
        ok &= check("loose: under 15 minutes", wall < LIMIT_S, f"{wall:.0f} s")
        if "binding" in runs:
            h100 = sum(c.uses("h100_sxm") for c in (o.cheapest for o in loose.chosen.models))
            count = max(h100 - args.squeeze, 1)
            print(f"binding       H100 count {count} (the cheapest answers hold {h100})")
            tight, workloads, wall, cpu = run_fleet(fleet_file(folder, "binding", count), args.jobs)
            show("binding", tight, wall, cpu)
            report = tight.to_json()
            best, greedy = independent_best(tight)
            out["binding"] = {
                "wall_s": wall,
                "cpu_s": cpu,
                "h100": count,
                "independent_best": best,
                "greedy": greedy,
                "report": report,
            }
            ok &= check(
                "binding: the fleet fits",
                report["feasible"],
                f"{report['cost_per_hour']:.3f} per hour",
            )
            ok &= check(
                "binding: at most the best independent assignment that fits",
                best is None or report["cost_per_hour"] <= best + 1e-9,
                f"{report['cost_per_hour']:.3f} <= {best} (greedy {greedy})",
            )
            replays = replayed_alone(tight, workloads)
            out["binding"]["replayed_alone"] = replays
            ok &= check(
                "binding: every recommended deployment replayed alone meets its target",
                all(meets for _, _, meets in replays),
                ", ".join(f"{label} {ratio:.2%}" for label, ratio, _ in replays),
            )
            ok &= check("binding: under 15 minutes", wall < LIMIT_S, f"{wall:.0f} s")
    print(f"load average {os.getloadavg()[0]:.1f} at end")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
