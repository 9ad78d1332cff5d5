"""The senders' message log, shared by ``uncoordinated`` and ``logio``.

The stage feeding the keyed stage (the source partitions, *senders*) logs every message before
the shuffle: per micro-batch ``b`` and destination instance ``i``, sender ``s`` writes the events
it sends to ``i`` as ``<job>/log-s<s>/d<i>/b<b>`` (channel ``s -> i``, sequence number ``b``: each
channel carries one message per micro-batch).  A message holds the columns the receiving operator
reads (:attr:`~spark_integration.keyed_state.KeyedState.COLUMNS`), so replaying it needs nothing
else.  The driver decides which entries are garbage (:class:`LogPlan`); the senders delete them.

The bytes the senders put are counted per job in a Spark accumulator created on the driver
(:func:`logged_bytes` reads it there): the log's volume is work the protocol does, reported beside
the bytes checkpointed.  Spark applies an accumulator update only for a task that succeeded, so a
killed task's writes are not counted.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ..keyed_state import encode_log
from ..operators import state_class
from ..orphans import References
from ..settings import Settings
from ..store import Scoped, participant_store


def log_key(dest: int, batch: int) -> str:
    """The key of sender ``s``'s message to instance ``dest`` in micro-batch ``batch`` (under ``log-s<s>/``)."""
    return f"d{dest}/b{batch:010d}"


#: job id -> the accumulator of its senders' logged bytes (driver side; see :func:`logged_bytes`)
_logged: dict[str, Any] = {}


def logged_bytes(job_id: str) -> int:
    """The bytes job ``job_id``'s senders have logged so far, as seen by the driver (0: none)."""
    acc = _logged.get(job_id)
    return int(acc.value) if acc is not None else 0


def sender_owner(sender: int) -> str:
    """The backend namespace of sender ``sender``'s log."""
    return f"log-s{sender}"


@dataclass(frozen=True)
class LogPlan:
    """What every sender does in one micro-batch: log it, and delete the entries named in ``gc``."""

    batch_seq: int
    gc: tuple[tuple[int, int, int], ...]  # (dest, from_batch, below_batch): entries senders delete


def log_partition(settings: Settings, plan: LogPlan, parallelism: int, logged: Any,
                  batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` body of the senders: log per destination, then pass the events on;
    ``logged`` (an accumulator, or None) counts the bytes put."""
    import pyarrow as pa
    from pyspark import TaskContext

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
    with participant_store(settings, sender_owner(sender)) as store:
        for d, chunks in parts.items():
            merged = [np.concatenate([ch[j] for ch in chunks]) if chunks else np.zeros(0, np.int64)
                      for j in range(len(columns))]
            blob = encode_log(merged)
            store.put(log_key(d, plan.batch_seq), blob)
            if logged is not None:
                logged.add(len(blob))
        store.flush()
        drop_logged(store, plan.gc)
    yield from out


def drop_logged(store: Scoped, gc: tuple[tuple[int, int, int], ...]) -> None:
    """A sender's log GC: delete the entries ``gc`` names (``(dest, from_batch, below_batch)``)."""
    for dest, lo, hi in gc:
        for b in range(lo, hi):
            store.delete(log_key(dest, b))


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


def logging_stage(settings: Settings, df: Any, plan: LogPlan, parallelism: int) -> Any:
    """``df`` with the senders' logging in front of the shuffle into ``parallelism`` instances."""
    from pyspark.sql import functions as F

    logged = _logged.get(settings.job_id)
    if logged is None:
        logged = _logged[settings.job_id] = df.sparkSession.sparkContext.accumulator(0)
    # the destination exactly as repartition(P, "key") computes it (Murmur3 hash, seed 42)
    with_dest = df.withColumn("dest", F.expr(f"pmod(hash(key), {parallelism})").cast("long"))
    return with_dest.mapInArrow(functools.partial(log_partition, settings, plan, parallelism, logged),
                                df.schema)
