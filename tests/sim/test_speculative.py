"""Speculative decoding draws: the reference's per-rank acceptance stream, position rates."""

from __future__ import annotations

import pytest

from plansim.sim.speculative import DEFAULT_ACCEPT_RATES, DraftSampler, accept_rates


def test_stream_matches_the_reference_for_seed_42():
    # Observed on the reference replay (one 1000-token request, aic_nextn 1, rate 0.5, seed
    # 42): passes emitted 1,1,1,2,2,2,1,1,2,2,1,1,2,2,1,2,2,1,2 tokens.
    sampler = DraftSampler((0.5,), seed=42)
    assert [sampler.tokens() for _ in range(19)] == [
        1,
        1,
        1,
        2,
        2,
        2,
        1,
        1,
        2,
        2,
        1,
        1,
        2,
        2,
        1,
        2,
        2,
        1,
        2,
    ]


def test_neighbouring_ranks_draw_different_streams():
    # The reference seeds rank k of a pool with aic_mtp_seed + k; seeds 42/43/44 took 20, 17
    # and 19 passes for a 30-token output at rate 0.5.
    def passes(seed: int, n: int = 30) -> int:
        sampler, done, k = DraftSampler((0.5,), seed), 0, 0
        while done < n:
            done += min(sampler.tokens(), n - done)
            k += 1
        return k

    assert [passes(s) for s in (42, 43, 44)] == [20, 17, 19]


def test_rate_one_accepts_without_drawing_and_rate_zero_stops():
    sure = DraftSampler((1.0, 1.0), seed=1)
    assert [sure.tokens() for _ in range(3)] == [3, 3, 3]
    assert sure._counter == 0  # nothing was drawn
    never = DraftSampler((0.0, 1.0), seed=1)
    assert [never.tokens() for _ in range(3)] == [1, 1, 1]


def test_a_word_pair_straddling_a_refill_keeps_the_stream_aligned():
    sampler = DraftSampler((0.5,), seed=7)
    for _ in range(32):  # 64 words: the buffer is exactly used up
        sampler.next_u64()
    sampler.next_u64()
    assert sampler._index == 2
    odd = DraftSampler((0.5,), seed=7)
    odd._refill()
    odd._index = 63  # one word left: the next u64 takes it and the first of the next refill
    low = odd._words[63]
    value = odd.next_u64()
    assert value & 0xFFFFFFFF == low and odd._index == 1 and value >> 32 == odd._words[0]


def test_accept_rates_are_padded_cut_and_defaulted():
    assert accept_rates(3, (1.0, 0.5)) == (1.0, 0.5, 0.0)
    assert accept_rates(2, (1.0, 0.5, 0.25)) == (1.0, 0.5)
    assert accept_rates(2, None) == DEFAULT_ACCEPT_RATES[:2]
    for bad in ((1.1,), (-0.1,)):
        with pytest.raises(ValueError):
            accept_rates(1, bad)
    with pytest.raises(ValueError):
        accept_rates(6, None)


# ---------------------------------------------------------------- engine passes

from simkit import decode_ms, prefill_ms, req, run  # noqa: E402


def test_a_verification_pass_emits_accepted_drafts_and_costs_one_decode():
    # Rate 1: every pass emits 2 tokens. The prompt's own pass also verifies, so it is timed
    # as the prefill plus a decode at the prompt's length.
    r = run([(0.0, 1000, 4, [1, 2])], engine={"aic_nextn": 1, "aic_nextn_accept_rates": "1.0"})
    first = prefill_ms(1000) + decode_ms(1000)
    assert req(r, 0).ttft_ms == pytest.approx(first, abs=1e-6)
    assert req(r, 0).ttst_ms == 0.0
    assert req(r, 0).e2e_latency_ms == pytest.approx(first + decode_ms(1002), abs=1e-6)
    # Token gaps 0, D(1002), 0 (kept to the microsecond).
    assert r.summary["mean_itl_ms"] == pytest.approx(decode_ms(1002) / 3, abs=1e-3)


def test_seeded_draws_decide_the_tokens_of_each_pass():
    # Seed 42 at rate 0.5 emits 1, 1, 1, 2 tokens in the first four passes.
    r = run([(0.0, 1000, 5, [1, 2])], engine={"aic_nextn": 1, "aic_nextn_accept_rates": "0.5"})
    e2e = prefill_ms(1000) + sum(decode_ms(k) for k in (1000, 1001, 1002, 1003))
    assert req(r, 0).e2e_latency_ms == pytest.approx(e2e, abs=1e-6)


def test_sglang_prefill_pass_emits_one_token_without_drawing():
    r = run(
        [(0.0, 1000, 3, [1, 2])],
        engine={
            "backend": "sglang",
            "block_size": 64,
            "aic_nextn": 1,
            "aic_nextn_accept_rates": "1.0",
        },
    )
    assert req(r, 0).ttft_ms == pytest.approx(prefill_ms(1000), abs=1e-6)
    assert req(r, 0).e2e_latency_ms == pytest.approx(prefill_ms(1000) + decode_ms(1001), abs=1e-6)


def test_a_cached_prefix_loses_its_last_block_to_the_draft_head():
    # B repeats A's 2048-token prompt + 52: 32 cached blocks, one recomputed with MTP.
    rows = [(0.0, 2048, 2, [1, 2, 3, 4]), (1000.0, 2100, 2, [1, 2, 3, 4, 5])]
    plain = run(rows)
    mtp = run(rows, engine={"aic_nextn": 1})
    assert req(plain, 1).reused_input_tokens == 2048
    assert req(mtp, 1).reused_input_tokens == 2048 - 64
