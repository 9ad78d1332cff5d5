"""When each instance checkpoints: its own clock, staggered and jittered (CheckMate's schedule).

The driver ships one :class:`InstanceSchedule` with every micro-batch; each instance decides from
it alone whether it checkpoints now, and decides the same on a re-run of the batch.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from ..tokens import CheckpointToken


@dataclass(frozen=True)
class InstanceSchedule(CheckpointToken):
    """Every ``interval`` micro-batches per instance, moved by up to ``jitter`` either way."""

    interval: int
    jitter: int = 0
    job_id: str = ""

    def due(self, instance: int, batch: int) -> bool:
        """Whether ``instance`` checkpoints after micro-batch ``batch``: its ``k``-th checkpoint is
        due at ``k * interval - instance % interval``, moved by a pseudo-random ``-jitter..jitter``
        drawn from (job, instance, k) — its own clock, the same on a re-run."""
        n, j = self.interval, self.jitter
        if j == 0:
            return (batch + instance) % n == 0
        k0 = (batch + instance % n) // n
        return any(k * n - instance % n + self._shift(instance, k) == batch for k in (k0, k0 + 1))

    def _shift(self, instance: int, k: int) -> int:
        h = zlib.crc32(f"{self.job_id}/{instance}/{k}".encode())
        return h % (2 * self.jitter + 1) - self.jitter
