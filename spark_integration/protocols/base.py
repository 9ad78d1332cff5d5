"""The one interface every protocol implements.

A protocol answers two questions: *what to write while processing* and *what to read and replay
when an instance fails*.  The driver-side half plans each micro-batch and commits; the
instance-side half (``checkpoint``/``restore``) runs inside the operator's Spark task and talks to
the backend through :func:`spark_integration.store.participant_store`.  The object is pickled into
the task closures, so it keeps only small driver-side bookkeeping.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

from ..conf import Settings


@dataclass
class Recovery:
    """How to bring the instances back: a restore token for every instance and where to replay from."""

    restore: Any
    replay_from: int


@dataclass
class CommitResult:
    """What one completed checkpoint cost (trigger -> durable)."""

    checkpoint_ms: float = 0.0
    bytes: int = 0
    ops: int = 0
    extra: dict = field(default_factory=dict)


class Protocol(abc.ABC):
    name = ""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    # -- driver side ------------------------------------------------------------------------
    @abc.abstractmethod
    def plan_checkpoint(self, batch_seq: int) -> Any:
        """The checkpoint token instances act on at the end of batch ``batch_seq`` (None: none)."""

    def prepare(self, df: Any, plan: Any, parallelism: int) -> Any:
        """The stage feeding the keyed stage (e.g. message logging); default: unchanged."""
        return df

    def commit(self, token: Any, end_offset: int, stats: list[dict]) -> list[CommitResult]:
        """Called once every instance finished a batch (with checkpoint ``token``, maybe None);
        returns the checkpoints that became durable."""
        return []

    @abc.abstractmethod
    def recover(self, failed_batch_start: int, batch_seq: int, parallelism: int) -> Recovery:
        """After a failure: what every instance restores and from which offset the source replays."""

    # -- instance side ----------------------------------------------------------------------
    def acknowledge(self, settings: Settings, instance: int, batch_seq: int) -> int:
        """Before processing a micro-batch's events (LOG.io: assign them to an Input Set durably);
        returns the backend operations issued."""
        return 0

    def discard(self, settings: Settings, instance: int, batch_seq: int) -> None:
        """Delete what a cancelled task of a failed job may have written for ``batch_seq`` from a
        partial input (see :func:`~..operators.discard_zombie_work`); default: nothing to do."""

    def checkpoint(self, settings: Settings, instance: int, state: Any, token: Any, batch_seq: int) -> dict:
        """Write ``state`` (what the token asks for); returns ckpt_start/ckpt_ms/ckpt_bytes/backend_ops."""
        return {}

    @abc.abstractmethod
    def restore(self, settings: Settings, instance: int, token: Any) -> Any:
        """The instance's state at the recovery point (a :class:`~..operators.KeyedState`)."""
