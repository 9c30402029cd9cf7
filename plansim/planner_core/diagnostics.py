"""Per-tick diagnostics: what the planner estimated, predicted and decided at each tick.

``PlannerEffects.diagnostics`` is one flat dict per tick (:meth:`TickDiagnostics.to_row`); the
host stacks them into the ``ticks`` table (one row per tick; ``ticks.parquet``). Values are
``None`` where a quantity was not computed at that tick (the column is then null). Columns:

Tick and cadence
    ``at_s`` (planner seconds), ``tick_ordinal``, ``run_load_scaling``, ``run_throughput_scaling``
Replica counts (as observed at the tick)
    ``ready_prefill``, ``ready_decode``, ``starting_prefill``, ``starting_decode``,
    ``draining_prefill``, ``draining_decode``, ``expected_prefill``, ``expected_decode``
    (agg mode reports its workers as decode)
Observed traffic (the window handed to this tick, if any)
    ``observed_duration_s``, ``observed_num_req``, ``observed_rps`` (num_req / duration),
    ``observed_isl``, ``observed_osl``, ``observed_ttft_ms``, ``observed_itl_ms``,
    ``observed_kv_hit_rate``, ``observed_accept_length``
Load estimates (max over engines; ms)
    ``estimated_ttft_ms``, ``estimated_itl_ms``
Predictions (throughput ticks)
    ``predicted_num_req``, ``predicted_rps`` (predicted_num_req / throughput interval),
    ``predicted_isl``, ``predicted_osl``, ``predicted_kv_hit_rate``, ``predicted_accept_length``
Capacity (one engine's req/s under the SLA)
    ``engine_rps_prefill``, ``engine_rps_decode``
Throughput floors
    ``throughput_lower_bound_prefill``, ``throughput_lower_bound_decode``
Reasons (strings of :mod:`plansim.planner_core.reasons`)
    ``load_decision_reason``, ``load_decision_reason_prefill``, ``load_decision_reason_decode``,
    ``throughput_decision_reason``, ``throughput_decision_reason_prefill``,
    ``throughput_decision_reason_decode``
Engine load (per engine, for the engine-load charts)
    ``engine_queues``: JSON list of ``{"worker_id", "dp_rank", "queued_prefill_tokens",
    "queued_decode_kv_tokens", "inflight_decode_kv_tokens"}``; totals ``queued_prefill_tokens``,
    ``decode_kv_tokens`` (queued + inflight); ``max_kv_tokens`` (decode capacity per engine)
Decision
    ``scale_to_prefill``, ``scale_to_decode`` (absolute targets; null = no change),
    ``execute_action`` (apply | skip_short_circuit | skip_no_targets), ``short_circuit_reason``,
    ``plugin_overrides`` (JSON list of [plugin_id, stage, type, component, value]),
    ``reconcile_reasons`` (JSON object), ``advisory`` (bool)
SLA targets
    ``ttft_sla_ms``, ``itl_sla_ms`` (the planner's ``ttft_ms``/``itl_ms``; under ``sla_goodput``
    the deployment's ``sla`` it sizes for)
Scaling policy (``scaling_policy``; the ``sla_goodput`` columns are null under ``dynamo``)
    ``scaling_policy``; ``policy_reason``, ``policy_reason_prefill``, ``policy_reason_decode``
    (why the policy's last decision for each pool was made, in words, starting with a
    :class:`~plansim.planner_core.reasons.GoodputReason` code); ``goodput_sized_prefill``,
    ``goodput_sized_decode`` (the model's size this tick, before hysteresis);
    ``goodput_observed_violation`` (fraction of the window's completed requests over the SLA),
    ``goodput_target_violation``; ``goodput_queue_calibration``, ``goodput_stall_calibration``,
    ``goodput_bias_prefill``, ``goodput_bias_decode`` (what the model learned from attainment)
Gauges (the reference Prometheus metric names, same values as above)
    ``dynamo_planner_estimated_ttft_ms``, ``dynamo_planner_estimated_itl_ms``,
    ``dynamo_planner_engine_prefill_capacity_requests_per_second``,
    ``dynamo_planner_engine_decode_capacity_requests_per_second``,
    ``dynamo_planner_load_scaling_decision``, ``dynamo_planner_throughput_scaling_decision``
    (the two enums as their state index in the reference state lists; -1 outside them)

The reports engineer draws the 6x2 planner grid (reference 6.2) from these columns: replica counts
with the throughput lower bounds, observed vs predicted rps, observed and estimated TTFT/ITL vs
the SLA columns, engine queues, engine capacity, observed vs predicted ISL/OSL, and the load and
throughput reason tracks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from plansim.planner_core.reasons import gauge_index

GAUGES = {
    "dynamo_planner_estimated_ttft_ms": "estimated_ttft_ms",
    "dynamo_planner_estimated_itl_ms": "estimated_itl_ms",
    "dynamo_planner_engine_prefill_capacity_requests_per_second": "engine_rps_prefill",
    "dynamo_planner_engine_decode_capacity_requests_per_second": "engine_rps_decode",
}


@dataclass(slots=True)
class TickDiagnostics:
    """Per-tick scratch, reset at the start of every tick (reference 6.1 plus observations)."""

    at_s: float = 0.0
    tick_ordinal: int = 0
    run_load_scaling: bool = False
    run_throughput_scaling: bool = False
    ready_prefill: int = 0
    ready_decode: int = 0
    starting_prefill: int = 0
    starting_decode: int = 0
    draining_prefill: int = 0
    draining_decode: int = 0
    expected_prefill: int = 0
    expected_decode: int = 0
    observed_duration_s: float | None = None
    observed_num_req: float | None = None
    observed_rps: float | None = None
    observed_isl: float | None = None
    observed_osl: float | None = None
    observed_ttft_ms: float | None = None
    observed_itl_ms: float | None = None
    observed_kv_hit_rate: float | None = None
    observed_accept_length: float | None = None
    estimated_ttft_ms: float | None = None
    estimated_itl_ms: float | None = None
    predicted_num_req: float | None = None
    predicted_rps: float | None = None
    predicted_isl: float | None = None
    predicted_osl: float | None = None
    predicted_kv_hit_rate: float | None = None
    predicted_accept_length: float | None = None
    engine_rps_prefill: float | None = None
    engine_rps_decode: float | None = None
    throughput_lower_bound_prefill: int | None = None
    throughput_lower_bound_decode: int | None = None
    load_decision_reason: str | None = None
    load_decision_reason_prefill: str | None = None
    load_decision_reason_decode: str | None = None
    throughput_decision_reason: str | None = None
    throughput_decision_reason_prefill: str | None = None
    throughput_decision_reason_decode: str | None = None
    engine_queues: list[dict[str, int]] = field(default_factory=list)
    queued_prefill_tokens: int | None = None
    decode_kv_tokens: int | None = None
    max_kv_tokens: int | None = None
    scale_to_prefill: int | None = None
    scale_to_decode: int | None = None
    execute_action: str | None = None
    short_circuit_reason: str | None = None
    plugin_overrides: list[tuple[str, str, str, str, int]] = field(default_factory=list)
    reconcile_reasons: dict[str, str] = field(default_factory=dict)
    advisory: bool = False
    ttft_sla_ms: float | None = None
    itl_sla_ms: float | None = None
    scaling_policy: str | None = None
    policy_reason: str | None = None
    policy_reason_prefill: str | None = None
    policy_reason_decode: str | None = None
    goodput_sized_prefill: int | None = None
    goodput_sized_decode: int | None = None
    goodput_observed_violation: float | None = None
    goodput_target_violation: float | None = None
    goodput_queue_calibration: float | None = None
    goodput_stall_calibration: float | None = None
    goodput_bias_prefill: float | None = None
    goodput_bias_decode: float | None = None

    def to_row(self) -> dict[str, Any]:
        """The flat row for the ticks table: nested values as JSON text, plus the gauges."""
        row = asdict(self)
        for key in ("engine_queues", "plugin_overrides", "reconcile_reasons"):
            row[key] = orjson.dumps(row[key]).decode()
        for gauge, column in GAUGES.items():
            row[gauge] = row[column]
        row["dynamo_planner_load_scaling_decision"] = gauge_index(
            self.load_decision_reason, load=True
        )
        row["dynamo_planner_throughput_scaling_decision"] = gauge_index(
            self.throughput_decision_reason, load=False
        )
        return row


TICK_COLUMNS: tuple[str, ...] = tuple(TickDiagnostics().to_row())
