"""What the host (the simulator, or a live runtime) hands the planner each tick, and what the
planner hands back. Planner time is in seconds; the host converts from its own clock.

These records are the contract between ``sim`` and ``planner_core``: ``sim`` builds
``TickInput`` values, ``planner_core.PlannerEngine`` returns ``PlannerEffects``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ForwardPassMetrics:
    """One engine pass (forward pass) of one worker rank, as the engine reports it.

    ``wall_time_s`` is the pass duration in seconds; 0 marks an idle heartbeat.
    Scheduled = in this pass; queued = waiting when the pass was scheduled.
    """

    worker_id: int
    dp_rank: int
    wall_time_s: float
    num_prefill_requests: int
    sum_prefill_tokens: int
    num_decode_requests: int
    sum_decode_kv_tokens: int
    queued_prefill_requests: int
    queued_prefill_tokens: int
    queued_decode_requests: int
    queued_decode_kv_tokens: int


@dataclass(frozen=True, slots=True)
class TrafficObservation:
    """Traffic since the planner's last traffic read.

    ``num_req`` counts requests offered (arrived) in the window; ``isl``/``osl`` are averages over
    requests completed in it; latencies in milliseconds; any average is ``None`` without samples.
    """

    duration_s: float
    num_req: float
    isl: float | None
    osl: float | None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    kv_hit_rate: float | None = None
    accept_length: float | None = None


@dataclass(frozen=True, slots=True)
class WorkerCounts:
    """Workers per role. ``ready`` serve traffic; ``starting`` are provisioned but not yet ready;
    ``draining`` no longer take requests. Agg mode reports its workers as decode."""

    ready_prefill: int
    ready_decode: int
    starting_prefill: int = 0
    starting_decode: int = 0
    draining_prefill: int = 0
    draining_decode: int = 0
    # Host-side "a scale operation of this role is not finished" flags (e.g. a connector that
    # has not acknowledged the last decision); the planner then only observes that role.
    prefill_in_progress: bool = False
    decode_in_progress: bool = False


@dataclass(frozen=True, slots=True)
class ScheduledTick:
    """When the next tick runs and what it needs from the host."""

    at_s: float
    run_load_scaling: bool = False
    run_throughput_scaling: bool = False
    need_traffic_metrics: bool = False
    traffic_metrics_duration_s: float = 0.0
    need_worker_states: bool = True
    need_worker_fpm: bool = False


@dataclass(frozen=True, slots=True)
class TickInput:
    """Everything the planner observes at one tick. ``fpm`` maps role (``"prefill"``/``"decode"``)
    to the latest pass of each ready worker rank."""

    now_s: float
    worker_counts: WorkerCounts
    traffic: TrafficObservation | None = None
    fpm: dict[str, tuple[ForwardPassMetrics, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ScalingDecision:
    """Absolute replica targets; ``None`` means no opinion for that role."""

    num_prefill: int | None
    num_decode: int | None


@dataclass(frozen=True, slots=True)
class PlannerEffects:
    """What a tick returns. ``scale_to`` None: no change. ``next_tick`` None: stop ticking.

    ``router_parameters``: complete desired router parameter map per worker type (level-triggered;
    the host applies the difference), filled by retune only. ``retune_decisions``: decision
    records whose ``planner_changes`` the host applies after the tick.
    """

    scale_to: ScalingDecision | None
    next_tick: ScheduledTick | None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    router_parameters: dict[str, dict[str, Any]] = field(default_factory=dict)
    retune_decisions: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class RoleCapabilities:
    """What one worker of a role can do, derived by the host from its engine arguments."""

    num_gpu: int
    max_num_batched_tokens: int
    max_num_seqs: int
    max_kv_tokens: int
    context_length: int | None = None
    speculative_nextn: int = 0


@dataclass(frozen=True, slots=True)
class WorkerCapabilities:
    """Per-role capabilities: ``decode`` only in agg mode, both in disagg mode.

    ``benchmark_fpms`` are the workers' self-benchmark passes (bootstrap source 1 of the seed),
    per role; empty when the host cannot benchmark.
    """

    mode: str
    decode: RoleCapabilities
    prefill: RoleCapabilities | None = None
    benchmark_fpms: dict[str, tuple[ForwardPassMetrics, ...]] = field(default_factory=dict)
