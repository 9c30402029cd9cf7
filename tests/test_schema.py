"""plansim.schema: dependency-free, and the facts it holds are the producers' facts."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd

from plansim import schema
from plansim.sim.summary import SlaThresholds, summarize


def test_schema_imports_nothing_outside_the_standard_library():
    script = (
        "import sys, plansim.schema; "
        "print(sorted(m for m in ('numpy', 'pandas', 'plotly', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _requests() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "status": ["completed", "completed"],
            "input_length": [100, 200],
            "output_length": [10, 20],
            "reused_input_tokens": [0, 50],
            "arrival_ms": [0.0, 10.0],
            "first_token_ms": [50.0, 80.0],
            "last_token_ms": [500.0, 900.0],
            "ttst_ms": [5.0, 6.0],
            "tpot_ms": [50.0, 43.0],
        }
    )


def test_every_summary_key_has_a_label_and_unit_or_is_a_distribution():
    summary = summarize(
        _requests(),
        np.array([40.0, 45.0]),
        np.array([9.0, 19.0]),
        prefill_worker_seconds=0.0,
        decode_worker_seconds=10.0,
        prefill_gpus_per_worker=0,
        decode_gpus_per_worker=1,
        sla=SlaThresholds(ttft_ms=500.0),
        wall_time_ms=12.0,
    )
    distributions = {f"{s}_{m}" for m in schema.SUMMARY_DISTRIBUTIONS for s in schema.SUMMARY_STATS}
    unlabelled = set(summary) - set(schema.SUMMARY_KEY_BY_NAME) - distributions
    assert unlabelled == set()
    assert {k.group for k in schema.SUMMARY_KEYS} <= set(schema.SUMMARY_GROUPS)


def test_sla_text_names_only_the_bounds_set():
    assert schema.sla_text({"ttft_ms": 500.0, "itl_ms": 20.0, "e2e_ms": None}) == (
        "TTFT ≤ 500 ms and ITL ≤ 20 ms"
    )  # a planner's targets
    assert schema.sla_text({"ttft_ms": 500.0, "tpot_ms": 20.0}) == (
        "TTFT ≤ 500 ms and TPOT ≤ 20 ms"
    )
    assert schema.sla_text({"e2e_ms": 3000.0}) == "E2E ≤ 3000 ms"
    assert schema.sla_text({}) == "" and schema.sla_text(None) == ""


def test_objectives_have_units_and_latency_objectives_are_minimized():
    from plansim.retune import scoring

    assert set(schema.OBJECTIVE_UNITS) == set(scoring.METRIC)
    assert schema.is_minimized("TTFT") and schema.is_minimized("E2ELatency")
    assert not schema.is_minimized("GoodputPerGPU") and not schema.is_minimized(None)
