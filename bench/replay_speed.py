"""Replay speed: wall time of ``sim.replay`` (workload already loaded) for reference cases S1, S2,
S5 and a 200,000-request synthetic workload (16 workers, KV router, about 70% load), with
simulated requests per wall second, CPU time and peak RSS.

    python bench/replay_speed.py [--cases ../shared/reference/cases.json] [--synth-requests N]
                                 [--skip-synth] [--skip-cases] [--profile]

The reference replay takes about 1.0 s (S1), 1.3 s (S2) and 2.0 s (S5) on this kind of machine.
Peak RSS is the process high-water mark (ru_maxrss) after each replay, so the synthetic run goes
last. ``--profile`` prints the top functions of a cProfile of each replay.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import sys
import time
from pathlib import Path

from plansim.sim.cases import case_deployment, case_workload, load_cases
from plansim.sim.deployment import build_deployment
from plansim.sim.host import replay
from plansim.traces.synth import SynthSpec, synthesize
from plansim.traces.workload import Workload

DEFAULT_CASES = Path(__file__).resolve().parents[2] / "shared" / "reference" / "cases.json"
REFERENCE_WALL_S = {"S1": 1.0, "S2": 1.3, "S5": 2.0}
# About 70% load of 16 default workers for this workload: they saturate near 250 req/s (on
# 10k-request runs, median TTFT is 97 ms at 175 req/s, 1.2 s at 250 and 3.5 s at 300).
DEFAULT_SYNTH_RATE = 175.0


def synthetic_workload(n: int, rate_rps: float, seed: int = 7) -> Workload:
    """``n`` Poisson arrivals at ``rate_rps``; ISL lognormal around 3000 tokens and OSL around
    300 (the ``traces.synth`` defaults), half of each prompt shared within 64 prefix groups."""
    spec = SynthSpec(
        rate_rps=rate_rps,
        duration_s=1.2 * n / rate_rps + 60.0,
        max_requests=n,
        prefix_groups=64,
        shared_prefix_ratio=0.5,
    )
    return synthesize(spec, seed=seed)


def timed(name: str, workload, deployment, profile: bool) -> None:
    prof = cProfile.Profile() if profile else None
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    result = replay(workload, deployment)
    if prof:
        prof.disable()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    n = len(workload)
    ref = REFERENCE_WALL_S.get(name[:2])
    ref_txt = f"  reference {ref:.1f} s" if ref else ""
    print(
        f"{name:24s} wall {wall:7.2f} s  cpu {cpu:7.2f} s  {n / wall:10.0f} req/s  "
        f"completed {result.summary['completed_requests']}  peak RSS {rss_mb:7.0f} MB{ref_txt}",
        flush=True,
    )
    if prof:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(15)
        print(out.getvalue())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=str(DEFAULT_CASES))
    ap.add_argument("--synth-requests", type=int, default=200_000)
    ap.add_argument(
        "--synth-rate",
        type=float,
        default=None,
        help="arrivals per second (default 175: ~70%% load of 16 workers)",
    )
    ap.add_argument("--skip-synth", action="store_true")
    ap.add_argument("--skip-cases", action="store_true")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    for case in [] if args.skip_cases else load_cases(args.cases):
        if case.name[:2] in REFERENCE_WALL_S:
            timed(case.name, case_workload(case), case_deployment(case), args.profile)
    if not args.skip_synth:
        rate = args.synth_rate or DEFAULT_SYNTH_RATE
        wl = synthetic_workload(args.synth_requests, rate)
        dep = build_deployment({"num_workers": 16, "router": {"mode": "kv_router"}})
        timed(f"synthetic-{args.synth_requests // 1000}k", wl, dep, args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
