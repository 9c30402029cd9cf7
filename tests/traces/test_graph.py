"""The columnar request graph: assembly, cycles and what waits on them, open-loop estimates,
reordering with the workload."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.errors import TraceError
from plansim.traces.graph import (
    COMPLETION,
    DISPATCH,
    TERMINAL,
    Edges,
    build_graph,
    estimated_arrival_ms,
    topological_levels,
)

NAN = float("nan")


def _graph(n, not_before, edges, session=None):
    target, source, delay, trigger = (
        (np.array(x) for x in zip(*edges, strict=True))
        if edges
        else (np.zeros(0, np.int64),) * 2 + (np.zeros(0), np.zeros(0, np.int8))
    )
    ids = np.array([f"r{i}" for i in range(n)], dtype=object)
    session = np.full(n, -1) if session is None else np.array(session)
    n_sessions = int(session.max()) + 1 if session.size else 0
    return build_graph(
        n,
        np.array(not_before, dtype=float),
        Edges(
            target.astype(np.int64),
            source.astype(np.int64),
            delay.astype(float),
            trigger.astype(np.int8),
        ),
        session,
        np.array([f"s{k}" for k in range(n_sessions)], dtype=object),
        request_id=ids,
        locate=lambda row: ("t.jsonl", row + 1),
    )


def test_edges_are_grouped_by_target_in_csr():
    g = _graph(
        3, [0, NAN, NAN], [(2, 0, 5.0, COMPLETION), (1, 0, 1.0, DISPATCH), (2, 1, 2.0, COMPLETION)]
    )
    assert g.dep_offsets.tolist() == [0, 0, 1, 3]
    assert g.dep_source.tolist() == [0, 0, 1]
    assert g.dep_delay_ms.tolist() == [1.0, 5.0, 2.0]
    assert g.num_edges == 3


def test_levels_put_every_dependency_in_an_earlier_level():
    g = _graph(
        4, [0, NAN, NAN, 7], [(1, 0, 0.0, DISPATCH), (2, 1, 0.0, DISPATCH), (2, 3, 0.0, DISPATCH)]
    )
    assert [lv.tolist() for lv in topological_levels(g)] == [[0, 3], [1], [2]]


def test_a_row_waiting_on_two_rows_of_one_level_is_released_after_both():
    # r2 depends on r0 and r1 (one level), r3 on r2 twice over (a completion and a dispatch).
    g = _graph(
        4,
        [0, 0, NAN, NAN],
        [
            (2, 0, 0.0, COMPLETION),
            (2, 1, 0.0, COMPLETION),
            (3, 2, 0.0, COMPLETION),
            (3, 2, 1.0, DISPATCH),
        ],
    )
    assert [lv.tolist() for lv in topological_levels(g)] == [[0, 1], [2], [3]]


def test_estimate_is_the_release_if_requests_took_no_time():
    # r2 joins r0 (+10) and r1 (+1 after r1, which is r0 + 5): max(10, 6) = 10, not before 4.
    g = _graph(
        3, [0, NAN, 4], [(1, 0, 5.0, COMPLETION), (2, 0, 10.0, COMPLETION), (2, 1, 1.0, TERMINAL)]
    )
    assert estimated_arrival_ms(g).tolist() == [0.0, 5.0, 10.0]
    # A later not_before wins over the dependencies.
    g = _graph(2, [0, 30], [(1, 0, 5.0, COMPLETION)])
    assert estimated_arrival_ms(g).tolist() == [0.0, 30.0]


def test_cycle_is_named_at_its_first_line_with_what_waits_on_it():
    with pytest.raises(TraceError) as info:
        _graph(
            4,
            [0, 0, 0, 0],
            [(1, 2, 0.0, COMPLETION), (2, 1, 0.0, COMPLETION), (3, 2, 0.0, COMPLETION)],
        )
    err = info.value
    assert err.line == 2 and err.field == "dependencies"
    assert "r1 -> r2 -> r1" in err.message and "1 more request" in err.message


def test_self_dependency_is_a_cycle():
    with pytest.raises(TraceError, match="r0 -> r0"):
        _graph(1, [0], [(0, 0, 0.0, DISPATCH)])


def test_reordered_follows_the_rows_and_remaps_sources():
    g = _graph(3, [0, NAN, 9], [(1, 0, 5.0, COMPLETION)], session=[0, 0, 1])
    r = g.reordered(np.array([2, 0, 1]))
    assert r.not_before_ms[[0, 1]].tolist() == [9.0, 0.0] and np.isnan(r.not_before_ms[2])
    assert r.dep_offsets.tolist() == [0, 0, 0, 1]
    assert r.dep_source.tolist() == [1]  # row 0 moved to position 1
    assert r.session.tolist() == [1, 0, 0] and r.turn_index.tolist() == [0, 0, 1]


def test_origin_is_the_smallest_release_bound():
    assert _graph(3, [40, NAN, 15], [(1, 0, 1.0, TERMINAL)]).origin_ms == 15.0
