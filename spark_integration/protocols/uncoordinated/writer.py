"""The asynchronous checkpoint writer of a Python worker, and the durable note it leaves behind.

A task does not wait for its checkpoint: it hands a :class:`WriteRequest` (a copy of the state,
or of its changes, encoded) to the writer through a bounded drop-oldest queue (S4's SafeKeeper
discipline) and goes on.  The writer thread writes the checkpoint ``<job>/i<i>/c<b>`` (in the
job's layout, :mod:`spark_integration.layouts`), deletes the instance's older checkpoints but
those :func:`.chain.kept` keeps (the new one's chain and the chain of the newest before it) and
writes an executor-local *durable note*; the instance's next task reads the note and reports it
to the driver.  The newest older chain stays because the new checkpoint may yet be discarded:
when a job fails, Spark cancels its other tasks, and a cancelled task whose input ended early can
still checkpoint its partial state; the re-run deletes that checkpoint and its note
(:meth:`.protocol.UncoordinatedProtocol.discard`), and the instance restores the one before it,
whose senders' log the driver has kept.  A write that fails leaves a *failed note*
(``i<i>.unwritten``) instead, so that the instance's next checkpoint starts a new chain rather
than wait for this one (:func:`.chain.next_base`); so does a request the full queue drops.  A
request lost with its process (an injected failure's ``os._exit`` kills every thread of the
Python worker, the writer too) leaves no note; the chain note names the process, and the next
checkpoint starts a new chain once that process is gone.

The writer is per process by nature: Spark runs an instance's tasks in whichever Python worker is
idle, and the thread must outlive the task that fed it.  So there is exactly one
:class:`CheckpointWriter` per process, :data:`WRITER`; its thread starts with the first request.
Every request carries the incarnation it was built in and is written under the fence
(:mod:`.fence`), so a request of a dead incarnation is dropped, never written.

Fail points, reached in the writer thread (so the Python worker dies after its task returned;
the failure record makes the instance's next task fail): ``spark.worker.during_checkpoint_write``
(the checkpoint put, not flushed) and ``spark.uncoordinated.before_commit`` (the checkpoint durable,
the older ones not deleted and the durable note not written, so the driver never hears of it).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass

from backends import failpoints
from backends.safekeeper import DropOldestQueue

from ...layouts.base import Encoded, Layout
from ...layouts.registry import layout_for
from ...operators import DURING_CHECKPOINT_WRITE, reach
from ...settings import Settings, local_path, replace_local
from ...store import Scoped, participant_store
from ..tokens import CheckpointReport
from .chain import kept
from .fence import fence

QUEUE_CAPACITY = 4

BEFORE_COMMIT = failpoints.declare(
    "spark.uncoordinated.before_commit",
    "an uncoordinated instance's writer dies with its checkpoint durable, before it deletes the older "
    "checkpoints and notes the new one as durable for the driver")


def checkpoint_key(batch: int) -> str:
    """Instance ``i``'s checkpoint after micro-batch ``batch`` (under ``i<i>/``)."""
    return f"c{batch:010d}"


@dataclass(frozen=True)
class WriteRequest:
    """One checkpoint for the writer: instance ``instance``'s state after micro-batch ``batch``."""

    settings: Settings
    instance: int
    batch: int
    encoded: Encoded  # the state, taken in the job's layout
    started: float  # wall-clock time the task handed it over
    incarnation: int  # the instance's incarnation when the state was taken (:mod:`.fence`)
    fail_point: str | None = None  # the fail point the submitting task was armed for


@dataclass
class WriterStats:
    """What this process's writer did with its requests (tests, diagnostics)."""

    written: int = 0
    fenced: int = 0  # dropped: the request's incarnation was dead
    failed: int = 0  # the backend write raised; the instance recovers from an older checkpoint


class CheckpointWriter:
    """A bounded drop-oldest queue and the thread draining it (see the module doc)."""

    def __init__(self, capacity: int = QUEUE_CAPACITY) -> None:
        self.capacity = capacity
        self.stats = WriterStats()
        self._queue: DropOldestQueue | None = None
        self._start_lock = threading.Lock()

    def submit(self, request: WriteRequest) -> None:
        """Queue ``request``; when the queue is full its oldest request is dropped, and noted as
        failed (its instance's next checkpoint must not wait for it)."""
        with self._start_lock:
            if self._queue is None:
                self._queue = DropOldestQueue(self.capacity)
                threading.Thread(target=self._drain, args=(self._queue,), name="ckpt-writer", daemon=True).start()
        if (dropped := self._queue.put(request)) is not None:
            _note_failed(dropped)

    def _drain(self, queue: DropOldestQueue) -> None:
        while (request := queue.get()) is not None:
            try:
                with fence(request.settings, request.instance) as f:  # held across the whole write
                    if f.current != request.incarnation:
                        self.stats.fenced += 1  # a dead incarnation's checkpoint: never written
                        continue
                    _write(request)
                    self.stats.written += 1
            except Exception:  # noqa: BLE001 - a lost checkpoint is recovered from an older one
                self.stats.failed += 1
                _note_failed(request)


#: this process's writer (the only one; see the module doc)
WRITER = CheckpointWriter()


def _durable_path(settings: Settings, instance: int) -> str:
    return local_path(settings, f"i{instance}.durable")


def _failed_path(settings: Settings, instance: int) -> str:
    # not ``i<i>.failed``: that is the instance's injected-failure record (:mod:`...operators`)
    return local_path(settings, f"i{instance}.unwritten")


def _note_failed(request: WriteRequest) -> None:
    with contextlib.suppress(OSError):
        replace_local(_failed_path(request.settings, request.instance), str(request.batch))


def _write(request: WriteRequest) -> None:
    settings, instance, batch = request.settings, request.instance, request.batch
    layout = layout_for(settings)
    with participant_store(settings, f"i{instance}") as store:
        older = {b: base for b, base in checkpoint_bases(store, layout).items() if b < batch}
        layout.write(store, checkpoint_key(batch), request.encoded)
        reach(settings, instance, DURING_CHECKPOINT_WRITE, request.fail_point)
        store.flush()
        reach(settings, instance, BEFORE_COMMIT, request.fail_point)
        keep = kept({**older, batch: request.encoded.base}, batch)
        for b in older:  # only the latest durable checkpoint of a committed batch is restored
            if b not in keep:
                layout.delete(store, checkpoint_key(b))
        ops = store.ops
    # executor-local note of what is durable: read by this instance's next task -> driver
    replace_local(_durable_path(settings, instance),
                  f"{batch} {request.started} {(time.time() - request.started) * 1e3} {request.encoded.nbytes} {ops}")


def checkpoint_bases(store: Scoped, layout: Layout) -> dict[int, int]:
    """The instance's checkpoints (by micro-batch) and the base each names (0: a full one),
    from their commit records."""
    return {int(k[1:]): m.base for k, m in layout.find_many(store, store.keys("c")).items()}


def forget_durable(settings: Settings, instance: int, batch: int) -> None:
    """Drop this executor's durable note if it names micro-batch ``batch`` or a later one: that
    checkpoint is being discarded (a cancelled task's), and the driver, which deletes the senders'
    log up to the durable checkpoint an instance reports, must not hear of it."""
    if read_durable(settings, instance).get("durable", 0) >= batch:
        with contextlib.suppress(FileNotFoundError):
            os.remove(_durable_path(settings, instance))


def read_failed(settings: Settings, instance: int) -> int:
    """The newest checkpoint of the instance a writer of this executor failed to write (0: none)."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        with open(_failed_path(settings, instance)) as f:
            return int(f.read())
    return 0


def read_durable(settings: Settings, instance: int) -> CheckpointReport:
    """The instance's latest durable checkpoint as this executor's writer noted it ({}: none)."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        with open(_durable_path(settings, instance)) as f:
            batch, started, ms, size, ops = f.read().split()
        return {"durable": int(batch), "ckpt_start": float(started), "ckpt_ms": float(ms),
                "ckpt_bytes": int(size), "backend_ops": int(ops)}
    return {}
