"""``CountSchedule``: a stand-in for the planner that sets worker counts at given times and
nothing else, for replays whose scaling is known in advance (a segment replay that scales down
at the segment edge, a hindsight schedule replayed as a policy).

The replay host drives it like a planner (``initial_tick``, ``tick``); each change is applied
at its time (s of replay time) through the host's scaling: added workers become ready after the
engine's ``startup_time``, removed ones drain, newest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from plansim.planner_core.observations import (
    PlannerEffects,
    ScalingDecision,
    ScheduledTick,
    TickInput,
)
from plansim.roles import Mode


@dataclass(frozen=True, slots=True)
class CountChange:
    """At ``at_s``, set the pools to these counts (``None``: leave the pool as it is). An
    aggregated deployment's single pool is ``num_decode``, as the planner sees it."""

    at_s: float
    num_prefill: int | None
    num_decode: int | None


class CountSchedule:
    """Applies ``changes`` (sorted by time) and stops ticking after the last."""

    advisory = False

    def __init__(self, changes: Sequence[CountChange]) -> None:
        self._changes = sorted(changes, key=lambda c: c.at_s)
        self._next = 0

    def _tick_after(self) -> ScheduledTick | None:
        if self._next >= len(self._changes):
            return None
        return ScheduledTick(at_s=self._changes[self._next].at_s, need_worker_states=False)

    def initial_tick(self, now_s: float) -> PlannerEffects:
        del now_s
        return PlannerEffects(scale_to=None, next_tick=self._tick_after())

    def tick(self, inp: TickInput) -> PlannerEffects:
        del inp
        change = self._changes[self._next]
        self._next += 1
        return PlannerEffects(
            scale_to=ScalingDecision(change.num_prefill, change.num_decode),
            next_tick=self._tick_after(),
        )


def change_to(mode: str, at_s: float, counts: Sequence[int | None]) -> CountChange:
    """A change setting the pools of a ``mode`` deployment to ``counts`` (deployment order;
    ``None`` leaves a pool as it is)."""

    def count(n: int | None) -> int | None:
        return None if n is None else int(n)

    if Mode(mode) is Mode.AGG:
        return CountChange(at_s, None, count(counts[0]))
    return CountChange(at_s, count(counts[0]), count(counts[1]))
