"""The one progress display of every long command: rich's bar on stderr, with what is done of
the total, the rate and the time left; off when stderr is not a terminal and with ``--quiet``.

Only the display goes to stderr: what a command prints while it runs (a retune window's line)
goes through ``Progress.echo`` to stdout, the bar cleared around it, so stdout stays the result
whatever stderr is. rich is imported only when the display is on (its import costs tens of ms,
which a piped or quiet run does not pay).
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any, Self

from plansim.commands import console

QUIET_HELP = console.QUIET_HELP  # what -q means: plansim.commands.console
# Redraws a second: the display's own thread, so elapsed time and time left move on between
# updates (a retune window or a capacity round can take many seconds).
REFRESH_PER_SECOND = 4


class Progress:
    """A progress display over ``total`` ``unit`` (None: not known, the bar pulses and no time
    left is shown). A context manager: the display is on inside the block and erased after."""

    def __init__(
        self, description: str, *, total: float | None, unit: str, quiet: bool = False
    ) -> None:
        self._done, self._total = 0.0, total
        self._bar: Any = None
        self._task: Any = None
        if not quiet and sys.stderr.isatty():
            self._bar = _rich_progress(unit)
            self._task = self._bar.add_task(description, total=total)

    @property
    def on(self) -> bool:
        """Whether the display is shown."""
        return self._bar is not None

    def __enter__(self) -> Self:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(
        self, completed: float, total: float | None = None, description: str | None = None
    ) -> None:
        """Set what is done (and, when given, the total and the description). A total that
        was an estimate grows to what is done."""
        if self._bar is None:
            return
        self._done = completed
        if total is not None:
            self._total = total
        if self._total is not None:
            self._total = max(self._total, completed)
        fields: dict[str, Any] = {"completed": completed, "total": self._total}
        if description is not None:
            fields["description"] = description
        self._bar.update(self._task, **fields)

    def advance(self, amount: float = 1.0) -> None:
        self.update(self._done + amount)

    def echo(self, *lines: str) -> None:
        """Print ``lines`` on stdout as detail lines (``console.echo``: not with ``-q`` or
        ``--json``), the display cleared while they are written."""
        if not lines:
            return
        if self._bar is not None:
            self._bar.stop()
        console.echo(*lines)
        if self._bar is not None:
            sys.stdout.flush()
            self._bar.start()


def _rich_progress(unit: str) -> Any:
    """rich's Progress on stderr: description, bar, percentage, done/total, rate (per
    second), elapsed time, time left (rich's estimates from the recent rate)."""
    from rich.console import Console
    from rich.progress import BarColumn, ProgressColumn, TaskProgressColumn, TextColumn
    from rich.progress import Progress as RichProgress
    from rich.text import Text

    class Done(ProgressColumn):
        def render(self, task: Any) -> Text:
            total = "?" if task.total is None else _number(task.total)
            return Text(f"{_number(task.completed)}/{total} {unit}")

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{_number(speed)}/s")

    class Times(ProgressColumn):
        """Elapsed, and time left when the total is known."""

        def render(self, task: Any) -> Text:
            text = f"{_clock(task.finished_time if task.finished else task.elapsed)} elapsed"
            if task.total is not None:
                text += f", {_clock(0.0 if task.finished else task.time_remaining)} left"
            return Text(text)

    return RichProgress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=None),
        TaskProgressColumn(),
        Done(),
        Rate(),
        Times(),
        # The bar takes what the text leaves of the terminal's width.
        console=Console(file=sys.stderr),
        expand=True,
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
        refresh_per_second=REFRESH_PER_SECOND,
    )


def _clock(seconds: float | None) -> str:
    """``h:mm:ss``; ``-:--:--`` when not known yet."""
    if seconds is None:
        return "-:--:--"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


def _number(value: float) -> str:
    """A count or an amount, briefly: whole numbers as they are, others to 3 digits."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
