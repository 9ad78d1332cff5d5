"""``uncoordinated``: instances checkpoint on their own schedules; senders log their messages.

Write pattern:
  * the stage feeding the keyed stage (the source partitions, *senders*) **logs** every message
    before the shuffle: per micro-batch ``b`` and destination instance ``i``, sender ``s`` writes the
    keys it sends to ``i`` as ``<job>/log-s<s>/d<i>/b<b>`` (channel ``s -> i``, sequence number ``b``);
  * instance ``i`` checkpoints every ``interval`` micro-batches, staggered by ``i`` and moved by up
    to ``jitter`` micro-batches either way per round (its own clock, not aligned with the others;
    CheckMate: every interval +- 1 s), **asynchronously**: the task hands a copy of its state to a
    writer thread through a bounded drop-oldest queue (S4's SafeKeeper discipline) and goes on; the
    checkpoint ``<job>/i<i>/c<b>`` records the last sequence number processed on every channel
    (``b``: each channel carries one message per micro-batch);
  * log GC: once instance ``i``'s checkpoint at ``b`` is durable, senders delete ``d<i>/b<=b``.
Fencing of dead incarnations: the writer thread outlives the task that fed it (it lives in a
reused Python worker), so a cancelled task of a failed job may still have a checkpoint built from
partial input in the queue — or in flight — when the instance is recovered. Every instance has an
*incarnation* number in an executor-local fence file; recovery (``discard``, and ``restore`` from
the backend) bumps it under an exclusive ``flock``, and the writer checks, under a shared lock held
across the whole write (put, GC deletes, durable note), that its item's incarnation is still the
current one — else the item is dropped. So once recovery has bumped the number, no write of the
old incarnation is in flight and none can start: the instance's backend namespace is its own.

Recovery of a failed instance, **alone**: compute the recovery line (:func:`line_for`: the
checkpoint graph of the instance and the senders feeding it, then rollback propagation), restore
the line's checkpoint, replay the logged range of every channel the line names (each sender's
``d<i>/b`` after what the checkpoint processed), and go on; instances that had already applied the
failed micro-batch skip it on the re-run (deduplication by sequence number).  The senders are
stateless and have logged every channel up to the micro-batch before the failed one, and the keyed
instances send nothing to each other, so the line is normally the latest durable checkpoint; one
that claims to have processed more than the senders logged (an orphan) is rolled back past and
counted as *useless* (``[SPARK], UselessCheckpoints``).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from backends.safekeeper import DropOldestQueue

from ..conf import Settings
from ..recovery_line import Checkpoint, RecoveryLine, compute
from ..store import participant_store
from .base import CommitResult, Protocol, Recovery

QUEUE_CAPACITY = 4


def _log_key(dest: int, batch: int) -> str:
    return f"d{dest}/b{batch:010d}"


def _ckpt_key(batch: int) -> str:
    return f"c{batch:010d}"


@dataclass(frozen=True)
class InstanceSchedule:
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


@dataclass(frozen=True)
class LogRestore:
    batch_seq: int  # the micro-batch being re-run
    senders: int  # channels into every instance


@dataclass(frozen=True)
class LogPlan:
    batch_seq: int
    gc: tuple  # ((dest, from_batch, below_batch), ...) log entries senders delete


# ------------------------------------------------------------------ the asynchronous writer
_queue: DropOldestQueue | None = None
_queue_lock = threading.Lock()


def _durable_path(settings: Settings, instance: int) -> str:
    base = os.path.join(settings.state_dir, settings.job_id)
    os.makedirs(base, exist_ok=True)
    return os.path.join(base, f"i{instance}.durable")


class Fence:
    """The instance's incarnation number, read or bumped under its ``flock`` (see the module doc)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @property
    def current(self) -> int:
        text = os.pread(self.fd, 32, 0).strip()
        return int(text) if text else 0

    def bump(self) -> int:
        """A new incarnation (only under the exclusive lock): older writers are fenced off."""
        n = self.current + 1
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, str(n).encode(), 0)
        return n


@contextlib.contextmanager
def fence(settings: Settings, instance: int, exclusive: bool = False) -> Iterator[Fence]:
    """Shared: a writer's check-and-write; exclusive: recovery's bump (waits for writers in flight)."""
    fd = os.open(os.path.join(os.path.dirname(_durable_path(settings, instance)), f"i{instance}.fence"),
                 os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield Fence(fd)
    finally:
        os.close(fd)  # releases the lock


def new_incarnation(settings: Settings, instance: int) -> int:
    with fence(settings, instance, exclusive=True) as f:
        return f.bump()


#: what this process's writer did (tests, diagnostics): checkpoints written / dropped as fenced
WRITER_STATS = {"written": 0, "fenced": 0, "failed": 0}


def _write(settings: Settings, instance: int, batch: int, blob: bytes, started: float) -> None:
    with participant_store(settings, f"i{instance}") as store:
        older = [k for k, _ in store.scan("c") if k < _ckpt_key(batch)]
        store.put(_ckpt_key(batch), blob)
        store.flush()
        for key in older:  # only the latest durable checkpoint is ever restored
            store.delete(key)
        ops = store.ops
    # executor-local note of what is durable: read by this instance's next task -> driver
    info = f"{batch} {started} {(time.time() - started) * 1e3} {len(blob)} {ops}"
    path = _durable_path(settings, instance)
    with open(path + ".tmp", "w") as f:
        f.write(info)
    os.replace(path + ".tmp", path)


def _writer_loop(queue: DropOldestQueue) -> None:
    while (item := queue.get()) is not None:
        settings, instance, batch, blob, started, incarnation = item
        try:
            with fence(settings, instance) as f:  # held across the whole write
                if f.current != incarnation:
                    WRITER_STATS["fenced"] += 1  # a dead incarnation's checkpoint: never written
                    continue
                _write(settings, instance, batch, blob, started)
                WRITER_STATS["written"] += 1
        except Exception:  # noqa: BLE001 - a lost checkpoint is recovered from an older one
            WRITER_STATS["failed"] += 1


def _submit(item: tuple) -> None:
    global _queue
    with _queue_lock:
        if _queue is None:
            _queue = DropOldestQueue(QUEUE_CAPACITY)
            threading.Thread(target=_writer_loop, args=(_queue,), name="ckpt-writer", daemon=True).start()
    _queue.put(item)


def _read_durable(settings: Settings, instance: int) -> dict:
    with contextlib.suppress(FileNotFoundError, ValueError):
        with open(_durable_path(settings, instance)) as f:
            batch, started, ms, size, ops = f.read().split()
        return {"durable": int(batch), "ckpt_start": float(started), "ckpt_ms": float(ms),
                "ckpt_bytes": int(size), "backend_ops": int(ops)}
    return {}


# ------------------------------------------------------------------------------ the sender
def log_partition(settings: Settings, plan: LogPlan, parallelism: int, batches: Any) -> Any:
    """``mapInArrow`` body of the senders: log per destination, then pass the events on."""
    import pyarrow as pa
    from pyspark import TaskContext

    from ..operators import encode_log, state_class

    sender = TaskContext.get().partitionId()
    columns = state_class(settings).COLUMNS  # what the receiving operator reads: all it needs to replay
    out, parts = [], {d: [] for d in range(parallelism)}
    for rb in batches:
        dest = rb.column("dest").to_numpy()
        cols = [rb.column(c).to_numpy() for c in columns]
        for d in range(parallelism):
            parts[d].append([c[dest == d] for c in cols])
        out.append(rb.drop_columns(["dest"]) if hasattr(rb, "drop_columns") else
                   pa.RecordBatch.from_arrays(rb.columns[:-1], names=rb.schema.names[:-1]))
    with participant_store(settings, f"log-s{sender}") as store:
        for d, chunks in parts.items():
            merged = [np.concatenate([ch[j] for ch in chunks]) if chunks else np.zeros(0, np.int64)
                      for j in range(len(columns))]
            store.put(_log_key(d, plan.batch_seq), encode_log(merged))
        store.flush()
        for dest, lo, hi in plan.gc:
            for b in range(lo, hi):
                store.delete(_log_key(dest, b))
    yield from out


class UncoordinatedProtocol(Protocol):
    name = "uncoordinated"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.durable: dict[int, int] = {}  # instance -> latest durable checkpoint batch seen
        self.gc_done: dict[int, int] = {}  # instance -> log entries below this are deleted

    # -- driver side ------------------------------------------------------------------------
    def plan_checkpoint(self, batch_seq: int) -> Any:
        s = self.settings  # each instance decides on its own clock
        return InstanceSchedule(s.interval, s.jitter, s.job_id)

    def prepare(self, df: Any, plan: Any, parallelism: int) -> Any:
        from pyspark.sql import functions as F

        gc = tuple((i, self.gc_done.get(i, 1), d + 1) for i, d in self.durable.items()
                   if d + 1 > self.gc_done.get(i, 1))
        for i, lo, hi in gc:
            self.gc_done[i] = hi
        # the destination exactly as repartition(P, "key") computes it (Murmur3 hash, seed 42)
        with_dest = df.withColumn("dest", F.expr(f"pmod(hash(key), {parallelism})").cast("long"))
        fn = functools.partial(log_partition, self.settings, LogPlan(plan.batch_seq, gc), parallelism)
        return with_dest.mapInArrow(fn, df.schema)

    def commit(self, token: Any, end_offset: int, stats: list[dict]) -> list[CommitResult]:
        out = []
        for s in stats:
            if s["durable"] > self.durable.get(s["instance"], 0):
                self.durable[s["instance"]] = s["durable"]
                out.append(CommitResult(s["ckpt_ms"], s["ckpt_bytes"], s["backend_ops"]))
        return out

    def recover(self, failed_batch_start: int, batch_seq: int, parallelism: int) -> Recovery:
        # no rewind: each instance decides alone (keep, skip as duplicate, or restore + log replay)
        return Recovery(restore=LogRestore(batch_seq, parallelism), replay_from=failed_batch_start)

    # -- instance side ----------------------------------------------------------------------
    def checkpoint(self, settings: Settings, instance: int, state: Any, token: Any, batch_seq: int) -> dict:
        from ..operators import encode_pairs

        if token.due(instance, batch_seq):  # this instance's own clock
            with fence(settings, instance) as f:
                incarnation = f.current
            _submit((settings, instance, batch_seq, encode_pairs(*state.items()), time.time(), incarnation))
        return _read_durable(settings, instance)

    def discard(self, settings: Settings, instance: int, batch_seq: int) -> None:
        """A cancelled task may have checkpointed ``batch_seq`` from a partial input: fence its
        incarnation off (its writer can no longer write, nor is it writing), then drop the record."""
        new_incarnation(settings, instance)
        with participant_store(settings, f"i{instance}") as store:
            store.delete(_ckpt_key(batch_seq))
            store.flush()

    def restore(self, settings: Settings, instance: int, token: Any) -> Any:
        from ..operators import decode_pairs, load_state, new_state, replay_log

        local = load_state(settings, instance)
        if local is not None and local.version >= token.batch_seq - 1:
            return local  # intact (applies the batch) or already applied it (skipped as duplicate)
        new_incarnation(settings, instance)  # before reading: the dead one's writes are over
        state = new_state(settings)
        with participant_store(settings, f"i{instance}") as store:
            found = {int(key[1:]): blob for key, blob in store.scan("c")}
        line = line_for(instance, sorted(found), token.senders, token.batch_seq - 1)
        at = line.line[instance]
        if at:
            state.set(*decode_pairs(found[at]))
        state.version = at
        state.useless = line.useless_count
        for sender in range(token.senders):  # replay each channel s -> instance the line names
            after, upto = line.replay.get((_sender_id(sender), instance), (at, at))
            names = [_log_key(instance, b) for b in range(after + 1, upto + 1)]
            with participant_store(settings, f"log-s{sender}") as store:
                blobs = store.get_many(names) if names else {}
            for name in names:
                if name in blobs:
                    replay_log(state, blobs[name])
        state.version = token.batch_seq - 1
        state.dirty[:] = False
        return state


def _sender_id(sender: int) -> int:
    """Senders' ids in the checkpoint graph (keyed instances are 0, 1, ...)."""
    return -1 - sender


def line_for(instance: int, checkpoints: list[int], senders: int, logged: int) -> RecoveryLine:
    """The recovery line of ``instance`` (its durable checkpoints, by the micro-batch they end at)
    and the ``senders`` feeding it.  Every channel carries one message per micro-batch, its sequence
    number the batch, so checkpoint ``b`` processed ``b`` on each channel; a sender is stateless
    and its one "checkpoint" is what it has logged: every channel up to ``logged``."""
    graph = {instance: [Checkpoint(instance, b, processed={_sender_id(s): b for s in range(senders)})
                        for b in checkpoints]}
    for s in range(senders):
        graph[_sender_id(s)] = [Checkpoint(_sender_id(s), 1, sent={instance: logged})]
    return compute(graph)
