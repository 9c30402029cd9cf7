"""Domain syntax and the candidate grid (issue 5 item 2, retune.md 3.1)."""

import pytest

from plansim.errors import ConfigError
from plansim.retune.domains import Point, candidate_set, expand_knobs, grid, parse_field


def test_a_concrete_value_is_one_value():
    assert parse_field("f", 0.5) == (0.5,)
    assert parse_field("f", "kalman") == ("kalman",)


def test_choices_keep_list_order():
    assert parse_field("f", {"choices": [2, 0, 1]}) == (2, 0, 1)


def test_stepped_float_range_includes_its_exact_endpoint():
    assert parse_field("f", {"range": {"min": 0.1, "max": 0.3, "step": 0.1}}) == (0.1, 0.2, 0.3)


def test_linear_range_stops_at_the_last_step_below_max():
    assert parse_field("f", {"range": {"min": 0, "max": 1, "step": 0.3}}) == (0.0, 0.3, 0.6, 0.9)
    assert parse_field("f", {"range": {"min": 1, "max": 10, "step": 3}}) == (1, 4, 7, 10)


def test_log_range_spaces_values_evenly_in_log_space():
    values = parse_field("f", {"range": {"min": 1, "max": 100, "scale": "log", "num": 3}})
    assert values == pytest.approx((1.0, 10.0, 100.0))


def test_integer_fields_round_log_ranges_and_drop_repeats():
    values = parse_field(
        "f", {"range": {"min": 1, "max": 2, "scale": "log", "num": 4}}, integer=True
    )
    assert values == (1, 2)  # 1, 1.26, 1.59, 2 round to 1, 1, 2, 2


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ([1, 2], "f"),
        ({"choices": []}, "f.choices"),
        ({"choices": [1, 1]}, "f.choices"),
        ({"range": {"min": 2, "max": 1, "step": 1}}, "f.range"),
        ({"range": {"min": 0, "max": 1}}, "f.range.step"),
        ({"range": {"min": 0, "max": 1, "step": 0}}, "f.range.step"),
        ({"range": {"min": 0, "max": 1, "scale": "log", "num": 3}}, "f.range.min"),
        ({"range": {"min": 1, "max": 2, "scale": "log", "step": 1}}, "f.range.step"),
        ({"range": {"min": 1, "max": 2, "scale": "log"}}, "f.range.num"),
        ({"choices": [1], "range": {}}, "f"),
    ],
)
def test_malformed_domains_name_their_field(raw, field):
    with pytest.raises(ConfigError) as err:
        parse_field("f", raw)
    assert err.value.field == field


def test_grid_is_router_then_planner_knobs_sorted_by_name_last_fastest():
    knobs = expand_knobs("router", {"b": {"choices": [1, 2]}, "a": 0.5}) + expand_knobs(
        "planner", {"z": {"choices": ["x", "y"]}}
    )
    assert [p.label() for p in grid(knobs)] == [
        "a=0.5 b=1 z=x",
        "a=0.5 b=1 z=y",
        "a=0.5 b=2 z=x",
        "a=0.5 b=2 z=y",
    ]


def test_candidate_set_is_current_then_startup_then_grid_without_duplicates():
    knobs = expand_knobs("router", {"w": {"choices": [0.5, 1.0, 2.0]}})
    current = Point.of({"w": 2.0})
    startup = Point.of({"w": 1})  # equal to the grid's 1.0: one candidate
    points = candidate_set(grid(knobs), startup, current)
    assert [p.router_map["w"] for p in points] == [2.0, 1, 0.5]
    assert len(points) <= len(grid(knobs)) + 2


def test_changes_from_lists_only_differing_knobs():
    a = Point.of({"w": 1.0, "t": 0.0}, {"n": 5})
    b = Point.of({"w": 1, "t": 0.5}, {"n": 5})
    assert a.changes_from(b) == {"router": {"t": 0.0}, "planner": {}}
