"""``PlannerEngine``: the clock-free planner a host ticks.

Host contract (the simulator, or any other driver)::

    engine = PlannerEngine(config, capabilities, warmup=..., retune=...)
    effects = engine.initial_tick(start_s)          # no decision; schedules the first tick
    while effects.next_tick is not None:
        # at effects.next_tick.at_s, observe what next_tick asks for:
        effects = engine.tick(TickInput(now_s, worker_counts, traffic, fpm))
        # apply effects.scale_to (unless engine.advisory), effects.router_parameters, and the
        # planner_changes of effects.retune_decisions via engine.apply_planner_changes(...)

Each tick runs OBSERVE (worker counts, traffic, FPMs into the perf models), the plugin pipeline
(PREDICT, PROPOSE, RECONCILE, CONSTRAIN), then projects the merged targets: minimum endpoints
(when no rollout is in progress) and the GPU budget band, and returns only changed roles in
``scale_to`` (agg mode scales ``num_decode``). ``diagnostics`` is the tick's row for the
``ticks`` table (see :mod:`plansim.planner_core.diagnostics`).

Retune hook: a controller object passed as ``retune`` must offer ``initial_tick(start_s)`` and
``on_tick(now_s, worker_counts) -> (router_parameters, decisions)``. The engine calls it at start
and after the pipeline on every tick, and returns its outputs in
``PlannerEffects.router_parameters`` / ``retune_decisions``. In retune-only mode (retune set, both
scaling flags false) no ``scale_to`` is ever returned.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from plansim.errors import ConfigError
from plansim.planner_core.budget import proportional_clamp_pair, proportional_clamp_single
from plansim.planner_core.builtins import BuiltinLoadPredict
from plansim.planner_core.config import PREDICTOR_FIELDS, PlannerConfig, with_changes
from plansim.planner_core.diagnostics import TickDiagnostics
from plansim.planner_core.observations import (
    ForwardPassMetrics,
    PlannerEffects,
    ScalingDecision,
    ScheduledTick,
    SlaTargets,
    TickInput,
    WorkerCapabilities,
    WorkerCounts,
)
from plansim.planner_core.pipeline import (
    Observations,
    PipelineContext,
    PlannerPlugin,
    PluginScheduler,
    load_plugin,
    normalise_plugin,
    run_pipeline,
)
from plansim.planner_core.reasons import ExecuteAction
from plansim.planner_core.scaling_policies import SCALING_POLICIES, PolicyPlugins
from plansim.planner_core.state import PlannerScalingState
from plansim.roles import Mode, PlannerMode, Role

# A decision nobody completes stops blocking new ones after this long (seconds).
DEFAULT_SCALING_TIMEOUT_S = 1800.0


def check_fits(config: PlannerConfig, capabilities: WorkerCapabilities) -> None:
    """Raise ``ConfigError`` when ``config`` cannot drive a deployment with ``capabilities``."""
    if PlannerMode(config.mode).deployment_mode != capabilities.mode:
        article = "an" if capabilities.mode == Mode.AGG else "a"
        raise ConfigError(
            f"mode {config.mode} does not match {article} {capabilities.mode} deployment",
            field="mode",
        )
    if Role.PREFILL in config.active_roles() and capabilities.prefill is None:
        raise ConfigError("the deployment has no prefill workers", field="mode")
    if config.max_gpu_budget >= 0:
        state = PlannerScalingState(config=config, capabilities=capabilities)
        state.rebuild_budget()
        b = state.budget
        floor = b.min_prefill * b.gpu_prefill + b.min_decode * b.gpu_decode
        if floor > config.max_gpu_budget:
            raise ConfigError(
                f"the minimum endpoints need {floor} GPUs, more than max_gpu_budget "
                f"{config.max_gpu_budget}",
                field="max_gpu_budget",
            )


class PlannerEngine:
    """Pure planner: observations in, effects out; time only through ``now_s``."""

    def __init__(
        self,
        config: PlannerConfig,
        capabilities: WorkerCapabilities,
        *,
        warmup: Iterable[Any] | None = None,
        retune: Any = None,
        profile_fpms: dict[str, tuple[ForwardPassMetrics, ...]] | None = None,
        plugins: Sequence[PlannerPlugin] = (),
        scaling_timeout_s: float = DEFAULT_SCALING_TIMEOUT_S,
        sla: SlaTargets | None = None,
    ) -> None:
        check_fits(config, capabilities)
        self.config = config
        self.capabilities = capabilities
        self.sla = sla
        self.retune = retune
        self.scaling_timeout_s = scaling_timeout_s
        self.state = PlannerScalingState.create(config, capabilities)
        # Bootstrap order: worker self-benchmark, then profiling data, then live FPMs only.
        if (
            not (
                capabilities.benchmark_fpms
                and self.state.install_bootstrap(capabilities.benchmark_fpms, "benchmark")
            )
            and profile_fpms
        ):
            self.state.install_bootstrap(profile_fpms, "profile")
        self._predict = BuiltinLoadPredict(self.state) if self._throughput_active() else None
        if self._predict is not None and warmup is not None:
            self._predict.warm(warmup)
        self._build_policy()
        self._user_plugins = [load_plugin(p.import_path, p.params) for p in config.plugins] + [
            normalise_plugin(p, getattr(p, "plugin_id", type(p).__name__)) for p in plugins
        ]
        self._scheduler: PluginScheduler | None = None
        self._last_tune_s = 0.0
        self._expected: tuple[int, int] | None = None
        self._expected_since_s = 0.0
        self._ordinal = 0

    # -- public API ------------------------------------------------------------------------
    @property
    def advisory(self) -> bool:
        """Advisory: decisions are computed and returned but the host must not apply them."""
        return self.config.advisory

    @property
    def plugins(self) -> list[PlannerPlugin]:
        builtins: list[PlannerPlugin] = []
        if self.config.retune_only:
            return list(self._user_plugins)
        if self._predict is not None:
            builtins.append(self._predict)
        if self._throughput_active() and self._throughput is not None:
            builtins.append(self._throughput)
        if self.config.enable_load_scaling and self._load is not None:
            builtins.append(self._load)
        return builtins + list(self._user_plugins)

    def initial_tick(self, now_s: float) -> PlannerEffects:
        """Anchor the schedule at ``now_s``; the first tick is one base interval later."""
        self._scheduler = PluginScheduler(self.plugins, now_s)
        self._last_tune_s = now_s
        if self.retune is not None:
            self.retune.initial_tick(now_s)
        return PlannerEffects(
            scale_to=None, next_tick=self._schedule(now_s + self.config.scale_interval_s)
        )

    def tick(self, inp: TickInput) -> PlannerEffects:
        """Run one tick at ``inp.now_s`` (seconds): observe, run the due plugins, project the
        targets. ``scale_to`` holds only the roles whose target changed (None when nothing
        changed, the pipeline short-circuited, or in retune-only mode); ``next_tick`` says when
        and what to observe next. ``RuntimeError`` before :meth:`initial_tick`."""
        if self._scheduler is None:
            raise RuntimeError("PlannerEngine.tick called before initial_tick")
        now = inp.now_s
        self._ordinal += 1
        diag = self.state.diag = TickDiagnostics(at_s=now, tick_ordinal=self._ordinal)
        due = self._scheduler.due(now)
        run_load = self._load in due
        run_throughput = self._throughput in due or (
            self._predict is not None and self._predict in due
        )
        diag.run_load_scaling, diag.run_throughput_scaling = run_load, run_throughput
        diag.advisory = self.advisory
        diag.ttft_sla_ms, diag.itl_sla_ms = self.config.ttft_ms, self.config.itl_ms
        diag.scaling_policy = self.config.scaling_policy

        self._observe(inp)
        baseline = self._baseline()
        ctx = PipelineContext(
            observations=Observations(now, inp.worker_counts, inp.traffic, dict(inp.fpm)),
            targets=dict(baseline),
            run_load_scaling=run_load,
            run_throughput_scaling=run_throughput,
        )
        outcome = run_pipeline(due, ctx)
        self._scheduler.mark_fired(due, now)

        scale_to = None
        if outcome.rejected is not None:
            diag.execute_action = ExecuteAction.SKIP_SHORT_CIRCUIT
            diag.short_circuit_reason = outcome.rejected
        else:
            targets = self._project(outcome.targets, outcome.touched)
            changed = {r: v for r, v in targets.items() if v != baseline[r]}
            diag.execute_action = ExecuteAction.APPLY if changed else ExecuteAction.SKIP_NO_TARGETS
            if changed and not self.config.retune_only:
                scale_to = ScalingDecision(
                    num_prefill=changed.get(Role.PREFILL), num_decode=changed.get(Role.DECODE)
                )
                diag.scale_to_prefill, diag.scale_to_decode = (
                    scale_to.num_prefill,
                    scale_to.num_decode,
                )
                if not self.advisory:
                    merged = {**baseline, **changed}
                    self._expected = (merged.get(Role.PREFILL, 0), merged.get(Role.DECODE, 0))
                    self._expected_since_s = now
        diag.plugin_overrides = outcome.overrides
        diag.reconcile_reasons = outcome.reconcile_reasons
        diag.throughput_lower_bound_prefill = (
            self.state.lower_bound_prefill if Role.PREFILL in self.config.active_roles() else None
        )
        diag.throughput_lower_bound_decode = (
            self.state.lower_bound_decode if Role.DECODE in self.config.active_roles() else None
        )

        router_parameters: dict[str, dict[str, Any]] = {}
        decisions: tuple[dict[str, Any], ...] = ()
        if self.retune is not None:
            router_parameters, decisions = self.retune.on_tick(now, inp.worker_counts)
        return PlannerEffects(
            scale_to=scale_to,
            next_tick=self._schedule(now + self.config.scale_interval_s),
            diagnostics=diag.to_row(),
            router_parameters=router_parameters,
            retune_decisions=tuple(decisions),
        )

    def apply_planner_changes(
        self, changes: dict[str, Any], predictor_warmup: Iterable[Any] | None = None
    ) -> None:
        """Apply PlannerConfig field changes (from a retune decision) from the next tick on.

        Re-validates the whole config and its fit to the deployment (``ConfigError`` on
        failure, nothing changed). A changed load predictor is rebuilt and warmed from
        ``predictor_warmup``; perf models keep their samples."""
        if not changes:
            return
        new = with_changes(self.config, changes)
        check_fits(new, self.capabilities)
        self.config = new
        self.state.config = new
        self.state.rebuild_budget()
        if not changes.keys().isdisjoint(("scaling_policy", "scaling_policy_params")):
            self._build_policy()
        for model in self.state.perf_models.values():
            model.min_observations = new.load_min_observations
        if self._throughput_active():
            if self._predict is None:
                self._predict = BuiltinLoadPredict(self.state)
                if predictor_warmup is not None:
                    self._predict.warm(predictor_warmup)
            elif not changes.keys().isdisjoint(PREDICTOR_FIELDS):
                self._predict.replace_predictor(predictor_warmup)
        if self._scheduler is not None:
            # a plugin the change enables fires on the next tick
            previous, self._scheduler = (
                self._scheduler,
                PluginScheduler(self.plugins, float("-inf")),
            )
            self._scheduler.carry_over(previous)

    # -- internals ---------------------------------------------------------------------------
    def _build_policy(self) -> None:
        policy = SCALING_POLICIES.get(self.config.scaling_policy)
        self._policy: PolicyPlugins = policy.plugins(
            self.state, self.config.policy_params, self.sla
        )
        self._throughput = self._policy.throughput
        self._load = self._policy.load

    def _throughput_active(self) -> bool:
        c = self.config
        return c.optimization_target == "sla" and c.enable_throughput_scaling and not c.retune_only

    def _schedule(self, at_s: float) -> ScheduledTick:
        due = self._scheduler.due(at_s) if self._scheduler is not None else []
        traffic_windows = [p.observation_window_seconds or 0.0 for p in due if "traffic" in p.needs]
        tune_due = self.config.optimization_target == "sla" and self._tune_due(at_s)
        return ScheduledTick(
            at_s=at_s,
            run_load_scaling=self._load in due,
            run_throughput_scaling=self._throughput in due,
            need_traffic_metrics=bool(traffic_windows),
            traffic_metrics_duration_s=max(traffic_windows, default=0.0),
            need_worker_states=True,
            need_worker_fpm=tune_due or any("fpm" in p.needs for p in due),
        )

    def _tune_due(self, now_s: float) -> bool:
        return now_s - self._last_tune_s >= self.config.load_adjustment_interval_seconds - 1e-9

    def _observe(self, inp: TickInput) -> None:
        state, diag = self.state, self.state.diag
        counts = inp.worker_counts
        if self._expected is not None:
            reached = self._expected == (counts.ready_prefill, counts.ready_decode)
            timed_out = inp.now_s - self._expected_since_s >= self.scaling_timeout_s
            if reached or timed_out:
                self._expected = None
        state.observe_workers(counts, self._expected_for_roles(counts))
        diag.ready_prefill, diag.ready_decode = counts.ready_prefill, counts.ready_decode
        diag.starting_prefill, diag.starting_decode = (
            counts.starting_prefill,
            counts.starting_decode,
        )
        diag.draining_prefill, diag.draining_decode = (
            counts.draining_prefill,
            counts.draining_decode,
        )
        diag.expected_prefill, diag.expected_decode = state.expected_prefill, state.expected_decode
        caps = state.role_caps(Role.DECODE)
        diag.max_kv_tokens = caps.max_kv_tokens if caps is not None else None
        traffic = inp.traffic
        if traffic is not None:
            state.update_runtime_metadata(traffic.kv_hit_rate, traffic.accept_length)
            diag.observed_duration_s = traffic.duration_s
            diag.observed_num_req = traffic.num_req
            diag.observed_rps = (
                traffic.num_req / traffic.duration_s if traffic.duration_s > 0 else None
            )
            diag.observed_isl, diag.observed_osl = traffic.isl, traffic.osl
            diag.observed_ttft_ms, diag.observed_itl_ms = traffic.ttft_ms, traffic.itl_ms
            diag.observed_kv_hit_rate, diag.observed_accept_length = (
                traffic.kv_hit_rate,
                traffic.accept_length,
            )
        if self.config.optimization_target == "sla" and self._tune_due(inp.now_s):
            self._last_tune_s = inp.now_s
            self._feed_perf_models(inp.fpm)
        if self._policy.observe is not None:
            self._policy.observe(inp)

    def _expected_for_roles(self, counts: WorkerCounts) -> tuple[int, int] | None:
        if self._expected is None:
            return None
        exp_p, exp_d = self._expected
        if Role.PREFILL not in self.config.active_roles():
            exp_p = counts.ready_prefill
        if Role.DECODE not in self.config.active_roles():
            exp_d = counts.ready_decode
        return exp_p, exp_d

    def _feed_perf_models(self, fpm: dict[str, tuple[ForwardPassMetrics, ...]]) -> None:
        """Train on every observation: each is one rank's per-pass means since its previous one."""
        for role, model in self.state.perf_models.items():
            for f in fpm.get(role, ()):
                model.observe(f)

    def _baseline(self) -> dict[str, int]:
        """Per scaled role: where the deployment is heading (pending target, else ready)."""
        s = self.state
        return {
            r: (s.expected_prefill if r == Role.PREFILL else s.expected_decode)
            for r in self.config.active_roles()
        }

    def _project(self, targets: dict[str, int], touched: set[str]) -> dict[str, int]:
        """Final invariants: minimum endpoints (unless a rollout is in progress), GPU band."""
        s = self.state
        roles = self.config.active_roles()
        out = {r: targets[r] for r in roles}
        for r in roles:
            if not s.in_progress(r):
                out[r] = max(out[r], s.min_endpoint(r))
        if not (touched & set(roles)) and out == {r: targets[r] for r in roles}:
            return out
        b = s.budget
        if len(roles) == 2:
            if not b.pair_in_band((out[Role.PREFILL], out[Role.DECODE])):
                p, d = proportional_clamp_pair((out[Role.PREFILL], out[Role.DECODE]), b)
                out = {Role.PREFILL: p, Role.DECODE: d}
        else:
            (r,) = roles
            out[r] = proportional_clamp_single(out[r], s.gpus_per_replica(r), s.min_endpoint(r), b)
        return out
