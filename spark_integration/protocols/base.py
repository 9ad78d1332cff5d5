"""The interfaces every registered protocol implements: :class:`Protocol`, or :class:`Baseline`.

A protocol answers two questions: *what to write while processing* and *what to read and replay
when an instance fails*.  The driver-side half plans each micro-batch and commits; the
instance-side half (``checkpoint``/``restore``) runs inside the operator's Spark task and talks to
the backend through :func:`spark_integration.store.participant_store`.  The object is pickled into
the task closures, so it keeps only small driver-side bookkeeping.  A protocol is generic in its
two token types (:mod:`.tokens`), so the checkpoint token it plans is the one its instances
receive, and the restore token of its recovery the one its ``restore`` reads.

Recovery is measured by phase for every protocol without its help (:mod:`spark_integration.phases`):
backend reads during ``restore`` are load, the rest of ``restore`` is rebuilding.  A protocol that
re-applies logged events wraps that loop in ``with phases.replaying():`` so it counts as replay.
A protocol's failure steps are fail points (:mod:`backends.failpoints`): the instance side reaches
``spark.worker.during_checkpoint_write`` (and its own ``spark.<protocol>.*`` points) through
:func:`spark_integration.operators.reach`, which kills the instance when the driver's plan armed it.

A baseline is what users would pick instead of a protocol: it replaces the whole job run (e.g.
Spark's own state store, :mod:`spark_integration.spark_state`) and reports the same
:class:`~spark_integration.job.Metrics`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Iterator, Mapping, TypeVar

from ..errors import SparkIntegrationError
from ..job import JobSpec, Metrics
from ..keyed_state import KeyedState
from ..orphans import References
from ..settings import Settings
from ..source import Tap
from .tokens import BatchPlan, CheckpointReport, CheckpointToken, InstanceStats, RestoreToken

C = TypeVar("C", bound=CheckpointToken)
R = TypeVar("R", bound=RestoreToken)


@dataclass(frozen=True)
class Recovery(Generic[R]):
    """How to bring the instances back: a restore token for every instance and where to replay from.

    ``from_log``: every event of the failed micro-batch is in the protocol's own durable log, so
    the source is not read again and nothing is shuffled: the driver runs the keyed stage's
    instances alone, with no input, and each one brings itself to the end of the failed batch from
    the backend (an intact neighbour keeps its state).  ``replay_from`` is then only the batch's
    start, not a range to re-read.
    """

    restore: R
    replay_from: int
    from_log: bool = False


@dataclass
class CommitResult:
    """What one completed checkpoint cost (trigger -> durable)."""

    checkpoint_ms: float = 0.0
    bytes: int = 0
    ops: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    #: the full state's size at this checkpoint; None: the runner sums the instances' rows
    state_bytes: int | None = None


class Protocol(abc.ABC, Generic[C, R]):
    name: ClassVar[str] = ""
    #: the fail points its senders reach (those that log: :data:`.sender_log.SENDER_POINTS`),
    #: armed by the driver's plan as its instances' ``spark.worker.*`` and own points are
    sender_points: ClassVar[tuple[str, ...]] = ()

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    # -- driver side ------------------------------------------------------------------------
    @abc.abstractmethod
    def plan_checkpoint(self, batch_seq: int) -> C | None:
        """The checkpoint token instances act on at the end of batch ``batch_seq`` (None: none)."""

    def source_tap(self, plan: BatchPlan, parallelism: int) -> Tap | None:
        """What the senders do to batch ``plan``'s events where the source makes them (e.g.
        log them, :mod:`.sender_log`), as a tap of the source (:mod:`..source`); default: None."""
        return None

    def prepare(self, df: Any, plan: BatchPlan, parallelism: int) -> Any:
        """A stage of its own feeding the keyed stage, for what a tap cannot do (add a column,
        as CIC's piggyback); default: ``df`` unchanged."""
        return df

    def commit(self, token: C | None, end_offset: int, stats: list[InstanceStats]) -> list[CommitResult]:
        """Called once every instance finished a batch (with checkpoint ``token``, maybe None);
        returns the checkpoints that became durable."""
        return []

    @abc.abstractmethod
    def recover(self, failed_batch_start: int, batch_seq: int, parallelism: int) -> Recovery[R]:
        """After a failure: what every instance restores and from which offset the source replays."""

    def resume(self, parallelism: int) -> tuple[Recovery[R], int]:
        """A new driver taking over a job whose driver died: what every instance restores, where
        the source replays from, and the last micro-batch that recovery point covers (the resumed
        job numbers its micro-batches on from there).  Only a protocol whose driver keeps its
        bookkeeping in the backend can; default: refuse."""
        raise SparkIntegrationError(
            f"protocol {self.name!r} keeps its driver's bookkeeping in memory, so a job whose driver "
            f"died cannot be resumed; run it again from the start")

    def references(self, parallelism: int) -> dict[str, References]:
        """Per participant (``driver``, ``i0``, ``log-s0``, ...): the records a recovery would
        read if an instance failed now — the checkpoints of its recovery line, the records that
        commit them, the log it would replay (:mod:`spark_integration.orphans`).  Asked by the
        driver between micro-batches; it may list the protocol's records, never change them.
        Default: none (a protocol that writes nothing)."""
        return {}

    def collect(self, parallelism: int) -> None:
        """Do now, from the driver, the garbage collection the protocol leaves to its next
        checkpoint (deleting what the recovery line has passed, through the same steps), so
        that what a run ends with can be counted before and after it.  Called once the job's
        tasks are done.  Default: nothing to collect."""

    # -- instance side ----------------------------------------------------------------------
    def acknowledge(self, settings: Settings, instance: int, batch_seq: int) -> int:
        """When a micro-batch's events start to arrive (LOG.io: assign them to an Input Set
        durably); returns the backend operations issued.  It runs in a thread of its own while
        the task applies the events, and the task waits for it before anything else it does —
        its checkpoint or commit, its result, any injected failure
        (:class:`~spark_integration.operators.Acknowledgement` says why that is as safe as
        writing it first)."""
        return 0

    def receive(self, settings: Settings, instance: int, batch_seq: int, state: KeyedState,
                batches: Iterator[Any]) -> Iterator[Any]:
        """Before a micro-batch's messages (Arrow batches) are applied to ``state`` (never on a
        duplicate): the protocol may read what the senders piggybacked and act on the state as it
        was before them (CIC: a forced checkpoint); returns the batches to apply.  Default: as is."""
        return batches

    def counters(self) -> dict[str, float]:
        """The protocol's own totals for the ``[SPARK]`` lines (e.g. CIC's forced checkpoints),
        asked once at the end of a run; default: none."""
        return {}

    def discard(self, settings: Settings, instance: int, batch_seq: int) -> None:
        """Delete what a cancelled task of a failed job may have written for ``batch_seq`` from a
        partial input (see :func:`~spark_integration.operators.discard_zombie_work`); default:
        nothing to do."""

    def checkpoint(self, settings: Settings, instance: int, state: KeyedState, token: C,
                   batch_seq: int) -> CheckpointReport:
        """Write ``state`` (what the token asks for) and report it."""
        return {}

    @abc.abstractmethod
    def restore(self, settings: Settings, instance: int, token: R) -> KeyedState:
        """The instance's state at the recovery point."""


class Baseline(abc.ABC):
    """A whole job run without any protocol of ours, reported like one (see the module doc)."""

    name: ClassVar[str] = ""
    #: Spark conf the session needs from the start (a state store provider, ...)
    session_conf: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def check(cls, spec: JobSpec, settings: Settings) -> None:
        """Refuse, with one line, what the baseline cannot run; asked before a session starts
        (and again by :meth:`run`).  Default: it runs everything it is registered for."""

    @abc.abstractmethod
    def run(self, spark: Any, spec: JobSpec, settings: Settings) -> Metrics:
        """Run ``spec`` on ``spark`` with what ``settings`` asks of a job (state size, injected
        failures, a cold restore, where the checkpoints go); the same metrics as a protocol's run."""
