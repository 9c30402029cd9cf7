"""Test doubles for retune: an in-process executor that swaps the I/O tasks (window read,
candidate replay) for scripted ones, so controller and sweep rules are checked without traces or
the simulator (pre-sweep and predictor preparation tasks run for real), and the retune setup the
controller tests start from."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from plansim.planner_core.config import parse_planner_config
from plansim.retune.setup import RetuneSetup, retune_setup
from plansim.retune.tasks import WindowData, read_window_task, replay_candidate_task
from plansim.sim.deployment import build_deployment
from plansim.workers.executor import BatchOutcome, Task, TaskContext, run_serially


def agg_setup(
    retune: dict[str, Any] | None = None,
    planner: dict[str, Any] | None = None,
    deployment: dict[str, Any] | None = None,
) -> RetuneSetup:
    """The retune setup of an agg planner (its own scaling off) on two workers behind a KV
    router, arrivals sped up 2x, searching ``overlap_score_weight`` over 0.5, 1 and 2 in 60 s
    windows with 5 s grace; ``retune``, ``planner`` and ``deployment`` add or replace keys."""
    raw = {
        "mode": "agg",
        "enable_load_scaling": False,
        "enable_throughput_scaling": False,
        **(planner or {}),
    }
    raw["retune"] = {
        "interval_seconds": 60,
        "grace_seconds": 5,
        "router": {"overlap_score_weight": {"choices": [0.5, 1.0, 2.0]}},
        **(retune or {}),
    }
    dep = build_deployment(
        {
            "mode": "agg",
            "num_workers": 2,
            "router": {"mode": "kv_router"},
            "arrival_speedup_ratio": 2.0,
            **(deployment or {}),
        }
    )
    return retune_setup(parse_planner_config(raw), dep)


class ScriptedExecutor:
    """Runs tasks in this process; ``read(spec)`` and ``replay(spec, config)`` replace the I/O
    tasks. ``timeout`` makes every batch time out. Records the replay configs it ran."""

    def __init__(
        self,
        replay: Callable[[Any, Any], dict[str, Any]],
        read: Callable[[Any], WindowData] | None = None,
        timeout: bool = False,
    ) -> None:
        self.max_parallel = 1
        self._replay = replay
        self._read = read or (lambda spec: WindowData("unused", 10, {}))
        self.timeout = timeout
        self.replayed: list[Any] = []
        self.closed = False

    def run(self, tasks: Sequence[Task], context: TaskContext, timeout_s: float | None = None):
        if self.timeout:
            return BatchOutcome((), timed_out=True)
        swapped = []
        for task in tasks:
            if task.fn is read_window_task:
                swapped.append(Task(task.key, _call, (self._read, task.args[0])))
            elif task.fn is replay_candidate_task:
                self.replayed.append(task.args[1])
                swapped.append(Task(task.key, _call, (self._replay, task.args[0], task.args[1])))
            else:
                swapped.append(task)
        return run_serially(swapped, context)

    def cancel(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _call(context: TaskContext, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def summary(
    goodput_tok_s: float, *, duration_ms: float = 60_000.0, gpus: float = 1.0
) -> dict[str, Any]:
    """A replay summary with the keys the objectives read."""
    return {
        "completed_requests": 10,
        "duration_ms": duration_ms,
        "gpu_hours": gpus * duration_ms / 3_600_000.0,
        "goodput_output_throughput_tok_s": goodput_tok_s,
        "output_throughput_tok_s": goodput_tok_s,
        "mean_output_token_throughput_per_user": 10.0,
        "mean_ttft_ms": 100.0,
        "mean_e2e_latency_ms": 1000.0,
    }
