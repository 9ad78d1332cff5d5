"""Keyed stateful operator instances, vectorized per partition.

An *instance* is one partition of the keyed stage (``repartition(P, "key")``): partition ``i`` of
every micro-batch goes to instance ``i``.  Its per-key state is a dense numpy array of counts
(plus a *dirty* flag per key for incremental checkpoints), updated with one ``bincount`` per
Arrow batch — no per-key Python call, no call into Spark's state store.

Working state lives on the executor, outside any one Python worker: Spark hands a task to
whichever worker is idle, so a module-level dict would be seen by one worker only.  Each instance
keeps its state in a file under ``stateDir`` (tmpfs by default, i.e. memory), stamped with the
number of the last micro-batch it applied and guarded by an ``flock`` so that a dying task and its
successor never interleave.  Like Flink's RocksDB working directory it is *not* a checkpoint: a
killed instance loses it, and only the protocol can bring it back from the backend.

A task that finds its state missing or not at the expected version raises
:class:`InstanceStateLost`: the driver treats that as a failure and runs the protocol's recovery.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import Any, Iterator

import numpy as np

from .errors import SparkIntegrationError
from .keyed_state import KeyedState, decode_log, decode_pairs, encode_log, encode_pairs, replay_log
from .protocols.base import Protocol
from .protocols.tokens import STATS_SCHEMA, BatchPlan, CheckpointReport, InstanceStats
from .q3 import JoinState
from .settings import Settings, local_path

#: ``Settings.operator`` -> the state class of that operator
STATE_CLASSES: dict[str, type[KeyedState]] = {"count": KeyedState, "join": JoinState}

__all__ = ["STATS_SCHEMA", "BatchPlan", "InstanceStateLost", "KeyedState", "decode_log", "decode_pairs",
           "encode_log", "encode_pairs", "replay_log", "state_class", "new_state", "load_state", "save_state",
           "drop_state", "instance_lock", "process_partition", "discard_zombie_work", "dump_partition"]


class InstanceStateLost(SparkIntegrationError):
    """An instance's working state is missing or stale: it must be recovered by the protocol."""


def state_class(settings: Settings) -> type[KeyedState]:
    """The state class of the job's operator (``Settings.operator``)."""
    try:
        return STATE_CLASSES[settings.operator]
    except KeyError:
        raise SparkIntegrationError(
            f"unknown operator {settings.operator!r}; valid: {', '.join(STATE_CLASSES)}") from None


def new_state(settings: Settings) -> KeyedState:
    return state_class(settings)()


# --------------------------------------------------------------------- executor-local state
def _state_paths(settings: Settings, instance: int) -> tuple[str, str]:
    return local_path(settings, f"i{instance}.state"), local_path(settings, f"i{instance}.lock")


@contextlib.contextmanager
def instance_lock(settings: Settings, instance: int) -> Iterator[None]:
    _, lock = _state_paths(settings, instance)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def load_state(settings: Settings, instance: int) -> KeyedState | None:
    path, _ = _state_paths(settings, instance)
    try:
        with open(path, "rb") as f:
            return state_class(settings).from_bytes(f.read())
    except FileNotFoundError:
        return None


def save_state(settings: Settings, instance: int, state: KeyedState) -> None:
    path, _ = _state_paths(settings, instance)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(state.to_bytes())
    os.replace(tmp, path)


def drop_state(settings: Settings, instance: int) -> None:
    """What a crash of the instance loses."""
    path, _ = _state_paths(settings, instance)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


# ----------------------------------------------------------------------------- the task
def process_partition(settings: Settings, protocol: Protocol, plan: BatchPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """The body of ``mapInArrow``: apply this partition's events to its instance's state."""
    import pyarrow as pa
    from pyspark import TaskContext

    instance = TaskContext.get().partitionId()
    with instance_lock(settings, instance):
        restore_ms, replayed, useless = 0.0, 0, 0
        if plan.restore is not None:
            t = time.perf_counter()
            if plan.expected is not None:
                discard_zombie_work(settings, protocol, plan, instance)
            state = protocol.restore(settings, instance, plan.restore)
            replayed, useless = getattr(state, "replayed", 0), getattr(state, "useless", 0)
            restore_ms = (time.perf_counter() - t) * 1e3
        else:
            state = load_state(settings, instance)
            if state is None and plan.batch_seq == 1:
                state = new_state(settings)
            if state is None or state.version != plan.batch_seq - 1:
                found = "no working state" if state is None else f"working state at batch {state.version}"
                raise InstanceStateLost(
                    f"instance {instance} of job {settings.job_id} has {found}, expected batch "
                    f"{plan.batch_seq - 1}: it must be recovered"
                )
        # deduplication: a re-run batch this instance had already applied (sequence number = batch)
        duplicate = state.version == plan.batch_seq
        ack_ops = 0 if duplicate else protocol.acknowledge(settings, instance, plan.batch_seq)
        if not duplicate:  # the protocol may read what the senders piggybacked, and act first
            batches = protocol.receive(settings, instance, plan.batch_seq, state, batches)
        events, lo, hi = 0, -1, -1
        for rb in batches:
            if rb.num_rows == 0:
                continue
            seq = rb.column("seq").to_numpy()
            if not duplicate:
                state.apply_columns([rb.column(c).to_numpy() for c in state.COLUMNS])
            events += rb.num_rows
            lo = int(seq.min()) if lo < 0 else min(lo, int(seq.min()))
            hi = max(hi, int(seq.max()))
        if plan.kill_offset is not None and instance == plan.kill_instance and hi >= plan.kill_offset:
            drop_state(settings, instance)
            os._exit(17)  # the task dies for real, taking its Python worker with it
        ckpt: CheckpointReport = {"ckpt_start": 0.0, "ckpt_ms": 0.0, "ckpt_bytes": 0, "backend_ops": 0, "durable": 0,
                                   "forced": 0}
        if plan.checkpoint is not None and not duplicate:
            ckpt.update(protocol.checkpoint(settings, instance, state, plan.checkpoint, plan.batch_seq))
        ckpt["backend_ops"] += ack_ops
        if not duplicate:
            state.last_events = events
        state.version = plan.batch_seq
        save_state(settings, instance, state)
    row = InstanceStats(instance=instance, events=events, min_seq=lo, max_seq=hi, restore_ms=restore_ms,
                        ckpt_start=ckpt["ckpt_start"], ckpt_ms=ckpt["ckpt_ms"], ckpt_bytes=ckpt["ckpt_bytes"],
                        backend_ops=ckpt["backend_ops"], durable=ckpt["durable"], replayed=replayed,
                        useless=useless, forced=ckpt["forced"])
    # by name, in the schema's order (mapInArrow matches columns by position)
    yield pa.RecordBatch.from_pydict({n: [row[n]] for n in InstanceStats.__annotations__})


def discard_zombie_work(settings: Settings, protocol: Protocol, plan: BatchPlan, instance: int) -> None:
    """Undo what a task of the *failed* job did with a partial input.

    When a job fails, Spark cancels its other tasks; a cancelled task's Arrow input can simply end
    early, so the task "finishes" a micro-batch with part of its events, writes its local state
    (and its protocol's commit) and only then is discarded by Spark.  The re-run's driver knows
    how many events each instance must see in the batch: a local state at this batch with another
    count is dropped (the instance recovers as a failed one), and any protocol record of this
    batch not backed by a complete local state is deleted.
    """
    local = load_state(settings, instance)
    if local is None:
        return
    complete = local.version == plan.batch_seq and local.last_events == plan.expected.get(instance, 0)
    if local.version == plan.batch_seq and not complete:
        drop_state(settings, instance)
    if not complete:
        protocol.discard(settings, instance, plan.batch_seq)


def dump_partition(settings: Settings, instance: int) -> tuple[int, int, bytes]:
    """(instance, version, encoded pairs) of an instance's working state — for verification."""
    with instance_lock(settings, instance):
        state = load_state(settings, instance)
    if state is None:
        return instance, -1, encode_pairs(np.zeros(0, np.int64), np.zeros(0, np.int64))
    return instance, state.version, encode_pairs(*state.items())
