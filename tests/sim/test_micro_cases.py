"""The nine micro cases of the reference (tests/sim/reference, a copy of
shared/reference/micro_cases.json): every request's figures must match the reference replay.

Each case pins one engine rule (single request, token budget, prefix reuse, max_num_seqs,
preemption, rejection, round robin, NPZ timing, disaggregation). All are round-robin, so the
reference is deterministic and times must agree to 1e-3 ms.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from plansim.sim.cases import ReferenceCase, case_deployment, case_workload, load_cases

CASES_FILE = Path(__file__).parent / "reference" / "micro_cases.json"
CASES = load_cases(CASES_FILE)
TIME_TOL_MS = 1e-3

# reference per-request key -> our requests-table column
TIME_COLUMNS = {
    "arrival_time_ms": "arrival_ms",
    "first_admit_ms": "first_admit_ms",
    "first_token_ms": "first_token_ms",
    "last_token_ms": "last_token_ms",
    "ttft_ms": "ttft_ms",
    "ttst_ms": "ttst_ms",
    "e2e_latency_ms": "e2e_latency_ms",
}
COUNT_COLUMNS = {
    "input_length": "input_length",
    "output_length": "output_length",
    "reused_input_tokens": "reused_input_tokens",
    "admission_count": "admission_count",
    "readmission_count": "readmission_count",
    "terminal_status": "status",
}


def _replay(case: ReferenceCase):
    from plansim.sim.host import replay

    return replay(case_workload(case), case_deployment(case))


def _ordered(rows: list[dict]) -> list[dict]:
    """Reference order is (arrival, input length); requests identical in both are
    interchangeable, so order those by when they were served."""

    def key(row: dict) -> tuple:
        def t(name: str) -> float:
            value = row[name]
            return math.inf if value is None or pd.isna(value) else float(value)

        return (
            t("arrival_time_ms"),
            row["input_length"],
            t("first_admit_ms"),
            t("first_token_ms"),
            t("last_token_ms"),
        )

    return sorted(rows, key=key)


def _ours_as_reference_rows(requests: pd.DataFrame) -> list[dict]:
    rows = []
    for record in requests.to_dict("records"):
        row = {ref: record[col] for ref, col in TIME_COLUMNS.items()}
        row.update({ref: record[col] for ref, col in COUNT_COLUMNS.items()})
        rows.append(row)
    return rows


def _same_time(ours, expected) -> bool:
    if expected is None:
        return ours is None or pd.isna(ours)
    return ours is not None and not pd.isna(ours) and abs(float(ours) - expected) <= TIME_TOL_MS


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_request_matches_the_reference(case: ReferenceCase):
    result = _replay(case)
    ours = _ordered(_ours_as_reference_rows(result.requests))
    expected = _ordered(case.expected_requests)
    assert len(ours) == len(expected)
    mismatches = []
    for i, (got, want) in enumerate(zip(ours, expected, strict=True)):
        for key in TIME_COLUMNS:
            if not _same_time(got[key], want[key]):
                mismatches.append(f"request {i} {key}: ours {got[key]} reference {want[key]}")
        for key in COUNT_COLUMNS:
            if got[key] != want[key]:
                mismatches.append(f"request {i} {key}: ours {got[key]} reference {want[key]}")
    assert not mismatches, f"{case.name} ({case.about}):\n" + "\n".join(mismatches)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_summary_matches_the_reference(case: ReferenceCase):
    summary = _replay(case).summary
    assert summary["completed_requests"] == case.expected["completed_requests"]
    assert summary["duration_ms"] == pytest.approx(case.expected["duration_ms"], abs=TIME_TOL_MS)
    assert summary["prefix_cache_reused_ratio"] == pytest.approx(
        case.expected["prefix_cache_reused_ratio"], abs=1e-9
    )
