"""The running batch's rows (``plansim.sim.batch``): removal keeps the others in batch order with
their own state and row numbers, and gives the removed requests their state back."""

from hypothesis import given, settings
from hypothesis import strategies as st

from plansim.sim.batch import Batch, Request


@st.composite
def removals(draw):
    """A batch size (past the initial capacity, so the arrays have grown) and rounds of rows
    to remove, ascending (a round may name none)."""
    size = draw(st.integers(1, 40))
    rounds = []
    left = size
    for _ in range(draw(st.integers(1, 4))):
        rows = sorted(draw(st.sets(st.integers(0, left - 1), max_size=left))) if left else []
        rounds.append(rows)
        left -= len(rows)
    return size, rounds


def _request(rid):
    # Distinct state in every field, so a row moved to the wrong place shows.
    req = Request(rid, 1000 + rid, 50 + rid, [])
    req._computed = 3 * rid
    req._generated = 2 * rid
    req._n_blocks = 5 * rid
    req._pass_no = 7 * rid
    req._before = 11 * rid
    return req


def _state(rid):
    """``rid``'s row as ``_request`` made it: computed, generated, blocks, pass, before."""
    return 3 * rid, 2 * rid, 5 * rid, 7 * rid, 11 * rid


@settings(max_examples=200, deadline=None)
@given(removals())
def test_removal_keeps_the_other_rows_in_order_with_their_state(case):
    size, rounds = case
    batch = Batch(capacity=8)
    for rid in range(size):
        batch.add(_request(rid))
    model = list(range(size))
    for rows in rounds:
        if not rows:
            continue
        gone = [batch.reqs[row] for row in rows]
        batch.remove(rows)
        for req in gone:
            assert not req.in_batch
            assert (
                req.computed,
                req.generated,
                req.n_blocks,
                req.pass_no,
                req.computed_before,
            ) == _state(req.rid)
        model = [rid for i, rid in enumerate(model) if i not in set(rows)]
        assert [r.rid for r in batch.reqs] == model
        for row, req in enumerate(batch.reqs):
            assert req._row == row
            assert (
                req.computed,
                req.generated,
                req.n_blocks,
                req.pass_no,
                req.computed_before,
            ) == _state(req.rid)
        n = len(model)
        assert batch.rid[:n].tolist() == model
        assert batch.total[:n].tolist() == [1050 + 2 * rid for rid in model]
