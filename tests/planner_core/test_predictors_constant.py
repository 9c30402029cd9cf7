from plansim.planner_core.predictors import make_predictor


def test_constant_forecasts_the_last_value():
    p = make_predictor("constant")
    for x in [3, 9, 4]:
        p.observe(x)
    assert p.predict_next() == 4.0


def test_constant_ignores_log1p():
    p = make_predictor("constant", load_predictor_log1p=True)
    p.observe(100)
    assert p.predict_next() == 100.0
