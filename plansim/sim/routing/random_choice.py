"""``random``: a uniformly random ready rank, from the replay's seeded generator."""

from __future__ import annotations

from collections.abc import Sequence

from plansim.sim.engine_protocol import PrefixView
from plansim.sim.routing.base import Policy, RankLoad, Route


class RandomChoice(Policy):
    reads_prefix_cache = False
    observes_first_tokens = False

    def choose(
        self, isl: int, keys: list[int], views: Sequence[PrefixView], loads: Sequence[RankLoad]
    ) -> Route:
        return Route(int(self.rng.integers(len(views))), 0)
