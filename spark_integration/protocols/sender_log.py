"""The senders' message log, shared by ``uncoordinated`` and ``logio``.

The source partitions (the *senders*, :mod:`..source`) log every message before the shuffle, in
the source's tap (:func:`log_tap`), where the events are made: per micro-batch ``b`` and
destination instance ``i``, sender ``s`` writes the events
it sends to ``i`` as ``<job>/log-s<s>/d<i>/b<b>`` (channel ``s -> i``, sequence number ``b``: each
channel carries one message per micro-batch).  A message holds the columns the receiving operator
reads (:attr:`~spark_integration.keyed_state.KeyedState.COLUMNS`), so replaying it needs nothing
else.  The driver decides which entries are garbage (:class:`LogPlan`); the senders delete them.

When a message is logged.  A sender passes its events on as they arrive and keeps each
destination's share (the instance ``repartition(P, "key")`` sends each event to, computed as Spark
does, :func:`..spark_hash.destinations`); once its input has ended it writes the whole
micro-batch's log in one ``put_many`` (one batch write, one group commit, instead of a put per
destination), flushes it, and only then returns.  The log is still durable before any receiver
sees one of its events: Spark's shuffle hands a map task's output to the next stage only once
that task has succeeded, and a source read succeeds only once the tap's generator has returned —
after the flush.  A sender that dies (or whose put or flush fails) before that fails its task, and its
events reach no receiver (the micro-batch is re-run); one that has returned has logged all of
them.  So every event a receiver applies is in the log, the one fact :mod:`.logio` (an
acknowledged micro-batch is wholly logged) and :mod:`.uncoordinated` (the senders have logged
every channel up to the micro-batch before a failed one) recover from.  Passing the events on
first keeps the logging off the micro-batch's critical path: Spark turns them into shuffle
rows while the sender is still reading, instead of after it has logged them all.

The bytes the senders put are counted on the driver (:func:`count_logged`, :func:`logged_bytes`)
from what the instances received in each micro-batch that completed: a message is 8 bytes per
column per event, so the count needs nothing back from the senders.  The log's volume is work the
protocol does, reported beside the bytes checkpointed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from backends import failpoints

from ..keyed_state import encode_log
from ..operators import state_class
from ..orphans import References
from ..settings import Settings
from ..source import Tap
from ..spark_hash import destinations
from ..store import Scoped, participant_store
from .tokens import BatchPlan


def log_key(dest: int, batch: int) -> str:
    """The key of sender ``s``'s message to instance ``dest`` in micro-batch ``batch`` (under ``log-s<s>/``)."""
    return f"d{dest}/b{batch:010d}"


#: job id -> the bytes its senders logged in the micro-batches that completed (driver side)
_logged: dict[str, int] = {}


def count_logged(settings: Settings, events: int) -> None:
    """On the driver: a micro-batch that completed had its senders log ``events`` events (what
    its instances received), each 8 bytes a column of the receiving operator."""
    width = 8 * len(state_class(settings).COLUMNS)
    _logged[settings.job_id] = _logged.get(settings.job_id, 0) + width * events


def logged_bytes(job_id: str) -> int:
    """The bytes job ``job_id``'s senders have logged so far, as counted on the driver (0: none)."""
    return _logged.get(job_id, 0)


def sender_owner(sender: int) -> str:
    """The backend namespace of sender ``sender``'s log."""
    return f"log-s{sender}"


BEFORE_LOG_WRITE = failpoints.declare(
    "spark.sender.before_log_write",
    "a sender dies with every event of its micro-batch passed on to Spark, before its log "
    "entries are written")
#: the fail points the senders reach (armed by the driver's plan like an instance's)
SENDER_POINTS = (BEFORE_LOG_WRITE,)


@dataclass(frozen=True)
class LogPlan:
    """What every sender does in one micro-batch: log it, and delete the entries named in ``gc``."""

    batch_seq: int
    gc: tuple[tuple[int, int, int], ...]  # (dest, from_batch, below_batch): entries senders delete
    #: a sender fail point the driver's plan armed: sender ``kill_sender`` dies at it once it has
    #: passed on an event >= ``kill_offset`` (None: none armed)
    fail_point: str | None = None
    kill_offset: int | None = None
    kill_sender: int = 0

    @classmethod
    def of(cls, plan: BatchPlan, gc: tuple[tuple[int, int, int], ...]) -> "LogPlan":
        """The senders' part of the driver's ``plan``, with the entries to delete."""
        if plan.fail_point not in SENDER_POINTS or plan.kill_offset is None:
            return cls(plan.batch_seq, gc)
        return cls(plan.batch_seq, gc, plan.fail_point, plan.kill_offset, plan.kill_instance)


def log_tap(settings: Settings, plan: LogPlan, parallelism: int) -> Tap:
    """The source's tap (:mod:`..source`) that logs a micro-batch's messages: :func:`log_events`."""
    return functools.partial(log_events, settings, plan, parallelism)


def log_events(settings: Settings, plan: LogPlan, parallelism: int, sender: int,
               batches: Iterator[Any]) -> Iterator[Any]:
    """Sender ``sender``'s tap: pass the events on as they come, keep each destination's
    share, and log every share before the read ends.

    Passing an event on before it is logged is safe (module doc, "When a message is logged"):
    nothing this task hands Spark reaches a receiver before the task has succeeded, and it
    succeeds only after this generator has returned, i.e. after the log's flush."""
    columns = state_class(settings).COLUMNS  # what the receiving operator reads: all it needs to replay
    parts: dict[int, list[list[np.ndarray]]] = {d: [] for d in range(parallelism)}
    hi = -1
    for rb in batches:
        if not rb.num_rows:
            continue
        cols = [rb.column(c).to_numpy() for c in columns]
        hi = max(hi, int(rb.column("seq").to_numpy().max()))
        dest = destinations(rb.column("key").to_numpy(), parallelism)
        for d in range(parallelism):
            parts[d].append([c[dest == d] for c in cols])
        yield rb
    if plan.fail_point and sender == plan.kill_sender and hi >= plan.kill_offset:
        failpoints.arm(plan.fail_point)  # a sender keeps no working state: no failure record
    failpoints.hit(BEFORE_LOG_WRITE)
    entries = []
    for d, chunks in parts.items():
        merged = [np.concatenate([ch[j] for ch in chunks]) if chunks else np.zeros(0, np.int64)
                  for j in range(len(columns))]
        entries.append((log_key(d, plan.batch_seq), encode_log(merged)))
    with participant_store(settings, sender_owner(sender)) as store:
        store.put_many(entries)  # the micro-batch's whole log: one batch write, one group commit
        store.flush()
        drop_logged(store, plan.gc)


def drop_logged(store: Scoped, gc: tuple[tuple[int, int, int], ...]) -> None:
    """A sender's log GC: delete the entries ``gc`` names (``(dest, from_batch, below_batch)``),
    in one batch delete."""
    keys = [log_key(dest, b) for dest, lo, hi in gc for b in range(lo, hi)]
    if keys:
        store.delete_many(keys)


def collect_logs(settings: Settings, gc: tuple[tuple[int, int, int], ...], senders: int) -> None:
    """The log GC every sender does at its next micro-batch, done now from the driver."""
    for sender in range(senders):
        with participant_store(settings, sender_owner(sender)) as store:
            drop_logged(store, gc)


def log_tails(instances: dict[int, int], senders: int) -> dict[str, References]:
    """What a recovery replays of the senders' logs: of each channel ``s -> i``, the entries
    after micro-batch ``instances[i]`` (the checkpoint the instance would restore)."""
    tails = tuple((f"d{i}/", log_key(i, at + 1)) for i, at in sorted(instances.items()))
    return {sender_owner(s): References(tails=tails) for s in range(senders)}


