"""What the driver and the operator instances tell each other: typed, frozen, picklable messages.

Driver -> instances, pickled into the task closures: one :class:`BatchPlan` per micro-batch. It
carries the protocol's :class:`CheckpointToken` (what to write at the end of the batch) and, when
the batch is re-run after a failure, its :class:`RestoreToken` (what to restore first); ``None``
stands for "no checkpoint" / "no restore".  Every protocol subclasses the two token types with
its own fields, so a token says which protocol issued it.

Instances -> driver: one :class:`InstanceStats` row per instance and micro-batch, the output of
the keyed stage's ``mapInArrow`` (:data:`STATS_SCHEMA` is derived from it, so the Spark schema and
the Python type cannot drift apart); its checkpoint fields are the protocol's
:class:`CheckpointReport`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, TypedDict, get_type_hints


@dataclass(frozen=True)
class CheckpointToken:
    """Base of every protocol's checkpoint token: what an instance writes after a micro-batch."""


@dataclass(frozen=True)
class RestoreToken:
    """Base of every protocol's restore token: what an instance restores before a re-run."""


@dataclass(frozen=True)
class BatchPlan:
    """What every instance does in one micro-batch; decided by the driver, pickled to tasks."""

    batch_seq: int  # the version instances reach after this batch (previous one = batch_seq - 1)
    restore: RestoreToken | None = None  # restore from the backend instead of the local state
    checkpoint: CheckpointToken | None = None  # checkpoint at the end of this batch
    kill_offset: int | None = None  # kill ``kill_instance`` once it sees an event >= this offset
    kill_instance: int = 0
    #: with ``kill_offset``: instead of being killed after applying its events, ``kill_instance``
    #: ends at this named fail point (``spark.worker.*``, :mod:`~spark_integration.operators`)
    fail_point: str | None = None
    #: on the re-run of a failed micro-batch: events per instance in it (to detect partial zombies)
    expected: Mapping[int, int] | None = None
    #: the first offset of the micro-batch: every event below it was applied before it, so the
    #: windows ending at or before it are closed (``windowEvents``, :mod:`~spark_integration.sized_state`)
    watermark: int = 0


class CheckpointReport(TypedDict, total=False):
    """What an instance's checkpoint step reports (zeros when it wrote nothing)."""

    ckpt_start: float  # wall-clock start of the checkpoint (0: none in this micro-batch)
    ckpt_ms: float  # its duration
    ckpt_bytes: int
    backend_ops: int
    durable: int  # the latest micro-batch whose checkpoint is durable (0: unknown or none)
    forced: int  # checkpoints the protocol forced in this micro-batch (communication-induced)


class InstanceStats(TypedDict):
    """One instance's row for one micro-batch, as the driver collects it."""

    instance: int
    events: int
    min_seq: int  # first and last event offset seen (-1: no events)
    max_seq: int
    restore_ms: float  # the whole restore (load and log replay included)
    ckpt_start: float
    ckpt_ms: float
    ckpt_bytes: int
    backend_ops: int
    durable: int
    replayed: int  # events re-applied from a message log during a restore
    useless: int  # checkpoints past the recovery line of a restore
    forced: int  # checkpoints forced by what senders piggybacked (communication-induced)
    load_ms: float  # of restore_ms: backend reads (phases.Meter)
    load_bytes: int  # bytes those reads returned
    log_replay_ms: float  # of restore_ms: logged events re-applied
    failed_at: float  # wall-clock time this instance was killed before this task (0: it was not)
    state_bytes: int  # the full state's size as a checkpoint would write it
    dropped: int  # keys whose state this task dropped (their window closed or moved on)
    encode_ms: float  # of its checkpoint: the layout turning the state into pieces
    write_ms: float  # of its checkpoint: backend writes, deletes and flushes in the task
    #: the requests the stores sent for its checkpoint / its restore, as JSON
    #: (:meth:`backends.ledger.Ledger.as_dict`; "" for none)
    ckpt_requests: str
    restore_requests: str
    task_ms: float  # the whole task, lock wait, restore and checkpoint included


_SPARK_TYPES = {int: "long", float: "double", str: "string"}
#: the Spark DDL schema of :class:`InstanceStats`, fields in the same order
STATS_SCHEMA = ", ".join(f"{name} {_SPARK_TYPES[t]}" for name, t in get_type_hints(InstanceStats).items())
