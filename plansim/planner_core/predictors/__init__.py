"""Load predictors of the planner: one-step-ahead forecasts of request count, ISL and OSL.

Public API::

    make_predictor(name, **params) -> LoadPredictor     # params: PlannerConfig field names
    PREDICTOR_NAMES                                       # constant, arima, kalman, prophet
    LoadPredictor.observe(x) / .predict_next() / .warm(values) / .reset_idle_skip()
    TrafficForecaster(build)                              # the three series with live feeding rules
    presweep_loss(forecast, actual)                       # retune pre-sweep loss
    backtest(buckets, predictors, warmup) -> DataFrame    # one-step-ahead comparison rows
    run_backtest(...) -> BacktestResult                   # rows + ranked summary

(``backtest`` here is the function; its module is ``plansim.planner_core.predictors.backtest``.)
"""

from plansim.planner_core.predictors.backtest import BacktestResult, backtest, run_backtest
from plansim.planner_core.predictors.base import LoadPredictor
from plansim.planner_core.predictors.constant import ConstantPredictor
from plansim.planner_core.predictors.factory import (
    PREDICTOR_NAMES,
    PREDICTOR_PARAM_DEFAULTS,
    PredictorSpec,
    coerce_param,
    expand_candidates,
    make_predictor,
)
from plansim.planner_core.predictors.kalman import KalmanPredictor
from plansim.planner_core.predictors.loss import presweep_loss, presweep_window_losses
from plansim.planner_core.predictors.traffic import TrafficForecast, TrafficForecaster

__all__ = [
    "PREDICTOR_NAMES",
    "PREDICTOR_PARAM_DEFAULTS",
    "BacktestResult",
    "ConstantPredictor",
    "KalmanPredictor",
    "LoadPredictor",
    "PredictorSpec",
    "TrafficForecast",
    "TrafficForecaster",
    "backtest",
    "coerce_param",
    "expand_candidates",
    "make_predictor",
    "presweep_loss",
    "presweep_window_losses",
    "run_backtest",
]
