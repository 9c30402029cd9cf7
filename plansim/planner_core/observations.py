"""What the host (the simulator, or a live runtime) hands the planner each tick, and what the
planner hands back. Planner time is in seconds; the host converts from its own clock.

These records are the contract between ``sim`` and ``planner_core``: ``sim`` builds
``TickInput`` values, ``planner_core.PlannerEngine`` returns ``PlannerEffects``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class PassTotals:
    """Sums over a set of forward passes of one worker rank: how many, their total wall time
    (seconds), and the requests and tokens they scheduled."""

    passes: int = 0
    wall_s: float = 0.0
    prefill_requests: int = 0
    prefill_tokens: int = 0
    decode_requests: int = 0
    decode_kv_tokens: int = 0
    # Sum over passes of the squared prompt tokens per pass: a convex prefill cost can be fitted
    # from window sums, as every other feature is.
    prefill_tokens_sq: int = 0

    def __add__(self, other: PassTotals) -> PassTotals:
        return PassTotals(
            self.passes + other.passes,
            self.wall_s + other.wall_s,
            self.prefill_requests + other.prefill_requests,
            self.prefill_tokens + other.prefill_tokens,
            self.decode_requests + other.decode_requests,
            self.decode_kv_tokens + other.decode_kv_tokens,
            self.prefill_tokens_sq + other.prefill_tokens_sq,
        )


@dataclass(frozen=True, slots=True)
class ForwardPassMetrics:
    """Forward-pass metrics of one worker rank, as the engine reports them to the planner.

    The scheduled fields (``wall_time_s`` in seconds, request and token counts) are per-pass
    means over the ``num_passes`` passes the rank completed since the previous observation: the
    seed's per-worker time-averaged metrics. Each pass counts once, so a long chunked-prefill
    pass weighs as much as a short decode pass, as in the engine's own iteration log; a single
    pass is a window of one. ``num_passes`` 0 with ``wall_time_s`` 0 is an idle heartbeat.

    Queued fields are the waiting queue at the observation. ``inflight_prefill_tokens``: prompt
    tokens still to compute of running requests whose prefill is under way (chunked prefill).
    ``mixed`` / ``decode_only``: the window's totals split into passes that scheduled prompt
    tokens and passes that did not (``None`` for a synthetic pass, such as a benchmark sample).
    """

    worker_id: int
    dp_rank: int
    wall_time_s: float
    num_prefill_requests: float
    sum_prefill_tokens: float
    num_decode_requests: float
    sum_decode_kv_tokens: float
    queued_prefill_requests: int
    queued_prefill_tokens: int
    queued_decode_requests: int
    queued_decode_kv_tokens: int
    num_passes: int = 1
    inflight_prefill_tokens: int = 0
    mixed: PassTotals | None = None
    decode_only: PassTotals | None = None

    @classmethod
    def sample(
        cls,
        worker_id: int,
        wall_time_s: float,
        *,
        n_prefill: int = 0,
        prefill_tokens: int = 0,
        n_decode: int = 0,
        decode_kv_tokens: int = 0,
    ) -> ForwardPassMetrics:
        """One synthetic pass of rank 0 with empty queues (a benchmark or profile sample)."""
        return cls(
            worker_id=worker_id,
            dp_rank=0,
            wall_time_s=wall_time_s,
            num_prefill_requests=n_prefill,
            sum_prefill_tokens=prefill_tokens,
            num_decode_requests=n_decode,
            sum_decode_kv_tokens=decode_kv_tokens,
            queued_prefill_requests=0,
            queued_prefill_tokens=0,
            queued_decode_requests=0,
            queued_decode_kv_tokens=0,
        )

    @classmethod
    def from_window(
        cls,
        worker_id: int,
        dp_rank: int,
        mixed: PassTotals,
        decode_only: PassTotals,
        *,
        queued: tuple[int, int, int, int] = (0, 0, 0, 0),
        inflight_prefill_tokens: int = 0,
    ) -> ForwardPassMetrics:
        """The per-pass means of a window of passes; ``queued`` is (prefill requests, prefill
        tokens, decode requests, decode KV tokens) waiting at the observation."""
        total = mixed + decode_only
        n = total.passes
        scale = 1.0 / n if n else 0.0
        return cls(
            worker_id=worker_id,
            dp_rank=dp_rank,
            wall_time_s=total.wall_s * scale,
            num_prefill_requests=total.prefill_requests * scale,
            sum_prefill_tokens=total.prefill_tokens * scale,
            num_decode_requests=total.decode_requests * scale,
            sum_decode_kv_tokens=total.decode_kv_tokens * scale,
            queued_prefill_requests=queued[0],
            queued_prefill_tokens=queued[1],
            queued_decode_requests=queued[2],
            queued_decode_kv_tokens=queued[3],
            num_passes=n,
            inflight_prefill_tokens=inflight_prefill_tokens,
            mixed=mixed,
            decode_only=decode_only,
        )


@dataclass(frozen=True, slots=True)
class CompletedRequests:
    """The requests completed in a traffic window, one entry per request (the frontend's request
    log): prompt and output tokens, prompt tokens served from the prefix cache, prompt tokens an
    earlier request had already sent (what a cache of unbounded size would have served: the
    router sees every request's block hashes), TTFT and mean inter-token gap in milliseconds
    (NaN without a first token / with fewer than 2 tokens)."""

    isl_tokens: np.ndarray
    osl_tokens: np.ndarray
    cached_tokens: np.ndarray
    reusable_tokens: np.ndarray
    ttft_ms: np.ndarray
    itl_ms: np.ndarray

    def __len__(self) -> int:
        return int(self.isl_tokens.shape[0])


@dataclass(frozen=True, slots=True)
class TrafficObservation:
    """Traffic since the planner's last traffic read.

    ``num_req`` counts requests offered (arrived) in the window; ``isl``/``osl`` are averages over
    requests completed in it; latencies in milliseconds; any average is ``None`` without samples.
    ``requests``: the completed requests one by one, when the host keeps them.
    """

    duration_s: float
    num_req: float
    isl: float | None
    osl: float | None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    kv_hit_rate: float | None = None
    accept_length: float | None = None
    requests: CompletedRequests | None = None


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
    to one :class:`ForwardPassMetrics` per ready worker rank: its passes since the previous FPM
    observation."""

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
class SlaTargets:
    """The goodput SLA a deployment is scored on, in milliseconds (None: not bounded)."""

    ttft_ms: float | None = None
    itl_ms: float | None = None


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
