"""The seed's scoring rules: Goodput rescaling, fail closed, ranking, strict threshold."""

import math

import pytest

from plansim.retune.scoring import Scored, ScoreError, beats, decide, rank, score

SUMMARY = {
    "completed_requests": 10,
    "duration_ms": 120_000.0,
    "gpu_hours": 2 * 120 / 3600,  # 2 GPUs for 120 s
    "goodput_output_throughput_tok_s": 50.0,
    "output_throughput_tok_s": 80.0,
    "mean_output_token_throughput_per_user": 30.0,
    "mean_ttft_ms": 250.0,
    "mean_e2e_latency_ms": 900.0,
}


def test_goodput_is_rescaled_to_the_window_length():
    # 50 good tok/s over a 120 s replay = 6000 good tokens; per second of a 100 s window = 60.
    assert score(SUMMARY, "Goodput", 100.0) == pytest.approx(60.0)


def test_goodput_per_gpu_divides_by_the_time_averaged_gpu_count():
    # avg_gpu = gpu_hours / (120 s in hours) = 2, so 60 / 2.
    assert score(SUMMARY, "GoodputPerGPU", 100.0) == pytest.approx(30.0)


def test_throughput_objectives_are_not_rescaled():
    assert score(SUMMARY, "Throughput", 100.0) == 80.0
    assert score(SUMMARY, "ThroughputPerGPU", 100.0) == pytest.approx(40.0)
    assert score(SUMMARY, "ThroughputPerUser", 100.0) == 30.0
    assert score(SUMMARY, "TTFT", 100.0) == 250.0
    assert score(SUMMARY, "E2ELatency", 100.0) == 900.0


@pytest.mark.parametrize(
    ("objective", "patch"),
    [
        ("Goodput", {"goodput_output_throughput_tok_s": None}),
        ("GoodputPerGPU", {"gpu_hours": 0.0}),
        ("ThroughputPerGPU", {"duration_ms": 0.0}),
        ("Goodput", {"duration_ms": -1.0}),
        ("TTFT", {"completed_requests": 0}),
        ("E2ELatency", {"mean_e2e_latency_ms": math.nan}),
    ],
)
def test_a_missing_input_fails_the_candidate_instead_of_scoring(objective, patch):
    summary = {**SUMMARY, **patch}
    summary = {k: v for k, v in summary.items() if v is not None}
    with pytest.raises(ScoreError):
        score(summary, objective, 100.0)


def test_ties_go_to_the_current_point_then_canonical_order():
    cands = [Scored(2, 5.0, False, True), Scored(1, 5.0, False, True), Scored(0, 5.0, True, False)]
    assert [c.index for c in rank(cands, maximize=True)] == [0, 1, 2]


def test_latency_objectives_rank_lowest_first_and_failures_are_left_out():
    cands = [
        Scored(0, 300.0, True, False),
        Scored(1, 200.0, False, True),
        Scored(2, None, False, True),
    ]
    assert [c.index for c in rank(cands, maximize=False)] == [1, 0]


def test_the_threshold_is_strict():
    # 2% of 100 is 2: 102 does not beat 100, 102.0001 does.
    assert not beats(102.0, 100.0, 2.0, maximize=True)
    assert beats(102.0001, 100.0, 2.0, maximize=True)
    assert not beats(98.0, 100.0, 2.0, maximize=False)
    assert beats(97.9999, 100.0, 2.0, maximize=False)


def test_a_zero_current_score_needs_any_strict_gain():
    assert beats(1e-9, 0.0, 50.0, maximize=True)
    assert not beats(0.0, 0.0, 0.0, maximize=True)


def test_a_zero_latency_is_never_beaten():
    assert not beats(0.0, 0.0, 0.0, maximize=False)


def test_decide_applies_only_a_strict_winner_that_changes_something():
    current = Scored(0, 100.0, True, False)
    assert (
        decide(
            [current, Scored(1, 102.0, False, True)], maximize=True, min_improvement_percentage=2.0
        ).outcome
        == "no_improvement"
    )
    verdict = decide(
        [current, Scored(1, 103.0, False, True)], maximize=True, min_improvement_percentage=2.0
    )
    assert (verdict.outcome, verdict.winner) == ("apply", 1)
    assert verdict.improvement_percentage == pytest.approx(3.0)


def test_decide_fails_when_the_current_point_failed():
    verdict = decide(
        [Scored(0, None, True, False), Scored(1, 5.0, False, True)],
        maximize=True,
        min_improvement_percentage=0.0,
    )
    assert (verdict.outcome, verdict.reason) == ("failed", "current point failed")
