"""Engine keys an AIConfigurator model decides.

With ``timing_model: {type: aic, ...}``, unless the engine sets them itself:

- ``num_gpu_blocks``: the GPU's KV capacity (:mod:`plansim.aic.memory`), with the backend's
  memory-fraction key; the other two fraction keys, or all three when ``num_gpu_blocks`` is
  given, have no effect and are listed in ``no_effect_keys``.
- ``kv_bytes_per_token`` (the disaggregated handoff): KV bytes per token per GPU x TP.
- ``tensor_parallel_size`` = ``tp_size`` and ``dp_size`` = ``attention_dp_size`` (when above 1),
  so ``gpus_per_worker`` = TP x DP; a conflicting explicit value is an error.
"""

from __future__ import annotations

from typing import Any

from plansim.aic.memory import MEMORY_FRACTION_KEYS, kv_capacity
from plansim.aic.spec import AicSpec
from plansim.errors import ConfigError


def derived_engine_fields(args: Any, spec: AicSpec) -> dict[str, Any]:
    """Values for the keys above that ``args`` (a validated ``EngineArgs``) left unset, and its
    ``no_effect_keys`` extended by the memory-fraction keys without effect."""
    given = args.model_fields_set
    out: dict[str, Any] = {}
    _agree(args, given, "tensor_parallel_size", spec.tp_size, "tp_size", out)
    if spec.attention_dp_size > 1:
        _agree(args, given, "dp_size", spec.attention_dp_size, "attention_dp_size", out)
    fraction_key, default = MEMORY_FRACTION_KEYS[spec.backend]
    used = set()
    if "num_gpu_blocks" not in given or "kv_bytes_per_token" not in given:
        fraction = getattr(args, fraction_key)
        try:
            capacity = kv_capacity(
                spec,
                block_size=args.block_size,
                max_num_batched_tokens=args.max_num_batched_tokens,
                max_num_seqs=args.max_num_seqs,
                memory_fraction=default if fraction is None else fraction,
            )
        except ConfigError as exc:
            raise ValueError(exc.message) from None
        if "num_gpu_blocks" not in given:
            out["num_gpu_blocks"] = capacity.num_gpu_blocks
            used.add(fraction_key)
        if "kv_bytes_per_token" not in given:
            out["kv_bytes_per_token"] = capacity.handoff_bytes_per_token
    unused = [
        key
        for key, _ in MEMORY_FRACTION_KEYS.values()
        if key not in used and getattr(args, key) is not None
    ]
    if unused:
        out["no_effect_keys"] = tuple(sorted(set(args.no_effect_keys) | set(unused)))
    return out


def _agree(
    args: Any, given: set[str], field: str, value: int, spec_field: str, out: dict[str, Any]
) -> None:
    if field not in given:
        out[field] = value
    elif getattr(args, field) != value:
        raise ValueError(
            f"{field} {getattr(args, field)} differs from timing_model.{spec_field} {value}"
        )
