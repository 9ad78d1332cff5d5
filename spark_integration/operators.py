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
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from .conf import Settings, SparkIntegrationError

STATS_SCHEMA = (
    "instance long, events long, min_seq long, max_seq long, restore_ms double, "
    "ckpt_start double, ckpt_ms double, ckpt_bytes long, backend_ops long, durable long, replayed long, "
    "useless long"
)


class InstanceStateLost(SparkIntegrationError):
    """An instance's working state is missing or stale: it must be recovered by the protocol."""


class KeyedState:
    """Counts per key id (dense), the dirty set since the last checkpoint, and a version.

    It is also the protocols' view of *any* operator state: a sparse map ``int64 slot -> int64``
    (0 = absent) over dense arrays, read by ``items``/written by ``set``. An operator with other
    state (the Q3 join, :class:`~.q3.JoinState`) subclasses it, names the input ``COLUMNS`` it
    consumes and overrides :meth:`apply_columns`; checkpoints, logs and restores stay the same.
    """

    __slots__ = ("counts", "dirty", "version", "replayed", "useless", "last_events")
    COLUMNS: tuple[str, ...] = ("key",)  # what the operator reads (and senders log), in order

    def __init__(self, counts: np.ndarray | None = None, version: int = 0) -> None:
        self.counts = np.zeros(1024, np.int64) if counts is None else counts
        self.dirty = np.zeros(len(self.counts), bool)
        self.version = version
        self.replayed = 0  # events re-applied from a message log during a restore
        self.useless = 0  # checkpoints past the recovery line of a restore (uncoordinated)
        self.last_events = -1  # events of micro-batch ``version`` this instance applied (-1: unknown)

    def _grow(self, size: int) -> None:
        if size > len(self.counts):
            new = max(size, 2 * len(self.counts))
            self.counts = np.concatenate([self.counts, np.zeros(new - len(self.counts), np.int64)])
            self.dirty = np.concatenate([self.dirty, np.zeros(new - len(self.dirty), bool)])

    def apply(self, keys: np.ndarray) -> None:
        """Count one batch of events (vectorized)."""
        if len(keys) == 0:
            return
        bc = np.bincount(keys)
        self._grow(len(bc))
        self.counts[: len(bc)] += bc
        self.dirty[: len(bc)] |= bc > 0

    def apply_columns(self, cols: list[np.ndarray]) -> None:
        """One batch of events given as the arrays of :attr:`COLUMNS` (from Arrow or a log)."""
        self.apply(cols[0])

    def set(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Overwrite the given keys (restoring a checkpoint)."""
        if len(keys):
            self._grow(int(keys.max()) + 1)
            self.counts[keys] = values

    def items(self, only_dirty: bool = False) -> tuple[np.ndarray, np.ndarray]:
        idx = np.flatnonzero(self.dirty if only_dirty else self.counts)
        return idx.astype(np.int64), self.counts[idx]

    # -- the executor-local file ------------------------------------------------------------
    def to_bytes(self) -> bytes:
        n = len(self.counts)
        head = np.array([self.version, n, self.last_events], np.int64)
        return head.tobytes() + self.counts.tobytes() + self.dirty.tobytes()

    @classmethod
    def from_bytes(cls, blob: bytes) -> "KeyedState":
        version, n, last = np.frombuffer(blob, np.int64, 3)
        state = cls(np.frombuffer(blob, np.int64, int(n), 24).copy(), int(version))
        state.dirty = np.frombuffer(blob, bool, int(n), 24 + 8 * int(n)).copy()
        state.last_events = int(last)
        return state


def encode_pairs(keys: np.ndarray, values: np.ndarray) -> bytes:
    """``n | keys | values`` as little-endian int64 — the checkpoint blob of a key range."""
    return np.array([len(keys)], "<i8").tobytes() + keys.astype("<i8").tobytes() + values.astype("<i8").tobytes()


def decode_pairs(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    n = int(np.frombuffer(blob, "<i8", 1)[0])
    return np.frombuffer(blob, "<i8", n, 8), np.frombuffer(blob, "<i8", n, 8 + 8 * n)


def encode_log(cols: list[np.ndarray]) -> bytes:
    """A logged message: the operator's columns, one after the other, little-endian int64 (one
    column — a keyed count's keys — is just the keys)."""
    return b"".join(np.asarray(c).astype("<i8").tobytes() for c in cols)


def decode_log(blob: bytes, ncols: int) -> list[np.ndarray]:
    return list(np.frombuffer(blob, "<i8").reshape(ncols, -1))


def state_class(settings: Settings) -> type[KeyedState]:
    """The state class of the job's operator (``Settings.operator``)."""
    if settings.operator == "join":
        from .q3 import JoinState

        return JoinState
    if settings.operator == "count":
        return KeyedState
    raise SparkIntegrationError(f"unknown operator {settings.operator!r}; valid: count, join")


def new_state(settings: Settings) -> KeyedState:
    return state_class(settings)()


def replay_log(state: KeyedState, blob: bytes) -> int:
    """Apply one logged message to ``state``; returns the events it held."""
    cols = decode_log(blob, len(state.COLUMNS))
    state.apply_columns(cols)
    state.replayed += len(cols[0])
    return len(cols[0])


# --------------------------------------------------------------------- executor-local state
def _state_paths(settings: Settings, instance: int) -> tuple[str, str]:
    base = os.path.join(settings.state_dir, settings.job_id)
    os.makedirs(base, exist_ok=True)
    return os.path.join(base, f"i{instance}.state"), os.path.join(base, f"i{instance}.lock")


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
@dataclass(frozen=True)
class BatchPlan:
    """What every instance does in one micro-batch; decided by the driver, pickled to tasks."""

    batch_seq: int  # the version instances reach after this batch (previous one = batch_seq - 1)
    restore: Any = None  # protocol token: restore from the backend instead of the local state
    checkpoint: Any = None  # protocol token: checkpoint at the end of this batch
    kill_offset: int | None = None  # kill ``kill_instance`` once it sees an event >= this offset
    kill_instance: int = 0
    #: on the re-run of a failed micro-batch: events per instance in it (to detect partial zombies)
    expected: Any = None


def process_partition(settings: Settings, protocol: Any, plan: BatchPlan, batches: Iterator[Any]) -> Iterator[Any]:
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
        ckpt: dict[str, Any] = {"ckpt_start": 0.0, "ckpt_ms": 0.0, "ckpt_bytes": 0, "backend_ops": 0, "durable": 0}
        if plan.checkpoint is not None and not duplicate:
            ckpt.update(protocol.checkpoint(settings, instance, state, plan.checkpoint, plan.batch_seq))
        ckpt["backend_ops"] += ack_ops
        if not duplicate:
            state.last_events = events
        state.version = plan.batch_seq
        save_state(settings, instance, state)
    row = {"instance": instance, "events": events, "min_seq": lo, "max_seq": hi, "restore_ms": restore_ms,
           **ckpt, "replayed": replayed, "useless": useless}
    # by name, in the schema's order (mapInArrow matches columns by position)
    names = [f.split()[0] for f in STATS_SCHEMA.split(", ")]
    yield pa.RecordBatch.from_pydict({n: [row[n]] for n in names})


def discard_zombie_work(settings: Settings, protocol: Any, plan: BatchPlan, instance: int) -> None:
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
