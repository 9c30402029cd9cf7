"""Speculative decoding draws: the reference's per-rank acceptance stream, position rates."""

from __future__ import annotations

import pytest

from plansim.sim.speculative import DEFAULT_ACCEPT_RATES, DraftSampler, accept_rates


def test_stream_matches_the_reference_for_seed_42():
    # Observed on the reference replay (one 1000-token request, aic_nextn 1, rate 0.5, seed
    # 42): passes emitted 1,1,1,2,2,2,1,1,2,2,1,1,2,2,1,2,2,1,2 tokens.
    sampler = DraftSampler((0.5,), seed=42)
    assert [sampler.tokens() for _ in range(19)] == [
        1, 1, 1, 2, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2, 1, 2, 2, 1, 2]


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
