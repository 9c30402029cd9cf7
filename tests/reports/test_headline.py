"""Headline cards: the figures a run answers, with the SLA goodput used and n/a for no samples."""

from __future__ import annotations

import pandas as pd
import pytest

from plansim.reports.headline import (
    all_rejected,
    baseline_reference,
    goodput_sla,
    replay_cards,
    saving_card,
    scaling_cards,
)


def _summary(**over):
    base = {
        "num_requests": 200,
        "completed_requests": 200,
        "goodput_completed_requests": 150,
        "gpu_hours": 2.0,
        "duration_ms": 3_600_000.0,
        "median_ttft_ms": 100.0,
        "p90_ttft_ms": 600.0,
        "p99_ttft_ms": 900.0,
        "median_tpot_ms": 10.0,
        "p90_tpot_ms": 15.0,
        "p99_tpot_ms": 30.0,
        "decode_worker_seconds": 7200.0,
        "prefill_worker_seconds": 0.0,
    }
    return {**base, **over}


def _cards(summary, sla=None, timeseries=None):
    return {c.name: c for c in replay_cards(summary, sla or {}, timeseries)}


def test_goodput_is_the_share_of_all_requests_and_names_its_sla():
    card = _cards(_summary(), {"ttft_ms": 500.0, "tpot_ms": 20.0})["goodput"]
    assert card.value == "75.0%"  # 150 of 200
    assert card.detail == "150 of 200 requests met TTFT ≤ 500 ms and TPOT ≤ 20 ms"


def test_latency_cards_are_judged_against_their_bounds():
    cards = _cards(_summary(), {"ttft_ms": 500.0, "tpot_ms": 20.0})
    assert (cards["p90_ttft"].value, cards["p90_ttft"].tone) == ("600 ms", "bad")
    assert cards["p90_ttft"].detail.startswith("above the 500 ms bound")
    # The TPOT card is what the SLA scores; it names the p90 of every token gap (ITL) beside it.
    assert (cards["p90_tpot"].label, cards["p90_tpot"].value) == ("p90 TPOT", "15 ms")
    assert cards["p90_tpot"].tone == "good"


def test_no_completed_request_shows_na_not_a_number():
    summary = _summary(completed_requests=0, goodput_completed_requests=0, p90_tpot_ms=33.75)
    cards = _cards(summary, {"ttft_ms": 500.0})
    assert cards["p90_tpot"].value == "n/a" and cards["p90_ttft"].value == "n/a"
    assert cards["not_completed"].value == "200" and cards["not_completed"].tone == "bad"


def test_a_run_that_rejected_every_request_says_why_first():
    requests = pd.DataFrame(
        {
            "status": ["rejected"] * 3,
            "reason": ["prompt_exceeds_kv_pool"] * 3,
            "input_length": [700, 300, 513],
        }
    )
    inputs = {
        "deployment": {
            "mode": "disagg",
            "engine": {"block_size": 64, "num_gpu_blocks": 1000},
            "prefill_engine": {"block_size": 16, "num_gpu_blocks": 4},
        }
    }
    why = all_rejected(requests, inputs)
    # The prefill pool takes the prompts: 300 tokens in 16-token blocks is 19 blocks, against 4.
    assert why == (
        "all 3 requests were rejected (prompt_exceeds_kv_pool): the smallest prompt, "
        "300 tokens, needs 19 KV blocks of 16 tokens, and a prefill rank has 4 "
        "(num_gpu_blocks)"
    )
    summary = _summary(num_requests=3, completed_requests=0, goodput_completed_requests=0)
    cards = replay_cards(summary, {}, None, why)
    assert (cards[0].name, cards[0].value, cards[0].detail, cards[0].tone) == (
        "all_rejected",
        "3",
        why,
        "bad",
    )
    assert "not_completed" not in {c.name for c in cards}
    requests.loc[1, "status"] = "completed"
    assert all_rejected(requests, inputs) is None


def test_without_an_sla_goodput_is_not_scored():
    summary = {k: v for k, v in _summary().items() if k != "goodput_completed_requests"}
    assert _cards(summary)["goodput"].value == "not scored"


def test_gpu_hours_state_the_average_gpus():
    # 2 GPU-hours over 1 hour: 2 GPUs on average
    assert _cards(_summary())["gpu_hours"].detail == "2 GPUs on average over 60 min"


def test_peak_and_time_weighted_mean_workers_per_pool():
    # 4 samples 1 s apart; prefill 1,1,2,2 and decode 3,3,3,1 (ready + starting + draining)
    ts = pd.DataFrame(
        {
            "time_s": [0.0, 1.0, 2.0, 3.0] * 2,
            "pool": ["prefill"] * 4 + ["decode"] * 4,
            "ready": [1, 1, 1, 2, 3, 3, 2, 1],
            "starting": [0, 0, 1, 0, 0, 0, 0, 0],
            "draining": [0, 0, 0, 0, 0, 0, 1, 0],
        }
    )
    cards = _cards(_summary(), timeseries=ts)
    assert cards["peak_workers"].value == "5"  # t = 2: 2 + 3
    assert cards["mean_workers"].value == "4"  # (4 + 4 + 5 + 3) / 4
    assert "decode 2.5" in cards["mean_workers"].detail  # (3 + 3 + 3 + 1) / 4


def test_goodput_sla_ignores_the_planner_targets():
    inputs = {"planner": {"ttft_ms": 500, "itl_ms": 27}, "deployment": {"sla": {"tpot_ms": 20.0}}}
    assert goodput_sla(inputs) == {"tpot_ms": 20.0}
    assert goodput_sla({"planner": {"itl_ms": 27}}) == {}
    # A folder written before the bound was called TPOT spells it itl_ms.
    assert goodput_sla({"deployment": {"sla": {"itl_ms": 20.0}}}) == {"tpot_ms": 20.0}


def test_scaling_cards_count_applied_events():
    events = [
        {"applied": True, "from_count": 2, "to_count": 3},
        {"applied": True, "from_count": 3, "to_count": 2},
        {"applied": True, "from_count": 2, "to_count": 1},
        {"applied": False, "from_count": 1, "to_count": 4},
    ]
    (card,) = scaling_cards(events)
    assert card.value == "3"
    assert card.detail == "1 up, 2 down; 1 advisory (not applied)"


def test_a_saving_is_shown_with_both_goodputs_and_says_what_it_cost():
    # The planner example's figures: 0.383 GPU-hours at 1,350 of 2,254 good against the static
    # 4 workers' 0.67 at 1,819 of 2,254 (80.7%).
    run = {"gpu_hours": 0.383, "goodput_completed_requests": 1350, "num_requests": 2254}
    static = baseline_reference(
        {
            "label": "static 4 workers",
            "summary": {
                "gpu_hours": 0.67,
                "goodput_completed_requests": 1819,
                "num_requests": 2254,
            },
        }
    )
    card = saving_card(run, static)
    assert (card.label, card.value, card.tone) == ("GPU-hours vs static 4 workers", "-42.8%", "bad")
    assert card.detail == (
        "goodput 20.8 points lower: goodput 59.9% against 80.7%; 0.383 against 0.67 GPU-hours"
    )
    better = saving_card({**run, "goodput_completed_requests": 1900}, static)
    assert better.tone == "good" and better.detail.startswith("at no loss of goodput")


def test_no_saving_is_shown_without_the_goodputs():
    run = {"gpu_hours": 0.383, "goodput_completed_requests": 1350, "num_requests": 2254}
    unscored = {"label": "static", "summary": {"gpu_hours": 0.67, "num_requests": 2254}}
    assert baseline_reference(unscored) is None and saving_card(run, None) is None
    static = baseline_reference(
        {"summary": {"gpu_hours": 0.67, "goodput_completed_requests": 1, "num_requests": 2}}
    )
    assert saving_card({"gpu_hours": 0.383, "num_requests": 2254}, static) is None


def test_a_card_tone_is_checked():
    from plansim.reports.page import Card

    with pytest.raises(ValueError):
        Card("x", "X", "1", tone="red")
