"""``PlannerScalingState``: the cross-tick state the builtin plugins share (seed, "Builtin
Shared State"). Predictor history is deliberately not here: ``builtin_load_predict`` owns it.

It holds exactly:

- worker inventory: ready and expected counts per role, and whether a scale operation of a role
  is still in progress;
- perf models: one :class:`EnginePerfModel` per scaled role (prefill, decode, or agg), with the
  pre-deployment bootstrap FPMs and the online FPM updates;
- throughput lower bounds per role (initially 1; load scaling may go above, never below);
- runtime metadata: last valid KV hit rate and speculative accept length (last-value semantics);
- per-tick diagnostics scratch (:class:`TickDiagnostics`);
- worker capabilities and budget inputs (GPUs per replica, minimum endpoints, GPU band).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from plansim.planner_core.budget import (
    Budget,
    Pair,
    guard_disagg_scaling_budget,
    proportional_clamp_pair,
)
from plansim.planner_core.diagnostics import TickDiagnostics
from plansim.planner_core.observations import ForwardPassMetrics, WorkerCapabilities, WorkerCounts
from plansim.planner_core.perf_model import EngineLimits, EnginePerfModel
from plansim.planner_core.reasons import BudgetReason
from plansim.roles import PlannerMode, Role

if TYPE_CHECKING:
    # The state holds a validated config and reads its fields: the config module, which
    # validates against the scaling-policy registry whose loops hold the state, is not needed
    # to import it.
    from plansim.planner_core.config import PlannerConfig


@dataclass(slots=True)
class PlannerScalingState:
    config: PlannerConfig
    capabilities: WorkerCapabilities
    # worker inventory
    ready_prefill: int = 0
    ready_decode: int = 0
    expected_prefill: int = 0
    expected_decode: int = 0
    prefill_in_progress: bool = False
    decode_in_progress: bool = False
    # perf models, keyed by role ("prefill", "decode"; agg mode keeps its model under "decode")
    perf_models: dict[str, EnginePerfModel] = field(default_factory=dict)
    bootstrap_source: str = "live"
    # throughput floors
    lower_bound_prefill: int = 1
    lower_bound_decode: int = 1
    # runtime metadata (last valid values)
    last_kv_hit_rate: float | None = None
    last_accept_length: float | None = None
    # per-tick scratch
    diag: TickDiagnostics = field(default_factory=TickDiagnostics)
    # budget inputs
    budget: Budget = field(default_factory=Budget)

    @classmethod
    def create(cls, config: PlannerConfig, capabilities: WorkerCapabilities) -> PlannerScalingState:
        state = cls(config=config, capabilities=capabilities)
        state.rebuild_budget()
        for role in config.active_roles():
            kind = PlannerMode(config.mode).pool_for(role)
            state.perf_models[role] = EnginePerfModel(
                kind,
                EngineLimits.from_capabilities(state.role_caps(role)),
                max_samples=config.max_num_fpm_samples,
                bucket_count=config.fpm_sample_bucket_size,
                min_observations=config.load_min_observations,
            )
        return state

    # -- capabilities and budget ----------------------------------------------------------
    def role_caps(self, role: str):
        caps = self.capabilities
        return caps.prefill if role == Role.PREFILL else caps.decode

    def gpus_per_replica(self, role: str) -> int:
        """Config value when set, else the worker's capability (1 when unknown)."""
        configured = (
            self.config.prefill_engine_num_gpu
            if role == Role.PREFILL
            else self.config.decode_engine_num_gpu
        )
        if configured is not None:
            return configured
        caps = self.role_caps(role)
        return caps.num_gpu if caps is not None else 1

    def min_endpoint(self, role: str) -> int:
        return self.config.min_endpoint_for(role) if role in self.config.active_roles() else 0

    def rebuild_budget(self) -> None:
        self.budget = Budget(
            min_gpus=self.config.min_gpu_budget,
            max_gpus=self.config.max_gpu_budget,
            gpu_prefill=self.gpus_per_replica(Role.PREFILL),
            gpu_decode=self.gpus_per_replica(Role.DECODE),
            min_prefill=self.min_endpoint(Role.PREFILL),
            min_decode=self.min_endpoint(Role.DECODE),
        )

    # -- inventory -------------------------------------------------------------------------
    def observe_workers(self, counts: WorkerCounts, expected: Pair | None) -> None:
        """Record ready counts; a role is in progress while workers start or drain (the
        reference counts draining workers as active, so its expected count differs from them
        until they are gone), the host flags it, or the counts the planner last asked for are not
        ready yet."""
        self.ready_prefill, self.ready_decode = counts.ready_prefill, counts.ready_decode
        exp_p, exp_d = expected if expected is not None else (self.ready_prefill, self.ready_decode)
        self.expected_prefill, self.expected_decode = exp_p, exp_d
        self.prefill_in_progress = (
            counts.starting_prefill > 0
            or counts.draining_prefill > 0
            or counts.prefill_in_progress
            or exp_p != self.ready_prefill
        )
        self.decode_in_progress = (
            counts.starting_decode > 0
            or counts.draining_decode > 0
            or counts.decode_in_progress
            or exp_d != self.ready_decode
        )

    def ready(self, role: str) -> int:
        return self.ready_prefill if role == Role.PREFILL else self.ready_decode

    def in_progress(self, role: str) -> bool:
        return self.prefill_in_progress if role == Role.PREFILL else self.decode_in_progress

    def lower_bound(self, role: str) -> int:
        return self.lower_bound_prefill if role == Role.PREFILL else self.lower_bound_decode

    def set_lower_bound(self, role: str, value: int) -> None:
        if role == Role.PREFILL:
            self.lower_bound_prefill = value
        else:
            self.lower_bound_decode = value

    # -- perf models and metadata ------------------------------------------------------------
    def install_bootstrap(
        self, fpms: dict[str, tuple[ForwardPassMetrics, ...]], source: str
    ) -> bool:
        """Feed pre-deployment FPMs to the perf models; True if any model received some."""
        installed = False
        for role, model in self.perf_models.items():
            role_fpms = fpms.get(role, ())
            if self.config.mode == PlannerMode.AGG:
                # agg models learn from both pass kinds: prefill-only and decode-only samples.
                role_fpms = tuple(fpms.get(Role.DECODE, ())) + tuple(fpms.get(Role.PREFILL, ()))
            for fpm in role_fpms:
                model.observe(fpm, update_averages=False)
            installed = installed or bool(role_fpms)
        if installed:
            self.bootstrap_source = source
        return installed

    def update_runtime_metadata(
        self, kv_hit_rate: float | None, accept_length: float | None
    ) -> None:
        """Keep the last valid KV hit rate and accept length (clamped to [1, nextn + 1])."""
        if kv_hit_rate is not None and math.isfinite(kv_hit_rate):
            self.last_kv_hit_rate = min(max(kv_hit_rate, 0.0), 1.0)
        if accept_length is not None and math.isfinite(accept_length):
            self.last_accept_length = accept_length

    def accept_length(self) -> float:
        """Accept length for capacity: last value clamped to [1, nextn + 1]; 1 without spec."""
        caps = self.capabilities.decode
        nextn = (
            caps.speculative_nextn
            if caps is not None and caps.speculative_nextn > 0
            else self.config.speculative_nextn
        )
        value = self.last_accept_length
        if nextn <= 0 or value is None or not math.isfinite(value):
            return 1.0
        return min(max(value, 1.0), nextn + 1.0)

    # -- budget wrappers ---------------------------------------------------------------------
    def apply_disagg_scaling_budget(
        self, current: Pair, proposed: Pair
    ) -> tuple[Pair, BudgetReason | None]:
        """Direction-preserving guard; a role below its minimum reconciles first."""
        b = self.budget
        if current[0] < b.min_prefill or current[1] < b.min_decode:
            lifted = (max(proposed[0], b.min_prefill), max(proposed[1], b.min_decode))
            return proportional_clamp_pair(lifted, b), BudgetReason.RECONCILE
        return guard_disagg_scaling_budget(current, proposed, b)
