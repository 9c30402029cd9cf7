"""plansim.validation: strict models of user input and their one-line errors."""

from __future__ import annotations

import math

import pytest
from pydantic import Field, ValidationError

from plansim.validation import StrictModel, config_error


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
        "d.yaml: pool.workers: expected a number, got true"
    )
    assert str(_error({"pool": {"rate": False}})) == (
        "d.yaml: pool.rate: expected a number, got false"
    )
    assert _Pool(on=True).on is True


@pytest.mark.parametrize(
    ("value", "shown"), [(math.nan, "NaN"), (math.inf, "inf"), (-math.inf, "-inf")]
)
def test_non_finite_numbers_are_refused_by_name(value, shown):
    assert str(_error({"pool": {"rate": value}})) == (
        f"d.yaml: pool.rate: input should be a finite number, got {shown}"
    )


def test_bounds_and_unknown_keys_name_the_field_and_the_value():
    assert str(_error({"pool": {"workers": 9}})) == (
        "d.yaml: pool.workers: input should be less than or equal to 8, got 9"
    )
    assert str(_error({"pool": {"wrokers": 2}})) == "d.yaml: pool.wrokers: unknown key"


def test_prefix_and_aliases_rename_the_field():
    with pytest.raises(ValidationError) as err:
        _Pool.model_validate({"workers": 0})
    error = config_error(err.value, prefix="retune", aliases={"workers": "num_workers"})
    assert str(error) == "retune.num_workers: input should be greater than or equal to 1, got 0"


class _Sizes(StrictModel):
    blocks: int = Field(default=1, ge=1)
    offset: int = 0


@pytest.mark.parametrize("raw", [{"blocks": 2**63}, {"blocks": 2**64}, {"offset": -(2**63) - 1}])
def test_a_whole_number_past_64_bits_is_refused_by_name(raw):
    # What the branch's fuzzing found: num_gpu_blocks 2**64 failed writing inputs.json
    # (orjson), block_size 2**63 overflowed a numpy int64 in the router.
    ((name, value),) = raw.items()
    with pytest.raises(ValidationError) as err:
        _Sizes.model_validate(raw)
    assert str(config_error(err.value, source="d.yaml")) == (
        f"d.yaml: {name}: input should be at most 9,223,372,036,854,775,807 in size (a 64-bit "
        f"whole number), got {value}"
    )


def test_the_64_bit_edges_are_accepted():
    assert _Sizes(blocks=2**63 - 1, offset=-(2**63)).blocks == 9_223_372_036_854_775_807
