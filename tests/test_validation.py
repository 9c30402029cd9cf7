"""plansim.validation: strict models of user input and their one-line errors."""

from __future__ import annotations

import math

import pytest
from pydantic import Field, ValidationError

from plansim.errors import InputError
from plansim.validation import StrictModel, check_number, config_error, describe_value


class _Pool(StrictModel):
    workers: int = Field(default=1, ge=1, le=8)
    rate: float | None = Field(default=None, gt=0)
    on: bool = False


class _Top(StrictModel):
    pool: _Pool = Field(default_factory=_Pool)


def _error(raw):
    with pytest.raises(ValidationError) as err:
        _Top.model_validate(raw)
    return config_error(err.value, source="d.yaml")


def test_boolean_is_not_a_number():
    assert str(_error({"pool": {"workers": True}})) == (
        "d.yaml: pool.workers: expected a number, got true")
    assert str(_error({"pool": {"rate": False}})) == (
        "d.yaml: pool.rate: expected a number, got false")
    assert _Pool(on=True).on is True


@pytest.mark.parametrize(("value", "shown"), [(math.nan, "NaN"), (math.inf, "inf"),
                                              (-math.inf, "-inf")])
def test_non_finite_numbers_are_refused_by_name(value, shown):
    assert str(_error({"pool": {"rate": value}})) == (
        f"d.yaml: pool.rate: input should be a finite number, got {shown}")


def test_bounds_and_unknown_keys_name_the_field_and_the_value():
    assert str(_error({"pool": {"workers": 9}})) == (
        "d.yaml: pool.workers: input should be less than or equal to 8, got 9")
    assert str(_error({"pool": {"wrokers": 2}})) == "d.yaml: pool.wrokers: unknown key"


def test_prefix_and_aliases_rename_the_field():
    with pytest.raises(ValidationError) as err:
        _Pool.model_validate({"workers": 0})
    error = config_error(err.value, prefix="retune", aliases={"workers": "num_workers"})
    assert str(error) == "retune.num_workers: input should be greater than or equal to 1, got 0"


def test_describe_value_writes_values_as_a_user_would():
    assert [describe_value(v) for v in (None, True, 2, 0.5, "x", [1], {"a": 1})] == [
        "null", "true", "2", "0.5", "'x'", "a list", "a mapping"]


def test_check_number_names_the_flag():
    assert check_number(2.0, "--rate", gt=0) == 2.0
    with pytest.raises(InputError, match=r"^--rate: must be a finite number, got NaN$"):
        check_number(math.nan, "--rate", gt=0)
    with pytest.raises(InputError, match=r"^--rate: must be greater than 0 requests/s, got -1$"):
        check_number(-1.0, "--rate", gt=0, unit="requests/s")
    with pytest.raises(InputError, match=r"^--rate: must be at most 10, got 11$"):
        check_number(11.0, "--rate", le=10)
