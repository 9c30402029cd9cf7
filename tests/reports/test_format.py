"""Values as a reader sees them: units from key names, no Python reprs."""

from __future__ import annotations

import math

from plansim.reports.format import (
    column_label,
    duration,
    key_value,
    number,
    percent_against,
    plain_value,
)
from plansim.schema import DURATION_MS, RATIO


def test_no_python_repr_survives():
    assert plain_value(None) == "not set"
    assert plain_value(True) == "yes" and plain_value(False) == "no"
    assert plain_value({"a": 1, "b": None}) == "a=1, b=not set"
    assert plain_value([]) == "none" and plain_value({}) == "none"
    assert plain_value(["x", 2]) == "x, 2"


def test_units_come_from_the_key_suffix():
    assert key_value("ttft_ms", 500.0) == "500 ms"
    assert key_value("interval_seconds", 60) == "60 s"
    assert key_value("max_num_batched_tokens", 8192) == "8,192 tokens"
    assert key_value("output_throughput_tok_s", 709.571) == "709.6 tok/s"
    assert key_value("min_improvement_percentage", 2.0) == "2%"
    assert key_value("seed", 42) == "42"
    assert key_value("ttft_ms", None) == "not set"


def test_numbers_keep_about_four_significant_digits():
    assert number(896.6722) == "896.7"
    assert number(31.843) == "31.84"
    assert number(2.32614) == "2.326"
    assert number(0.38916) == "0.389"
    assert number(602814.8) == "602,815"
    assert number(1234567) == "1,234,567"
    assert number(float("nan")) == "n/a"
    assert number(0.00001) == "1e-05"


def test_ratios_and_durations():
    from plansim.reports.format import with_unit

    assert with_unit(0.0605, RATIO) == "6.0%"
    assert with_unit(602814.8, DURATION_MS) == "10.05 min"
    assert duration(30.0) == "30 s" and duration(7200.0) == "2 h"
    assert math.isnan(float("nan")) and duration(float("nan")) == "n/a"


def test_column_labels_move_the_unit_into_brackets():
    assert column_label("arrival_ms") == "arrival (ms)"
    assert column_label("e2e_latency_ms") == "e2e latency (ms)"
    assert column_label("output_throughput_tok_s") == "output throughput (tok/s)"
    assert column_label("request_id") == "request id"


def test_a_share_near_its_target_is_cut_down_to_two_decimals():
    assert percent_against(0.94982, 0.95) == "94.98%"  # not "95.0%": it misses
    assert percent_against(0.949999, 0.95) == "94.99%"
    assert percent_against(0.95, 0.95) == "95.00%"
    assert percent_against(0.9509, 0.95) == "95.09%"
    assert percent_against(0.9012, 0.95) == "90.1%"  # far from it: one decimal
