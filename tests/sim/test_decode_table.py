"""The decode-time tables: quantised decode pass times by KV tokens (and batch size), shared by
a pool's ranks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_timing import NPZ

from plansim.sim import decode_table
from plansim.sim.decode_table import PAGE, DecodePages, DecodeTable, quantised
from plansim.sim.timing import PolynomialTiming, load_npz_profile

TOTAL = 16384 * 64


def _pass_ms(model, kv, div, n=1):
    # A decode-only pass of n requests as the engine times it one by one: the model's time
    # (mean context kv // n) divided by the speedup and rounded to whole nanoseconds
    # (``Rank._pass_ms``).
    return round(model.decode_ms(n, kv, kv // n, TOTAL) / div * 1e6) / 1e6


@settings(max_examples=300, deadline=None)
@given(
    kv0=st.integers(0, 3 * TOTAL // 2),
    n=st.integers(1, 300),
    passes=st.integers(1, 400),
    div=st.sampled_from([1.0, 0.5, 1.3, 2.0, 1e-3]),
)
def test_a_run_s_times_are_each_pass_s_quantised_decode_ms(kv0, n, passes, div):
    # Runs anywhere in the pool (and past it, where the polynomial goes under its 1 ms floor),
    # each from a fresh table and from one grown by the run before it.
    model = PolynomialTiming()
    expected = [_pass_ms(model, kv, div) for kv in range(kv0, kv0 + passes * n, n)]
    assert DecodeTable(model.decode_ms_by_kv, TOTAL, div).run(kv0, n, passes).tolist() == expected
    grown = DecodeTable(model.decode_ms_by_kv, TOTAL, div)
    grown.run(kv0 // 2, 1, 2)
    assert grown.run(kv0, n, passes).tolist() == expected


def test_the_table_grows_to_the_furthest_kv_a_run_reaches_keeping_what_it_had():
    model = PolynomialTiming()
    table = DecodeTable(model.decode_ms_by_kv, TOTAL, 1.0)
    first = table.run(10, 3, 4)  # KV 10, 13, 16, 19
    assert table._times.shape[0] == 4096  # the first size
    far = table.run(4000, 50, 10)  # up to KV 4450: doubled
    assert table._times.shape[0] == 8192
    assert first.tolist() == [_pass_ms(model, kv, 1.0) for kv in (10, 13, 16, 19)]
    assert far.tolist() == [_pass_ms(model, kv, 1.0) for kv in range(4000, 4500, 50)]
    table.run(100_000, 1, 1)  # past twice the size: exactly as far as asked
    assert table._times.shape[0] == 100_001
    with pytest.raises(ValueError):
        far[0] = 0.0  # a view of the table: read-only


@settings(max_examples=200, deadline=None)
@given(
    raw=st.lists(
        st.one_of(st.floats(0.0, 1e4), st.integers(0, 10**7).map(lambda k: k / 2e6)),
        min_size=1,
        max_size=20,
    ),
    div=st.sampled_from([1.0, 3.0, 0.7]),
)
def test_quantised_is_python_s_round_to_whole_nanoseconds(raw, div):
    # Halves of a nanosecond among them (k / 2e6 ms): both round half to even.
    assert quantised(np.array(raw), div).tolist() == [round(x / div * 1e6) / 1e6 for x in raw]


def test_ranks_of_one_pool_share_one_table_and_models_of_more_than_kv_get_none():
    model = PolynomialTiming()
    tables = {}
    one = decode_table.shared(tables, model, TOTAL, 1.0)
    assert decode_table.shared(tables, model, TOTAL, 1.0) is one
    assert decode_table.shared(tables, model, TOTAL, 2.0) is not one  # another speedup
    assert decode_table.shared({}, model, TOTAL, 1.0) is not one  # another pool
    assert decode_table.shared(tables, model, TOTAL, 0.0) is None  # passes take no time
    # The NPZ profile's decode time depends on the batch and context too: pages by batch size.
    npz = load_npz_profile(NPZ)
    pages = decode_table.shared(tables, npz, TOTAL, 1.0)
    assert isinstance(pages, DecodePages) and decode_table.shared(tables, npz, TOTAL, 1.0) is pages
    assert decode_table.shared({}, object(), TOTAL, 1.0) is None  # neither form


@settings(max_examples=300, deadline=None)
@given(
    kv0=st.integers(0, 300_000),
    n=st.integers(1, 64),
    passes=st.integers(1, 400),
    div=st.sampled_from([1.0, 0.5, 1.3]),
    cap=st.sampled_from([1, 2, 1024]),
)
def test_an_npz_run_s_times_from_pages_are_each_pass_s_quantised_decode_ms(
    kv0, n, passes, div, cap
):
    # Runs inside a page and across pages (through the profile's grid cells and past its
    # ends), from a fresh set of pages and from one filled by a run before it; with a cap of
    # one or two pages the pages are dropped and made again as runs come.
    model = load_npz_profile(NPZ)
    expected = [_pass_ms(model, kv, div, n) for kv in range(kv0, kv0 + passes * n, n)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decode_table, "MAX_PAGES", cap)
        pages = DecodePages(model.decode_ms_by_batch, TOTAL, div)
        assert pages.run(kv0, n, passes).tolist() == expected
        pages.run(kv0 + PAGE, n, 3)
        pages.run(max(kv0 - PAGE, 0), 1, 2)
        assert pages.run(kv0, n, passes).tolist() == expected
        assert len(pages._pages) <= max(cap, 2 + passes * n // PAGE)


def test_pages_are_made_once_per_batch_size_and_page_a_run_reaches():
    model = load_npz_profile(NPZ)
    pages = DecodePages(model.decode_ms_by_batch, TOTAL, 1.0)
    pages.run(100, 4, 10)
    pages.run(PAGE - 10, 4, 5)  # into the second page
    pages.run(200, 8, 10)
    assert sorted(pages._pages) == [(4, 0), (4, 1), (8, 0)]
    with pytest.raises(ValueError):
        pages.run(100, 4, 10)[0] = 0.0  # a view of a page: read-only


def test_a_pool_s_ranks_time_their_runs_from_one_table():
    from plansim.roles import Role
    from plansim.sim.cluster import Pool
    from plansim.sim.deployment import EngineArgs
    from plansim.sim.engine_protocol import EngineHooks

    def ignore(*_args):
        return None

    ids = iter(range(10))
    pool = Pool(
        Role.AGG, EngineArgs(), PolynomialTiming(), EngineHooks(*[ignore] * 5), lambda: next(ids)
    )
    a, b = (pool.provision(0.0).ranks[0] for _ in range(2))
    assert a._decode_table is not None and a._decode_table is b._decode_table
