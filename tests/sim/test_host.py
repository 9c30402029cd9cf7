"""``plansim.sim.host``: a request's prompt block keys."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
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
    workload = SimpleNamespace(hashes=lambda rid: h, trace_block_size=tbs)
    return SimpleNamespace(block_size=bs, isl=np.array([isl]), workload=workload,
                           _key_grid=key_grid(bs, tbs, dense=dense))


@settings(max_examples=300, deadline=None)
@given(bs=st.sampled_from([1, 3, 16, 64, 512]), tbs=st.sampled_from([1, 16, 48, 64, 512, 1024]),
       isl=st.integers(0, 5000), hashes=st.lists(st.integers(0, 1 << 30), max_size=12))
def test_prompt_keys_follow_the_block_rule(bs, tbs, isl, hashes):
    host = _host(isl, bs, tbs, hashes)
    assert ReplayHost._prompt_keys(host, 0) == _keys_by_rule(isl, bs, tbs, hashes)


@settings(max_examples=300, deadline=None)
@given(bs=st.sampled_from([1, 3, 16, 64, 512]), tbs=st.sampled_from([1, 16, 48, 64, 512, 1024]),
       isl=st.integers(0, 5000), hashes=st.lists(st.integers(0, 1 << 30), max_size=12))
def test_dense_keys_name_the_same_blocks_as_the_rule(bs, tbs, isl, hashes):
    # Dense key c * per + k is the rule's c * tbs + offsets[k]: one to one, so equal blocks
    # (across prompts too) get equal keys and no others do.
    dense = ReplayHost._prompt_keys(_host(isl, bs, tbs, hashes, dense=True), 0)
    offsets = block_end_offsets(bs, tbs)
    if offsets is None:
        assert dense == _keys_by_rule(isl, bs, tbs, hashes)
        return
    per = offsets.shape[0]
    assert all(0 <= k for k in dense)
    assert [(k // per) * tbs + int(offsets[k % per]) for k in dense] == _keys_by_rule(
        isl, bs, tbs, hashes)


def test_blocks_tiling_trace_blocks_take_the_offset_pattern():
    assert block_end_offsets(16, 64).tolist() == [15, 31, 47, 63]
    assert block_end_offsets(64, 48) is None and block_end_offsets(16, 0) is None
    # 3 hashes of 64 tokens, 16-token blocks, a 150-token prompt: 9 full blocks.
    host = _host(150, 16, 64, [7, 8, 9])
    assert ReplayHost._prompt_keys(host, 0) == [
        7 * 64 + 15, 7 * 64 + 31, 7 * 64 + 47, 7 * 64 + 63,
        8 * 64 + 15, 8 * 64 + 31, 8 * 64 + 47, 8 * 64 + 63, 9 * 64 + 15]
