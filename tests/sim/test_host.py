"""``plansim.sim.host``: a request's prompt block keys."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plansim.sim.host import ReplayHost, block_end_offsets, key_grid


def _keys_by_rule(isl: int, bs: int, tbs: int, hashes: list[int]) -> list[int]:
    """The rule of ``plansim.sim.kv``, block by block: block j ends at token e = j*bs + bs - 1
    and is keyed hash[e // tbs] * tbs + e % tbs, while its trace block has a hash."""
    keys = []
    for j in range(isl // bs):
        e = j * bs + bs - 1
        if e // tbs >= len(hashes):
            break
        keys.append(hashes[e // tbs] * tbs + e % tbs)
    return keys


def _host(isl: int, bs: int, tbs: int, hashes: list[int], dense: bool = False) -> SimpleNamespace:
    h = np.array(hashes, dtype=np.uint64)
    workload = SimpleNamespace(
        hashes=lambda rid: h,
        hash_ids=h,
        hash_offsets=np.array([0, len(hashes)]),
        trace_block_size=tbs,
    )
    host = SimpleNamespace(
        block_size=bs,
        isl=np.array([isl]),
        workload=workload,
        _key_grid=key_grid(bs, tbs, dense=dense),
        _key_chunk=None,
    )
    host._grid_keys = lambda rid: ReplayHost._grid_keys(host, rid)
    return host


@settings(max_examples=300, deadline=None)
@given(
    bs=st.sampled_from([1, 3, 16, 64, 512]),
    tbs=st.sampled_from([1, 16, 48, 64, 512, 1024]),
    isl=st.integers(0, 5000),
    hashes=st.lists(st.integers(0, 1 << 30), max_size=12),
)
def test_prompt_keys_follow_the_block_rule(bs, tbs, isl, hashes):
    host = _host(isl, bs, tbs, hashes)
    assert ReplayHost._prompt_keys(host, 0) == _keys_by_rule(isl, bs, tbs, hashes)


@settings(max_examples=300, deadline=None)
@given(
    bs=st.sampled_from([1, 3, 16, 64, 512]),
    tbs=st.sampled_from([1, 16, 48, 64, 512, 1024]),
    isl=st.integers(0, 5000),
    hashes=st.lists(st.integers(0, 1 << 30), max_size=12),
)
def test_dense_keys_name_the_same_blocks_as_the_rule(bs, tbs, isl, hashes):
    # Dense key c * per + k is the rule's c * tbs + offsets[k]: one to one, so equal blocks
    # (across prompts too) get equal keys and no others do.
    dense = ReplayHost._prompt_keys(_host(isl, bs, tbs, hashes, dense=True), 0)
    offsets = block_end_offsets(bs, tbs)
    if offsets is None:
        assert dense == _keys_by_rule(isl, bs, tbs, hashes)
        return
    per = offsets.shape[0]
    assert all(k >= 0 for k in dense)
    assert [(k // per) * tbs + int(offsets[k % per]) for k in dense] == _keys_by_rule(
        isl, bs, tbs, hashes
    )


def test_blocks_tiling_trace_blocks_take_the_offset_pattern():
    assert block_end_offsets(16, 64).tolist() == [15, 31, 47, 63]
    assert block_end_offsets(64, 48) is None and block_end_offsets(16, 0) is None
    # 3 hashes of 64 tokens, 16-token blocks, a 150-token prompt: 9 full blocks.
    host = _host(150, 16, 64, [7, 8, 9])
    assert ReplayHost._prompt_keys(host, 0) == [
        7 * 64 + 15,
        7 * 64 + 31,
        7 * 64 + 47,
        7 * 64 + 63,
        8 * 64 + 15,
        8 * 64 + 31,
        8 * 64 + 47,
        8 * 64 + 63,
        9 * 64 + 15,
    ]


@settings(max_examples=150, deadline=None)
@given(
    bs=st.sampled_from([16, 64]),
    tbs=st.sampled_from([64, 512]),
    prompts=st.lists(
        st.tuples(st.integers(0, 3000), st.lists(st.integers(0, 1 << 20), max_size=8)),
        min_size=1,
        max_size=12,
    ),
    chunk=st.sampled_from([(1, 1 << 15), (3, 1 << 15), (256, 5), (256, 1 << 15)]),
    order=st.randoms(use_true_random=False),
    dense=st.booleans(),
)
def test_keys_computed_for_many_requests_at_once_are_each_requests_own(
    bs, tbs, prompts, chunk, order, dense
):
    # Requests asked for in any order, with chunks of a few requests or a few trace blocks:
    # each gets its own keys, as computed alone.
    import plansim.sim.host as host_module

    isl = np.array([p[0] for p in prompts])
    ids = [h for _, hs in prompts for h in hs]
    offsets = np.cumsum([0] + [len(hs) for _, hs in prompts])
    workload = SimpleNamespace(
        hash_ids=np.array(ids, dtype=np.int64),
        hash_offsets=offsets,
        hashes=lambda rid: np.array(prompts[rid][1], dtype=np.int64),
        trace_block_size=tbs,
    )
    host = SimpleNamespace(
        block_size=bs,
        isl=isl,
        workload=workload,
        _key_grid=key_grid(bs, tbs, dense=dense),
        _key_chunk=None,
    )
    host._grid_keys = lambda rid: ReplayHost._grid_keys(host, rid)
    rids = list(range(len(prompts)))
    order.shuffle(rids)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(host_module, "_KEY_CHUNK_REQUESTS", chunk[0])
        m.setattr(host_module, "_KEY_CHUNK_HASHES", chunk[1])
        for rid in rids:
            alone = _host(int(isl[rid]), bs, tbs, prompts[rid][1], dense=dense)
            assert ReplayHost._prompt_keys(host, rid) == ReplayHost._prompt_keys(alone, 0)
            if not dense:
                assert ReplayHost._prompt_keys(host, rid) == _keys_by_rule(
                    int(isl[rid]), bs, tbs, prompts[rid][1]
                )


def test_a_request_arriving_exactly_at_a_pass_end_joins_the_pass_starting_then():
    # A's prompt pass ends at t1 = prefill_ms(1000) with one token left (no run follows it);
    # B arrives at that very instant: the next pass, starting at t1, is A's decode and B's
    # prompt together.
    from simkit import decode_ms, prefill_ms, req, run

    t1 = prefill_ms(1000)
    r = run([(0.0, 1000, 2, [1, 2]), (t1, 800, 3, [3, 4])])
    assert req(r, 1).first_admit_ms == t1
    assert req(r, 1).first_token_ms == pytest.approx(
        t1 + prefill_ms(800) + decode_ms(1001), abs=1e-9
    )
    assert req(r, 0).last_token_ms == req(r, 1).first_token_ms


def test_a_pass_ending_with_nothing_else_due_then_is_followed_by_the_next_pass_at_once():
    # A alone: its prompt pass, then its one decode pass straight after; B arrives later, during
    # that decode pass, and joins the pass after it.
    from simkit import decode_ms, prefill_ms, req, run

    t1 = prefill_ms(1000)
    r = run([(0.0, 1000, 2, [1, 2]), (t1 + 1.0, 800, 3, [3, 4])])
    assert req(r, 0).last_token_ms == t1 + decode_ms(1001)
    assert req(r, 1).first_admit_ms == t1 + decode_ms(1001)


def test_arrivals_at_one_instant_at_an_idle_rank_join_its_first_pass_together():
    # The instant's last arrival starts the idle rank's pass at once; an earlier one at the same
    # instant must not, or the next would wait for the pass after it.
    from simkit import req, run

    r = run([(0.0, 100, 2, [1]), (500.0, 300, 2, [2]), (500.0, 400, 2, [3]), (500.0, 500, 2, [4])])
    assert req(r, 0).last_token_ms < 500.0
    assert [req(r, i).first_admit_ms for i in (1, 2, 3)] == [500.0, 500.0, 500.0]
    assert req(r, 1).first_token_ms == req(r, 3).first_token_ms


def test_an_arrival_at_an_idle_rank_starts_its_pass_after_the_calls_due_then():
    # B arrives at 1000 ms exactly, at the idle rank (A finished long before), as the sampler
    # takes its 1 s sample (scheduled after the arrival's step, at 0): the pass start comes after
    # that sample, which sees B waiting, not running.
    from simkit import req, run

    r = run([(0.0, 100, 2, [1]), (1000.0, 100, 2, [2])])
    assert req(r, 1).first_admit_ms == 1000.0
    row = r.timeseries.set_index("time_s").loc[1.0]
    assert (row.running, row.waiting) == (0, 1)
