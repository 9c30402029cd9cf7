"""The replay's virtual clock: time in milliseconds and a queue of timed calls.

``call_at(delay_ms, fn, priority)`` runs ``fn`` at ``now + delay_ms`` and returns a ``Handle``
that can cancel it; ``call_at_time(at_ms, fn, priority)`` runs it at ``at_ms`` (a time computed
as the clock would have reached it step by step, e.g. a run of passes' last end).
``process(steps)`` runs a generator that yields delays (ms): its first step runs at once (at
``FIRST`` priority), each later one after the delay it yielded. ``run()`` advances until nothing
is left.

Order at one instant (the rules every replay figure depends on):

1. ``FIRST``: a rank's pass ending (``PASS_END``), and the first step of a process started then
   (the arrival walker and the sampler start at 0, in that order, so the requests arriving at 0
   are in the first sample), in the order they were scheduled.
2. ``NORMAL``: everything else, in the order it was scheduled: an arrival (the walker's step),
   a pass start, a KV handoff reaching the decode pool, a worker becoming ready, a planner tick,
   a sample. A rank is kicked when work reaches it, and its pass start is scheduled then, so it
   runs after every call already due at that instant: a request arriving exactly when a pass
   ends joins the next pass, as in the reference. (A rank whose pass ends with nothing else due
   at that instant, or an idle one reached by the instant's last open-loop arrival with nothing
   else due then, starts its next pass at once: the scheduled start would be the next call.)
   A planner tick due at the same instant as an arrival runs before it when it was scheduled
   first (ticks are scheduled one interval ahead; the arrival walker schedules its next step
   when it emits the previous arrivals).

Time is the float sum ``now + delay`` (as SimPy computed it, whose queue this replaces: the
same (time, priority, scheduling order) keys, without its event objects).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator
from enum import IntEnum
from itertools import count

INFINITY = float("inf")


class Priority(IntEnum):
    """Rank of a call among those due at the same instant (lower runs first)."""

    FIRST = 0
    PASS_END = 0
    NORMAL = 1


class Handle:
    """A scheduled call; ``cancel()`` keeps it from running (it still holds its queue slot)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None] | None) -> None:
        self.fn = fn

    def cancel(self) -> None:
        self.fn = None

    @property
    def cancelled(self) -> bool:
        return self.fn is None


class Clock:
    """Virtual time in ms from 0; see the module docstring."""

    __slots__ = ("_order", "_queue", "now")

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, int, Handle]] = []
        self._order = count()

    def call_at(
        self, delay_ms: float, fn: Callable[[], None], priority: Priority = Priority.NORMAL
    ) -> Handle:
        """Run ``fn`` ``delay_ms`` (>= 0) from now."""
        handle = Handle(fn)
        heapq.heappush(self._queue, (self.now + delay_ms, priority, next(self._order), handle))
        return handle

    def call_at_time(
        self, at_ms: float, fn: Callable[[], None], priority: Priority = Priority.NORMAL
    ) -> Handle:
        """Run ``fn`` at virtual time ``at_ms`` (>= now)."""
        handle = Handle(fn)
        heapq.heappush(self._queue, (at_ms, priority, next(self._order), handle))
        return handle

    def process(self, steps: Generator[float, None, None]) -> None:
        """Run ``steps``: its first step now, ahead of the calls due now; each later step the
        yielded number of ms after the previous one."""

        def step() -> None:
            try:
                delay = next(steps)
            except StopIteration:
                return
            self.call_at(delay, step)

        self.call_at(0.0, step, Priority.FIRST)

    def latest(self) -> float:
        """When the last live queued call is due (cancelled ones left out); now when none is."""
        return max(
            (at for at, _, _, handle in self._queue if handle.fn is not None), default=self.now
        )

    def peek(self) -> float:
        """When the next queued call is due (cancelled ones included); inf when none is."""
        return self._queue[0][0] if self._queue else INFINITY

    def run(self) -> None:
        """Run every call in order until the queue is empty."""
        queue = self._queue
        pop = heapq.heappop
        while queue:
            at, _, _, handle = pop(queue)
            self.now = at
            fn = handle.fn
            if fn is not None:
                fn()
