"""The scheduler-policy seam: the registry keyed by backend, the vLLM policy's own rules
(refusals, preemption victim), and a rank driven by another policy through the same seam."""

from __future__ import annotations

import pytest
from simkit import decode_ms, prefill_ms

from plansim.errors import ConfigError
from plansim.sim.batch import Request
from plansim.sim.deployment import EngineArgs, build_deployment
from plansim.sim.engine import Rank
from plansim.sim.engine_protocol import EngineHooks, EngineRank
from plansim.sim.schedulers import SCHEDULERS, make_scheduler
from plansim.sim.schedulers.vllm import VllmScheduler
from plansim.sim.timing import PolynomialTiming


class Log:
    """Hooks that record what a rank reports."""

    def __init__(self) -> None:
        self.admitted: list[int] = []
        self.tokens: list[tuple[float, list[int]]] = []
        self.rejected: list[tuple[int, str]] = []

    def hooks(self) -> EngineHooks:
        return EngineHooks(
            lambda rank, req, now, reused: self.admitted.append(req.rid),
            lambda rank, rids, end: self.tokens.append((end, list(map(int, rids)))),
            lambda *a: None,
            lambda rank, req, reason: self.rejected.append((req.rid, reason)),
            lambda *a: None,
        )


def drain(rank: Rank) -> float:
    t = 0.0
    while rank.has_work():
        t = rank.start_pass(t)
        rank.finish(t)
    return t


def test_the_registry_builds_the_policy_named_by_engine_type():
    assert "vllm" in SCHEDULERS.names()
    assert isinstance(make_scheduler(EngineArgs()), VllmScheduler)


def test_an_unknown_backend_fails_naming_the_key_and_the_known_ones():
    with pytest.raises(
        ConfigError, match=r"engine.engine_type: unknown engine backend 'tgi' \(known: vllm"
    ):
        build_deployment({"engine": {"engine_type": "tgi"}})


def test_a_rank_offers_the_engine_rank_protocol():
    rank = Rank(0, 0, EngineArgs(), PolynomialTiming(), Log().hooks())
    assert isinstance(rank, EngineRank)
    assert rank.prefix_view.overlap([1, 2]) == 0


@pytest.mark.parametrize(("mode", "victim"), [("lifo", 2), ("fifo", 0)])
def test_vllm_preempts_the_newest_or_the_oldest(mode, victim):
    policy = VllmScheduler(EngineArgs(preemption_mode=mode))
    running = [Request(i, 10, 1, []) for i in range(3)]
    assert policy.victim(running, running[1]) == victim


def test_vllm_refuses_what_can_never_run_and_clips_the_output_to_max_model_len():
    policy = VllmScheduler(EngineArgs(max_model_len=1000))
    assert policy.refusal(Request(0, 1000, 5, [])) == "prompt_exceeds_max_model_len"
    fits = Request(1, 990, 50, [])
    assert policy.refusal(fits) is None and fits.osl == 10
    unchunked = VllmScheduler(EngineArgs(enable_chunked_prefill=False, max_num_batched_tokens=512))
    assert unchunked.refusal(Request(2, 513, 5, [])) == "prompt_exceeds_batch_budget"


class OneAtATime:
    """A toy backend: runs one request to completion before admitting the next."""

    def refusal(self, req):
        return None

    def victim(self, running, needy):
        return len(running) - 1

    def compose(self, rank, now_ms):
        if not rank.running and rank.waiting:
            req = rank.waiting[0]
            rank.admit(req, rank.prefix_match(req), now_ms)
        for req in rank.running:
            rank.grant(req, req.isl + req.generated - req.computed)

    def steady_decode(self, rank):
        return not rank.waiting

    def decode_run(self, passes):
        """Nothing is kept from pass to pass."""

    def pass_state(self):
        return None


def test_another_policy_drives_the_same_mechanics():
    log = Log()
    rank = Rank(
        0, 0, EngineArgs(), PolynomialTiming(), log.hooks(), policy=OneAtATime(), decode_runs=False
    )
    rank.enqueue(Request(0, 1000, 2, []))
    rank.enqueue(Request(1, 500, 1, []))
    end = drain(rank)
    # A alone: prefill of 1000 tokens, one decode over 1001 tokens; then B's prefill.
    a_first, a_last = prefill_ms(1000), prefill_ms(1000) + decode_ms(1001)
    assert log.admitted == [0, 1]
    assert log.tokens == [
        (pytest.approx(a_first), [0]),
        (pytest.approx(a_last), [0]),
        (pytest.approx(a_last + prefill_ms(500)), [1]),
    ]
    assert end == pytest.approx(a_last + prefill_ms(500))
    assert rank.occupancy().running == rank.occupancy().waiting == 0


def test_a_grant_beyond_the_pool_preempts_the_policy_victim_and_gives_back_its_tokens():
    # 4 blocks of 64 tokens: A (128 tokens) and B (128) fill the pool; B's next token needs a
    # fifth block, so the policy's victim (the newest, B itself) is preempted.
    args = EngineArgs(num_gpu_blocks=4, block_size=64)
    rank = Rank(0, 0, args, PolynomialTiming(), Log().hooks(), decode_runs=False)
    a, b = Request(0, 128, 4, []), Request(1, 128, 4, [])
    rank.enqueue(a)
    rank.enqueue(b)
    rank.finish(rank.start_pass(0.0))  # both prefilled: 4 blocks in use, one token each
    assert (a.n_blocks, b.n_blocks) == (2, 2)
    rank.start_pass(1.0)  # A's decode takes a third block: B is preempted
    assert rank.preemptions == 1 and b.preempted and not b.in_batch
    assert list(rank.waiting) == [b] and b.computed == 0
    assert rank.pass_tokens == 1  # A's one decode token; B never got its grant


def _rank_with_cached_prefix(num_gpu_blocks: int, shared_blocks: int) -> Rank:
    # A running request holds a 16-token-block prompt whose first ``shared_blocks`` blocks a
    # waiting request shares (keys 0, 1, ...): those count as present for the waiting one.
    rank = Rank(
        0,
        0,
        EngineArgs(num_gpu_blocks=num_gpu_blocks, block_size=16, max_num_seqs=4),
        PolynomialTiming(),
        Log().hooks(),
        decode_runs=False,
    )
    rank.enqueue(Request(0, 16 * shared_blocks + 8, 50, list(range(shared_blocks))))
    rank.finish(rank.start_pass(0.0))
    return rank


def test_vllm_admits_a_head_whose_whole_sequence_fits_without_matching_its_prefix():
    # 20 blocks, 2 held by the running request: 18 available. A 17-block head (270 tokens) fits
    # whatever it shares; a 19-block head (300 tokens) fits only by its 2 active shared blocks.
    policy = VllmScheduler(EngineArgs(block_size=16))
    rank = _rank_with_cached_prefix(20, 1)
    assert rank.kv_available() == 18
    fits = Request(1, 270, 5, [0])
    assert policy.admits_uncached(rank, fits)
    assert policy.admits(rank, fits, rank.prefix_match(fits))
    rank = _rank_with_cached_prefix(20, 2)
    assert rank.kv_available() == 17
    shares = Request(1, 300, 5, [0, 1])
    assert not policy.admits_uncached(rank, shares)
    assert policy.admits(rank, shares, rank.prefix_match(shares))  # 19 - 2 active <= 17
    alone = Request(2, 300, 5, [7, 8])
    assert not policy.admits(rank, alone, rank.prefix_match(alone))


@pytest.mark.parametrize("blocks", [8, 12, 20, 40])
@pytest.mark.parametrize("isl", [1, 16, 100, 160, 300, 600])
@pytest.mark.parametrize("shared", [0, 1, 3])
def test_vllm_admits_uncached_only_where_admits_does(blocks, isl, shared):
    policy = VllmScheduler(EngineArgs(block_size=16))
    rank = _rank_with_cached_prefix(blocks, 3)
    head = Request(1, isl, 5, list(range(min(shared, isl // 16))))
    if policy.admits_uncached(rank, head):
        assert policy.admits(rank, head, rank.prefix_match(head))


def test_trtllm_takes_no_shortcut_past_its_reservations():
    from plansim.sim.schedulers.trtllm import TrtllmScheduler

    rank = _rank_with_cached_prefix(20, 1)
    assert not TrtllmScheduler(EngineArgs(block_size=16)).admits_uncached(
        rank, Request(1, 16, 5, [])
    )
