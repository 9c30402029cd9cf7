"""plansim: offline workbench for planning LLM serving capacity.

``plansim.replay(trace, config)`` replays in one call, for notebooks (``plansim.notebook``).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def replay(*args: Any, **kwargs: Any) -> Any:
    """``plansim.notebook.replay``: replay a trace against a deployment in one call; the result
    shows its headline cards in Jupyter and writes its report with ``.report(folder)``."""
    # Imported here: the package stays light until it is called.
    from plansim.notebook import replay as run

    return run(*args, **kwargs)
