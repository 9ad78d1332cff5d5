"""``none``: no checkpoints — the baseline for overhead ratios.

A failure loses the state: every instance restarts empty and only the failed micro-batch is
re-run, so a run with failures is (correctly) reported as *not* exactly-once.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..keyed_state import KeyedState
from ..operators import new_state
from ..settings import Settings
from .base import Protocol, Recovery
from .tokens import CheckpointToken, RestoreToken


@dataclass(frozen=True)
class RestartEmpty(RestoreToken):
    """Every instance starts over with an empty state."""


class NoneProtocol(Protocol[CheckpointToken, RestartEmpty]):
    name = "none"

    def plan_checkpoint(self, batch_seq: int) -> None:
        return None

    def recover(self, failed_batch_start: int, batch_seq: int, parallelism: int) -> Recovery[RestartEmpty]:
        return Recovery(restore=RestartEmpty(), replay_from=failed_batch_start)

    def restore(self, settings: Settings, instance: int, token: RestartEmpty) -> KeyedState:
        return new_state(settings)
