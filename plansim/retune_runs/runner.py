"""The Python API behind ``plansim retune``: load a retune run file, replay it with retune on, or
score one window's candidates without the outer replay.

A retune run file (YAML or JSON) names what to replay::

    trace: traces/sample.dynamo.jsonl.gz     # a path, a glob, a folder, or a list of them
    trace_format: auto                       # optional: auto or a trace format name
    deployment: {...}                        # a deployment mapping, or a deployment file
    planner:    {..., retune: {...}}         # a planner config mapping (with its retune block),
                                             # or a planner config file

Relative paths (trace, deployment and planner files) resolve against the run file's folder.
``load_retune_run(path)`` validates it all through ``plansim.api.setup`` (the retune block
parsed and checked once, kept in ``RetuneRun.setup``) before any trace is read.

``run_retune(run)`` replays the trace with the planner (and its retune controller) in the loop
and returns the ``ReplayResult`` (its ``retune_events`` are the decision records).
``score_window(run, k)`` sweeps window ``k`` from the startup point, with the deployment's
starting worker counts, and returns the ``SweepReport``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plansim import api
from plansim.configfile import read_config
from plansim.errors import ConfigError
from plansim.planner_core.observations import WorkerCounts
from plansim.retune.controller import RetuneController, controller_for_replay
from plansim.retune.setup import RetuneSetup
from plansim.retune.sweep import SweepReport, run_sweep
from plansim.roles import Role
from plansim.workers.executor import Executor

RUN_KEYS = frozenset({"trace", "trace_format", "trace_block_size", "deployment", "planner"})


@dataclass(frozen=True, slots=True)
class RetuneRun:
    """A validated run file: trace paths and format, the replay setup (deployment, planner
    config, its checked retune block) and the planner mapping as written."""

    source: str
    trace_paths: tuple[str, ...]
    trace_format: str
    trace_block_size: int | None
    setup: api.ReplaySetup
    planner_raw: Mapping[str, Any]

    @property
    def deployment(self) -> Any:
        return self.setup.deployment

    @property
    def planner_config(self) -> Any:
        return self.setup.planner_config

    @property
    def retune(self) -> RetuneSetup:
        assert self.setup.retune is not None  # load_retune_run requires the block
        return self.setup.retune


def load_retune_run(path: str | Path) -> RetuneRun:
    """Read and validate a run file; ConfigError names the file and the key."""
    from plansim.sim.deployment import build_deployment, load_deployment

    source = Path(path)
    raw = read_config(source, what="retune run file")
    unknown = sorted(set(raw) - RUN_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key (known: {', '.join(sorted(RUN_KEYS))})",
            source=str(source),
            field=unknown[0],
        )
    base = source.parent
    traces = raw.get("trace")
    if isinstance(traces, str):
        traces = [traces]
    if not traces or not isinstance(traces, list) or not all(isinstance(t, str) for t in traces):
        raise ConfigError(
            "a trace path or a list of trace paths is required", source=str(source), field="trace"
        )
    trace_paths = tuple(str(_resolve(base, t)) for t in traces)

    dep_raw = raw.get("deployment", {})
    if isinstance(dep_raw, str):
        deployment = load_deployment(_resolve(base, dep_raw))
    elif isinstance(dep_raw, Mapping):
        deployment = build_deployment(dict(dep_raw), source=str(source))
    else:
        raise ConfigError(
            "must be a mapping or a file path", source=str(source), field="deployment"
        )

    planner_raw = raw.get("planner", deployment.planner)
    planner_source = str(source)
    if isinstance(planner_raw, str):
        planner_path = _resolve(base, planner_raw)
        planner_raw, planner_source = (
            read_config(planner_path, what="planner config"),
            str(planner_path),
        )
    if not isinstance(planner_raw, Mapping):
        raise ConfigError(
            "a planner config with a retune block is required", source=str(source), field="planner"
        )
    if planner_raw.get("retune") is None:  # absent or null
        raise ConfigError(
            "the planner config has no retune block", source=planner_source, field="planner.retune"
        )
    return RetuneRun(
        source=str(source),
        trace_paths=trace_paths,
        trace_format=str(raw.get("trace_format", "auto")),
        trace_block_size=raw.get("trace_block_size"),
        setup=api.setup(deployment, dict(planner_raw), source=planner_source),
        planner_raw=dict(planner_raw),
    )


def load_run_workload(run: RetuneRun) -> Any:
    """The run's trace as a ``Workload``; the retune windows are read from the same files, so
    they must be Dynamo request traces (``TraceError`` naming the first file that is not)."""
    from plansim.errors import TraceError
    from plansim.traces import load_workload
    from plansim.traces.detect import detect_format
    from plansim.traces.formats import TRACE_FORMATS, windowed
    from plansim.traces.sources import resolve_paths

    for path in resolve_paths(list(run.trace_paths)):
        found = run.trace_format if run.trace_format != "auto" else detect_format(path)
        if found not in TRACE_FORMATS or TRACE_FORMATS.get(found).windows is None:
            raise TraceError(
                f"is a {found} trace; retune windows are read from {windowed()}: "
                "convert it with `plansim trace convert`",
                source=str(path),
            )
    return load_workload(
        list(run.trace_paths), format=run.trace_format, trace_block_size=run.trace_block_size
    )


def build_controller(
    run: RetuneRun,
    workload: Any,
    *,
    executor: Callable[[int], Executor] | None = None,
    on_decision: Callable[[dict[str, Any]], None] | None = None,
) -> RetuneController:
    """The retune controller for a replay of ``workload`` with the run's planner config."""
    return controller_for_replay(
        run.retune, workload, run.trace_paths, executor=executor, on_decision=on_decision
    )


def run_retune(
    run: RetuneRun,
    *,
    workload: Any = None,
    executor: Callable[[int], Executor] | None = None,
    on_decision: Callable[[dict[str, Any]], None] | None = None,
    progress: Callable[[float, float], None] | None = None,
    sweep: Callable[[Any, Executor], Any] | None = None,
) -> Any:
    """Replay the run's trace with the planner and retune in the loop; returns the
    ``ReplayResult`` (``retune_events``: the decision records, a list). ``sweep(plan,
    executor)`` runs each window's sweep (default ``retune.sweep.run_sweep``)."""
    workload = load_run_workload(run) if workload is None else workload
    return api.replay(
        workload,
        run.setup,
        trace_paths=run.trace_paths,
        progress=progress,
        executor=executor,
        on_decision=on_decision,
        sweep=sweep,
    )


def starting_counts(deployment: Any) -> WorkerCounts:
    """The deployment's starting workers, all ready (no outer replay has scaled anything)."""
    sizes = deployment.planner_role_sizes()
    return WorkerCounts(ready_prefill=sizes.get(Role.PREFILL, 0), ready_decode=sizes[Role.DECODE])


def score_window(
    run: RetuneRun,
    k: int,
    *,
    workload: Any = None,
    executor: Executor | None = None,
    use_timeout: bool = True,
) -> SweepReport:
    """Sweep window ``k`` from the startup point with the deployment's starting worker counts
    (no outer replay, so no recorded counts: the replay starts as the deployment does).
    ``use_timeout`` False lifts ``timeout_seconds``."""
    workload = load_run_workload(run) if workload is None else workload
    controller = build_controller(run, workload)
    controller.initial_tick(0.0)
    plan = controller.build_plan(k, starting_counts(run.deployment))
    if not use_timeout:
        from dataclasses import replace

        plan = replace(plan, timeout_s=None)
    own = executor is None
    pool = controller.executor() if own else executor
    try:
        return run_sweep(plan, pool)
    finally:
        if own:
            controller.close()


def count_windows(run: RetuneRun, workload: Any) -> int:
    """Windows whose sweep launches before the replay's last arrival (a progress estimate)."""
    if not len(workload):
        return 0
    cfg = run.retune.config
    span_s = (float(workload.arrival_ms.max()) - float(workload.arrival_ms.min())) / 1000.0
    span_s /= run.deployment.arrival_speedup_ratio
    n = int((span_s - cfg.grace_seconds) // cfg.interval_seconds)
    return max(n, 0)


def _resolve(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path
