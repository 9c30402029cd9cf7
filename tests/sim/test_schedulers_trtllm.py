"""TensorRT-LLM scheduler policy: GUARANTEED_NO_EVICT admission and refusals at the door."""

from __future__ import annotations

import pytest
from simkit import prefill_ms, req, run

from plansim.sim.deployment import EngineArgs
from plansim.sim.schedulers.base import PrefixMatch
from plansim.sim.schedulers.trtllm import TrtllmScheduler


class _Req:
    def __init__(self, isl, osl, n_blocks=0, prebuilt=False):
        self.isl, self.osl, self.n_blocks, self.prebuilt = isl, osl, n_blocks, prebuilt


class _Rank:
    block_size = 32

    def __init__(self, available, running):
        self._available, self.running = available, running

    def kv_available(self):
        return self._available


def _policy(**engine):
    return TrtllmScheduler(EngineArgs.model_validate({"backend": "trtllm", **engine}))


def test_default_block_size_is_32():
    assert EngineArgs.model_validate({"backend": "trtllm"}).block_size == 32


def test_admission_reserves_every_running_request_through_completion():
    # Running: 100 + 100 tokens to completion = 7 blocks, 4 held: 3 more set aside.
    # Candidate: 200 + 56 = 8 blocks, 1 of them an active cached block: needs 7.
    running = [_Req(100, 100, n_blocks=4)]
    cand = _Req(200, 56)
    match = PrefixMatch([], 1, 1, 0, 32)
    policy = _policy()
    assert not policy.admits(_Rank(9, running), cand, match)  # 9 - 3 = 6 < 7
    assert policy.admits(_Rank(10, running), cand, match)  # 10 - 3 = 7
    # A transferred prompt gets no prefix credit: 8 needed.
    assert not policy.admits(_Rank(10, running), _Req(200, 56, prebuilt=True), match)


def test_output_is_clipped_to_the_pool_and_a_prompt_that_fills_it_is_refused():
    policy = _policy(num_gpu_blocks=10)  # 320 tokens
    long_out = _Req(200, 500)
    assert policy.refusal(long_out) is None and long_out.osl == 120
    assert policy.refusal(_Req(320, 1)) == "prompt_exceeds_kv_pool"


def test_a_request_waits_rather_than_preempt():
    # 20 blocks of 32 = 640 tokens. A (300 + 200 -> 16 blocks) runs; B (100 + 50 -> 5 blocks)
    # cannot be guaranteed beside it (4 free) and waits for A to finish, never preempting it.
    rows = [(0.0, 300, 200, [1]), (1.0, 100, 50, [2])]
    r = run(rows, engine={"backend": "trtllm", "num_gpu_blocks": 20})
    assert req(r, 0).readmission_count == 0 and req(r, 1).readmission_count == 0
    assert req(r, 1).first_admit_ms == pytest.approx(req(r, 0).e2e_latency_ms, abs=1e-6)
    assert req(r, 1).ttft_ms == pytest.approx(
        req(r, 0).e2e_latency_ms - 1.0 + prefill_ms(100), abs=1e-6
    )
