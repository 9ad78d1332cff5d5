"""A tiny progress bar on stderr (no tqdm dependency).

Shown only when the stream is a TTY, and only once a phase has run for ``delay`` seconds, so
short runs and redirected output stay clean.  ``update(done)`` is called from the runner's
watcher thread a few times a second.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(
        self,
        label: str,
        total: int | None,
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
        delay: float = 1.0,
        width: int = 30,
    ) -> None:
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = enabled and _isatty(self.stream)
        self.delay = delay
        self.width = width
        self.start = time.monotonic()
        self._shown = False

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        if elapsed < self.delay:
            return
        rate = done / elapsed if elapsed > 0 else 0.0
        if self.total:
            frac = min(1.0, done / self.total)
            filled = int(frac * self.width)
            bar = "#" * filled + "." * (self.width - filled)
            text = f"{self.label} [{bar}] {frac * 100:5.1f}% {done}/{self.total}"
        else:
            text = f"{self.label} {done} ops"
        text += f" {elapsed:6.1f}s {rate:,.0f} ops/s"
        self.stream.write("\r" + text + "\x1b[K")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        """Erase the bar so the report that follows starts on a clean line."""
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
