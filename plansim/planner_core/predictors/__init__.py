"""Load predictors of the planner: one-step-ahead forecasts of request count, ISL and OSL.

Public API::

    make_predictor(name, **params) -> LoadPredictor     # params: PlannerConfig field names
    PREDICTOR_NAMES                                       # the registered names (factory)
    LoadPredictor.observe(x) / .predict_next() / .warm(values) / .reset_idle_skip()
    TrafficForecaster(build)                              # the three series with live feeding rules
    presweep_loss(forecast, actual)                       # retune pre-sweep loss
    backtest(buckets, predictors, warmup) -> DataFrame    # one-step-ahead comparison rows
    run_backtest(...) -> BacktestResult                   # rows + ranked summary

(``backtest`` here is the function; its module is ``plansim.planner_core.predictors.backtest``.)
"""

from plansim.lazy import lazy_getattr

_EXPORTS = {
    "BacktestResult": "plansim.planner_core.predictors.backtest",
    "backtest": "plansim.planner_core.predictors.backtest",
    "run_backtest": "plansim.planner_core.predictors.backtest",
    "LoadPredictor": "plansim.planner_core.predictors.base",
    "ConstantPredictor": "plansim.planner_core.predictors.constant",
    "PREDICTOR_NAMES": "plansim.planner_core.predictors.factory",
    "PREDICTOR_PARAM_DEFAULTS": "plansim.planner_core.predictors.factory",
    "PredictorSpec": "plansim.planner_core.predictors.factory",
    "coerce_param": "plansim.planner_core.predictors.factory",
    "expand_candidates": "plansim.planner_core.predictors.factory",
    "make_predictor": "plansim.planner_core.predictors.factory",
    "KalmanPredictor": "plansim.planner_core.predictors.kalman",
    "presweep_loss": "plansim.planner_core.predictors.loss",
    "presweep_window_losses": "plansim.planner_core.predictors.loss",
    "TrafficForecast": "plansim.planner_core.predictors.traffic",
    "TrafficForecaster": "plansim.planner_core.predictors.traffic",
}
__getattr__ = lazy_getattr(globals(), _EXPORTS)
__all__ = sorted(_EXPORTS)
