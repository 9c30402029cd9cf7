"""Router command-line flags, derived from the routing registry: the help of ``--router-mode``
and of each knob, and ``--router-param NAME=VALUE`` for any policy's knob."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from plansim.errors import ConfigError
from plansim.sim.routing import ROUTERS, all_router_knobs, router_knobs

ROUTER_MODE_HELP = f"Routing policy: {', '.join(ROUTERS.names())}."


def _modes_using(name: str) -> list[str]:
    return [mode for mode in ROUTERS if any(k.name == name for k in router_knobs(mode))]


def knob_help(name: str) -> str:
    """Help for one knob's flag: its policies, bounds, default and meaning."""
    knob = all_router_knobs()[name]
    return f"{' and '.join(_modes_using(name))}: {knob.describe()}."


# The knob names only: each knob's bounds, default and meaning are in its own flag's help (the
# common ones), in the message a bad value gets, and in the router block of examples/deploy.yaml.
ROUTER_PARAM_HELP = "Set a router knob, NAME=VALUE (repeatable). " + "; ".join(
    f"{mode}: {', '.join(k.name for k in router_knobs(mode))}" for mode in ROUTERS
    if router_knobs(mode)) + ". A bad value's message gives the knob's bounds."


def router_param_overrides(pairs: Iterable[str], flag: str = "--router-param") -> dict[str, Any]:
    """``NAME=VALUE`` pairs as dotted deployment overrides (``router.NAME``), each value checked
    against its knob's declaration; ``ConfigError`` naming the flag otherwise."""
    knobs = all_router_knobs()
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep:
            raise ConfigError(f"expected NAME=VALUE, got {pair!r}", field=flag)
        if name not in knobs:
            raise ConfigError(f"unknown router knob {name!r} (known: {', '.join(knobs)})",
                              field=flag)
        out[f"router.{name}"] = knobs[name].check(value.strip(), field=f"{flag} {name}")
    return out
