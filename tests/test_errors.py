"""plansim.errors: the located one-line error and how values are written in messages."""

from __future__ import annotations

import math

from plansim.errors import InputError, describe_value


def test_error_names_source_line_and_field():
    assert str(InputError("bad", source="f.yaml", line=3, field="seed")) == "f.yaml:3: seed: bad"
    assert str(InputError("seed: bad", source="f.yaml", field="seed")) == "f.yaml: seed: bad"
    assert str(InputError("bad", field="--rate")) == "--rate: bad"


def test_describe_value_writes_values_as_a_user_would():
    values = (None, True, 2, 0.5, math.nan, math.inf, -math.inf, "x", [1], {"a": 1})
    assert [describe_value(v) for v in values] == [
        "null",
        "true",
        "2",
        "0.5",
        "NaN",
        "inf",
        "-inf",
        "'x'",
        "a list",
        "a mapping",
    ]


def test_an_unknown_key_names_the_known_key_it_is_a_typo_of():
    from plansim.errors import unknown_key

    known = ["num_workers", "num_prefill_workers", "router", "sla"]
    assert unknown_key("num_wrokers", known) == "unknown key; did you mean 'num_workers'?"
    assert unknown_key("frobnicate", known) == "unknown key"
