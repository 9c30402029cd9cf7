"""The static search: for one variant, the cheapest worker counts whose goodput ratio meets the
target, replaying few counts.

Goodput is taken to be monotone in every pool's count (more workers never serve fewer requests
well), which holds in practice. Under it:

- **aggregated**: the smallest count is found by doubling from 1 (1, 2, 4, ... up to the most
  workers the GPU budget holds) and then bisecting between the last count that missed and the
  first that met the target: about ``2 log2(answer)`` replays;
- **disaggregated**: two such searches run side by side, one per pool, each with the other pool
  at its largest count (a probe, which may exceed the budget: it bounds what any split with
  fewer workers can do). They give the fewest prefill workers ``p0`` and decode workers ``d0``
  any feasible split needs. Splits with at least those counts are then tried in order of cost
  per hour, skipping every split that a split already seen to miss dominates; the first that
  meets the target is the cheapest. The walk is capped at ``corner_limit`` replays.

Searches are generators in the ``scheduler`` protocol, so the two pool searches share rounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

from plansim.capacity import objective as objectives
from plansim.capacity.tasks import FullReplay
from plansim.capacity.variants import Variant
from plansim.roles import Mode

Counts = tuple[int, ...]
# A count search yields the counts it wants replayed and receives their evaluations.
CountSearch = Generator[list[Counts], list["Evaluated"], Counts | None]


def required_good(target: float, requests: int) -> int:
    """Good requests a goodput ratio of ``target`` needs out of ``requests``. The 1e-9 keeps a
    product like 0.95 x 2000 from needing one more request through floating-point error."""
    return math.ceil(target * requests - 1e-9)


@dataclass(frozen=True, slots=True)
class Evaluated:
    """One static replay as the search sees it."""

    counts: Counts
    replay: FullReplay
    good: int
    requests: int
    cost: float
    meets_target: bool
    within_budget: bool

    @property
    def ratio(self) -> float:
        return self.good / self.requests if self.requests else 0.0

    @property
    def feasible(self) -> bool:
        """Meets the target within the GPU budget: a candidate for the recommendation."""
        return self.meets_target and self.within_budget


def evaluate(
    variant: Variant,
    counts: Counts,
    replay: FullReplay,
    *,
    target: float,
    budget: int,
    objective: objectives.Objective,
) -> Evaluated:
    requests = int(replay.summary["num_requests"])
    good = sum(replay.segment_good)
    return Evaluated(
        counts=counts,
        replay=replay,
        good=good,
        requests=requests,
        cost=objectives.measured(objective, variant.layout, replay.summary),
        meets_target=good >= required_good(target, requests),
        within_budget=variant.layout.within_budget(counts, budget),
    )


@dataclass(frozen=True, slots=True)
class StaticSearch:
    """A variant's search: every count replayed, in order; the answer (None when no count within
    the budget meets the target); ``complete`` False when the disaggregated walk hit its cap."""

    variant: Variant
    evaluated: tuple[Evaluated, ...]
    answer: Counts | None
    complete: bool = True

    def point(self, counts: Counts) -> Evaluated:
        return next(e for e in self.evaluated if e.counts == counts)

    @property
    def cheapest(self) -> Evaluated | None:
        return self.point(self.answer) if self.answer is not None else None

    @property
    def best_within_budget(self) -> Evaluated | None:
        """The evaluated point within budget with the highest goodput (then the lowest cost)."""
        inside = [e for e in self.evaluated if e.within_budget]
        return min(inside, key=lambda e: (-e.good, e.cost)) if inside else None


def smallest_count(point: Callable[[int], Counts], limit: int) -> CountSearch:
    """The smallest n in 1..limit whose ``point(n)`` meets the target (doubling, then
    bisection), or None."""
    missed, n = 0, 1
    while True:
        (e,) = yield [point(n)]
        if e.meets_target:
            met = n
            break
        missed = n
        if n >= limit:
            return None
        n = min(2 * n, limit)
    while met - missed > 1:
        mid = (met + missed) // 2
        (e,) = yield [point(mid)]
        if e.meets_target:
            met = mid
        else:
            missed = mid
    return (met,)


def side_by_side(
    a: CountSearch, b: CountSearch
) -> Generator[list[Counts], list[Evaluated], tuple[Counts | None, Counts | None]]:
    """Run two count searches in the same rounds; returns both answers."""
    searches = [a, b]
    answers: list[Counts | None] = [None, None]
    wants: list[list[Counts] | None] = [None, None]
    for i, search in enumerate(searches):
        try:
            wants[i] = next(search)
        except StopIteration as stop:
            answers[i] = stop.value
    while any(w is not None for w in wants):
        asked = [w or [] for w in wants]
        results = yield [c for w in asked for c in w]
        pos = 0
        for i, search in enumerate(searches):
            if wants[i] is None:
                continue
            mine, pos = results[pos : pos + len(asked[i])], pos + len(asked[i])
            try:
                wants[i] = search.send(mine)
            except StopIteration as stop:
                wants[i], answers[i] = None, stop.value
    return answers[0], answers[1]


def agg_search(variant: Variant, budget: int) -> CountSearch:
    (limit,) = variant.layout.max_counts(budget)
    return smallest_count(lambda n: (n,), limit)


def disagg_search(
    variant: Variant, budget: int, objective: objectives.Objective, corner_limit: int
) -> Generator[list[Counts], list[Evaluated], Counts | None]:
    layout = variant.layout
    p_max, d_max = layout.max_counts(budget)
    p_probe, d_probe = yield from side_by_side(
        smallest_count(lambda p: (p, d_max), p_max), smallest_count(lambda d: (p_max, d), d_max)
    )
    if p_probe is None or d_probe is None:
        return None
    p0, d0 = p_probe[0], d_probe[0]
    splits = sorted(
        (
            (p, d)
            for p in range(p0, p_max + 1)
            for d in range(d0, d_max + 1)
            if layout.within_budget((p, d), budget)
        ),
        key=lambda c: (objectives.rate(objective, layout, c), c),
    )
    missed: list[Counts] = []
    tried = 0
    for split in splits:
        if any(split[0] <= m[0] and split[1] <= m[1] for m in missed):
            continue
        if tried >= corner_limit:
            raise _CornerCapReached
        tried += 1
        (e,) = yield [split]
        if e.meets_target:
            return split
        missed.append(split)
    return None


class _CornerCapReached(Exception):
    """The disaggregated walk used its replays without meeting the target."""


def corner_limit_for(variant: Variant, budget: int) -> int:
    """Replays the disaggregated walk may use: three per doubling of the larger pool."""
    return 3 * max(math.ceil(math.log2(max(max(variant.layout.max_counts(budget)), 2))), 1)


EvaluateCounts = Callable[[Sequence[Counts]], Generator[object, object, list[Evaluated]]]


def run_search(
    variant: Variant, budget: int, objective: objectives.Objective, evaluate_counts: EvaluateCounts
) -> Generator[object, object, StaticSearch]:
    """Drive the variant's count search; ``evaluate_counts`` is a generator (in the scheduler
    protocol) that replays counts and returns their evaluations."""
    if variant.layout.mode is Mode.AGG:
        search: Generator[list[Counts], list[Evaluated], Counts | None] = agg_search(
            variant, budget
        )
    else:
        search = disagg_search(variant, budget, objective, corner_limit_for(variant, budget))
    answer, evaluated, complete = yield from drive(search, evaluate_counts)
    return StaticSearch(variant, evaluated, answer, complete)


def drive(
    search: Generator[list[Counts], list[Evaluated], Counts | None], evaluate_counts: EvaluateCounts
) -> Generator[object, object, tuple[Counts | None, tuple[Evaluated, ...], bool]]:
    """Run a count search, each count replayed once through ``evaluate_counts``; returns its
    answer, the evaluations in the order replayed, and False when a disaggregated walk stopped
    at its replay cap."""
    seen: dict[Counts, Evaluated] = {}
    order: list[Counts] = []
    sent: list[Evaluated] | None = None
    complete = True
    while True:
        try:
            wants = next(search) if sent is None else search.send(sent)
        except StopIteration as stop:
            answer = stop.value
            break
        except _CornerCapReached:
            answer, complete = None, False
            break
        new = [c for c in dict.fromkeys(wants) if c not in seen]
        if new:
            for e in (yield from evaluate_counts(new)):
                seen[e.counts] = e
                order.append(e.counts)
        sent = [seen[c] for c in wants]
    return answer, tuple(seen[c] for c in order), complete
