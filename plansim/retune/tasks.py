"""The sweep's task functions and their picklable inputs.

Every task is a module-level function ``fn(context, *args)`` that is pure apart from files in the
sweep folder, so any executor (spawn pool, Ray) runs it with the same result:

- ``read_window_task``: reads the window from the trace files (the seed's window rules, in
  ``plansim.traces.windows``), writes it to the sweep folder with ordinal request ids, and
  buckets the history when an inner planner scales on throughput;
- ``replay_candidate_task``: replays the window file for one candidate configuration with the
  canonical router seed (common random numbers), from the ready counts recorded at the window
  start, with an inner planner when scaling is on; returns the replay summary.

Times: planner time ``s`` (seconds) maps to trace time ``origin_ms + s * 1000 *
arrival_speedup_ratio``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.retune.domains import Point
from plansim.roles import POOL_COUNT_FIELDS, Mode, Role
from plansim.sim.summary import without_host_keys
from plansim.workers.executor import TaskContext

Bucket = tuple[float, float, float]  # (num_req, avg_isl, avg_osl)


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """Window ``index`` over planner time ``[start_s, end_s)``, censored at ``cutoff_s`` (L_k),
    and where to read it. ``bucket_interval_s``: the inner planner's throughput interval when
    history buckets are needed, else None."""

    index: int
    start_s: float
    end_s: float
    cutoff_s: float
    trace_paths: tuple[str, ...]
    origin_ms: float
    arrival_speedup_ratio: float = 1.0
    history_paths: tuple[str, ...] = ()
    bucket_interval_s: float | None = None

    @property
    def window_s(self) -> float:
        return self.end_s - self.start_s

    def trace_ms(self, planner_s: float) -> float:
        """Trace time (ms) of planner time ``planner_s``."""
        return self.origin_ms + planner_s * 1000.0 * self.arrival_speedup_ratio

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "cutoff_s": self.cutoff_s,
            "start_trace_ms": self.trace_ms(self.start_s),
            "end_trace_ms": self.trace_ms(self.end_s),
            "cutoff_trace_ms": self.trace_ms(self.cutoff_s),
        }


@dataclass(frozen=True, slots=True)
class WindowData:
    """What the read task returns: the window file, its request count, the reader's counts,
    and the traffic buckets (empty tuples without throughput scaling)."""

    path: str
    num_requests: int
    counts: Mapping[str, int]
    presweep_history: tuple[Bucket, ...] = ()  # history before the window, buckets ending at end
    presweep_window: tuple[Bucket, ...] = ()  # the window's own buckets, same alignment
    swap_warmup: tuple[Bucket, ...] = ()  # history + window: a swapped predictor's warm-up
    inner_warmup: tuple[Bucket, ...] = ()  # buckets ending at the window start


def read_window_task(context: TaskContext, spec: WindowSpec) -> WindowData:
    """Read window ``spec`` from the trace files into ``<sweep_dir>/window-<k>.npz``."""
    from plansim.traces import windows

    window = windows.read_window(
        spec.trace_paths,
        start_ms=spec.trace_ms(spec.start_s),
        end_ms=spec.trace_ms(spec.end_s),
        cutoff_ms=spec.trace_ms(spec.cutoff_s),
        history_paths=spec.history_paths if spec.bucket_interval_s else (),
        with_history=spec.bucket_interval_s is not None,
    )
    workload = window.workload
    path = os.path.join(context.sweep_dir, f"window-{spec.index}.npz")
    save_window(path, workload)
    data = WindowData(path, len(workload), dict(window.counts))
    if spec.bucket_interval_s is None:
        return data
    interval_ms = spec.bucket_interval_s * 1000.0 * spec.arrival_speedup_ratio
    hist = window.history
    arrival = np.concatenate([hist.arrival_ms, workload.arrival_ms])
    isl = np.concatenate([hist.isl_tokens, workload.isl_tokens])
    osl = np.concatenate([hist.osl_tokens, workload.osl_tokens])
    start_ms, end_ms = spec.trace_ms(spec.start_s), spec.trace_ms(spec.end_s)
    at_end = aligned_buckets(arrival, isl, osl, end_ms, interval_ms)
    n_window = max(int(math.floor((end_ms - start_ms) / interval_ms + 1e-9)), 0)
    split = len(at_end) - min(n_window, len(at_end))
    before_start = hist.arrival_ms < start_ms
    at_start = aligned_buckets(
        hist.arrival_ms[before_start],
        hist.isl_tokens[before_start],
        hist.osl_tokens[before_start],
        start_ms,
        interval_ms,
    )
    return WindowData(
        data.path,
        data.num_requests,
        data.counts,
        presweep_history=at_end[:split],
        presweep_window=at_end[split:],
        swap_warmup=at_end,
        inner_warmup=at_start,
    )


def aligned_buckets(
    arrival_ms: np.ndarray, isl: np.ndarray, osl: np.ndarray, end_ms: float, interval_ms: float
) -> tuple[Bucket, ...]:
    """Buckets ``[end - (i+1) I, end - i I)`` ending at ``end_ms``, oldest first, from the bucket
    of the earliest arrival before ``end_ms`` (empty buckets in between kept with averages 0)."""
    keep = arrival_ms < end_ms
    arrival_ms, isl, osl = arrival_ms[keep], isl[keep], osl[keep]
    if arrival_ms.size == 0:
        return ()
    # 0 = last bucket; ceil - 1 keeps an arrival on a bucket edge in the later bucket.
    back = (np.ceil((end_ms - arrival_ms) / interval_ms) - 1).astype(np.int64)
    n = int(back.max()) + 1
    slot = n - 1 - back
    count = np.bincount(slot, minlength=n).astype(float)
    isl_sum = np.bincount(slot, weights=isl.astype(float), minlength=n)
    osl_sum = np.bincount(slot, weights=osl.astype(float), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        avg_isl = np.where(count > 0, isl_sum / np.maximum(count, 1), 0.0)
        avg_osl = np.where(count > 0, osl_sum / np.maximum(count, 1), 0.0)
    return tuple((float(c), float(i), float(o)) for c, i, o in zip(count, avg_isl, avg_osl))


def save_window(path: str, workload: Any) -> None:
    """The window as numpy arrays; request ids are dropped (replays use ordinal ids)."""
    with open(path, "wb") as fh:
        np.savez(
            fh,
            arrival_ms=workload.arrival_ms,
            isl_tokens=workload.isl_tokens,
            osl_tokens=workload.osl_tokens,
            hash_offsets=workload.hash_offsets,
            hash_ids=workload.hash_ids,
            trace_block_size=np.int64(workload.trace_block_size),
        )


def load_window(path: str) -> Any:
    """The window file as a ``Workload`` with ordinal request ids ``"0"``, ``"1"``, ...: every
    candidate replay sees the same ids (common random numbers)."""
    from plansim.traces.workload import Workload

    with np.load(path) as data:
        n = int(data["arrival_ms"].shape[0])
        return Workload(
            arrival_ms=data["arrival_ms"],
            isl_tokens=data["isl_tokens"],
            osl_tokens=data["osl_tokens"],
            request_id=np.array([str(i) for i in range(n)], dtype=object),
            hash_offsets=data["hash_offsets"],
            hash_ids=data["hash_ids"],
            trace_block_size=int(data["trace_block_size"]),
            sources=(path,),
        )


@dataclass(frozen=True, slots=True)
class CandidateConfig:
    """What a candidate replay actually runs with; candidates with equal configs share one
    replay. ``router``: router parameters that take effect in the router mode; ``planner``:
    planner fields when an inner planner runs (empty otherwise)."""

    router: tuple[tuple[str, Any], ...] = ()
    planner: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class ReplaySpec:
    """The pinned replay inputs shared by every candidate of one window.

    ``deployment``: the outer replay's deployment (engines, router mode and startup parameters);
    ``planner_config``: the live planner config when scaling is on (None: fixed replicas);
    ``ready_counts``: ready workers recorded at the window start; ``seed``: the canonical router
    seed; ``sla``: the scoring SLA (``ttft_ms``/``itl_ms``/``e2e_ms``);
    ``throughput_interval_s``: the inner planner's throughput interval when it scales on
    throughput (its predictor warm-up is then the history bucketed at that interval).
    """

    deployment: Any
    planner_config: Any = None
    ready_counts: Any = None
    seed: int = 0
    sla: Mapping[str, float | None] | None = None
    throughput_interval_s: float | None = None

    @property
    def live_router_knobs(self) -> frozenset[str]:
        """The knobs a patch changes in this deployment's router policy; the others change
        nothing, so candidates differing only in them share one replay."""
        from plansim.sim.routing import router_knobs

        return frozenset(k.name for k in router_knobs(self.deployment.router.mode) if k.patchable)

    def has_ready_workers(self) -> bool:
        counts = self.ready_counts
        if counts is None:
            return False
        ready = _ready_by_role(counts)
        return all(ready[role] > 0 for role in Mode(self.deployment.mode).planner_roles)

    def resolve(self, point: Point) -> CandidateConfig:
        """The configuration a point replays with."""
        router = [(k, v) for k, v in point.router if k in self.live_router_knobs]
        planner = point.planner if self.planner_config is not None else ()
        return CandidateConfig(tuple(router), tuple(planner))


def candidate_deployment(spec: ReplaySpec, config: CandidateConfig) -> Any:
    """The outer deployment with the candidate's router parameters, the canonical seed, the
    scoring SLA and the worker counts recorded at the window start."""
    from plansim.sim.deployment import SlaConfig

    dep = spec.deployment
    counts = spec.ready_counts
    update: dict[str, Any] = {"seed": spec.seed, "planner": None}
    if config.router:
        update["router"] = dep.router.model_copy(update=dict(config.router))
    if spec.sla is not None:
        update["sla"] = SlaConfig(**dict(spec.sla))
    ready = _ready_by_role(counts)
    for pool in Mode(dep.mode).pools:
        update[POOL_COUNT_FIELDS[pool]] = ready[pool.planner_role]
    return dep.model_copy(update=update)


def _ready_by_role(counts: Any) -> dict[Role, int]:
    """Ready workers of ``WorkerCounts`` per planner role."""
    return {Role.PREFILL: counts.ready_prefill, Role.DECODE: counts.ready_decode}


def inner_planner_config(spec: ReplaySpec, config: CandidateConfig) -> Any:
    """The live config with the candidate's planner fields, retune off, no report, advisory
    off: the inner planner of a candidate replay."""
    from plansim.planner_core.config import with_changes

    changes = dict(config.planner)
    changes.update(retune=None, advisory=False, report_interval_hours=None)
    return with_changes(spec.planner_config, changes)


def replay_candidate_task(
    context: TaskContext,
    spec: ReplaySpec,
    config: CandidateConfig,
    window_path: str,
    inner_warmup: Sequence[Bucket],
) -> dict[str, Any]:
    """Replay the window for one candidate configuration; returns the replay summary."""
    del context
    from plansim.sim.host import replay

    workload = load_window(window_path)
    deployment = candidate_deployment(spec, config)
    planner = None
    if spec.planner_config is not None:
        planner = build_inner_planner(
            inner_planner_config(spec, config),
            deployment,
            inner_warmup,
            spec.throughput_interval_s,
        )
    summary = replay(workload, deployment, planner).summary
    # Wall-clock figures depend on the host, not on the candidate: a result must not.
    return without_host_keys(summary)


def build_inner_planner(
    config: Any, deployment: Any, warmup: Sequence[Bucket], interval_s: float | None
) -> Any:
    """The inner planner of a candidate replay: built like the outer one (the deployment's
    capabilities, profiling data when the workers cannot self-benchmark), but with throughput
    scaling its predictors are warmed from the history buckets ending at the window start."""
    from plansim.planner_core import PlannerEngine
    from plansim.planner_core.observations import TrafficObservation
    from plansim.sim.bootstrap import planner_inputs

    observations = None
    if interval_s is not None and warmup:
        observations = [
            TrafficObservation(
                duration_s=interval_s, num_req=n, isl=i if n else None, osl=o if n else None
            )
            for n, i, o in warmup
        ]
    capabilities, profile = planner_inputs(config, deployment)
    return PlannerEngine(config, capabilities, warmup=observations, profile_fpms=profile)
