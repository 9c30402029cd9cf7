"""``plansim.cli``: a command line loads only the command it names."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

MICRO_TRACE = Path(__file__).parent / "sim" / "reference" / "micro" / "M7-round-robin.jsonl"

# Runs ``plansim replay run`` in a fresh interpreter and, at the first simulated pass, prints
# which of the modules a round-robin replay without a planner does not use are loaded (the
# heavy libraries, numpy's random generators, the planner's records), then exits.
_AT_FIRST_PASS = """
import os, sys
import plansim.sim.engine as engine

def first_pass(self, now):
    heavy = ("pandas", "pyarrow", "plotly", "statsmodels", "prophet", "scipy", "numpy.random",
             "plansim.planner_core.observations")
    print(",".join(m for m in heavy if m in sys.modules), flush=True)
    os._exit(0)

engine.Rank.start_pass = first_pass
sys.argv = ["plansim", *sys.argv[1:]]
from plansim.cli import main
main()
"""


def _replay_micro(script: str, out: Path, *flags: str, env: dict[str, str] | None = None) -> str:
    """The stdout of ``script`` running ``plansim replay run`` on the micro trace, 3 workers
    (``env``: the process's environment, default this one's)."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "replay",
            "run",
            str(MICRO_TRACE),
            "--format",
            "mooncake",
            "--trace-block-size",
            "512",
            "--num-workers",
            "3",
            *flags,
            "--out",
            str(out),
            "--no-report",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout


def test_replay_run_reaches_its_first_pass_without_what_it_does_not_use(tmp_path):
    assert _replay_micro(_AT_FIRST_PASS, tmp_path / "out").strip() == ""


def test_help_lists_every_command(run_cli):
    from plansim.cli import COMMANDS

    code, stdout, _ = run_cli("--help")
    assert code == 0
    for name in COMMANDS:
        assert f" {name} " in stdout, name


def test_a_command_runs_after_another_was_registered_alone(run_cli):
    # `plansim report` alone is a single-command app unless plansim stays a group.
    code, _, _ = run_cli("report", "--help")
    assert code == 0
    code, stdout, _ = run_cli("trace", "--help")
    assert code == 0 and "Usage: plansim trace" in " ".join(stdout.split())


# Runs a whole ``plansim replay run`` in a fresh interpreter and prints, as it exits, whether
# pandas or pyarrow was ever loaded.
_AT_EXIT = """
import atexit, sys
atexit.register(lambda: print("pandas" in sys.modules or "pyarrow" in sys.modules, flush=True))
sys.argv = ["plansim", *sys.argv[1:]]
from plansim.cli import main
main()
"""


def test_replay_run_writes_its_tables_without_pandas_or_pyarrow(tmp_path):
    from plansim.traces import load_workload
    from plansim.traces.writers import write_dynamo

    azure = tmp_path / "a.csv"
    azure.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.9799600,1000,10\n2023-11-16 18:17:04.0319600,513,8\n"
    )
    dynamo = write_dynamo(
        load_workload(MICRO_TRACE, format="mooncake", trace_block_size=512), tmp_path / "d.jsonl"
    )
    for trace, fmt in ((MICRO_TRACE, "mooncake"), (azure, "azure"), (dynamo, "dynamo")):
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                _AT_EXIT,
                "replay",
                "run",
                str(trace),
                "--format",
                fmt,
                *(["--trace-block-size", "512"] if fmt != "dynamo" else []),
                "--num-workers",
                "3",
                "--out",
                str(tmp_path / fmt),
                "--no-report",
                "--quiet",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip().splitlines()[-1] == "False", fmt
        assert (tmp_path / fmt / "requests.parquet").exists()


# Runs a whole ``plansim replay run`` in a fresh interpreter and prints, as it exits, whether
# numpy's random generators were ever loaded, and how many ties the KV router broke.
_DRAWS_AT_EXIT = """
import atexit, sys
import plansim.sim.seeded_draws as seeded
draws = []
integers = seeded.SeededDraws.integers
seeded.SeededDraws.integers = lambda self, n: draws.append(n) or integers(self, n)
atexit.register(lambda: print("numpy.random" in sys.modules, sum(n > 1 for n in draws),
                              flush=True))
sys.argv = ["plansim", *sys.argv[1:]]
from plansim.cli import main
main()
"""


def test_a_kv_router_replay_breaks_its_ties_without_numpy_random(tmp_path):
    stdout = _replay_micro(_DRAWS_AT_EXIT, tmp_path / "out", "--router-mode", "kv_router")
    loaded, ties = stdout.strip().splitlines()[-1].split()
    assert loaded == "False" and int(ties) > 0


# Runs ``plansim replay run`` in a fresh interpreter and, at the first simulated pass (numpy
# loaded and used), prints OPENBLAS_NUM_THREADS and the process's thread count, then exits.
_BLAS_AT_FIRST_PASS = """
import os, sys
import plansim.cli as cli

def first_pass(self, now):
    tasks = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    print(os.environ["OPENBLAS_NUM_THREADS"], tasks, flush=True)
    os._exit(0)

def register_and_patch(args, register=cli.register_commands):
    register(args)
    import plansim.sim.engine as engine
    engine.Rank.start_pass = first_pass

cli.register_commands = register_and_patch
sys.argv = ["plansim", *sys.argv[1:]]
cli.main()
"""


def _blas_at_first_pass(tmp_path, env):
    # A folder of its own: the process ends at its first pass and leaves its folder's lock.
    out = _replay_micro(_BLAS_AT_FIRST_PASS, Path(tempfile.mkdtemp(dir=tmp_path)), env=env)
    setting, threads = out.split()
    return setting, int(threads)


def test_the_command_line_runs_blas_single_threaded_unless_the_user_says(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    # One thread: the process has no BLAS worker threads beside its own.
    assert _blas_at_first_pass(tmp_path, env) == ("1", 1)
    setting, _ = _blas_at_first_pass(tmp_path, {**env, "OPENBLAS_NUM_THREADS": "2"})
    assert setting == "2"
