"""SGLang scheduler policy: prefill-or-decode passes, PrefillAdder budgets and chunking,
prefill_decode_interval, lpm order and the retraction victim (times by the reference formulas)."""

from __future__ import annotations

import pytest
from simkit import decode_ms, prefill_ms, req, run

from plansim.sim.deployment import EngineArgs
from plansim.sim.schedulers.sglang import SglangScheduler

SGLANG = {"backend": "sglang", "block_size": 64}


def test_default_page_size_is_one():
    assert EngineArgs.model_validate({"backend": "sglang"}).block_size == 1


def test_a_prompt_that_overflows_the_chunk_budget_is_cut_to_whole_pages():
    # Pass 1: A (6000, 6016 in pages) leaves 2176 of the 8192 chunk budget: B takes 2176 and
    # the batch ends (C waits). 2 x mean(6000+2176, 0) = 8176 new tokens.
    # Pass 2: B's rest 2824 (prefix 2176) + C 100: 2 x (mean 2550 - mean 1088) = 2924.
    # Pass 3: everyone decodes, 6001 + 5001 + 101 KV tokens.
    rows = [
        (0.0, 6000, 2, list(range(100, 112))),
        (0.0, 5000, 2, list(range(200, 210))),
        (0.0, 100, 2, [300]),
    ]
    r = run(rows, engine=SGLANG)
    p1 = prefill_ms(8176)
    p2 = p1 + prefill_ms(2924)
    end = p2 + decode_ms(6001 + 5001 + 101)
    assert req(r, 0).ttft_ms == pytest.approx(p1, abs=1e-6)
    assert (req(r, 1).ttft_ms, req(r, 2).ttft_ms) == pytest.approx((p2, p2), abs=1e-6)
    assert [req(r, i).e2e_latency_ms for i in range(3)] == pytest.approx([end] * 3, abs=1e-6)


def test_running_requests_get_no_token_in_a_prefill_pass():
    # A decodes from P(1000); B arrives during A's second decode pass and is prefilled alone
    # in the following pass, so A's next token waits for that whole prefill pass.
    a0 = prefill_ms(1000)
    d1 = decode_ms(1001)
    rows = [(0.0, 1000, 4, [1, 2]), (a0 + 1.0, 300, 2, [9])]
    r = run(rows, engine=SGLANG)
    b_start = a0 + d1  # the pass in flight when B arrives ends here
    assert req(r, 1).ttft_ms == pytest.approx(b_start + prefill_ms(300) - (a0 + 1.0), abs=1e-6)
    third = b_start + prefill_ms(300) + decode_ms(1002 + 301)
    # A: token 1 at a0, 2 at a0+d1, 3 after B's prefill pass and one joint decode pass.
    assert req(r, 0).ttst_ms == pytest.approx(d1, abs=1e-6)
    assert req(r, 0).e2e_latency_ms == pytest.approx(third + decode_ms(1003), abs=1e-6)  # B is done


def test_prefill_decode_interval_holds_prefill_for_n_decode_passes():
    # Observed on the reference: with interval 7 a request arriving 61 ms after A is held
    # until A's 7th decode pass after its prefill.
    a0 = prefill_ms(1000)
    rows = [(0.0, 1000, 40, [1, 2]), (61.0, 300, 5, [9])]
    r = run(rows, engine={**SGLANG, "block_size": 1, "prefill_decode_interval": 7})
    seven = a0 + sum(decode_ms(1001 + j, 16384) for j in range(7))
    assert req(r, 1).first_admit_ms == pytest.approx(seven, abs=1e-6)


def test_prefill_budget_is_max_prefill_tokens_inclusive():
    # 3008 + 1088 page-rounded tokens are exactly max_prefill_tokens 4096: one batch.
    rows = [(0.0, 3008, 2, [1, 2, 3, 4, 5, 6]), (0.0, 1088, 2, [7, 8, 9])]
    r = run(rows, engine={**SGLANG, "sglang": {"max_prefill_tokens": 4096}})
    assert req(r, 0).ttft_ms == req(r, 1).ttft_ms == pytest.approx(prefill_ms(4096), abs=1e-6)


def test_lpm_admits_the_longest_cached_prefix_first():
    # A caches blocks 1..4; while it decodes, C (no cache hit) then B (A's prefix) wait; with
    # max_num_seqs 2 only one joins: lpm picks B, fifo picks C.
    rows = [
        (0.0, 2048, 60, [1, 2, 3, 4]),
        (50.0, 2048, 2, [20, 21, 22, 23]),
        (51.0, 2100, 2, [1, 2, 3, 4, 5]),
    ]
    for policy, first in (("lpm", 2), ("fifo", 1)):
        r = run(rows, engine={**SGLANG, "max_num_seqs": 2, "sglang": {"schedule_policy": policy}})
        later = 3 - first
        assert req(r, first).first_admit_ms < req(r, later).first_admit_ms


def test_retraction_takes_the_fewest_output_tokens_then_the_longest_prompt():
    policy = SglangScheduler(EngineArgs.model_validate({"backend": "sglang"}))

    class R:
        def __init__(self, generated, isl):
            self.generated, self.isl = generated, isl

    running = [R(5, 100), R(2, 100), R(2, 300), R(9, 1)]
    assert policy.victim(running, running[0]) == 2


def test_a_retracted_transferred_prompt_is_recomputed_on_its_decode_rank():
    # The decode rank has 103 blocks of 16 tokens; the three transferred prompts alone need
    # 45 + 53 + 24 = 122, so one is retracted and, holding its whole prompt again when it is
    # re-admitted, recomputes it: the KV it holds needs no room (it used to wait for room it
    # already had, a pass of no tokens forever).
    rows = [
        (0.0, 712, 65, [200, 201, 202]),
        (0.0, 844, 47, [100, 101, 102, 103]),
        (0.0, 383, 80, [1020, 1021]),
    ]
    engine = {
        "backend": "sglang",
        "num_gpu_blocks": 103,
        "block_size": 16,
        "max_num_seqs": 4,
        "enable_chunked_prefill": False,
    }
    for decode_runs in (True, False):
        r = run(
            rows,
            decode_runs=decode_runs,
            engine=engine,
            mode="disagg",
            num_prefill_workers=1,
            num_decode_workers=1,
        )
        assert list(r.requests.status) == ["completed"] * 3
        assert list(r.requests.output_length) == [65, 47, 80]
        assert r.requests.readmission_count.sum() >= 1


def test_a_retracted_prompt_that_can_never_finish_is_rejected_not_replayed_forever():
    # The decode rank holds 39 blocks of 16 tokens, 624 in all. The second request is
    # prefilled in chunks (a chunk reserves no output) and transferred; on its decode rank it
    # needs a block beside the first request, is retracted, and re-admitted holding its prompt:
    # to recompute it, its 592 prompt tokens and the 42 it has still to generate must fit,
    # 634 > 624, so no pass can ever serve it. Empty passes take no time: the rank used to
    # compose them forever at the same instant; it must reject the request and go on.
    rows = [(0.0, 117, 39, [100]), (50.0, 592, 50, [100, 101, 102])]
    engine = {
        "backend": "sglang",
        "num_gpu_blocks": 39,
        "block_size": 16,
        "max_num_seqs": 14,
        "max_num_batched_tokens": 256,
        "enable_chunked_prefill": True,
    }
    for decode_runs in (True, False):
        r = run(
            rows,
            decode_runs=decode_runs,
            engine=engine,
            mode="disagg",
            num_prefill_workers=1,
            num_decode_workers=1,
        )
        assert list(r.requests.status) == ["completed", "rejected"]
        assert list(r.requests.reason) == ["", "cannot_be_scheduled"]
        assert req(r, 0).output_length == 39
        assert req(r, 1).readmission_count == 1
