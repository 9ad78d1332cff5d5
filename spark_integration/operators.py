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

Injected failures.  An instance is killed either after applying a micro-batch (``failAt``, the
plan's ``kill_offset``) or, when the plan names one, at a fail point (:data:`WORKER_POINTS`, and
the protocols' own ``spark.<protocol>.*`` points, reached through :func:`reach`): its Python worker
ends with ``os._exit``.  Before it ends, it leaves an executor-local *failure record*
(``i<n>.failed``, the wall-clock instant).  The record stands for what the crash lost: the next task
of the instance drops the working state (it was memory of the dead instance, whatever survived in
the file) and recovers through the protocol; the task that completes reports the instant to the
driver (``failed_at``, the start of the recovery's detect phase) and removes the record.  A fail
point can fire in a thread that outlives its task (the uncoordinated checkpoint writer); the
record makes the instance's next task fail, so the loss is detected a micro-batch later instead of
never.

A restore runs under a recovery meter (:mod:`.phases`): its backend reads and log replay are
measured without the protocol's help and reported with the task's row.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import threading
import time
from typing import Any, Callable, Iterator

import numpy as np

from backends import failpoints
from backends.ledger import Ledger, tap

from . import phases, state_file
from .errors import SparkIntegrationError
from .keyed_state import KeyedState, decode_log, decode_pairs, encode_log, encode_pairs, replay_log
from .protocols.base import Protocol
from .protocols.tokens import STATS_SCHEMA, BatchPlan, CheckpointReport, InstanceStats
from .q3 import JoinState
from .settings import Settings, local_path, replace_local
from .sized_state import sized_count_state
from .state_size import parse_state_size

#: ``Settings.operator`` -> the state class of that operator
STATE_CLASSES: dict[str, type[KeyedState]] = {"count": KeyedState, "join": JoinState}

__all__ = ["STATS_SCHEMA", "BatchPlan", "InstanceStateLost", "KeyedState", "decode_log", "decode_pairs",
           "encode_log", "encode_pairs", "replay_log", "state_class", "new_state", "load_state", "save_state",
           "drop_state", "instance_lock", "process_partition", "restore_partition", "discard_zombie_work",
           "dump_partition", "WORKER_POINTS", "reach", "armed_point", "record_failure"]

BEFORE_CHECKPOINT = failpoints.declare(
    "spark.worker.before_checkpoint",
    "an operator instance dies after applying a micro-batch, before writing its checkpoint")
DURING_CHECKPOINT_WRITE = failpoints.declare(
    "spark.worker.during_checkpoint_write",
    "an operator instance dies with its checkpoint handed to the backend but not flushed, and its "
    "older checkpoints not deleted (the protocols reach it inside their write)")
AFTER_CHECKPOINT = failpoints.declare(
    "spark.worker.after_checkpoint",
    "an operator instance dies with its checkpoint written, before its result reaches the driver "
    "(so before the driver commits the micro-batch)")
#: the worker points every checkpointing protocol reaches (a protocol's own: ``spark.<name>.*``)
WORKER_POINTS = (BEFORE_CHECKPOINT, DURING_CHECKPOINT_WRITE, AFTER_CHECKPOINT)
#: exit status of an instance killed after applying its events (``failAt`` without a fail point)
KILL_EXIT = 17

_task = threading.local()  # the fail point the running task is armed for, if any


class InstanceStateLost(SparkIntegrationError):
    """An instance's working state is missing or stale: it must be recovered by the protocol."""


def state_class(settings: Settings) -> type[KeyedState]:
    """The state class of the job's operator (``Settings.operator``), sized when the job's keys
    hold state beyond their count (``Settings.state_bytes``: only the keyed count's do)."""
    try:
        cls = STATE_CLASSES[settings.operator]
    except KeyError:
        raise SparkIntegrationError(
            f"unknown operator {settings.operator!r}; valid: {', '.join(STATE_CLASSES)}") from None
    if parse_state_size(settings.state_bytes).sized:
        if cls is not KeyedState:
            raise SparkIntegrationError(
                f"spark.ckptbench.stateBytes sizes the keyed count's state; the {settings.operator} "
                f"operator keeps its own state: drop it")
        return sized_count_state(settings.state_bytes, settings.window_events)
    return cls


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
    """The instance's working state, mapped from its file (:mod:`.state_file`); None: none, or
    a task died while changing it."""
    path, _ = _state_paths(settings, instance)
    return state_file.load(path, state_class(settings))


def save_state(settings: Settings, instance: int, state: KeyedState) -> None:
    path, _ = _state_paths(settings, instance)
    state_file.save(path, state)


def drop_state(settings: Settings, instance: int) -> None:
    """What a crash of the instance loses."""
    path, _ = _state_paths(settings, instance)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


#: set by the cluster's workers in their environment (:mod:`services.cluster`), inherited by
#: executors and their Python workers: the address of the host a task runs on
HOST_ENV = "CKPTBENCH_HOST"


def host_path(settings: Settings, instance: int) -> str:
    return local_path(settings, f"i{instance}.host")


def record_host(settings: Settings, instance: int) -> None:
    """In a task: note the host it runs on as the instance's, for a node loss to know whose
    working state it takes (:mod:`.node_loss`); a no-op off the cluster."""
    host = os.environ.get(HOST_ENV)
    if not host:
        return
    path = host_path(settings, instance)
    with contextlib.suppress(FileNotFoundError):
        with open(path) as f:
            if f.read() == host:
                return
    replace_local(path, host)


# ------------------------------------------------------------------- injected failures
def _failure_path(settings: Settings, instance: int) -> str:
    return local_path(settings, f"i{instance}.failed")


def record_failure(settings: Settings, instance: int, at: float | None = None) -> None:
    """Leave the failure record of ``instance`` (the instant it died, ``at`` or now); see the
    module doc."""
    fd = os.open(_failure_path(settings, instance), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, f"{(time.time() if at is None else at)!r}\n".encode())
    finally:
        os.close(fd)


def failure_instant(settings: Settings, instance: int) -> float:
    """The earliest failure recorded for ``instance`` and not yet reported (0.0: none)."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        with open(_failure_path(settings, instance)) as f:
            return min(float(line) for line in f.read().split())
    return 0.0


def clear_failure(settings: Settings, instance: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_failure_path(settings, instance))


def armed_point() -> str | None:
    """The fail point the running task (in this thread) is armed for by its plan, if any."""
    return getattr(_task, "fail_point", None)


def reach(settings: Settings, instance: int, name: str, armed: str | None = None) -> None:
    """The instance reaches the step ``name``: if its task's plan armed that point (or ``armed``,
    for work that outlives the task), the instance dies here — failure record, then
    :func:`backends.failpoints.hit`'s ``os._exit``.  A point armed through ``CKPTBENCH_FAILPOINT``
    ends the process as well (without a record: the instance's working state then survives)."""
    if name == (armed or armed_point()):
        record_failure(settings, instance)
        failpoints.arm(name)  # the process ends at the hit below
    failpoints.hit(name)


# ----------------------------------------------------------------------------- the task
class Acknowledgement:
    """A task's :meth:`~.protocols.base.Protocol.acknowledge`, written in a thread of its own
    while the task reads and applies its events, and waited for before anything else the task does.

    Why that keeps every protocol's guarantee: what the acknowledgement protects is the
    instance's *output* — its checkpoint or commit, its result row to the driver — and every one
    of those, like every injected failure (``failAt``'s kill, the worker's and the protocols' fail
    points), comes after :meth:`wait`, so each of them finds the acknowledgement durable exactly
    as when it was written before the first event.  Until :meth:`wait` returns the task has
    changed only its working state, which a crash loses whole (:func:`state_file.begin`); a crash
    there leaves the acknowledgement written or not, the two states a crash before or after a
    write that came first could leave as well.  A protocol that does not acknowledge
    (the default, which writes nothing) gets no thread.
    """

    def __init__(self, protocol: Protocol, settings: Settings, instance: int, batch_seq: int,
                 ledger: Ledger) -> None:
        self.ops, self.error = 0, None
        self.thread = None
        if type(protocol).acknowledge is Protocol.acknowledge:
            return
        call = functools.partial(protocol.acknowledge, settings, instance, batch_seq)
        self.thread = threading.Thread(target=self._run, args=(call, ledger), name="acknowledge", daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[], int], ledger: Ledger) -> None:
        try:
            with tap(ledger):
                self.ops = call()
        except BaseException as exc:  # noqa: BLE001 - raised in the task by wait()
            self.error = exc

    def wait(self) -> int:
        """The backend operations the acknowledgement issued, once it is durable (or its error)."""
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            raise self.error
        return self.ops


def process_partition(settings: Settings, protocol: Protocol, plan: BatchPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """The body of ``mapInArrow``: apply this partition's events to its instance's state."""
    import pyarrow as pa
    from pyspark import TaskContext

    instance = TaskContext.get().partitionId()
    t_task = time.perf_counter()
    with instance_lock(settings, instance):
        record_host(settings, instance)  # on a cluster: whose loss takes this instance's state
        failed_at = failure_instant(settings, instance)
        if failed_at:  # the instance died since its last task: its working state died with it
            drop_state(settings, instance)
        restore_ms, replayed, useless = 0.0, 0, 0
        meter = phases.Meter()
        if plan.restore is not None:
            t = time.perf_counter()
            with phases.metering() as meter:
                if plan.expected is not None:
                    discard_zombie_work(settings, protocol, plan, instance)
                state = protocol.restore(settings, instance, plan.restore)
            replayed, useless = getattr(state, "replayed", 0), getattr(state, "useless", 0)
            restore_ms = (time.perf_counter() - t) * 1e3
        else:
            state = load_state(settings, instance)
            if state is None and plan.batch_seq == 1 and not failed_at:
                state = new_state(settings)
            if state is None or state.version != plan.batch_seq - 1:
                found = "no working state" if state is None else f"working state at batch {state.version}"
                raise InstanceStateLost(
                    f"instance {instance} of job {settings.job_id} has {found}, expected batch "
                    f"{plan.batch_seq - 1}: it must be recovered"
                )
        state_file.begin(state)  # from here until save_state, a dead task leaves no usable state
        # deduplication: a re-run batch this instance had already applied (sequence number = batch)
        duplicate = state.version == plan.batch_seq
        # counted with the checkpoint, as its backend_ops are; written while the events arrive
        acked = Ledger()
        ack = None if duplicate else Acknowledgement(protocol, settings, instance, plan.batch_seq, acked)
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
        ack_ops = ack.wait() if ack is not None else 0  # durable before any step that follows
        if not duplicate:  # the windows the driver's watermark closed go before the checkpoint
            state.expire(plan.watermark)
        if plan.kill_offset is not None and instance == plan.kill_instance and hi >= plan.kill_offset:
            if plan.fail_point is None:
                record_failure(settings, instance)
                os._exit(KILL_EXIT)  # the task dies for real, taking its Python worker with it
            _task.fail_point = plan.fail_point  # it dies when (if) it reaches that step
        spent = phases.Meter()  # where this task's checkpoint time went (encode, write)
        try:
            ckpt: CheckpointReport = {"ckpt_start": 0.0, "ckpt_ms": 0.0, "ckpt_bytes": 0, "backend_ops": 0,
                                      "durable": 0, "forced": 0}
            if plan.checkpoint is not None and not duplicate:
                reach(settings, instance, BEFORE_CHECKPOINT)
                with phases.metering() as spent:
                    ckpt.update(protocol.checkpoint(settings, instance, state, plan.checkpoint, plan.batch_seq))
                reach(settings, instance, AFTER_CHECKPOINT)
        finally:
            _task.fail_point = None
        ckpt["backend_ops"] += ack_ops
        if not duplicate:
            state.last_events = events
        state.version = plan.batch_seq
        save_state(settings, instance, state)
        if failed_at:
            clear_failure(settings, instance)
        size = state.encoded_size()
    row = InstanceStats(instance=instance, events=events, min_seq=lo, max_seq=hi, restore_ms=restore_ms,
                        ckpt_start=ckpt["ckpt_start"], ckpt_ms=ckpt["ckpt_ms"], ckpt_bytes=ckpt["ckpt_bytes"],
                        backend_ops=ckpt["backend_ops"], durable=ckpt["durable"], replayed=replayed,
                        useless=useless, forced=ckpt["forced"], load_ms=meter.load_s * 1e3,
                        load_bytes=meter.load_bytes, log_replay_ms=meter.replay_s * 1e3, failed_at=failed_at,
                        state_bytes=size, dropped=getattr(state, "dropped_keys", 0),
                        encode_ms=spent.encode_s * 1e3, write_ms=spent.write_s * 1e3,
                        ckpt_requests=_requests_json(spent.requests.add(acked)),
                        restore_requests=_requests_json(meter.requests),
                        task_ms=(time.perf_counter() - t_task) * 1e3)
    # by name, in the schema's order (mapInArrow matches columns by position)
    yield pa.RecordBatch.from_pydict({n: [row[n]] for n in InstanceStats.__annotations__})


def restore_partition(settings: Settings, protocol: Protocol, plan: BatchPlan,
                      placeholder: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` body of a ``from_log`` re-run (:class:`~.protocols.base.Recovery`): the
    instance's task of :func:`process_partition` with no input events — it restores (a failed
    instance from the backend, an intact one keeps its state) and yields its row.  Its input is
    a placeholder (partition ``i`` of a range names instance ``i``), not events."""
    for _ in placeholder:
        pass
    yield from process_partition(settings, protocol, plan, iter(()))


def _requests_json(ledger: Ledger) -> str:
    """A meter's requests for the stats row: JSON, or "" when the stores sent none."""
    return json.dumps(ledger.as_dict()) if ledger else ""


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


def dump_partition(settings: Settings, instance: int,
                   check: Callable[[KeyedState], tuple[int, int]] | None = None) -> tuple[int, int, bytes, tuple[int, int]]:
    """(instance, version, its keys and counts as pairs, ``check(state)``) of an instance's
    working state — for verification.  ``check`` runs here, on the executor, for what is too
    large to send to the driver (a sized state's rings: :func:`.sized_state.ring_mismatches`)."""
    with instance_lock(settings, instance):
        state = load_state(settings, instance)
    if state is None:
        return instance, -1, encode_pairs(np.zeros(0, np.int64), np.zeros(0, np.int64)), (0, 0)
    return instance, state.version, encode_pairs(*state.items()), check(state) if check else (0, 0)
