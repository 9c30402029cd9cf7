"""The measurements behind plansim's dependency choices (``docs/architecture.md``,
"Dependencies"): SimPy against plansim's own clock, joblib against its own spawn pool, and the
Parquet writer (pyarrow with compression against plansim's own encoder).

    python bench/dependency_choices.py [simpy] [joblib] [parquet] [--repeat N]

With no section named, all three run (simpy and joblib are the ``bench`` extra:
``pip install '.[bench]'``). Each prints its figures:

- ``simpy``: a SimPy-backed clock with ``plansim.sim.clock.Clock``'s contract (named
  priorities, cancellable handles, ``call_at_time`` at the exact float, processes yielding
  delays) against the own clock, on a synthetic event pattern of the replay's (pass ends at a
  priority, cancelled and rescheduled when an arrival cuts a run, pass starts scheduled for
  now, an arrival walker) in events per second, and on replays of the bundled sample
  (``examples/traces/sample.dynamo.jsonl.gz`` with ``examples/deploy.yaml``), whose summary
  must come out identical on both.
- ``joblib``: joblib's loky backend against ``SpawnPool`` for the pool's jobs: start-up (first
  result of a cold pool), per-task overhead (many trivial tasks on a warm pool), and each of the
  pool's guarantees tried out (niceness, dead-worker replacement, kill at timeout, die with the
  parent).
- ``parquet``: import time of pyarrow's Parquet module against ``plansim.parquet``'s, and size
  and write time of the sample replay's tables (``--requests N``: a synthetic replay's) by
  ``plansim.parquet`` (GZIP level 1, statistics) and by pyarrow (its defaults, with no
  compression, snappy, gzip and zstd).

Best of ``--repeat`` (default 5) for every timing. Figures taken while other processes run are
noisy: run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_TRACE = ROOT / "examples" / "traces" / "sample.dynamo.jsonl.gz"
SAMPLE_DEPLOYMENT = ROOT / "examples" / "deploy.yaml"


def best_of(
    repeat: int, fn: Callable[[], object], timer: Callable[[], float] = time.process_time
) -> float:
    """The shortest time of ``repeat`` calls of ``fn`` by ``timer`` (CPU time unless told),
    in seconds."""
    times = []
    for _ in range(repeat):
        start = timer()
        fn()
        times.append(timer() - start)
    return min(times)


# --------------------------------------------------------------------------------- simpy


def simpy_clock_class():
    """``Clock``'s contract on a SimPy ``Environment`` (built on first use: simpy is imported
    only for this section)."""
    import simpy
    from simpy.events import Event

    class Call(Event):
        """A call scheduled at a priority and a delay: SimPy's own ``Timeout``, whose priority
        is always NORMAL, with the priority given. Its handle: ``cancel()``, ``cancelled``."""

        def __init__(self, env, fn, priority, delay):
            # As Timeout's __init__ does (SimPy inlines Event.__init__ for speed).
            self.env = env
            self.callbacks = [_fire]
            self._value = None
            self._ok = True
            self.fn = fn
            env.schedule(self, priority, delay)

        def cancel(self) -> None:
            self.fn = None

        @property
        def cancelled(self) -> bool:
            return self.fn is None

    def _fire(event) -> None:
        fn = event.fn
        if fn is not None:
            fn()

    class SimPyClock:
        """``plansim.sim.clock.Clock`` on ``simpy.Environment``: the same (time, priority,
        scheduling order) queue, SimPy's events and its process machinery."""

        def __init__(self) -> None:
            self.env = simpy.Environment()

        @property
        def now(self) -> float:
            return self.env.now

        def call_at(self, delay_ms, fn, priority=1):
            return Call(self.env, fn, priority, delay_ms)

        def call_at_time(self, at_ms, fn, priority=1):
            # SimPy schedules at now + delay: find the delay whose sum is exactly at_ms (one
            # exists, as |delay| <= at_ms; usually at_ms - now is it).
            now = self.env.now
            delay = at_ms - now
            while now + delay < at_ms:
                delay = math.nextafter(delay, math.inf)
            while now + delay > at_ms:
                delay = math.nextafter(delay, -math.inf)
            return Call(self.env, fn, priority, delay)

        def process(self, steps: Generator[float, None, None]) -> None:
            env = self.env

            def run():
                for delay in steps:
                    yield env.timeout(delay)

            env.process(run())  # SimPy starts a process at URGENT priority: Clock's FIRST

        def peek(self) -> float:
            return self.env.peek()

        def run(self) -> None:
            self.env.run()

    return SimPyClock


def event_pattern(clock, ranks: int = 16, arrivals: int = 50_000, seed: int = 1) -> int:
    """The replay's event pattern on ``clock``; returns the calls that ran.

    An arrival walker (a process) emits arrivals; each arrival goes to a rank: a busy rank's
    pass end (PASS_END, at a time the rank computes: ``call_at_time``) is cancelled and
    rescheduled, an idle rank's pass start is scheduled for now (NORMAL). A pass end starts the
    next pass while the rank has work; a sampler process runs every 1,000 ms."""
    import random

    rng = random.Random(seed)
    gaps = [rng.expovariate(1 / 20.0) for _ in range(arrivals)]
    work = [0] * ranks
    busy = [False] * ranks
    ends = [0.0] * ranks
    handles = [None] * ranks
    ran = [0]
    left = [arrivals]

    def finish(r):
        ran[0] += 1
        busy[r] = False
        work[r] -= 1
        if work[r] > 0:
            begin(r)

    def begin(r):
        busy[r] = True
        ends[r] = clock.now + 12.5 + 0.25 * work[r]
        handles[r] = clock.call_at_time(ends[r], lambda: finish(r), 0)

    def start(r):
        ran[0] += 1
        if not busy[r] and work[r]:
            begin(r)

    def walker():
        for gap in gaps:
            ran[0] += 1
            r = rng.randrange(ranks)
            work[r] += 4
            if busy[r]:  # an arrival cuts the rank's run: its end moves
                handles[r].cancel()
                ends[r] += 0.5
                handles[r] = clock.call_at_time(ends[r], lambda r=r: finish(r), 0)
            else:
                clock.call_at(0.0, lambda r=r: start(r))
            left[0] -= 1
            yield gap

    def sampler():
        while left[0] or any(busy):
            ran[0] += 1
            yield 1000.0

    clock.process(walker())
    clock.process(sampler())
    clock.run()
    return ran[0]


# Summary figures that time the replay itself (the rest must not depend on the clock).
WALL_KEYS = ("wall_time_ms", "processed_tokens_per_s", "processed_output_tokens_per_s")


def sample_replay(clock_class) -> tuple[dict, float]:
    """The bundled sample replayed with ``clock_class`` as the host's clock: its summary
    without the wall-time figures, and the replay's wall time in seconds (the trace's loading
    and the set-up not included)."""
    from plansim import api
    from plansim.sim import host
    from plansim.sim.deployment import load_deployment
    from plansim.traces.load import load_workload

    setup = api.setup(load_deployment(SAMPLE_DEPLOYMENT))
    workload = load_workload(SAMPLE_TRACE)
    saved = host.Clock
    host.Clock = clock_class
    try:
        start = time.process_time()
        summary = api.replay(workload, setup).summary
        cpu = time.process_time() - start
    finally:
        host.Clock = saved
    return {k: v for k, v in summary.items() if k not in WALL_KEYS}, cpu


def counted(clock_class):
    """``clock_class`` counting the calls scheduled on it (``counted.calls``)."""

    class Counted(clock_class):
        calls = 0

        def call_at(self, *args):
            Counted.calls += 1
            return super().call_at(*args)

        def call_at_time(self, *args):
            Counted.calls += 1
            return super().call_at_time(*args)

    return Counted


def bench_simpy(repeat: int) -> None:
    from plansim.sim.clock import Clock

    SimPyClock = simpy_clock_class()
    print("simpy: SimPy-backed clock vs plansim.sim.clock.Clock")
    calls = {}
    for name, cls in (("own Clock", Clock), ("SimPy clock", SimPyClock)):
        events = event_pattern(cls())
        cpu = best_of(repeat, lambda cls=cls: event_pattern(cls()))
        calls[name] = events
        print(
            f"  event pattern  {name:<12} {events:,} calls in {cpu * 1e3:7.1f} ms CPU: "
            f"{events / cpu / 1e6:.2f} M calls/s"
        )
    assert calls["own Clock"] == calls["SimPy clock"], calls
    clocks = {"own Clock": Clock, "SimPy clock": SimPyClock}
    summaries = {name: sample_replay(cls)[0] for name, cls in clocks.items()}  # warm-up too
    cpus: dict[str, list[float]] = {name: [] for name in clocks}
    for _ in range(repeat):  # in turn, so that a drift in the machine's speed hits both
        for name, cls in clocks.items():
            cpus[name].append(sample_replay(cls)[1])
    for name, times in cpus.items():
        print(
            f"  sample replay  {name:<12} {min(times) * 1e3:7.1f} ms CPU best, "
            f"{sorted(times)[len(times) // 2] * 1e3:7.1f} ms median (the replay alone)"
        )
    same = summaries["own Clock"] == summaries["SimPy clock"]
    Counted = counted(Clock)
    sample_replay(Counted)
    print(f"  sample replay: {Counted.calls:,} calls scheduled; summaries identical: {same}")


# -------------------------------------------------------------------------------- joblib


# The pool under test (``plansim.workers.pool``).
def spawn_pool(jobs: int):
    from plansim.workers.pool import SpawnPool

    return SpawnPool(jobs)


def job(kind: str, arg=None):
    """What a trial's task does, in a worker of either pool."""
    if kind == "echo":
        return arg
    if kind == "sleep":
        time.sleep(arg)
        return arg
    if kind == "nice":
        return os.getpriority(os.PRIO_PROCESS, 0)
    if kind == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "hang":  # a task that starts a child of its own (as Prophet's Stan fits do)
        child = subprocess.Popen(["sleep", "600"])
        Path(arg).write_text(f"{os.getpid()} {child.pid}")
        time.sleep(600)
    raise ValueError(kind)


def pool_job(context, kind: str, arg=None):
    """``job`` as a ``SpawnPool`` task (which takes the task context first)."""
    return job(kind, arg)


def joblib_worker_setup() -> None:
    """The best a joblib worker can do through loky's ``initializer``: what a ``SpawnPool``
    worker does first (its own process group, dying with its parent, niceness 10)."""
    from plansim.lifecycle import die_with_parent

    os.setpgid(0, 0)
    die_with_parent()
    os.nice(10)


def run_pool(jobs: int, calls, timeout_s=None):
    """``calls`` (``(kind, arg)`` pairs) on a new ``SpawnPool``: (ok values, failures)."""
    from plansim.workers.executor import Task, TaskContext

    with spawn_pool(jobs) as pool:
        outcome = pool.run(
            [Task(str(i), pool_job, call) for i, call in enumerate(calls)],
            TaskContext(tempfile.gettempdir()),
            timeout_s=timeout_s,
        )
    return outcome


def run_joblib(jobs: int, calls, timeout_s=None, setup: bool = False, batch_size=1):
    """``calls`` on joblib's loky backend; its list of results (or the exception raised).
    ``jobs`` is at least 2: with one, joblib runs the calls in this process."""
    from joblib import Parallel, delayed

    extra = {"initializer": joblib_worker_setup} if setup else {}
    try:
        return Parallel(n_jobs=max(jobs, 2), timeout=timeout_s, batch_size=batch_size, **extra)(
            delayed(job)(*call) for call in calls
        )
    except Exception as exc:
        return exc


def shut_loky() -> None:
    """Stop loky's reusable workers, so that the next joblib call starts cold."""
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True, kill_workers=True)


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def hang_pids(path: Path, wait_s: float = 30.0) -> tuple[int, int]:
    """The (worker, its child) pids a ``hang`` task wrote to ``path``."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if len(text.split()) == 2:
            worker, child = text.split()
            return int(worker), int(child)
        time.sleep(0.02)
    raise TimeoutError(f"no hang task started ({path})")


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (its children, theirs, ...)."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parents[int(name)] = int(
                    Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1]
                )
            except OSError:
                pass
    found, frontier = [], [root]
    while frontier:
        below = [pid for pid, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found


def left_alive(pids: list[int], wait_s: float) -> str:
    """After ``wait_s``, how many of ``pids`` still run; kills what is left (this benchmark
    started them)."""
    time.sleep(wait_s)
    running = [pid for pid in pids if alive(pid)]
    for pid in running:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return f"{len(running)} of {len(pids)} processes left running"


def driver(kind: str, pids_file: str) -> None:
    """A parent process for the die-with-parent trial: runs one ``hang`` task and waits."""
    if kind == "pool":
        run_pool(1, [("hang", pids_file)])
    else:
        run_joblib(2, [("hang", pids_file)], setup=kind == "joblib+setup")


def kill_parent_trial(kind: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        pids_file = Path(folder) / "pids"
        parent = subprocess.Popen(
            [sys.executable, __file__, "--driver", kind, str(pids_file)], stderr=subprocess.DEVNULL
        )  # a killed tracker's warnings
        hang_pids(pids_file)
        below = descendants(parent.pid)  # workers, their children, trackers
        parent.kill()
        parent.wait()
        return left_alive(below, 2.0)


# The timeout of the timeout trial (s); its workers are started before, so the task runs.
TRIAL_TIMEOUT_S = 2.0


def timeout_trial(kind: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        pids_file = Path(folder) / "pids"
        hang = ("hang", str(pids_file))
        if kind == "pool":
            from plansim.workers.executor import Task, TaskContext

            with spawn_pool(1) as pool:
                pool.run([Task("warm", pool_job, ("echo", 0))], TaskContext(folder))
                outcome = pool.run(
                    [Task("0", pool_job, hang)], TaskContext(folder), timeout_s=TRIAL_TIMEOUT_S
                )
            ended = "timed out" if outcome.timed_out else "no timeout"
        else:
            setup = kind == "joblib+setup"
            run_joblib(2, [("echo", 0)] * 2, setup=setup)  # warm: the workers run
            ended = type(run_joblib(2, [hang], timeout_s=TRIAL_TIMEOUT_S, setup=setup)).__name__
        if not pids_file.exists():
            return f"{ended}; the task had not started"
        return f"{ended}; " + left_alive(list(hang_pids(pids_file)), 0.5)


def bench_joblib(repeat: int) -> None:
    import joblib

    jobs = 2
    print(f"joblib {joblib.__version__} (loky) vs plansim's SpawnPool, {jobs} workers")
    sleeps = [("sleep", 0.02)] * 40  # 40 tasks of 20 ms: 400 ms of work on 2 workers

    def pool_cold():
        run_pool(jobs, [("echo", 0)])

    def joblib_cold():
        shut_loky()
        run_joblib(jobs, [("echo", 0)])

    wall = time.perf_counter
    print(
        f"  start-up (cold pool to first result)   pool {best_of(repeat, pool_cold, wall):6.3f} s"
        f"   joblib {best_of(repeat, joblib_cold, wall):6.3f} s"
    )
    from plansim.workers.executor import Task, TaskContext

    with spawn_pool(jobs) as pool:
        tasks = [Task(str(i), pool_job, call) for i, call in enumerate(sleeps)]
        context = TaskContext(tempfile.gettempdir())
        pool.run(tasks[:jobs], context)  # warm: workers started
        pool_s = best_of(repeat, lambda: pool.run(tasks, context), wall)
    run_joblib(jobs, sleeps)  # warm
    joblib_s = best_of(repeat, lambda: run_joblib(jobs, sleeps), wall)
    ideal = len(sleeps) * 0.02 / jobs
    print(
        f"  per-task overhead (warm, 40 x 20 ms)    pool {(pool_s - ideal) / len(sleeps) * 1e3:6.2f} ms"
        f"  joblib {(joblib_s - ideal) / len(sleeps) * 1e3:6.2f} ms"
    )

    print("  niceness of a worker:")
    plain = run_joblib(2, [("nice", None)])[0]
    shut_loky()
    print(
        f"    pool {run_pool(1, [('nice', None)]).results[0].value}; joblib {plain}; "
        f"joblib with loky's initializer {run_joblib(2, [('nice', None)], setup=True)[0]}"
    )
    shut_loky()
    print("  a worker dies (SIGKILL) in a batch of 4 tasks:")
    calls = [("sleep", 0.2), ("die", None), ("sleep", 0.2), ("sleep", 0.2)]
    outcome = run_pool(jobs, calls)
    ok = sum(r.ok for r in outcome.results)
    failed = [r.error for r in outcome.results if not r.ok]
    print(f"    pool: {ok} of 4 results, the other failed: {failed}")
    outcome = run_joblib(jobs, calls)
    got = (
        f"{len(outcome)} of 4 results"
        if isinstance(outcome, list)
        else (f"0 of 4 results, the call raised {type(outcome).__name__}")
    )
    print(f"    joblib: {got}")
    shut_loky()
    print(
        f"  a task past a {TRIAL_TIMEOUT_S:g} s timeout (of the task's worker and the child it "
        "started, 0.5 s later):"
    )
    for kind in ("pool", "joblib", "joblib+setup"):
        print(f"    {kind:<13} {timeout_trial(kind)}")
        if kind != "pool":
            shut_loky()
    print("  the parent is SIGKILLed while a task runs (of the processes below it, 2 s later):")
    for kind in ("pool", "joblib", "joblib+setup"):
        print(f"    {kind:<13} {kill_parent_trial(kind)}")


# ------------------------------------------------------------------------------- parquet

CODECS = ("none", "snappy", "gzip", "zstd")


def import_ms(statement: str, module: str, repeat: int) -> float:
    """Best-of-``repeat`` cumulative import time of ``module`` (``python -X importtime``) in a
    new interpreter running ``statement``, in ms."""
    best = math.inf
    for _ in range(repeat):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", statement],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        for line in err.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[2].strip() == module:
                best = min(best, int(parts[1]) / 1e3)
    return best


def arrow_table(columns):
    """The Arrow table of a ``Table``'s numpy columns (NaN a null, as pandas writes it)."""
    import pyarrow as pa

    return pa.table({name: pa.array(col, from_pandas=True) for name, col in columns.items()})


def write_own(columns) -> bytes:
    from plansim.parquet import write_table

    out = io.BytesIO()
    write_table(out, columns)
    return out.getvalue()


def write_arrow(columns, codec: str) -> bytes:
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(arrow_table(columns), out, compression=codec)
    return out.getvalue()


def replay_tables(requests: int):
    """The request, time-series and worker tables of the sample replay (``requests`` 0) or of
    a synthetic replay of that many requests (``bench/replay_speed.py``'s workload)."""
    from plansim import api
    from plansim.sim.deployment import load_deployment

    if requests:
        from replay_speed import DEFAULT_SYNTH_RATE, synthetic_workload

        setup = api.setup(load_deployment(None, {"num_workers": 16, "router.mode": "kv_router"}))
        workload = synthetic_workload(requests, DEFAULT_SYNTH_RATE)
    else:
        from plansim.traces.load import load_workload

        setup = api.setup(load_deployment(SAMPLE_DEPLOYMENT))
        workload = load_workload(SAMPLE_TRACE)
    tables = api.replay(workload, setup).tables
    return {name: tables[name].columns for name in ("requests", "timeseries", "workers")}


def bench_parquet(repeat: int, requests: int = 0) -> None:
    import pyarrow

    print(f"parquet: plansim.parquet vs pyarrow {pyarrow.__version__}")
    floor = "import numpy"
    print(
        f"  import pyarrow.parquet after numpy: "
        f"{import_ms(floor + '; import pyarrow.parquet', 'pyarrow.parquet', repeat):.1f} ms "
        f"(best of {repeat}; plansim.parquet: "
        f"{import_ms(floor + '; import plansim.parquet', 'plansim.parquet', repeat):.1f} ms)"
    )
    tables = replay_tables(requests)
    what = f"a {requests:,}-request synthetic replay" if requests else "the sample replay"
    print(f"  tables of {what}: size in KB, CPU time to write in ms (best of {repeat})")
    print(
        f"    {'table':<11} {'rows':>8} {'plansim.parquet':>15} "
        + " ".join(f"{'pyarrow ' + c:>16}" for c in CODECS)
    )
    for name, columns in tables.items():
        rows = len(next(iter(columns.values())))
        cells = [
            (len(write_own(columns)), best_of(repeat, lambda columns=columns: write_own(columns)))
        ]
        for codec in CODECS:
            data = write_arrow(columns, codec)
            assert data == write_arrow(columns, codec), "pyarrow wrote different bytes"
            cells.append(
                (
                    len(data),
                    best_of(repeat, lambda c=codec, columns=columns: write_arrow(columns, c)),
                )
            )
        print(
            f"    {name:<11} {rows:>8,} "
            + " ".join(
                f"{size / 1e3:>{9 if i == 0 else 8}.0f} {cpu * 1e3:>6.1f}"
                + ("" if i in (0, len(cells) - 1) else "  ")
                for i, (size, cpu) in enumerate(cells)
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "sections",
        nargs="*",
        choices=["simpy", "joblib", "parquet", []],
        help="sections to run (default: all)",
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed runs, best taken")
    parser.add_argument(
        "--requests",
        type=int,
        default=0,
        help="parquet: the tables of a synthetic replay of N requests instead of the sample's",
    )
    parser.add_argument("--driver", nargs=2, metavar=("KIND", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        driver(*args.driver)
        return
    sections = args.sections or ["simpy", "joblib", "parquet"]
    for section in sections:
        if section == "parquet":
            bench_parquet(args.repeat, args.requests)
        else:
            globals()[f"bench_{section}"](args.repeat)


if __name__ == "__main__":
    main()
