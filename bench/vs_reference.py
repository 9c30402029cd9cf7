"""Whole-process replay speed against the reference replay (Dynamo 1.6.1's Rust engine).

    python bench/vs_reference.py [--cases FILE ...] [--only NAME ...] [--heavy 50000,200000]
                                 [--repeat 3] [--warmup 1] [--skip-heavy] [--skip-cases]
                                 [--startup]

For each case of the cases files (default: the shared ``cases.json``, ``session_cases.json`` and
``parity_cases.json``) and for the synthetic heavy workloads of ``bench/replay_speed.py`` (16
workers, KV router, ~175 req/s; written once as a Mooncake JSONL file both can read), runs
``plansim replay run ... --no-report`` and the reference (``../shared/tools/peer_replay.py`` in
the reference venv, ``PEER_DIR`` or ``~/.cache/plansim-peer``) as separate processes, alternating,
``--repeat`` times each, and prints the median wall time, CPU time (user + system) and peak RSS
of each side and the ratio ours / reference, with the load average beside every row (the
machine may be shared: CPU time is the load-independent figure). ``--startup`` also prints the
time ``plansim replay run`` takes to reach its first simulated pass (wall and CPU).

Both sides run warm: ``--warmup`` untimed runs of each first, and Python may write bytecode
(``PYTHONDONTWRITEBYTECODE`` is dropped from their environment, as a user's shell has it; the
reference's installed packages carry theirs). The heavy traces are kept in ``bench/_data``.

Quick run: ``--only S1-agg-rr --heavy 50000 --repeat 1``.

Targets (issue 17): ours / reference <= 1.0 on every case and heavy workload (<= 0.5 on the
heavy ones as a moonshot); peak RSS < 0.5 GB at 200k requests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# ``../shared`` beside the checkout (or beside an ancestor folder, for a worktree).
SHARED = next(
    (p / "shared" for p in ROOT.parents if (p / "shared" / "reference").is_dir()),
    ROOT.parent / "shared",
)
DEFAULT_CASES = [
    SHARED / "reference" / f for f in ("cases.json", "session_cases.json", "parity_cases.json")
]
PEER_SCRIPT = SHARED / "tools" / "peer_replay.py"
HEAVY_SIZES = (50_000, 200_000)
HEAVY_RATE_RPS = 175.0  # bench/replay_speed.py's workload: about 70% load of 16 workers
HEAVY_SEED = 7
DATA = ROOT / "bench" / "_data" / "vs_reference"
RSS_TARGET_MB = 512.0

# Reaches the first simulated pass, prints the seconds since ``T0`` (the parent's clock) and
# exits at once. The engine is patched once ``main`` has registered the command, so that what
# ``main`` does before any import (the BLAS thread setting) happens as in a real run.
_FIRST_PASS = """
import os, sys, time
import plansim.cli as cli

def first_pass(self, now):
    cpu = os.times()
    print(f"{time.time() - float(os.environ['PLANSIM_BENCH_T0']):.4f} "
          f"{cpu.user + cpu.system:.4f}", flush=True)
    os._exit(0)

def register_and_patch(args, register=cli.register_commands):
    register(args)
    import plansim.sim.engine as engine
    engine.Rank.start_pass = first_pass

cli.register_commands = register_and_patch
sys.argv = ["plansim", *sys.argv[1:]]
cli.main()
"""


@dataclass(frozen=True, slots=True)
class Sample:
    wall_s: float
    cpu_s: float
    rss_mb: float


def measure(cmd: list[str], env: dict[str, str] | None = None) -> Sample:
    """Run ``cmd`` to completion: its wall time, CPU time and peak RSS (its own process).
    Its stderr goes to a file (a pipe read only at the end would fill and stall it)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-400:]
            raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {proc.returncode}: {tail}")
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0)


def peer_python() -> Path:
    folder = Path(os.environ.get("PEER_DIR", Path.home() / ".cache" / "plansim-peer"))
    python = folder / "venv" / "bin" / "python"
    if not python.exists():
        sys.exit(f"vs_reference: no reference venv at {folder} (run ../shared/tools/peer_env.sh)")
    return python


def plansim_command(case, out_dir: Path, cfg_dir: Path) -> list[str]:
    """``plansim replay run`` for a reference case: its deployment as a config file."""
    cfg = cfg_dir / f"{case.name}.json"
    cfg.write_text(json.dumps(case.deployment))
    cmd = [
        sys.executable,
        "-m",
        "plansim",
        "replay",
        "run",
        str(case.trace),
        "--format",
        case.trace_format,
        "-c",
        str(cfg),
        "--no-report",
        "-q",
        "--out",
        str(out_dir / case.name),
        "--force",
    ]
    if case.trace_block_size is not None:
        cmd += ["--trace-block-size", str(case.trace_block_size)]
    if case.closed_loop is False:
        cmd.append("--open-loop")
    return cmd


def heavy_cases(sizes: list[int], folder: Path) -> Path:
    """The heavy synthetic workloads as Mooncake JSONL files in ``folder`` (written once) and one
    cases file naming them."""
    sys.path.insert(0, str(ROOT / "bench"))
    from replay_speed import synthetic_workload

    from plansim.traces.writers import write_mooncake

    folder.mkdir(parents=True, exist_ok=True)
    cases = []
    for n in sizes:
        trace = folder / f"heavy-{n}-{HEAVY_RATE_RPS:g}rps-seed{HEAVY_SEED}.jsonl"
        block_size = folder / f"{trace.stem}.block_size"
        if not trace.exists() or not block_size.exists():
            workload = synthetic_workload(n, HEAVY_RATE_RPS, seed=HEAVY_SEED)
            write_mooncake(workload, trace)
            block_size.write_text(str(workload.trace_block_size))
        cases.append(
            {
                "name": f"heavy-{n // 1000}k",
                "trace": trace.name,
                "trace_format": "mooncake",
                "trace_block_size": int(block_size.read_text()),
                "mode": "agg",
                "num_workers": 16,
                "router_mode": "kv_router",
                "engine_args": {},
            }
        )
    path = folder / "heavy_cases.json"
    path.write_text(json.dumps({"cases": cases}))
    return path


def startup(case, folder: Path, repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """Median seconds (wall, CPU) from launching ``plansim replay run`` to its first simulated
    pass."""
    cmd = plansim_command(case, folder, folder)
    cmd = [cmd[0], "-c", _FIRST_PASS, *cmd[3:]]
    walls, cpus = [], []
    for _ in range(repeat):
        out = subprocess.run(
            cmd,
            env={**env, "PLANSIM_BENCH_T0": repr(time.time())},
            capture_output=True,
            text=True,
            check=True,
        )
        wall, cpu = out.stdout.strip().splitlines()[-1].split()
        walls.append(float(wall))
        cpus.append(float(cpu))
    return statistics.median(walls), statistics.median(cpus)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--only", nargs="+", default=None, help="case names to run")
    ap.add_argument(
        "--heavy",
        default=",".join(str(n) for n in HEAVY_SIZES),
        help="request counts of the heavy workloads, comma-separated",
    )
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each side per case")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of each side first")
    ap.add_argument("--skip-heavy", action="store_true")
    ap.add_argument("--skip-cases", action="store_true")
    ap.add_argument(
        "--startup",
        action="store_true",
        help="also time plansim's start-up to its first simulated pass",
    )
    args = ap.parse_args(argv)

    from plansim.sim.cases import load_cases

    peer = peer_python()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    peer_env = {**env, "RUST_LOG": "error"}
    work = Path(tempfile.mkdtemp(prefix="vs_reference-"))
    runs: list[tuple[Path, object]] = []
    if not args.skip_cases:
        for path in args.cases:
            # Absolute: a case's NPZ path is relative to its file, and the config written for
            # plansim sits in another folder.
            path = path.resolve()
            runs += [(path, c) for c in load_cases(path)]
    if not args.skip_heavy and args.heavy:
        sizes = [int(n) for n in args.heavy.split(",") if n]
        path = heavy_cases(sizes, DATA)
        runs += [(path, c) for c in load_cases(path)]
    if args.only:
        runs = [(p, c) for p, c in runs if c.name in args.only]

    print(
        f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}; repeat {args.repeat} "
        f"after {args.warmup} warm-up (alternating, medians); "
        "ours = plansim replay run --no-report, reference = peer_replay.py"
    )
    head = (
        f"{'case':26s} {'ours s':>8s} {'ref s':>8s} {'ratio':>6s}   {'ours cpu':>8s} "
        f"{'ref cpu':>8s} {'cpu ratio':>9s}   {'ours MB':>8s} {'ref MB':>8s}  load"
    )
    print(head)
    print("-" * len(head))
    misses: list[str] = []
    try:
        for path, case in runs:
            ours_cmd = plansim_command(case, work, work)
            peer_cmd = [str(peer), str(PEER_SCRIPT), str(path), case.name]
            for _ in range(args.warmup):
                measure(ours_cmd, env)
                measure(peer_cmd, peer_env)
            ours, ref = [], []
            for _ in range(args.repeat):
                ours.append(measure(ours_cmd, env))
                ref.append(measure(peer_cmd, peer_env))
            o_wall = statistics.median(s.wall_s for s in ours)
            r_wall = statistics.median(s.wall_s for s in ref)
            o_cpu = statistics.median(s.cpu_s for s in ours)
            r_cpu = statistics.median(s.cpu_s for s in ref)
            o_rss = max(s.rss_mb for s in ours)
            ratio = o_wall / r_wall
            heavy = case.name.startswith("heavy-")
            if ratio > 1.0:
                misses.append(f"{case.name} wall ratio {ratio:.2f} > 1.0")
            if heavy and case.name.endswith("200k") and o_rss >= RSS_TARGET_MB:
                misses.append(f"{case.name} peak RSS {o_rss:.0f} MB >= {RSS_TARGET_MB:.0f} MB")
            moon = (
                "  (moonshot <= 0.5: " + ("met" if ratio <= 0.5 else "not met") + ")"
                if heavy
                else ""
            )
            print(
                f"{case.name:26s} {o_wall:8.2f} {r_wall:8.2f} {ratio:6.2f}   {o_cpu:8.2f} "
                f"{r_cpu:8.2f} {o_cpu / r_cpu:9.2f}   {o_rss:8.0f} "
                f"{max(s.rss_mb for s in ref):8.0f}  {os.getloadavg()[0]:.1f}{moon}",
                flush=True,
            )
            if args.startup and not heavy:
                wall, cpu = startup(case, work, args.repeat, env)
                print(
                    f"{'':26s} start-up to the first simulated pass: {wall:.3f} s wall, "
                    f"{cpu:.3f} s CPU (target < 0.3 s)",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"load average now {os.getloadavg()[0]:.2f}; targets: ours / reference <= 1.0 on "
        f"every case, peak RSS < {RSS_TARGET_MB:.0f} MB at 200k"
    )
    print("all targets met" if not misses else "missed: " + "; ".join(misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
