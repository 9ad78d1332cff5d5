"""Progress bars on stderr, drawn by ``rich``: label, bar, done/total, elapsed, ETA, ops/s.

One :class:`Display` serves a whole command.  Every bar it hands out is a task of one live
display, and a bar opened while another is still open is drawn under it, indented: the outer
bar of a comparison (its runs over the rounds) stays on screen above the load and run bars of
the run in progress.  That is what "nested bars" means here.

Safety of the output the bars share a terminal with:

- Nothing is drawn unless stderr is a TTY (and ``--no-progress`` was not given), so redirected
  output, a log file or a test's captured stderr never holds a control character.
- A bar is drawn only once its phase has run ``delay`` seconds, so a short run prints nothing
  extra; an inner bar that appears brings its open outer bars with it, in order.
- The display is transient: it is erased when its last bar closes, so the report printed after
  a phase starts on a clean line; stdout is never written.  Lines printed to stderr while bars
  are shown (``bench: compare: ...``) are printed above them by ``rich``.

``update(done)`` is called from the runner's watching thread a few times a second; ``rich``
locks its own state, and the display's is only touched from that thread and the caller's.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task,
                           TextColumn, TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text


class Display:
    """The bars of one command (a :data:`experiments.core.spec.ProgressFactory`: :meth:`bar`)."""

    def __init__(self, *, enabled: bool = True, stream: TextIO | None = None,
                 delay: float = 1.0) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled and _isatty(self.stream)
        self.delay = delay
        self._open: list[Bar] = []
        #: the live display, from the first bar shown to the last one closed
        self._live: Progress | None = None

    def bar(self, label: str, total: int | None) -> "Bar":
        """A bar for ``total`` units (``None``: unknown), nested in the innermost open one."""
        bar = Bar(self, label, total, self._open[-1] if self._open else None)
        self._open.append(bar)
        return bar

    def _progress(self) -> Progress:
        if self._live is None:
            self._live = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), _Rate(),
                console=Console(file=self.stream, highlight=False), transient=True,
                refresh_per_second=4, redirect_stdout=False)  # stdout holds the results
            self._live.start()
        return self._live

    def _closed(self, bar: "Bar") -> None:
        if bar in self._open:
            self._open.remove(bar)
        if bar.task is not None and self._live is not None:
            self._live.remove_task(bar.task)
        if not self._open and self._live is not None:
            self._live.stop()  # transient: the bars are erased
            self._live = None


class Bar:
    """One phase's bar: :meth:`update` with the units done so far, :meth:`close` when it ends."""

    def __init__(self, display: Display, label: str, total: int | None,
                 parent: "Bar | None") -> None:
        self.display, self.label, self.total, self.parent = display, label, total, parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.start = time.monotonic()
        self.task: Any = None
        self.done = 0

    def update(self, done: int) -> None:
        self.done = done
        if not self.display.enabled:
            return
        if self.task is None:
            if time.monotonic() - self.start < self.display.delay:
                return
            self._show()
        self.display._progress().update(self.task, completed=done)

    def _show(self) -> None:
        parent = self.parent
        if parent is not None and parent.task is None and parent in self.display._open:
            parent._show()  # outer bars first: the display lists bars in the order they came
        live = self.display._progress()
        self.task = live.add_task("  " * self.depth + self.label, total=self.total,
                                  completed=self.done, unit="ops")
        if parent is not None and parent.task is not None:  # it counts runs, not ops: no rate
            live.update(parent.task, unit="")

    def close(self) -> None:
        """Remove the bar (the last one closed erases the display)."""
        self.display._closed(self)


class _Rate(ProgressColumn):
    """ops/s for a phase's bar; nothing for an outer bar (its units are runs, not ops)."""

    def render(self, task: Task) -> Text:
        if not task.fields.get("unit") or task.speed is None:
            return Text("")
        return Text(f"{task.speed:,.0f} {task.fields['unit']}/s")


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
