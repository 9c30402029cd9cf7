"""Tolerant table access: SLA and settings found where each command writes them."""

from __future__ import annotations

import pandas as pd

from plansim.reports.tables import find_sla, find_value, first_column, missing


def test_sla_comes_from_the_top_level_block_first_then_the_deployment_then_the_planner():
    inputs = {
        "sla": {"ttft_ms": 500, "tpot_ms": None},
        "deployment": {"sla": {"itl_ms": 20, "e2e_ms": 0}},
        "planner": {"ttft_ms": 900, "itl_ms": 30, "e2e_ms": 8000},
    }
    # Unset (None) and non-positive bounds are skipped in favour of the next place; an SLA
    # block's itl_ms is its TPOT bound, a planner's its ITL target; a planner has no E2E target.
    assert find_sla(inputs) == {"ttft_ms": 500.0, "tpot_ms": 20.0, "itl_ms": 30.0}
    assert find_sla(None) == {}


def test_settings_are_found_at_the_top_or_in_a_planner_block():
    assert find_value({"planner": {"report_interval_hours": 2}}, "report_interval_hours") == 2
    nested = {"deployment": {"planner": {"report_interval_hours": 3}}}
    assert find_value(nested, "report_interval_hours") == 3
    assert find_value({"planner": "planner.yaml"}, "report_interval_hours") is None


def test_first_column_skips_columns_without_values():
    frame = pd.DataFrame({"a": [None, None], "b": [1.0, None]})
    assert first_column(frame, ("a", "b")) == "b"
    assert first_column(frame, ("c",)) is None


def test_missing_names_the_absent_columns():
    frame = pd.DataFrame({"x": [1]})
    assert missing(frame, "t.parquet", "x", "y") == "Not shown: t.parquet has no column y."
    assert missing(None, "t.parquet", "x") == "Not shown: t.parquet is absent or empty."
