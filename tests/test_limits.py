"""plansim.limits: bounds on sizes derived from user input, named in the message."""

from __future__ import annotations

import math

import pytest

from plansim.errors import InputError
from plansim.limits import MAX_SPAN_S, check_count, check_number, check_span, describe_span


def test_describe_span_picks_a_readable_unit():
    assert describe_span(42.0) == "42.0 s"
    assert describe_span(3 * 3600.0) == "3.0 h"
    assert describe_span(MAX_SPAN_S) == "31.0 days"
    assert describe_span(1e9) == "31.7 years"  # 1e9 s / (365.25 * 86400 s)


def test_span_over_the_limit_names_span_and_limit():
    check_span(MAX_SPAN_S, what="the trace")
    with pytest.raises(InputError) as err:
        check_span(1e9, what="the trace", source="t.jsonl", line=2)
    assert str(err.value) == (
        "t.jsonl:2: the trace spans 31.7 years; plansim handles at most "
        "31.0 days (check the timestamps' unit: ms)"
    )


def test_count_over_the_limit_names_the_count_the_limit_and_the_option():
    check_count(10, 10, what="buckets")
    with pytest.raises(InputError) as err:
        check_count(
            3.4e9, 1_000_000, what="the bucket count", field="--interval", hint="raise --interval"
        )
    assert str(err.value) == (
        "--interval: the bucket count would be 3,400,000,000; at most 1,000,000 (raise --interval)"
    )
    with pytest.raises(InputError, match=r"would be inf; at most"):
        check_count(float("inf"), 10, what="requests")


def test_check_number_names_the_flag_and_says_nan():
    assert check_number(2.0, "--rate", gt=0) == 2.0
    with pytest.raises(InputError, match=r"^--rate: must be a finite number, got NaN$"):
        check_number(math.nan, "--rate", gt=0)
    with pytest.raises(InputError, match=r"^--rate: must be greater than 0 requests/s, got -1$"):
        check_number(-1.0, "--rate", gt=0, unit="requests/s")
    with pytest.raises(InputError, match=r"^--rate: must be at most 10, got 11$"):
        check_number(11.0, "--rate", le=10)
