"""Decision-reason enums. Values are the reference strings; the enum order of the load and
throughput reasons is the reference metric state order (``LOAD_DECISION_STATES``,
``THROUGHPUT_DECISION_STATES``), so ``gauge_index`` gives the enum gauge value."""

from __future__ import annotations

from enum import StrEnum


class LoadReason(StrEnum):
    UNSET = "unset"
    DISABLED = "disabled"
    NO_FPM_DATA = "no_fpm_data"
    SCALING_IN_PROGRESS = "scaling_in_progress"
    WORKER_COUNT_MISMATCH = "worker_count_mismatch"
    INSUFFICIENT_DATA = "insufficient_data"
    NO_CHANGE = "no_change"
    SCALE_UP = "scale_up"
    SCALE_DOWN = "scale_down"
    SCALE_DOWN_CAPPED_BY_THROUGHPUT = "scale_down_capped_by_throughput"
    SCALE_DOWN_REFUSED_CONSOLIDATION = "scale_down_refused_consolidation"


class ThroughputReason(StrEnum):
    UNSET = "unset"
    DISABLED = "disabled"
    NO_TRAFFIC_DATA = "no_traffic_data"
    PREDICT_FAILED = "predict_failed"
    MODEL_NOT_READY = "model_not_ready"
    SET_LOWER_BOUND = "set_lower_bound"
    SCALE = "scale"
    # Emitted but not part of the reference gauge states.
    PARTNER_NOT_READY = "partner_not_ready"
    NO_CHANGE = "no_change"


class GoodputReason(StrEnum):
    """Decision codes of the ``sla_goodput`` policy (the ``policy_reason*`` texts start with
    them). ``scale_up``, ``no_change``, ``scaling_in_progress`` and ``model_not_ready`` keep the
    reference strings."""

    SIZED = "goodput_sized"
    MOST_CONSERVATIVE = "goodput_most_conservative"
    SCALE_DOWN_HELD = "goodput_scale_down_held"
    QUEUE_PRESSURE = "goodput_queue_pressure"
    KV_PRESSURE = "goodput_kv_pressure"
    AT_CEILING = "goodput_at_ceiling"
    NO_PREDICTION = "goodput_no_prediction"
    NO_TRAFFIC = "no_traffic_data"
    MODEL_NOT_READY = "model_not_ready"
    SCALE_UP = "scale_up"
    NO_CHANGE = "no_change"
    SCALING_IN_PROGRESS = "scaling_in_progress"


class BudgetReason(StrEnum):
    GUARD_HOLD = "gpu_budget_guard_hold"
    RECONCILE = "gpu_budget_reconcile"


class ExecuteAction(StrEnum):
    APPLY = "apply"
    SKIP_SHORT_CIRCUIT = "skip_short_circuit"
    SKIP_NO_TARGETS = "skip_no_targets"


_LOAD_GAUGE_STATES = tuple(LoadReason)
_THROUGHPUT_GAUGE_STATES = tuple(ThroughputReason)[:7]


def gauge_index(reason: str | None, *, load: bool) -> int:
    """Index of ``reason`` in the reference enum gauge states; -1 for reasons outside them."""
    states = _LOAD_GAUGE_STATES if load else _THROUGHPUT_GAUGE_STATES
    for i, state in enumerate(states):
        if state.value == (reason or "unset"):
            return i
    return -1
