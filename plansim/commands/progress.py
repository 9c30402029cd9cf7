"""``RoundStatus``: one progress line on stderr for a command that runs replays in rounds
(capacity's ``Runner``): the round, the replays by kind, the elapsed time. ``plansim fleet``
makes it in one place, so a richer progress display can replace it there."""

from __future__ import annotations

import sys
import time
from typing import Any


class RoundStatus:
    """Called with the runner's stats after each round; ``close()`` clears the line."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._start = time.monotonic()
        self._width = 0

    def __call__(self, stats: Any) -> None:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(stats.replays.items()))
        line = (f"{self._label}: round {stats.rounds}, {stats.total} replays ({kinds}), "
                f"{time.monotonic() - self._start:.0f} s")
        self._width = max(self._width, len(line))
        sys.stderr.write(f"\r{line:<{self._width}}")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\r" + " " * self._width + "\r")
        sys.stderr.flush()
