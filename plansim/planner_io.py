"""The file edge of the planner: reading planner configs, profiling data and the predictor
warm-up trace. ``plansim.planner_core`` never reads files; hosts and commands call this module
and pass what it returns into :class:`~plansim.planner_core.engine.PlannerEngine`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson

from plansim.configfile import read_config
from plansim.errors import ConfigError
from plansim.planner_core.config import PlannerConfig, parse_planner_config
from plansim.planner_core.observations import ForwardPassMetrics, TrafficObservation
from plansim.planner_core.profile_data import fpms_from_arrays

PROFILE_LAYOUT = {
    "prefill": ("selected_prefill_interpolation/raw_data.npz", "prefill_raw_data.json"),
    "decode": ("selected_decode_interpolation/raw_data.npz", "decode_raw_data.json"),
}


def read_planner_config(path: str | Path) -> PlannerConfig:
    """Load and validate the planner config in ``path`` (see :func:`read_planner_mapping`)."""
    return parse_planner_config(read_planner_mapping(path), source=str(path))


def read_planner_mapping(path: str | Path) -> dict[str, Any]:
    """The raw planner mapping in a YAML/JSON file (``plansim.configfile.read_config``). A file
    with a ``planner:`` mapping (e.g. a whole deployment file) gives that block. Raises
    ``ConfigError`` naming the file (and line, for a syntax error)."""
    raw = read_config(path, what="planner config")
    if isinstance(raw.get("planner"), dict):
        return raw["planner"]
    return raw


def read_profile_fpms(profile_results_dir: str | Path) -> dict[str, tuple[ForwardPassMetrics, ...]]:
    """Bootstrap FPMs from ``profile_results_dir`` (reference section 8 layout, NPZ preferred
    over the JSON fallback), or from a single engine timing-profile ``.npz`` file. A missing
    directory gives ``{}`` (the planner then learns from live FPMs)."""
    root = Path(profile_results_dir)
    try:
        if root.is_file():
            with np.load(root) as npz:
                return fpms_from_arrays({k: npz[k] for k in npz.files})
        if not root.is_dir():
            return {}
        arrays: dict[str, Any] = {}
        for npz_name, json_name in PROFILE_LAYOUT.values():
            if (root / npz_name).is_file():
                with np.load(root / npz_name) as npz:
                    arrays.update({k: npz[k] for k in npz.files})
            elif (root / json_name).is_file():
                arrays.update(orjson.loads((root / json_name).read_bytes()))
        return fpms_from_arrays(arrays)
    except (OSError, ValueError, KeyError, orjson.JSONDecodeError) as exc:
        raise ConfigError(
            f"unreadable profiling data: {exc}", source=str(root), field="profile_results_dir"
        ) from None


def read_warmup_observations(config: PlannerConfig) -> list[TrafficObservation] | None:
    """``load_predictor_warmup_trace`` bucketed at the throughput interval (``traces.buckets``:
    origin at the first arrival, empty intervals between the first and the last kept with 0
    requests), one observation per bucket; None without a warm-up trace or outside ``sla``."""
    if config.load_predictor_warmup_trace is None or config.optimization_target != "sla":
        return None
    from plansim.traces import load_workload
    from plansim.traces.buckets import buckets

    interval_s = config.throughput_adjustment_interval_seconds
    table = buckets(load_workload(config.load_predictor_warmup_trace), interval_s)
    return [
        TrafficObservation(duration_s=interval_s, num_req=float(n), isl=float(i), osl=float(o))
        for n, i, o in zip(table["request_count"], table["avg_isl"], table["avg_osl"])
    ]
