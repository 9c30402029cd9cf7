"""inference-perf's shared-prefix workload: group counts, lengths, rates and what repeats."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.traces.shared_prefix import (
    RateStage,
    SharedPrefixSpec,
    shared_prefix_workload,
    stage_starts_s,
)

SPEC = SharedPrefixSpec(
    num_groups=3,
    prompts_per_group=2,
    system_prompt_tokens=40,
    question_tokens=30,
    output_tokens=7,
    template_tokens=5,
)


def _blocks(workload, i):
    return workload.hash_ids[workload.hash_offsets[i] : workload.hash_offsets[i + 1]].tolist()


def test_even_stages_send_rate_times_duration_one_gap_apart_each_after_the_gap():
    stages = [RateStage(2.0, 3.0), RateStage(4.0, 1.0)]
    w = shared_prefix_workload(SPEC, stages, spacing="even", gap_s=2.0)
    # 6 requests 500 ms apart from 0, then 4 requests 250 ms apart from 3 + 2 s.
    assert w.arrival_ms.tolist() == [0, 500, 1000, 1500, 2000, 2500, 5000, 5250, 5500, 5750]
    assert stage_starts_s(stages).tolist() == [0, 3, 4]
    assert stage_starts_s(stages, 2.0).tolist() == [0, 5, 8]


def test_a_constant_stage_has_floor_rate_times_duration_requests():
    # inference-perf's int(rate x duration): 2.5 rps for 3 s is 7 requests, 0.4 rps for 2 s none.
    assert RateStage(2.5, 3.0).requests == 7
    assert RateStage(0.4, 2.0).requests == 0
    w = shared_prefix_workload(SPEC, [RateStage(0.4, 2.0), RateStage(2.5, 3.0)])
    assert len(w.arrival_ms) == 7 and w.arrival_ms.min() > 2000.0


def test_exponential_gaps_are_scaled_so_the_last_request_goes_at_the_stages_end():
    stages = [RateStage(50.0, 20.0), RateStage(100.0, 10.0)]
    w = shared_prefix_workload(SPEC, stages, gap_s=5.0, seed=7)
    first, second = w.arrival_ms[:1000], w.arrival_ms[1000:]
    assert len(second) == 1000
    # Each stage's gaps (from its start) add up to its duration exactly.
    assert first[-1] == pytest.approx(20_000.0) and second[-1] == pytest.approx(25_000.0 + 10_000)
    assert first[0] > 0.0 and second[0] > 25_000.0
    gaps = np.diff(first)
    assert (gaps > 0).all()
    # Exponential, not even: the gaps' coefficient of variation is about 1 (0 for even gaps).
    assert 0.85 < gaps.std() / gaps.mean() < 1.15


def test_every_stage_starts_again_at_the_first_prompt():
    # 6 prompts; stage 0 sends 4 (prompts 0-3 of the shuffled list), stage 1 starts at prompt 0.
    w = shared_prefix_workload(SPEC, [RateStage(1.0, 4.0), RateStage(1.0, 3.0)], seed=2)
    assert [_blocks(w, i) for i in range(4, 7)] == [_blocks(w, i) for i in range(3)]


def test_lengths_are_system_template_question_and_the_output_target():
    w = shared_prefix_workload(SPEC, [RateStage(1.0, 4.0)])
    assert set(w.isl_tokens.tolist()) == {75}
    assert set(w.osl_tokens.tolist()) == {7}
    # 75 tokens in blocks of 16: 5 blocks each.
    assert np.diff(w.hash_offsets).tolist() == [5] * 4


def test_groups_share_their_whole_system_prompt_blocks_only():
    # 12 requests cycle through the 6 prompts twice; 40 system tokens make 2 whole blocks.
    w = shared_prefix_workload(SPEC, [RateStage(1.0, 12.0)], seed=3)
    firsts = {tuple(_blocks(w, i)[:2]) for i in range(12)}
    assert len(firsts) == 3  # one shared pair of blocks per group
    thirds = {_blocks(w, i)[2] for i in range(12)}
    assert len(thirds) == 6  # the block holding the question is the prompt's


def test_repeat_sends_each_prompt_every_cycle_and_fresh_never_repeats():
    stages = [RateStage(1.0, 12.0)]
    repeat = shared_prefix_workload(SPEC, stages, seed=1)
    assert [_blocks(repeat, i) for i in range(6)] == [_blocks(repeat, i + 6) for i in range(6)]
    assert len({tuple(_blocks(repeat, i)) for i in range(6)}) == 6
    fresh = shared_prefix_workload(
        SharedPrefixSpec(3, 2, 40, 30, 7, template_tokens=5, questions="fresh"), stages, seed=1
    )
    assert len({tuple(_blocks(fresh, i)[2:]) for i in range(12)}) == 12
    # ... while still sharing the system prompt blocks of its group.
    assert len({tuple(_blocks(fresh, i)[:2]) for i in range(12)}) == 3


def test_the_same_seed_gives_the_same_workload_and_another_seed_another_order():
    a, b, c = (shared_prefix_workload(SPEC, [RateStage(1.0, 6.0)], seed=seed) for seed in (5, 5, 6))
    assert a.hash_ids.tolist() == b.hash_ids.tolist()
    assert a.arrival_ms.tolist() == b.arrival_ms.tolist()
    # Another seed: the same six prompts, in another order and at other times.
    prompts = [[tuple(_blocks(w, i)) for i in range(6)] for w in (a, c)]
    assert sorted(prompts[0]) == sorted(prompts[1]) and prompts[0] != prompts[1]
    assert a.arrival_ms.tolist() != c.arrival_ms.tolist()


def test_ids_and_blocks_of_the_workload():
    w = shared_prefix_workload(SPEC, [RateStage(1.0, 6.0)], block_size=16)
    assert w.request_id.tolist() == ["0", "1", "2", "3", "4", "5"]
    assert w.trace_block_size == 16
    # 3 groups x 2 shared blocks take ids 0-5; each prompt's own 3 blocks come after them.
    shared = {b for i in range(6) for b in _blocks(w, i)[:2]}
    own = {b for i in range(6) for b in _blocks(w, i)[2:]}
    assert shared == set(range(6)) and own == set(range(6, 6 + 6 * 3))


def test_a_replay_reuses_the_group_prompt_then_the_whole_prompt_when_it_comes_back():
    from plansim import api
    from plansim.sim.deployment import build_deployment

    # 2 groups x 2 prompts of 40 system + 5 template + 30 question tokens, 16-token blocks:
    # 5 blocks, the first 2 shared by the group. Prompts come back every 4 requests.
    spec = SharedPrefixSpec(2, 2, 40, 30, 3, template_tokens=5)
    w = shared_prefix_workload(spec, [RateStage(1.0, 8.0)], spacing="even")
    deployment = build_deployment(
        {
            "mode": "agg",
            "num_workers": 1,
            "engine": {
                "block_size": 16,
                "timing_model": {"type": "fixed", "prefill_ms": 1.0, "decode_ms": 1.0},
            },
        }
    )
    reused = api.replay(w, api.setup(deployment)).requests["reused_input_tokens"].tolist()
    group = [tuple(_blocks(w, i)[:2]) for i in range(4)]
    second_of_group = [i for i in range(4) if group[i] in group[:i]]
    # First cycle: a group's first prompt computes all, its second reuses the 32 shared tokens;
    # second cycle: each prompt's 4 whole blocks (64 tokens) are cached, the partial last is not.
    assert [reused[i] for i in range(4)] == [32 if i in second_of_group else 0 for i in range(4)]
    assert reused[4:] == [64] * 4


@pytest.mark.parametrize(
    "bad", [{"num_groups": 0}, {"question_tokens": -1}, {"questions": "sometimes"}]
)
def test_bad_specs_are_refused(bad):
    fields = {
        "num_groups": 1,
        "prompts_per_group": 1,
        "system_prompt_tokens": 1,
        "question_tokens": 1,
        "output_tokens": 1,
        **bad,
    }
    with pytest.raises(ValueError, match=next(iter(bad))):
        SharedPrefixSpec(**fields)


@pytest.mark.parametrize(
    ("bad", "name"),
    [
        ({"block_size": 0}, "block_size"),
        ({"spacing": "bursty"}, "spacing"),
        ({"gap_s": -1.0}, "gap_s"),
    ],
)
def test_bad_workload_options_are_refused(bad, name):
    with pytest.raises(ValueError, match=name):
        shared_prefix_workload(SPEC, [RateStage(1.0, 2.0)], **bad)
