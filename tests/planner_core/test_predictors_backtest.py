"""Backtest loop: a constant predictor checked by hand, ranking, process-count independence."""

import math

import numpy as np
import pandas as pd
import pytest

from plansim.errors import InputError
from plansim.planner_core.predictors import PredictorSpec
from plansim.planner_core.predictors.backtest import (
    PREDICTION_COLUMNS,
    SUMMARY_COLUMNS,
    backtest,
    run_backtest,
    summarize,
)

BUCKETS = pd.DataFrame(
    {
        "request_count": [0, 4, 6, 0, 8],
        "avg_isl": [0.0, 100.0, 200.0, 0.0, 50.0],
        "avg_osl": [0.0, 10.0, 20.0, 0.0, 5.0],
    }
)


def _e(p, a):
    return abs(math.log1p(p) - math.log1p(a))


def test_constant_backtest_by_hand():
    result = run_backtest(BUCKETS, ["constant"], warmup=2)
    rows = result.predictions
    assert list(rows.columns) == list(PREDICTION_COLUMNS)
    wide = rows.pivot(index="bucket", columns="series", values="forecast")
    # Warm-up: bucket 0 is a leading idle bucket (skipped), bucket 1 is seen.
    # Bucket 2 is forecast as bucket 1; bucket 3 as bucket 2; bucket 4 as bucket 3, whose
    # request count is 0 (an interior zero is kept) and whose ISL/OSL predictors were fed
    # bucket 2's again (the planner's idle rule), although bucket 3's table averages are 0.
    assert wide.loc[[2, 3, 4], "request_count"].tolist() == [4, 6, 0]
    assert wide.loc[[2, 3, 4], "avg_isl"].tolist() == [100, 200, 200]
    assert wide.loc[[2, 3, 4], "avg_osl"].tolist() == [10, 20, 20]
    actual = rows.pivot(index="bucket", columns="series", values="actual")
    assert actual.loc[[2, 3, 4], "request_count"].tolist() == [6, 0, 8]
    assert actual.loc[[2, 3, 4], "avg_isl"].tolist() == [200, 0, 50]  # the bucket table's value
    assert not rows["failed"].any()

    w2 = 0.4 * _e(400, 1200) + 0.4 * _e(40, 120) + 0.1 * _e(100, 200) + 0.1 * _e(10, 20)
    w3 = 0.4 * _e(1200, 0) + 0.4 * _e(120, 0) + 0.1 * _e(200, 0) + 0.1 * _e(20, 0)
    w4 = 0.4 * _e(0, 400) + 0.4 * _e(0, 40) + 0.1 * _e(200, 50) + 0.1 * _e(20, 5)
    s = result.summary.iloc[0]
    assert list(result.summary.columns) == list(SUMMARY_COLUMNS)
    assert s["predictor"] == "constant"
    assert s["rank"] == 1
    assert s["loss"] == pytest.approx((w2 + w3 + w4) / 3, rel=1e-12)
    assert s["mape_request_count_pct"] == pytest.approx((2 / 6 + 8 / 8) / 2 * 100)
    assert s["rmse_request_count"] == pytest.approx(math.sqrt((4 + 36 + 64) / 3))
    assert s["under_forecast_share"] == pytest.approx(2 / 3)  # 4 < 0.8*6 and 0 < 0.8*8
    assert s["failed_forecasts"] == 0


@pytest.mark.parametrize("jobs", [1, 2])
def test_on_task_counts_the_tasks_one_per_candidate_and_series(jobs):
    seen = []
    run_backtest(
        BUCKETS,
        ["constant", "kalman"],
        warmup=2,
        jobs=jobs,
        on_task=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(k, 6) for k in range(1, 7)]  # 2 candidates x 3 series


def test_backtest_returns_the_prediction_rows():
    rows = backtest(BUCKETS, ["constant", "kalman"], warmup=2)
    assert len(rows) == 2 * 3 * 3  # candidates x series x scored buckets
    assert rows["predictor"].unique().tolist() == ["constant", "kalman"]


def test_trace_shorter_than_warmup_plus_two_is_rejected():
    with pytest.raises(InputError, match="need at least warm-up \\+ 2 = 6"):
        run_backtest(BUCKETS, ["constant"], warmup=4)


def test_warmup_must_be_positive():
    with pytest.raises(InputError):
        run_backtest(BUCKETS, ["constant"], warmup=0)


def test_missing_bucket_column_is_rejected():
    with pytest.raises(InputError, match="request_count"):
        run_backtest(BUCKETS.drop(columns="avg_osl"), ["constant"], warmup=2)


def test_failing_candidate_ranks_last_whatever_its_loss():
    specs = [PredictorSpec.of("constant"), PredictorSpec.of("kalman")]
    rows = []
    for spec, forecast, failed in [(specs[0], 1.0, False), (specs[1], 2.0, True)]:
        for series in ("request_count", "avg_isl", "avg_osl"):
            rows.append(
                {
                    "bucket": 3,
                    "predictor": spec.label,
                    "series": series,
                    "forecast": forecast,
                    "actual": 2.0,
                    "fit_time_s": 0.0,
                    "failed": failed,
                }
            )
    summary = summarize(pd.DataFrame(rows), specs, {})
    assert summary["predictor"].tolist() == ["constant", "kalman"]  # kalman is exact but failed
    assert summary.loc[1, "loss"] == 0.0


def test_ties_keep_the_order_given():
    specs = [PredictorSpec.of("kalman"), PredictorSpec.of("constant")]
    flat = pd.DataFrame({"request_count": [5] * 8, "avg_isl": [100.0] * 8, "avg_osl": [10.0] * 8})
    result = run_backtest(flat, specs, warmup=5)
    assert result.summary["loss"].tolist() == [0.0, 0.0]
    assert result.summary["predictor"].tolist() == ["kalman", "constant"]


@pytest.mark.slow
def test_results_do_not_depend_on_the_number_of_processes():
    rng = np.random.default_rng(11)
    n = 16
    buckets = pd.DataFrame(
        {
            "request_count": rng.poisson(50, n),
            "avg_isl": rng.normal(2000, 200, n),
            "avg_osl": rng.normal(100, 10, n),
        }
    )
    specs = ["constant", "kalman", "arima"]
    serial = run_backtest(buckets, specs, warmup=5, interval_s=60, jobs=1)
    parallel = run_backtest(buckets, specs, warmup=5, interval_s=60, jobs=2)
    pd.testing.assert_frame_equal(
        serial.predictions.drop(columns="fit_time_s"),
        parallel.predictions.drop(columns="fit_time_s"),
        check_exact=True,
    )
    timing = ["fit_time_mean_s", "fit_time_max_s", "wall_time_s"]
    pd.testing.assert_frame_equal(
        serial.summary.drop(columns=timing), parallel.summary.drop(columns=timing), check_exact=True
    )
