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

SPEC = SharedPrefixSpec(num_groups=3, prompts_per_group=2, system_prompt_tokens=40,
                        question_tokens=30, output_tokens=7, template_tokens=5)


def _blocks(workload, i):
    return workload.hash_ids[workload.hash_offsets[i]:workload.hash_offsets[i + 1]].tolist()


def test_constant_stages_send_rate_times_duration_evenly_spaced_back_to_back():
    w = shared_prefix_workload(SPEC, [RateStage(2.0, 3.0), RateStage(4.0, 1.0)])
    # 6 requests 500 ms apart from 0, then 4 requests 250 ms apart from 3 s.
    assert w.arrival_ms.tolist() == [0, 500, 1000, 1500, 2000, 2500, 3000, 3250, 3500, 3750]
    assert stage_starts_s([RateStage(2.0, 3.0), RateStage(4.0, 1.0)]).tolist() == [0, 3, 4]


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
    assert len(firsts) == 3                      # one shared pair of blocks per group
    thirds = {_blocks(w, i)[2] for i in range(12)}
    assert len(thirds) == 6                      # the block holding the question is the prompt's


def test_repeat_sends_each_prompt_every_cycle_and_fresh_never_repeats():
    stages = [RateStage(1.0, 12.0)]
    repeat = shared_prefix_workload(SPEC, stages, seed=1)
    assert [_blocks(repeat, i) for i in range(6)] == [_blocks(repeat, i + 6) for i in range(6)]
    assert len({tuple(_blocks(repeat, i)) for i in range(6)}) == 6
    fresh = shared_prefix_workload(
        SharedPrefixSpec(3, 2, 40, 30, 7, template_tokens=5, questions="fresh"), stages, seed=1)
    assert len({tuple(_blocks(fresh, i)[2:]) for i in range(12)}) == 12
    # ... while still sharing the system prompt blocks of its group.
    assert len({tuple(_blocks(fresh, i)[:2]) for i in range(12)}) == 3


def test_the_same_seed_gives_the_same_workload_and_another_seed_another_order():
    a = shared_prefix_workload(SPEC, [RateStage(1.0, 6.0)], seed=5)
    b = shared_prefix_workload(SPEC, [RateStage(1.0, 6.0)], seed=5)
    c = shared_prefix_workload(SPEC, [RateStage(1.0, 6.0)], seed=6)
    assert a.hash_ids.tolist() == b.hash_ids.tolist()
    assert sorted(map(tuple, (_blocks(a, i) for i in range(6)))) == \
        sorted(map(tuple, (_blocks(c, i) for i in range(6))))


@pytest.mark.parametrize("bad", [{"num_groups": 0}, {"question_tokens": -1},
                                 {"questions": "sometimes"}])
def test_bad_specs_are_refused(bad):
    fields = {"num_groups": 1, "prompts_per_group": 1, "system_prompt_tokens": 1,
              "question_tokens": 1, "output_tokens": 1, **bad}
    with pytest.raises(ValueError, match=next(iter(bad))):
        SharedPrefixSpec(**fields)
