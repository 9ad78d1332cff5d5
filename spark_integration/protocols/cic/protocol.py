"""``cic``: uncoordinated checkpoints plus HMNR's forced checkpoints, driven by piggybacks.

Everything ``uncoordinated`` does stays (:mod:`..uncoordinated.protocol`): senders log every
message, instances take *basic* checkpoints on their own clocks (:mod:`..uncoordinated.schedule`)
through the asynchronous, fenced writer, and a failed instance recovers alone through the
recovery line (:mod:`spark_integration.recovery_line`) and the senders' logs.  CIC adds, like
CheckMate's ``CICCheckpointing`` extends its uncoordinated protocol:

  * **piggybacks on every message**: the processes of the rule are the ``P`` senders and the ``P``
    keyed instances (``n = 2P``); the sender stage appends its HMNR piggyback
    (:class:`.hmnr.Piggyback`, ``8 + 10 n`` bytes) to *every row* it sends, so the bytes cross the
    shuffle as CheckMate's cross the network (``[SPARK], PiggybackedBytes``);
  * **forced checkpoints**: before an instance applies a micro-batch (the ``receive`` hook), it
    runs HMNR's rule over the piggybacks of the batch's messages; if any message needs one, it
    checkpoints the state as it was *before the batch* (``c<b-1>``) and then merges them.  The
    micro-batch is the delivery unit, so a forced checkpoint always ends at a micro-batch boundary
    and processed every channel up to ``b-1`` — what the recovery line's sequence numbers say a
    checkpoint ``c<b-1>`` holds.  Taking it before the batch's first message rather than between
    two of them only moves it earlier, which breaks every Z-cycle the per-message rule breaks;
  * **bookkeeping with the state**: the instance's HMNR variables live beside its working state
    (executor-local ``i<i>.hmnr``) and travel with every checkpoint, in its commit record beside
    the state (the layout's ``extra``, :mod:`spark_integration.layouts.base`), so a restore brings
    them back with the state of the recovery line.

In this job the senders are the stateless source partitions: they never checkpoint and receive
nothing, so their piggybacks stay HMNR's initial values and no message can close a Z-cycle — the
rule never fires (``ForcedCheckpoints, 0``), as HMNR promises on an acyclic topology; what CIC
costs here is the bytes on every message.  A topology with cycles (instances that message each
other) is where forced checkpoints appear (see ``experiments/spark/checkmate.py``'s cyclic query).
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, Iterator

import numpy as np

from ...keyed_state import KeyedState
from ...layouts.base import Encoded, Manifest
from ...layouts.registry import layout_for
from ...operators import load_state
from ...settings import Settings, local_path
from ...store import participant_store
from ..base import CommitResult
from ..tokens import BatchPlan, CheckpointReport, InstanceStats
from ..uncoordinated.protocol import LogRestore, UncoordinatedProtocol, submit_checkpoint
from ..uncoordinated.recovery import line_for
from ..uncoordinated.schedule import InstanceSchedule
from ..uncoordinated.writer import read_durable
from .hmnr import Hmnr, Piggyback, piggyback_size

PB_COLUMN = "pb"

#: forced checkpoints this Python worker took per (job, instance, micro-batch), reported by the
#: same task's checkpoint step (a worker runs one task at a time)
_FORCED: dict[tuple[str, int, int], int] = {}


# ------------------------------------------------------------------- the senders' piggybacks
def sender_piggyback(parallelism: int, sender: int) -> bytes:
    """What sender ``sender`` piggybacks: a stateless source partition never checkpoints nor
    receives, so its bookkeeping is HMNR's initial one (process ``P + sender`` of ``2P``)."""
    h = Hmnr(2 * parallelism, parallelism + sender % parallelism)
    return h.send(0).to_bytes()


def piggyback_partition(parallelism: int, batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` body of the senders: every row gets the sender's piggyback."""
    import pyarrow as pa
    from pyspark import TaskContext

    pb = sender_piggyback(parallelism, TaskContext.get().partitionId())
    for rb in batches:
        n = rb.num_rows
        offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * len(pb)).tobytes())
        column = pa.BinaryArray.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(pb * n)])
        yield pa.RecordBatch.from_arrays(rb.columns + [column], names=rb.schema.names + [PB_COLUMN])


# -------------------------------------------------------------- the instance's bookkeeping
def _hmnr_path(settings: Settings, instance: int) -> str:
    return local_path(settings, f"i{instance}.hmnr")


def load_hmnr(settings: Settings, instance: int, n: int) -> Hmnr:
    with contextlib.suppress(FileNotFoundError):
        with open(_hmnr_path(settings, instance), "rb") as f:
            return Hmnr.from_bytes(f.read())
    return Hmnr(n, instance)


def save_hmnr(settings: Settings, instance: int, h: Hmnr) -> None:
    path = _hmnr_path(settings, instance)
    with open(f"{path}.{os.getpid()}.tmp", "wb") as f:
        f.write(h.to_bytes())
    os.replace(f"{path}.{os.getpid()}.tmp", path)


def checkpoint_of(settings: Settings, state: KeyedState, h: Hmnr) -> Encoded:
    """The state's checkpoint in the job's layout, carrying the bookkeeping at the checkpoint
    (see the module doc)."""
    return layout_for(settings).encode(state, extra=h.to_bytes())


def bookkeeping_of(manifest: Manifest) -> Hmnr | None:
    """The bookkeeping a checkpoint carries (None: a checkpoint without one)."""
    return Hmnr.from_bytes(manifest.extra) if manifest.extra else None


class CicProtocol(UncoordinatedProtocol):
    name = "cic"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.batch_seq = 0
        self.parallelism = 0
        self.basic = 0
        self.forced = 0
        self.piggybacked_messages = 0

    # -- driver side ------------------------------------------------------------------------
    def prepare(self, df: Any, plan: BatchPlan, parallelism: int) -> Any:
        from pyspark.sql.types import BinaryType, StructField, StructType

        self.batch_seq, self.parallelism = plan.batch_seq, parallelism
        schema = StructType(df.schema.fields + [StructField(PB_COLUMN, BinaryType())])
        with_pb = df.mapInArrow(functools.partial(piggyback_partition, parallelism), schema)
        return super().prepare(with_pb, plan, parallelism)

    def commit(self, token: InstanceSchedule | None, end_offset: int,
               stats: list[InstanceStats]) -> list[CommitResult]:
        for s in stats:
            self.forced += s.get("forced", 0)
            self.piggybacked_messages += s["events"]
            if token is not None and token.due(s["instance"], self.batch_seq):
                self.basic += 1
        return super().commit(token, end_offset, stats)

    def counters(self) -> dict[str, float]:
        return {"BasicCheckpoints": self.basic, "ForcedCheckpoints": self.forced,
                "PiggybackedMessages": self.piggybacked_messages,
                "PiggybackedBytes": self.piggybacked_messages * piggyback_size(2 * self.parallelism)}

    # -- instance side ----------------------------------------------------------------------
    def receive(self, settings: Settings, instance: int, batch_seq: int, state: KeyedState,
                batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow.compute as pc

        batches = list(batches)
        pbs: list[bytes] = []
        for rb in batches:
            if rb.num_rows and PB_COLUMN in rb.schema.names:
                pbs.extend(p for p in pc.unique(rb.column(PB_COLUMN)).to_pylist() if p not in pbs)
        if not pbs:
            return iter(batches)
        messages = [Piggyback.from_bytes(p) for p in pbs]
        h = load_hmnr(settings, instance, len(messages[0].ckpt))
        trial = Hmnr.from_bytes(h.to_bytes())  # the per-message rule, message by message
        if any(trial.receive(m) for m in messages):
            h.checkpoint(forced=True)  # of the state before the batch: c<batch_seq - 1>
            if batch_seq > 1:
                submit_checkpoint(settings, instance, batch_seq - 1, checkpoint_of(settings, state, h))
            key = (settings.job_id, instance, batch_seq)
            _FORCED[key] = _FORCED.get(key, 0) + 1
        for m in messages:
            h.merge(m)
        save_hmnr(settings, instance, h)
        return iter(batches)

    def checkpoint(self, settings: Settings, instance: int, state: KeyedState, token: InstanceSchedule,
                   batch_seq: int) -> CheckpointReport:
        if token.due(instance, batch_seq):  # a basic checkpoint, on this instance's own clock
            h = load_hmnr(settings, instance, 2 * max(self.parallelism, instance + 1))
            h.checkpoint()
            save_hmnr(settings, instance, h)
            submit_checkpoint(settings, instance, batch_seq, checkpoint_of(settings, state, h))
        report = read_durable(settings, instance)
        report["forced"] = _FORCED.pop((settings.job_id, instance, batch_seq), 0)
        return report

    def restore(self, settings: Settings, instance: int, token: LogRestore) -> KeyedState:
        local = load_state(settings, instance)
        state = super().restore(settings, instance, token)
        if local is not None and local.version >= token.batch_seq - 1:
            return state  # the working state (and its bookkeeping) survived
        # the bookkeeping of the recovery line's checkpoint comes back with its state
        with participant_store(settings, f"i{instance}") as store:
            found = {int(key[1:]): m for key, m in layout_for(settings).list(store, "c").items()}
        at = line_for(instance, sorted(found), token.senders, token.batch_seq - 1).line[instance]
        h = bookkeeping_of(found[at]) if at in found else None
        if h is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_hmnr_path(settings, instance))
        else:
            save_hmnr(settings, instance, h)
        return state
