"""The hindsight lower bound: the least cost any scaling policy could spend on the trace and
still meet the goodput target overall.

The trace is cut into segments (``segments``). A schedule gives each segment a worker count per
pool. Its cost is each segment's length at the schedule's cost per hour, the last segment
running on until the last request completes, plus the start-up of every worker added at a
segment edge (``startup_time`` at that pool's rate; removing workers is free, and the first
segment's workers are ready at time 0, as in a static replay). It meets the target when the
segments' good requests add up to the target share of all requests. ``solve`` finds the
cheapest such schedule exactly, by dynamic programming over (segment, counts, bad requests so
far) with the start-up charge applied pool by pool in linear time.

What a segment achieves at some counts comes from replays (``SegmentValues``). A segment
replay replays the segment at those counts after a lead-in of the traffic before it, served by
at least the chosen static counts and scaled down to the segment's counts at the edge: the
requests in flight at the edge and the warm KV caches carry over, a backlog does not (the
schedule would not have built one). A whole-trace static replay at the same counts gives a
floor (the value under the constant schedule). Counts never segment-replayed are given the best
value monotonicity allows: no more than any larger counts segment-replayed, at most every
request, at least the floor. The run first finds, in each segment, each pool's threshold along
its line (the other pools at their limits) by bisection below the smallest count whose floor met
the segment's own target; then it solves, replays every
(segment, counts) the cheapest schedule uses without a segment replay, with what bounds its
neighbours fastest (the midpoint between it and the replayed counts that bound its value, or,
in a disaggregated deployment, its lines with the other pool at its limit), and solves again,
until
the schedule uses replayed values only (the bound is then exact for this segment model) or the
round limit is reached (it is then looser, still a lower bound).

Why it is a lower bound, and where it is approximate: a policy that knew the future could do no
better than choosing, segment by segment, the counts that just meet the target, paying only for
the start-ups it must, which is what the schedule does. The approximations are in the segment
values: carry-over over an edge is that of a well-provisioned previous segment (a policy that
under-provisioned before the edge would do worse, so the bound stays below it), requests still
running after a segment's end finish without the next segment's traffic, scale-downs drain for
free, and goodput is taken as monotone in the counts. The bound is capped at the cheapest
static deployment's cost (a constant schedule it contains), so it never exceeds it. The
schedule itself is then replayed on the whole trace (``schedule_replay``): when that replay
meets the target, the best possible cost lies between the bound and its cost.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Counts = tuple[int, ...]
# Cells the dynamic programme may store (segments x count grid x bad-request bins).
MAX_DP_CELLS = 5_000_000


@dataclass(frozen=True, slots=True)
class BoundInputs:
    """Everything ``solve`` needs, in plain numbers.

    ``limits``: the largest count per pool (the grid is 1..limit per pool); ``budget_ok(counts)``
    is folded into ``allowed`` (a bool grid); ``worker_rates``: cost per worker-hour per pool;
    ``startup_s``: start-up seconds per pool; ``length_s``: seconds per segment (the last ends at
    the last arrival); ``requests``: requests per segment; ``allowed_bad``: requests that may
    miss the SLA overall; ``last_edge_ms``: the last arrival (replay ms).
    """

    limits: Counts
    allowed: np.ndarray
    worker_rates: tuple[float, ...]
    startup_s: tuple[float, ...]
    length_s: np.ndarray
    requests: np.ndarray
    allowed_bad: int
    last_edge_ms: float


@dataclass(frozen=True, slots=True)
class Schedule:
    """The cheapest schedule found: counts per segment, its cost (start-ups included) and the
    good requests it is credited with per segment."""

    counts: tuple[Counts, ...]
    cost: float
    good: tuple[int, ...]
    startup_cost: float


class SegmentValues:
    """What the replays say each segment achieves at each counts.

    A segment replay's value is final for its (segment, counts). A whole-trace static replay at
    some counts gives every segment a floor there: what that segment achieved with the same
    counts before it (the constant schedule); a segment replay may credit more (the schedule
    may have had more workers before). A final value is the larger of the two.
    """

    def __init__(self, requests: Sequence[int]) -> None:
        self.requests = [int(n) for n in requests]
        n = len(self.requests)
        self.final: list[dict[Counts, int]] = [{} for _ in range(n)]
        self.floor: list[dict[Counts, int]] = [{} for _ in range(n)]
        self._end_final: dict[Counts, float] = {}
        self._end_floor: dict[Counts, float] = {}

    def add_static(self, counts: Counts, segment_good: Sequence[int], end_ms: float) -> None:
        for s, good in enumerate(segment_good):
            self.floor[s][counts] = int(good)
            if counts in self.final[s]:
                self.final[s][counts] = max(self.final[s][counts], int(good))
        self._end_floor[counts] = end_ms

    def add_segment(self, segment: int, counts: Counts, good: int, end_ms: float) -> None:
        self.final[segment][counts] = max(int(good), self.floor[segment].get(counts, 0))
        if segment == len(self.requests) - 1:
            self._end_final[counts] = end_ms

    def is_final(self, segment: int, counts: Counts) -> bool:
        return counts in self.final[segment]

    def probe(self, segment: int, counts: Counts, limits: Counts) -> list[Counts]:
        """What to replay to learn about ``counts`` of ``segment``, a cell a schedule wants
        but no segment replay has valued: the cell itself, and what bounds its neighbours
        fastest. When replayed counts that dominate it bound its optimistic value, the midpoint
        between it and them (so each round halves the counts that share that value); when
        nothing bounds it and there are several pools, each pool's line through it with the
        other pools at their limits (which bounds the whole line at once)."""
        final = self.final[segment]
        cells = [counts]
        above = [f for f in final if all(a >= c for a, c in zip(f, counts))]
        if above:
            bound = min(above, key=lambda f: (final[f], sum(f), f))
            cells.append(tuple((c + b) // 2 for c, b in zip(counts, bound)))
        elif len(counts) > 1:
            cells += [
                tuple(c if j == i else lim for j, (c, lim) in enumerate(zip(counts, limits)))
                for i in range(len(counts))
            ]
        return [c for c in dict.fromkeys(cells) if c not in final]

    def good_grid(self, segment: int, limits: Counts) -> np.ndarray:
        """Good requests per counts on the grid ``1..limits``: the final value where there is
        one; elsewhere the least final value among counts that dominate it (no pool smaller),
        or every request, but never below the floor."""
        final = np.full(limits, np.inf)
        for counts, good in self.final[segment].items():
            if _on_grid(counts, limits):
                final[_cell(counts)] = good
        dominated = final
        for axis in range(len(limits)):
            dominated = np.flip(np.minimum.accumulate(np.flip(dominated, axis), axis=axis), axis)
        out = np.minimum(dominated, float(self.requests[segment]))
        for counts, good in self.floor[segment].items():
            if _on_grid(counts, limits):
                out[_cell(counts)] = max(out[_cell(counts)], good)
        replayed = np.isfinite(final)
        out[replayed] = final[replayed]
        return out

    def last_end_ms(self) -> dict[Counts, float]:
        """The replayed end (last completion, replay ms) of the last segment per final counts:
        the earlier of its segment replay and its whole-trace replay."""
        return {c: min(end, self._end_floor.get(c, end)) for c, end in self._end_final.items()}


def line_threshold(
    values: SegmentValues, segment: int, pool: int, limits: Counts, need: int
) -> Generator[list[tuple[int, Counts]], None, None]:
    """The fewest workers of ``pool`` with which ``segment`` meets its own ``need`` (good
    requests) while the other pools are at their limits: bisection below the smallest count
    whose floor already met it (or the pool's limit), on segment replays. Yields the cells to
    replay next; the caller records them in ``values`` before resuming."""

    def point(n: int) -> Counts:
        return tuple(n if j == pool else lim for j, lim in enumerate(limits))

    floors = values.floor[segment]
    met = [n for n in range(1, limits[pool] + 1) if floors.get(point(n), -1) >= need]
    top = min(met) if met else limits[pool]
    if not values.is_final(segment, point(top)):
        yield [(segment, point(top))]
    if values.final[segment][point(top)] < need:
        return
    missed, hit = 0, top
    while hit - missed > 1:
        mid = (missed + hit) // 2
        if not values.is_final(segment, point(mid)):
            yield [(segment, point(mid))]
        if values.final[segment][point(mid)] >= need:
            hit = mid
        else:
            missed = mid


def lockstep(searches: Sequence[Generator[list[Any], None, None]]) -> Iterator[list[Any]]:
    """Step several searches together: each round, the requests of all that are not done."""
    active = list(searches)
    while active:
        round_: list[Any] = []
        still = []
        for search in active:
            try:
                round_ += next(search)
            except StopIteration:
                continue
            still.append(search)
        active = still
        if round_:
            yield round_


def _on_grid(counts: Counts, limits: Counts) -> bool:
    return all(1 <= c <= lim for c, lim in zip(counts, limits))


def _cell(counts: Counts) -> tuple[int, ...]:
    return tuple(c - 1 for c in counts)


def _startup_step(values: np.ndarray, axis: int, per_worker: float) -> np.ndarray:
    """``min over a of values[a] + per_worker * max(0, b - a)`` along ``axis`` for every b, in
    linear time: the best of coming down (free: suffix minimum) and coming up (prefix minimum
    of ``values[a] - a w``, plus ``b w``)."""
    n = values.shape[axis]
    shape = [1] * values.ndim
    shape[axis] = n
    index = np.arange(n, dtype=np.float64).reshape(shape) * per_worker
    down = np.flip(np.minimum.accumulate(np.flip(values, axis), axis=axis), axis)
    up = np.minimum.accumulate(values - index, axis=axis)
    up = (
        np.concatenate(
            [
                np.full_like(np.take(up, [0], axis=axis), np.inf),
                np.take(up, np.arange(n - 1), axis=axis),
            ],
            axis=axis,
        )
        + index
    )
    return np.minimum(down, up)


def _startup_cost(src: np.ndarray, dst: Counts, per_worker: np.ndarray) -> np.ndarray:
    """Start-up cost from every grid cell ``src`` (count arrays per pool) to ``dst``."""
    cost = np.zeros(src.shape[1:])
    for i, c in enumerate(dst):
        cost = cost + np.maximum(c - src[i], 0) * per_worker[i]
    return cost


def solve(
    inputs: BoundInputs, good: Sequence[np.ndarray], last_end_ms: Mapping[Counts, float]
) -> Schedule | None:
    """The cheapest schedule meeting the target given per-segment good-request grids ``good``
    (``SegmentValues.good_grid``) and the replayed end of the last segment per counts (counts
    without one are charged to the last arrival only). None when no schedule within the budget
    can."""
    limits = inputs.limits
    n_seg = len(good)
    cells = int(np.prod(limits))
    rates = np.asarray(inputs.worker_rates, dtype=np.float64)
    per_worker_startup = rates * np.asarray(inputs.startup_s) / 3600.0
    counts_grid = np.indices(limits) + 1  # (pools, *limits)
    rate_grid = np.tensordot(rates, counts_grid, axes=1)
    # Bad requests in bins of `unit` (rounded down, so a real schedule is never excluded).
    unit = max(1, math.ceil(n_seg * cells * (inputs.allowed_bad + 1) / MAX_DP_CELLS))
    bins = inputs.allowed_bad // unit
    requests = inputs.requests.astype(np.float64)

    def charged_s(seg: int) -> np.ndarray:
        if seg < n_seg - 1:
            return np.full(limits, inputs.length_s[seg])
        tail = np.zeros(limits)
        for counts, end_ms in last_end_ms.items():
            if _on_grid(counts, limits) and math.isfinite(end_ms):
                tail[_cell(counts)] = (end_ms - inputs.last_edge_ms) / 1000.0
        return np.maximum(inputs.length_s[seg] + tail, 0.0)

    bad_bins = [np.floor((requests[s] - good[s]) / unit).astype(np.int64) for s in range(n_seg)]
    seg_cost = [
        np.where(inputs.allowed, rate_grid * charged_s(s) / 3600.0, np.inf) for s in range(n_seg)
    ]
    b_axis = np.arange(bins + 1)

    def place(before: np.ndarray, seg: int) -> np.ndarray:
        """``seg_cost + before[counts, b - bad(counts)]`` (inf where b < bad)."""
        shift = b_axis - bad_bins[seg][..., None]
        taken = np.take_along_axis(before, np.clip(shift, 0, bins), axis=-1)
        return np.where(shift >= 0, taken + seg_cost[seg][..., None], np.inf)

    table = [place(np.zeros(limits + (bins + 1,)), 0)]
    for seg in range(1, n_seg):
        carried = table[-1]
        for axis in range(len(limits)):
            carried = _startup_step(carried, axis, float(per_worker_startup[axis]))
        table.append(place(carried, seg))
    final = table[-1][..., bins]
    if not np.isfinite(final).any():
        return None
    # Walk back: the cheapest last counts, then each predecessor that reaches it at that cost.
    flat_last = int(np.argmin(final))
    path = [tuple(int(i) + 1 for i in np.unravel_index(flat_last, limits))]
    b = bins
    for seg in range(n_seg - 1, 0, -1):
        here = path[-1]
        b -= int(bad_bins[seg][_cell(here)])
        before = table[seg - 1][..., b] + _startup_cost(counts_grid, here, per_worker_startup)
        path.append(tuple(int(i) + 1 for i in np.unravel_index(int(np.argmin(before)), limits)))
    path.reverse()
    return _price(inputs, path, good, seg_cost, per_worker_startup)


def _price(
    inputs: BoundInputs,
    path: list[Counts],
    good: Sequence[np.ndarray],
    seg_cost: Sequence[np.ndarray],
    per_worker_startup: np.ndarray,
) -> Schedule:
    """The schedule's cost summed again in float64 along the path (the same figures the
    programme minimised)."""
    cost = 0.0
    startup = 0.0
    for seg, counts in enumerate(path):
        cost += float(seg_cost[seg][_cell(counts)])
        if seg:
            startup += sum(
                max(c - p, 0) * float(w)
                for c, p, w in zip(counts, path[seg - 1], per_worker_startup)
            )
    credited = tuple(int(good[s][_cell(counts)]) for s, counts in enumerate(path))
    return Schedule(tuple(path), cost + startup, credited, startup)
