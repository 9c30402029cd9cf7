"""Cutting the trace into segments, and the lead-in of a segment replay."""

from __future__ import annotations

import numpy as np

from plansim.capacity.segments import cut, replay_arrivals_ms, windows


def test_segments_cover_the_trace_and_the_last_ends_at_the_last_arrival():
    arrivals = np.array([0.0, 1000.0, 59_000.0, 61_000.0, 119_000.0, 150_000.0])
    segs = cut(arrivals, 60.0)
    assert segs.edges_ms.tolist() == [0.0, 60_000.0, 120_000.0, 150_000.0]
    assert segs.requests.tolist() == [3, 2, 1]
    assert segs.length_s.tolist() == [60.0, 60.0, 30.0]
    assert segs.count(np.array([True, False, True, True, True, False])).tolist() == [2, 2, 0]


def test_a_last_segment_shorter_than_half_merges_into_the_one_before():
    arrivals = np.array([0.0, 30_000.0, 65_000.0, 80_000.0])
    segs = cut(arrivals, 60.0)
    assert segs.edges_ms.tolist() == [0.0, 80_000.0]
    assert segs.requests.tolist() == [4]


def test_a_trace_shorter_than_a_segment_is_one_segment():
    segs = cut(np.array([0.0, 5_000.0]), 600.0)
    assert segs.edges_ms.tolist() == [0.0, 5_000.0] and segs.requests.tolist() == [2]


def test_replay_time_starts_at_the_first_arrival_and_divides_by_the_speedup():
    assert replay_arrivals_ms(np.array([500.0, 1500.0, 2500.0]), 2.0).tolist() == [
        0.0,
        500.0,
        1000.0,
    ]


def test_a_segment_window_leads_in_with_the_traffic_just_before_it():
    arrivals = np.arange(0.0, 180_000.0, 10_000.0)  # one request every 10 s
    wins = windows(cut(arrivals, 60.0), lead_in_s=20.0)
    assert windows(cut(arrivals, 60.0), lead_in_s=200.0)[1].lead_row == 3  # half of 60 s
    first, second = wins[0], wins[1]
    assert (first.lead_row, first.start_row, first.stop_row) == (0, 0, 6)
    assert not first.has_lead_in
    # lead-in from 40 s: rows 4, 5 (at 40 and 50 s), then the segment's own rows 6..11
    assert (second.lead_row, second.start_row, second.stop_row) == (4, 6, 12)
    assert second.offset_ms == 40_000.0 and second.edge_ms == 60_000.0
