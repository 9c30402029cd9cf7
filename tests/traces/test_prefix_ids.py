"""Prefix-chain ids: equal ids exactly when the whole prefix up to that block is equal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plansim.traces import prefix
from plansim.traces.buffers import GrowingArray
from plansim.traces.prefix import factorize, prefix_chain_ids


def _csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    counts = np.array([len(r) for r in rows], dtype=np.int64)
    flat = np.array([h for r in rows for h in r], dtype=np.uint64)
    return flat, counts


def _split(ids: np.ndarray, counts: np.ndarray) -> list[list[int]]:
    out, pos = [], 0
    for c in counts.tolist():
        out.append(ids[pos : pos + c].tolist())
        pos += c
    return out


def test_rolling_hashes_are_compacted():
    rows = [[2**64 - 1, 2**63 + 5], [2**64 - 1, 17], [2**64 - 1, 2**63 + 5, 9]]
    flat, counts = _csr(rows)
    ids = _split(prefix_chain_ids(flat, counts), counts)
    assert ids[0][0] == ids[1][0] == ids[2][0]
    assert ids[0][1] == ids[2][1] != ids[1][1]
    assert sorted({i for r in ids for i in r}) == [0, 1, 2, 3]


def test_content_ids_become_prefix_ids():
    # Block value 7 follows 1 in the first row and 2 in the second: different prefixes.
    rows = [[1, 7], [2, 7], [1, 7, 7]]
    flat, counts = _csr(rows)
    ids = _split(prefix_chain_ids(flat, counts), counts)
    assert ids[0][1] != ids[1][1]
    assert ids[0] == ids[2][:2]
    assert ids[2][2] != ids[2][1]  # same content, one block deeper: another prefix
    # Prefixes: (1), (1,7), (2), (2,7), (1,7,7).
    assert sorted({i for r in ids for i in r}) == list(range(5))


def test_empty_rows_and_no_hashes():
    flat, counts = _csr([[], [5], []])
    assert prefix_chain_ids(flat, counts).tolist() == [0]
    flat, counts = _csr([[], []])
    assert prefix_chain_ids(flat, counts).size == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=6), min_size=1, max_size=25))
def test_equal_ids_iff_equal_prefixes(rows):
    flat, counts = _csr(rows)
    _assert_prefix_ids(rows, _split(prefix_chain_ids(flat, counts), counts))


def _assert_prefix_ids(rows: list[list[int]], ids: list[list[int]]) -> None:
    """Equal ids exactly for equal prefixes, and the ids are 0 .. distinct prefixes - 1."""
    by_prefix: dict[tuple, int] = {}
    for row, row_ids in zip(rows, ids, strict=True):
        for t, i in enumerate(row_ids):
            prefix = tuple(row[: t + 1])
            assert by_prefix.setdefault(prefix, i) == i
    assert len(set(by_prefix.values())) == len(by_prefix)
    assert set(by_prefix.values()) == set(range(len(by_prefix)))


def _random_rows(seed: int, n_rows: int = 400) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    heads = rng.integers(0, 2**64 - 1, size=5, dtype=np.uint64).tolist()
    rows = []
    for _ in range(n_rows):
        shared = heads[: int(rng.integers(0, 6))]
        fresh = rng.integers(0, 2**64 - 1, size=int(rng.integers(0, 5)), dtype=np.uint64).tolist()
        rows.append(shared + fresh)
    return rows


def test_ids_are_int32_unless_there_are_too_many_blocks(monkeypatch):
    flat, counts = _csr(_random_rows(1))
    small = prefix_chain_ids(flat.copy(), counts)
    assert small.dtype == np.int32
    monkeypatch.setattr(prefix, "INT32_ID_LIMIT", flat.size - 1)
    wide = prefix_chain_ids(flat.copy(), counts)
    assert wide.dtype == np.int64
    assert wide.tolist() == small.tolist()


def test_slicing_and_batching_do_not_change_the_ids(monkeypatch):
    # One hash repeated in every row makes one partition far larger than a batch.
    rows = [[7] + r for r in _random_rows(2)]
    flat, counts = _csr(rows)
    expected = prefix_chain_ids(flat.copy(), counts).tolist()
    monkeypatch.setattr(prefix, "_GROUP_ROWS", 64)
    monkeypatch.setattr(prefix, "_BATCH", 16)
    ids = prefix_chain_ids(flat.copy(), counts)
    _assert_prefix_ids(rows, _split(ids, counts))
    assert ids.tolist() == expected


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from([0, 1, 2, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1), max_size=6
        ),
        min_size=1,
        max_size=40,
    )
)
def test_a_single_slice_gets_the_ids_of_the_grouped_path(rows):
    flat, counts = _csr(rows)
    one_slice = prefix_chain_ids(flat.copy(), counts)
    with pytest.MonkeyPatch.context() as m:  # every input takes the grouped path, in slices
        m.setattr(prefix, "_GROUP_ROWS", 4)
        grouped = prefix_chain_ids(flat.copy(), counts)
    assert one_slice.tolist() == grouped.tolist()
    assert one_slice.dtype == grouped.dtype


def test_a_mapped_buffer_is_reused_for_the_ids():
    flat, counts = _csr(_random_rows(3))
    expected = prefix_chain_ids(flat.copy(), counts).tolist()
    col = GrowingArray(np.uint64)
    col.extend(flat)
    assert prefix_chain_ids(col.array(), counts).tolist() == expected


def test_a_view_of_other_memory_gets_the_same_ids():
    flat, counts = _csr(_random_rows(4))
    expected = prefix_chain_ids(flat.copy(), counts).tolist()
    padded = np.concatenate([np.zeros(1, dtype=np.uint64), flat])
    assert prefix_chain_ids(padded[1:], counts).tolist() == expected


def test_factorize_codes_values_by_first_appearance():
    codes, uniques = factorize(np.array([5, 3, 5, 7, 3], dtype=np.int64))
    assert codes.tolist() == [0, 1, 0, 2, 1]
    assert uniques.tolist() == [5, 3, 7]
    assert codes.dtype == np.int64 and uniques.dtype == np.int64


def test_factorize_large_inputs_agree_with_small_ones(monkeypatch):
    values = np.array([9, 1, 9, 4, 1, 2], dtype=np.int64)
    small = factorize(values)
    monkeypatch.setattr(prefix, "_SMALL_FACTORIZE", 0)  # take the pandas path
    large = factorize(values)
    assert small[0].tolist() == large[0].tolist() == [0, 1, 0, 2, 1, 3]
    assert small[1].tolist() == large[1].tolist() == [9, 1, 4, 2]
