"""``none``: no checkpoints — the baseline for overhead ratios.

A failure loses the state: every instance restarts empty and only the failed micro-batch is
re-run, so a run with failures is (correctly) reported as *not* exactly-once.
"""

from __future__ import annotations

from typing import Any

from ..conf import Settings
from .base import Protocol, Recovery


class NoneProtocol(Protocol):
    name = "none"

    def plan_checkpoint(self, batch_seq: int) -> Any:
        return None

    def recover(self, failed_batch_start: int, batch_seq: int, parallelism: int) -> Recovery:
        return Recovery(restore="empty", replay_from=failed_batch_start)

    def restore(self, settings: Settings, instance: int, token: Any) -> Any:
        from ..operators import new_state

        return new_state(settings)
