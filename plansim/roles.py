"""Roles and deployment modes: the one place that says which pools a deployment has, which
role each pool's workers play, and how the planner sees them.

A deployment is aggregated (``agg``: one pool of workers that prefill and decode) or
disaggregated (``disagg``: a prefill pool whose workers hand each request's KV to a decode
pool). The planner only knows two roles, prefill and decode: an aggregated pool counts as
decode (as in Dynamo, whose planner scales an aggregated deployment through its decode
component). Every module that needs one of these facts asks this module; none compares
strings.

``Role`` and ``Mode`` are string enums, so their members equal (and hash as) the names used
in files, tables and reports (``"agg"``, ``"prefill"``, ``"decode"``, ``"disagg"``).

This module imports nothing from plansim: the planner core, the simulator, retune and the
reports all depend on it.
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """What a pool's workers do: ``agg`` (prefill and decode), ``prefill`` or ``decode``."""

    AGG = "agg"
    PREFILL = "prefill"
    DECODE = "decode"

    @classmethod
    def _missing_(cls, value: object) -> Role | None:
        # Engine args spell an aggregated worker ``aggregated`` (the reference mocker's
        # ``worker_type``).
        if isinstance(value, str) and value.lower() in ("aggregated", "agg"):
            return cls.AGG
        if isinstance(value, str) and value.lower() in ("prefill", "decode"):
            return cls(value.lower())
        return None

    @property
    def prefills(self) -> bool:
        """Its workers compute prompts (prefill time is charged): agg and prefill."""
        return self is not Role.DECODE

    @property
    def decodes(self) -> bool:
        """Its workers generate the tokens the user sees (decode time is charged): agg and
        decode."""
        return self is not Role.PREFILL

    @property
    def hands_off(self) -> bool:
        """A request leaves after its prompt (and one internal token) for the decode pool."""
        return self is Role.PREFILL

    @property
    def receives_handoff(self) -> bool:
        """Requests arrive with their prompt KV built by a prefill worker."""
        return self is Role.DECODE

    @property
    def planner_role(self) -> Role:
        """The role the planner sees: an aggregated pool is decode."""
        return Role.PREFILL if self is Role.PREFILL else Role.DECODE

    @property
    def worker_type(self) -> str:
        """The reference engine args' ``worker_type`` spelling."""
        return "aggregated" if self is Role.AGG else self.value


class Mode(StrEnum):
    """A deployment's shape: ``agg`` (one pool) or ``disagg`` (prefill and decode pools)."""

    AGG = "agg"
    DISAGG = "disagg"

    @classmethod
    def _missing_(cls, value: object) -> Mode | None:
        aliases = {"aggregated": cls.AGG, "disaggregated": cls.DISAGG}
        return aliases.get(value.lower()) if isinstance(value, str) else None

    @property
    def pools(self) -> tuple[Role, ...]:
        """Its pools, in the order they are built and reported."""
        return (Role.AGG,) if self is Mode.AGG else (Role.PREFILL, Role.DECODE)

    @property
    def entry_pool(self) -> Role:
        """The pool a request arrives at."""
        return Role.AGG if self is Mode.AGG else Role.PREFILL

    @property
    def visible_pool(self) -> Role:
        """The pool whose tokens the user sees (output throughput is counted there)."""
        return Role.AGG if self is Mode.AGG else Role.DECODE

    @property
    def other(self) -> Mode:
        return Mode.DISAGG if self is Mode.AGG else Mode.AGG

    @property
    def size_keys(self) -> tuple[str, ...]:
        """The deployment keys that size its pools."""
        return tuple(POOL_COUNT_FIELDS[pool] for pool in self.pools)

    @property
    def pool_keys(self) -> tuple[str, ...]:
        """The deployment keys that describe its pools only (the other mode's contradict it)."""
        return self.size_keys + (() if self is Mode.AGG else ("prefill_engine", "decode_engine"))

    @property
    def planner_roles(self) -> tuple[Role, ...]:
        """The planner roles its pools map to: ``(decode,)`` or ``(prefill, decode)``."""
        return tuple(pool.planner_role for pool in self.pools)

    def pool_for(self, planner_role: Role | str) -> Role | None:
        """The pool the planner's ``planner_role`` stands for (None: the mode has none)."""
        role = Role(planner_role)
        for pool in self.pools:
            if pool.planner_role is role:
                return pool
        return None


# The planner's roles, in the order decisions and reports list them.
PLANNER_ROLES: tuple[Role, ...] = (Role.PREFILL, Role.DECODE)


class PlannerMode(StrEnum):
    """A planner config's ``mode``: what it scales. ``agg`` scales an aggregated deployment's
    one pool (which it sees as decode); the others a disaggregated deployment's pools."""

    DISAGG = "disagg"
    PREFILL = "prefill"
    DECODE = "decode"
    AGG = "agg"

    @property
    def roles(self) -> tuple[Role, ...]:
        """The planner roles it scales."""
        if self is PlannerMode.DISAGG:
            return PLANNER_ROLES
        return (Role.PREFILL,) if self is PlannerMode.PREFILL else (Role.DECODE,)

    @property
    def deployment_mode(self) -> Mode:
        """The deployment mode it runs against."""
        return Mode.AGG if self is PlannerMode.AGG else Mode.DISAGG

    def pool_for(self, role: Role | str) -> Role:
        """The pool a planner role stands for: ``agg`` for decode in agg mode, else the role."""
        pool = self.deployment_mode.pool_for(role)
        assert pool is not None, f"planner mode {self} has no {role} pool"
        return pool


def pools_seen_as(planner_role: Role | str) -> tuple[Role, ...]:
    """The pools the planner counts as ``planner_role``: ``(agg, decode)`` for decode,
    ``(prefill,)`` for prefill (scaling events name pools)."""
    role = Role(planner_role)
    return tuple(pool for pool in Role if pool.planner_role is role)


def pools_doing(work: Role | str) -> tuple[Role, ...]:
    """The pools whose workers do a planner role's work: prefill work on agg and prefill
    workers, decode work on agg and decode workers (engine load panels)."""
    role = Role(work)
    return tuple(pool for pool in Role if (pool.prefills if role is Role.PREFILL else pool.decodes))


# The deployment field holding each pool's initial worker count.
POOL_COUNT_FIELDS: dict[Role, str] = {
    Role.AGG: "num_workers",
    Role.PREFILL: "num_prefill_workers",
    Role.DECODE: "num_decode_workers",
}


def rank_role(pool: Role, worker_role: Role) -> Role:
    """The role a pool's engine ranks play: a disaggregated pool's role is its own, whatever
    flags its engine args carry; an aggregated pool's ranks play their engine args' role."""
    return worker_role if pool is Role.AGG else pool
