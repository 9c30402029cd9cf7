"""Request ids: compact string arrays, ordinals for missing ids, exact repeat detection."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from plansim.traces import request_ids
from plansim.traces.request_ids import STRING, IdCollector, fill_missing, first_repeat, repeated


def test_first_repeat_is_the_earliest_row_equal_to_an_earlier_one():
    ids = np.array(["a", "b", "c", "b", "a"], dtype=STRING)
    assert first_repeat(ids) == 3
    assert first_repeat(np.array(["x", "y"], dtype=STRING)) is None
    assert first_repeat(np.array([], dtype=STRING)) is None


def test_colliding_hashes_are_settled_by_the_strings(monkeypatch):
    monkeypatch.setattr(request_ids, "_hashes", lambda ids: np.zeros(ids.size, dtype=np.int64))
    assert first_repeat(np.array(["a", "b", "c"], dtype=STRING)) is None
    assert first_repeat(np.array(["a", "b", "c", "b"], dtype=STRING)) == 3
    assert repeated(np.array(["a", "b", "c", "b"], dtype=STRING)).tolist() == [
        False,
        False,
        False,
        True,
    ]


def test_repeated_marks_every_row_after_an_ids_first():
    ids = np.array(["a", "b", "a", "c", "b", "a"], dtype=STRING)
    assert repeated(ids).tolist() == [False, False, True, False, True, True]
    assert repeated(np.array(["x", "y"], dtype=STRING)).tolist() == [False, False]
    assert repeated(np.array([], dtype=STRING)).tolist() == []


def test_missing_ids_become_their_ordinals_from_the_start():
    values = np.array(["x", None, "y", None], dtype=object)
    out = fill_missing(values, 10)
    assert out.dtype == STRING and out.tolist() == ["x", "11", "y", "13"]
    assert fill_missing(np.array([None, None], dtype=object), 0).tolist() == ["0", "1"]


@pytest.mark.parametrize("step_rows", [2, 1000])  # several pyarrow steps; decoded at once
def test_collected_ids_come_back_in_order_from_slices_and_lists(monkeypatch, step_rows):
    monkeypatch.setattr(request_ids, "_HASH_ROWS", step_rows)
    col = IdCollector()
    sliced = pa.array(["skip", "ä-1", "", "long-" + "x" * 40]).slice(1, 3)  # non-zero offset
    col.extend(sliced)
    col.extend(["b", "ç"])
    col.extend(pa.array([], type=pa.string()))
    out = col.array()
    assert out.dtype == STRING
    assert out.tolist() == ["ä-1", "", "long-" + "x" * 40, "b", "ç"]
    assert isinstance(out[0], str)
    col = IdCollector()
    col.extend([])
    assert col.array().tolist() == []
