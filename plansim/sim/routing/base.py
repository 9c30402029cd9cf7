"""The routing-policy seam: what a pool's router is, and the per-rank load it keeps.

The host keeps one router per pool, built by ``plansim.sim.routing.make_router`` from the
deployment's ``router`` block. For each request the host calls ``choose`` with the ready ranks'
prefix-cache views (``PrefixView.overlap``) and the router's own ``RankLoad`` records of them
(index for index), then ``sent`` with the chosen one; as the request progresses,
``prefill_done`` (its prompt is computed) and ``finished`` (it left the rank). ``set_parameters``
patches the policy's knobs mid-replay (only the ones declared patchable change).

A policy declares its knobs once, as a ``Knobs`` parameter dataclass (``plansim.params``): the
deployment's ``router`` fields, their validation, the command-line help and retune's searchable
router knobs all come from it.

Adding a policy: one module with a policy class and one line in
``plansim.sim.routing.ROUTERS``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from plansim.params import NoParams, Param, params_of
from plansim.roles import Role
from plansim.sim.engine_protocol import PrefixView
from plansim.sim.seeded_draws import Draws


class RankLoad:
    """What a router tracks for one rank: prompt tokens it sent there that are still queued,
    the blocks of the requests it sent there and has not seen finish (``blocks``: the
    policy's record for each block it indexes; ``n_blocks`` how many it counts), and how many
    such requests there are."""

    __slots__ = ("blocks", "n_blocks", "prefill_tokens", "requests")

    def __init__(self) -> None:
        self.prefill_tokens = 0
        self.blocks: dict[int, Any] = {}
        self.n_blocks = 0
        self.requests = 0


@dataclass(frozen=True, slots=True)
class Route:
    """Where ``choose`` sends a request: the candidate's index, the prompt blocks cached there
    (0 when the policy does not look), the prompt tokens the policy counts as cached there
    (its load records the rest as queued prefill) and the prompt's leading blocks its load
    record there already counts (None: not looked up)."""

    index: int
    overlap_blocks: int
    cached_tokens: int = 0
    shared_blocks: int | None = None


def recurring_blocks(
    hash_ids: np.ndarray, hash_offsets: np.ndarray, trace_block_size: int, block_size: int
) -> list[int]:
    """For each request, how many of its prompt's leading (full) blocks may be another
    request's too: those up to its last trace block whose hash occurs more than once in the
    trace. A block past them is keyed from a hash no other request has, so no other prompt can
    share it (a superset: a repeated hash need not make an equal block)."""
    n = hash_offsets.shape[0] - 1
    # The requests' hashes (the offsets need not start at 0 nor end at the array's end).
    ids = hash_ids[hash_offsets[0] : hash_offsets[-1]]
    if not ids.size:
        return [0] * n
    if ids.dtype.kind in "iu" and int(ids.min()) >= 0 and int(ids.max()) < 4 * ids.size:
        # Compact ids (a trace's prefix-chain ids are): counted in one linear pass.
        counts = np.bincount(ids.astype(np.intp, copy=False))
        repeated = counts[ids] > 1
    else:
        _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
        repeated = counts[inverse] > 1
    lengths = np.diff(hash_offsets)
    owner = np.repeat(np.arange(n), lengths)
    position = np.arange(ids.size) - np.repeat(hash_offsets[:-1] - hash_offsets[0], lengths)
    last = np.zeros(n, dtype=np.int64)
    np.maximum.at(last, owner[repeated], position[repeated] + 1)
    return ((last * trace_block_size) // block_size).tolist()


class RoutingPolicy(Protocol):
    """One pool's router; see the module docstring."""

    Knobs: ClassVar[type]
    # Other spellings of the policy's ``router.mode`` (besides hyphens for underscores).
    aliases: ClassVar[tuple[str, ...]]
    # Whether the policy draws from the seeded stream (its choices then depend on the seed).
    draws: ClassVar[bool]
    # Whether ``choose`` or ``hold`` reads the views (``Policy`` says True unless told; a
    # policy may decide per pool).
    reads_prefix_cache: bool
    # Whether ``prefill_done`` or ``release`` act on a request's first token (``Policy`` says
    # True unless told).
    observes_first_tokens: ClassVar[bool]
    # Whether the router indexes the prompt blocks it sends (then the host hands it
    # ``recurring``: per request id, the leading blocks another request's prompt may share,
    # ``recurring_blocks``; None: any may). A router sees each request once.
    indexes_prompt_blocks: bool
    recurring: Sequence[int] | None

    def choose(
        self, isl: int, keys: list[int], views: Sequence[PrefixView], loads: Sequence[RankLoad]
    ) -> Route: ...

    def hold(
        self,
        rid: int,
        isl: int,
        keys: list[int],
        views: Sequence[PrefixView],
        loads: Sequence[RankLoad],
        arrival_ms: float,
    ) -> bool:
        """Keep the request at the router (a queue) instead of routing it now."""
        ...

    def release(self, loads: Sequence[RankLoad]) -> tuple[int, Any] | None:
        """The next held request to route now and what ``choose`` takes as its ``overlaps``,
        or None; the host routes each before asking again."""
        ...

    def sent(self, rid: int, isl: int, keys: list[int], route: Route, load: RankLoad) -> None: ...

    def prefill_done(self, rid: int) -> None: ...

    def finished(self, rid: int) -> None: ...

    def set_parameters(self, params: Mapping[str, Any]) -> dict[str, Any]: ...

    def parameters(self) -> dict[str, Any]: ...


class Policy:
    """Shared plumbing of the built-in policies: the knob values as attributes (read in the
    hot path), patches of the patchable ones, and no-op progress hooks.

    ``config``: the deployment's router block (anything with the knobs as attributes, or a
    mapping); ``block_size``: tokens per KV block; ``rng``: the replay's seeded draws
    (``plansim.sim.seeded_draws``); ``pool``: the pool's role."""

    Knobs: ClassVar[type] = NoParams
    aliases: ClassVar[tuple[str, ...]] = ()
    # Whether the policy draws from the seeded stream: a replay with another seed may route
    # otherwise (capacity search replays such a deployment with several seeds).
    draws: ClassVar[bool] = True
    # Whether ``choose`` or ``hold`` reads the ranks' prefix-cache views (the ranks of a pool
    # whose router never does may run passes with prompt chunks in one step, and keep no view
    # of their cache for it).
    reads_prefix_cache: bool = True
    # Whether ``prefill_done`` or ``release`` act on a request's first token (the ranks of a
    # pool whose router never does may report a pass's tokens at the end of the decode run
    # that pass runs on into).
    observes_first_tokens: ClassVar[bool] = True
    indexes_prompt_blocks: bool = False
    recurring: Sequence[int] | None = None

    def __init__(
        self,
        config: Any,
        block_size: int,
        rng: Draws,
        *,
        pool: Role,
        max_batched_tokens: int = 1 << 62,
    ) -> None:
        self.block_size = block_size
        self.rng = rng  # the seeded stream of draws, shared by the pools' routers
        self.pool = pool
        self.max_batched_tokens = max_batched_tokens
        aliases = []
        for knob in self.knobs():
            value = (
                config.get(knob.name, knob.default)
                if isinstance(config, Mapping)
                else getattr(config, knob.name, knob.default)
            )
            if knob.alias_of is None:
                setattr(self, knob.name, value)
            elif value is not None:
                aliases.append((knob.alias_of, value))
        for target, value in aliases:  # a deprecated spelling, when given, wins
            setattr(self, target, value)

    @classmethod
    def knobs(cls) -> tuple[Param, ...]:
        return params_of(cls.Knobs)

    def set_parameters(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Replace patchable knobs; returns the ones that changed (name -> new value). A value
        for a deprecated spelling (``alias_of``) is its target's, and wins over the target's."""
        values: dict[str, Any] = {}
        aliases: dict[str, Any] = {}
        for knob in self.knobs():
            if knob.patchable and knob.name in params:
                value = knob.check(params[knob.name])
                if knob.alias_of is None:
                    values[knob.name] = value
                elif value is not None:
                    aliases[knob.alias_of] = value
        values.update(aliases)
        changed: dict[str, Any] = {}
        for name, value in values.items():
            if value != getattr(self, name):
                setattr(self, name, value)
                changed[name] = value
        return changed

    def parameters(self) -> dict[str, Any]:
        """Every knob's current value (deprecated spellings under their target's name)."""
        return {
            knob.name: getattr(self, knob.name) for knob in self.knobs() if knob.alias_of is None
        }

    def hold(
        self,
        rid: int,
        isl: int,
        keys: list[int],
        views: Sequence[PrefixView],
        loads: Sequence[RankLoad],
        arrival_ms: float,
    ) -> bool:
        return False

    def release(self, loads: Sequence[RankLoad]) -> tuple[int, Any] | None:
        return None

    def sent(self, rid: int, isl: int, keys: list[int], route: Route, load: RankLoad) -> None:
        return None

    def prefill_done(self, rid: int) -> None:
        return None

    def finished(self, rid: int) -> None:
        return None
