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


# Short: an unknown knob's message lists every knob, a bad value's gives its bounds, and the
# router block of examples/deploy.yaml explains each.
_EXAMPLE = next((k.name for k in all_router_knobs().values() if not k.alias_of), "")
ROUTER_PARAM_HELP = (
    f"Set a router knob, NAME=VALUE (repeatable), e.g. {_EXAMPLE}=2; an unknown "
    "NAME's message lists the knobs, a bad VALUE's gives the bounds."
)


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
            raise ConfigError(
                f"unknown router knob {name!r} (known: {', '.join(knobs)})", field=flag
            )
        out[f"router.{name}"] = knobs[name].check(value.strip(), field=f"{flag} {name}")
    return out
