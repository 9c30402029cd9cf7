"""``round_robin``: ready ranks in turn, whatever their load or cache."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plansim.sim.engine_protocol import PrefixView
from plansim.sim.routing.base import Policy, RankLoad, Route


class RoundRobin(Policy):
    """The next candidate after the previous choice (by position in the candidate list)."""

    draws = False
    reads_prefix_cache = False
    observes_first_tokens = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next = 0

    def choose(
        self, isl: int, keys: list[int], views: Sequence[PrefixView], loads: Sequence[RankLoad]
    ) -> Route:
        i = self._next % len(views)
        self._next += 1
        return Route(i, 0)
