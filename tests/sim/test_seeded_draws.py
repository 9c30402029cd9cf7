"""``plansim.sim.seeded_draws``: numpy's ``default_rng(seed)`` stream, number for number."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plansim.sim.seeded_draws import SeededDraws

# A draw: random(), or integers(n) over small ranges (a router's ranks), powers of two and the
# 32-bit edges (n = 2**32 takes a 32-bit draw whole, n = 1 takes none).
DRAWS = st.lists(
    st.none()
    | st.integers(1, 8)
    | st.sampled_from([1, 2, 3, 1000, 2**31, 2**31 + 1, 2**32 - 1, 2**32])
    | st.integers(1, 2**32),
    max_size=60,
)
SEEDS = st.integers(0, 2**63 - 1) | st.sampled_from([0, 1, 2**32 - 1, 2**32, 2**128 + 7])


@settings(max_examples=300, deadline=None)
@given(SEEDS, DRAWS)
def test_the_stream_is_numpys(seed, draws):
    ours, numpys = SeededDraws(seed), np.random.default_rng(seed)
    for n in draws:
        if n is None:
            assert ours.random() == numpys.random()
        else:
            assert ours.integers(n) == int(numpys.integers(n))


def test_a_long_stream_of_router_ties_is_numpys():
    # Thousands of draws from one stream, as a KV-router replay breaks its ties.
    ours, numpys = SeededDraws(0), np.random.default_rng(0)
    sizes = np.random.default_rng(1).integers(2, 17, 5000).tolist()
    assert [ours.integers(n) for n in sizes] == [int(numpys.integers(n)) for n in sizes]


@pytest.mark.parametrize("n", [0, -1, 2**32 + 1])
def test_a_range_beyond_32_bits_or_empty_is_refused(n):
    with pytest.raises(ValueError, match="n must be 1 to 2"):
        SeededDraws(0).integers(n)


def test_a_negative_seed_is_refused():
    with pytest.raises(ValueError, match="non-negative"):
        SeededDraws(-1)
