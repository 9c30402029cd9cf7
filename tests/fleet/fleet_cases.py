"""Small fleets for the tests: Qwen3-0.6B timed by AIConfigurator (the ``aic`` extra) on H100
and H200, behind round-robin routing, with short synthetic traces written as Mooncake JSONL.

``light`` is 60 requests per second for 20 s, ``heavy`` 90 per second (4,000-token prompts, 40
output tokens, SLA TTFT 150 ms / ITL 4 ms): each needs a few workers of either GPU, and a
replay takes a fraction of a second. ``step`` is 30 per second for 20 s, then 150 per second for
20 s: a planner sized for the first half must scale up in the second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import yaml

SLA = {"ttft_ms": 150.0, "itl_ms": 4.0}
RATES = {"light": ((20.0, 60.0),), "heavy": ((20.0, 90.0),), "step": ((20.0, 30.0), (20.0, 150.0))}
PRICES = {"h200_sxm": 3.5, "h100_sxm": 2.2}
SEARCH = {"timing_model.system": ["h200_sxm", "h100_sxm"]}


def write_trace(
    path: Path,
    spans: tuple[tuple[float, float], ...],
    seed: int = 3,
    isl: int = 4000,
    osl: int = 40,
) -> Path:
    """Requests at uniform random times, ``spans`` of (seconds, requests per second) in turn."""
    rng = np.random.default_rng(seed)
    parts, start = [], 0.0
    for seconds, rate in spans:
        parts.append(np.sort(rng.uniform(start, start + seconds * 1000.0, int(rate * seconds))))
        start += seconds * 1000.0
    arrivals = np.concatenate(parts)
    blocks = -(-isl // 512)
    with path.open("w") as f:
        for i, at in enumerate(arrivals):
            f.write(
                orjson.dumps(
                    {
                        "timestamp": float(at),
                        "input_length": isl,
                        "output_length": osl,
                        "hash_ids": list(range(i * blocks, (i + 1) * blocks)),
                    }
                ).decode()
                + "\n"
            )
    return path


def deployment(system: str = "h100_sxm", planner: bool = False, **extra: Any) -> dict[str, Any]:
    """A deployment file's mapping; ``planner``: with Dynamo's planner (throughput loop every
    5 s, at most 8 GPUs)."""
    out: dict[str, Any] = {
        "mode": "agg",
        "num_workers": 1,
        "engine": {
            "timing_model": {"type": "aic", "model": "Qwen/Qwen3-0.6B", "system": system},
            "startup_time": 2.0,
        },
        "router": {"mode": "round_robin"},
        "sla": dict(SLA),
        **extra,
    }
    if planner:
        out["planner"] = {
            "mode": "agg",
            "scaling_policy": "dynamo",
            "optimization_target": "sla",
            "enable_throughput_scaling": True,
            "enable_load_scaling": False,
            "throughput_adjustment_interval_seconds": 5,
            "ttft_ms": SLA["ttft_ms"],
            "itl_ms": SLA["itl_ms"],
            "load_predictor": "constant",
            "max_gpu_budget": 8,
        }
    return out


def write_fleet(
    folder: Path,
    inventory: dict[str, Any],
    *,
    models: tuple[str, ...] = ("light", "heavy"),
    planner: bool = False,
    target: float = 0.9,
    deployments: dict[str, dict[str, Any]] | None = None,
    search: Any = None,
    **top: Any,
) -> Path:
    """A fleet file in ``folder`` with one model per name of ``models`` (``light``/``heavy``
    traffic), each searching both GPU systems; returns its path."""
    entries = []
    for name in models:
        write_trace(folder / f"{name}.jsonl", RATES[name])
        dep = (deployments or {}).get(name) or deployment(planner=planner)
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(dep, sort_keys=False))
        entries.append(
            {
                "name": name,
                "trace": f"{name}.jsonl",
                "deployment": f"{name}.yaml",
                "search": SEARCH if search is None else search,
                "target": target,
            }
        )
    path = folder / "fleet.yaml"
    path.write_text(
        yaml.safe_dump({"inventory": inventory, **top, "models": entries}, sort_keys=False)
    )
    return path


def on_demand(h100: int, h200: int, **spot: float) -> dict[str, Any]:
    inventory: dict[str, Any] = {
        "h200_sxm": {"count": h200, "price_per_gpu_hour": 3.5},
        "h100_sxm": {"count": h100, "price_per_gpu_hour": 2.2},
    }
    if spot:
        inventory["h100_sxm"]["spot"] = spot
    return inventory
