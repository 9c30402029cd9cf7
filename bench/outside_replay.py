"""Where a ``plansim replay run`` process spends its CPU outside the replay (issue 17).

    python bench/outside_replay.py [--cases FILE ...] [--only NAME ...] [--repeat 5]

For each case of the cases files (default: the shared ``cases.json``, ``session_cases.json``
and ``parity_cases.json``), runs ``python -m plansim replay run ... --no-report`` as its own
process ``--repeat`` times and prints the median CPU time (user + system) of each phase:

- ``start``: the interpreter, ``site`` and ``plansim.cli`` (typer) imported;
- ``command``: the command's modules imported (numpy, pydantic, plansim's own);
- ``deployment``: the command line parsed (typer), the deployment's modules imported and its
  models built, the deployment read and validated;
- ``trace``: the replay's set-up checked (``api.setup``) and the trace read into a
  ``Workload``;
- ``setup``: the replay's pools and routers built, up to the first simulated pass;
- ``replay``: the replay itself (not outside it: shown for scale);
- ``assembly``: the result assembled (the recorder's totals, the summary, the tables);
- ``tables``: the output folder written (Parquet and JSON);
- ``exit``: the summary printed and the process ended;

then ``outside``, everything but the replay, and ``floor``: the CPU of a process that only
imports the libraries a replay run cannot do without (numpy, pydantic with one model built,
typer, orjson), which no change to plansim can take away.

Each phase ends where a plansim function is entered or left (stamped by patching it when its
module is first imported, so imports happen in their natural order). Python may write
bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped), and one untimed run of each case comes
first. CPU time is the figure to read on a shared machine; the load average is printed beside
every row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from vs_reference import DEFAULT_CASES, plansim_command  # noqa: E402

PHASES = (
    "start",
    "command",
    "deployment",
    "trace",
    "setup",
    "replay",
    "assembly",
    "tables",
    "exit",
)

# Run as ``python -c``: stamps the process's CPU time when a phase ends, and prints the stamps
# at the exit (``os._exit`` skips atexit handlers, so ``runtime.exit_now`` is wrapped).
_STAMPED = r"""
import importlib.abc, importlib.machinery, sys, time
STAMPS = []
def stamp(name):
    STAMPS.append((name, time.process_time()))
# (module, function, phase ended on entry, phase ended on return)
HOOKS = {
    "plansim.cli": [("register_commands", "start", "command")],
    "plansim.sim.deployment": [("load_deployment", None, "deployment")],
    "plansim.traces.load": [("load_workload", None, "trace")],
    "plansim.sim.assembly": [("assemble_result", "replay", "assembly")],
    "plansim.commands.output": [("write_replay_outputs", None, "tables")],
}
def wrapped(f, before, after):
    def g(*args, **kwargs):
        if before:
            stamp(before)
        result = f(*args, **kwargs)
        if after:
            stamp(after)
        return result
    return g
def patch(module):
    for name, before, after in HOOKS.get(module.__name__, ()):
        setattr(module, name, wrapped(getattr(module, name), before, after))
    if module.__name__ == "plansim.sim.engine":
        start_pass = module.Rank.start_pass
        def first(self, now):
            if not any(n == "setup" for n, _ in STAMPS):
                stamp("setup")
            return start_pass(self, now)
        module.Rank.start_pass = first
    if module.__name__ == "plansim.runtime":
        exit_now = module.exit_now
        def report(status):
            stamp("exit")
            print("STAMPS " + " ".join(f"{n}={t:.4f}" for n, t in STAMPS), file=sys.stderr,
                  flush=True)
            exit_now(status)
        module.exit_now = report
class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in HOOKS and name not in ("plansim.sim.engine", "plansim.runtime"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            return None
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            patch(module)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Hook())
sys.argv = ["plansim", *sys.argv[1:]]
import runpy
runpy.run_module("plansim", run_name="__main__", alter_sys=True)
"""

# Ends as plansim does, without the interpreter's teardown (``runtime.exit_now``).
_FLOOR = """
import os, numpy, orjson, typer
from pydantic import BaseModel
class One(BaseModel):
    x: int = 1
One(x=2)
os._exit(0)
"""


def run_stamped(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """CPU seconds of each phase of one run of ``cmd`` (``python -m plansim ...``)."""
    args = [sys.executable, "-c", _STAMPED, *cmd[3:]]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        err.seek(0)
        text = err.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[3:6])} ... failed: {text[-400:]}")
    line = next(ln for ln in text.splitlines() if ln.startswith("STAMPS "))
    stamps = [(k, float(v)) for k, v in (kv.split("=") for kv in line.split()[1:])]
    total = usage.ru_utime + usage.ru_stime
    out, previous = {}, 0.0
    for name, t in stamps:
        out[name] = t - previous
        previous = t
    out["exit"] = out.get("exit", 0.0) + total - previous
    return out


def floor_cpu(env: dict[str, str], repeat: int) -> float:
    """Median CPU seconds of ``_FLOOR``, with the two settings ``plansim`` makes for itself."""
    env = {**env, "OPENBLAS_NUM_THREADS": "1", "PYDANTIC_DISABLE_PLUGINS": "__all__"}
    runs = []
    for _ in range(repeat):
        proc = subprocess.Popen([sys.executable, "-c", _FLOOR], env=env)
        _, _, usage = os.wait4(proc.pid, 0)
        runs.append(usage.ru_utime + usage.ru_stime)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--only", nargs="*", default=None, help="case names to run")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from plansim.sim.cases import load_cases

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cases = [
        c for f in args.cases for c in load_cases(f) if args.only is None or c.name in args.only
    ]
    print(
        f"floor {floor_cpu(env, args.repeat):.3f} s CPU (numpy, pydantic + one model, typer, "
        f"orjson), load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'case':26s} " + " ".join(f"{p:>10s}" for p in PHASES) + f" {'outside':>9s}  load")
    with tempfile.TemporaryDirectory(prefix="outside_replay") as tmp:
        work = Path(tmp)
        for case in cases:
            cmd = plansim_command(case, work / "out", work)
            run_stamped(cmd, env)  # warm-up: bytecode written, files cached
            runs = [run_stamped(cmd, env) for _ in range(args.repeat)]
            med = {p: statistics.median(r.get(p, 0.0) for r in runs) for p in PHASES}
            outside = statistics.median(sum(v for k, v in r.items() if k != "replay") for r in runs)
            print(
                f"{case.name:26s} "
                + " ".join(f"{med[p]:10.3f}" for p in PHASES)
                + f" {outside:9.3f}  {os.getloadavg()[0]:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
