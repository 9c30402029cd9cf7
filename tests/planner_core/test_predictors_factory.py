"""make_predictor / PredictorSpec / expand_candidates: PlannerConfig names, defaults, errors."""

import pytest

from plansim.errors import ConfigError
from plansim.planner_core.predictors import (
    PREDICTOR_NAMES,
    PREDICTOR_PARAM_DEFAULTS,
    PredictorSpec,
    make_predictor,
)
from plansim.planner_core.predictors.factory import PREDICTORS, expand_candidates


def test_names_and_reference_defaults():
    assert PREDICTOR_NAMES == ("constant", "arima", "kalman", "prophet")
    assert PREDICTOR_PARAM_DEFAULTS == {
        "load_predictor_log1p": False,
        "prophet_window_size": 50,
        "kalman_q_level": 1.0,
        "kalman_q_trend": 0.1,
        "kalman_r": 10.0,
        "kalman_min_points": 5,
        "throughput_adjustment_interval_seconds": 180,
    }


@pytest.mark.parametrize("name", PREDICTOR_NAMES)
def test_every_name_builds_a_predictor_of_that_name(name):
    assert type(make_predictor(name)) is PREDICTORS.get(name)


def test_kalman_parameters_reach_the_filter():
    p = make_predictor("kalman", kalman_min_points=2, load_predictor_log1p=True)
    assert p.minimum_data_points == 2
    assert p.log1p


def test_prophet_parameters_reach_the_predictor():
    p = make_predictor("prophet", prophet_window_size=7, throughput_adjustment_interval_seconds=60)
    assert p.window_size == 7
    assert p.step_ms == 60_000


def test_parameters_of_other_predictors_are_ignored():
    assert type(make_predictor("constant", kalman_r=3, prophet_window_size=9)) is PREDICTORS.get(
        "constant"
    )


def test_unknown_predictor_names_the_field():
    with pytest.raises(ConfigError, match="unknown load predictor 'lstm'") as info:
        make_predictor("lstm")
    assert info.value.field == "load_predictor"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("kalman_q_levle", 1.0),
        ("kalman_r", "abc"),
        ("kalman_r", float("nan")),
        ("kalman_r", -1),
        ("kalman_min_points", 0),
        ("kalman_min_points", 2.5),
        ("prophet_window_size", 0),
        ("load_predictor_log1p", "maybe"),
    ],
)
def test_bad_parameter_names_its_field(key, value):
    with pytest.raises(ConfigError) as info:
        make_predictor("kalman", **{key: value})
    assert info.value.field == key


def test_strings_from_a_command_line_are_parsed():
    spec = PredictorSpec.of(
        "kalman", {"kalman_q_level": "0.5", "kalman_min_points": "3", "load_predictor_log1p": "yes"}
    )
    assert dict(spec.params) == {
        "kalman_q_level": 0.5,
        "kalman_min_points": 3,
        "load_predictor_log1p": True,
    }
    assert spec.label == "kalman(kalman_min_points=3,kalman_q_level=0.5,load_predictor_log1p=true)"


def test_grid_expands_only_for_predictors_that_use_it():
    specs = expand_candidates(
        ["constant", "kalman"], {"kalman_r": "5"}, {"kalman_q_level": ["0.1", "1", "10"]}
    )
    assert [s.label for s in specs] == [
        "constant",
        "kalman(kalman_q_level=0.1,kalman_r=5)",
        "kalman(kalman_q_level=1,kalman_r=5)",
        "kalman(kalman_q_level=10,kalman_r=5)",
    ]


def test_two_grids_give_their_cartesian_product():
    specs = expand_candidates(
        ["kalman"], {}, {"kalman_q_level": [1, 2], "load_predictor_log1p": ["false", "true"]}
    )
    assert len(specs) == 4
    assert len({s.label for s in specs}) == 4


def test_grid_nobody_uses_is_rejected():
    with pytest.raises(ConfigError) as info:
        expand_candidates(["constant", "arima"], {}, {"kalman_q_level": [1, 2]})
    assert info.value.field == "kalman_q_level"


def test_fixed_parameter_nobody_uses_is_rejected():
    with pytest.raises(ConfigError) as info:
        expand_candidates(["constant"], {"prophet_window_size": 20})
    assert info.value.field == "prophet_window_size"


def test_parameter_both_fixed_and_gridded_is_rejected():
    with pytest.raises(ConfigError):
        expand_candidates(["kalman"], {"kalman_r": 1}, {"kalman_r": [1, 2]})


def test_fractional_interval_is_accepted_for_prophet():
    assert make_predictor("prophet", throughput_adjustment_interval_seconds=1.5).step_ms == 1500
    with pytest.raises(ConfigError):
        make_predictor("prophet", throughput_adjustment_interval_seconds=0)


def test_planner_config_fields_are_the_predictors_declared_parameters():
    from plansim.planner_core.config import PREDICTOR_FIELDS, PlannerConfig
    from plansim.planner_core.predictors.factory import all_predictor_params

    declared = all_predictor_params()
    own = {"throughput_adjustment_interval_seconds"}  # the planner's field, shared by Prophet
    assert set(PREDICTOR_FIELDS) == {"load_predictor", *declared} - own
    for name, p in declared.items():
        assert PlannerConfig.model_fields[name].default == p.default


def test_a_prophet_window_the_config_accepts_builds_a_predictor():
    # Config and factory share one declaration: what loads also builds (it used to be >= 1 in
    # the config and >= 2 in the factory).
    from plansim.planner_core.config import parse_planner_config

    config = parse_planner_config({"load_predictor": "prophet", "prophet_window_size": 1})
    predictor = make_predictor(config.load_predictor, **config.predictor_params())
    assert predictor.window_size == 1
    with pytest.raises(ConfigError) as err:
        parse_planner_config({"prophet_window_size": 0})
    assert err.value.field == "prophet_window_size"


def test_an_unknown_predictor_is_named_with_the_registered_ones():
    with pytest.raises(
        ConfigError,
        match=r"unknown load predictor 'lstm' \(known: constant, "
        r"arima, kalman, prophet\)",
    ) as err:
        make_predictor("lstm")
    assert err.value.field == "load_predictor"
