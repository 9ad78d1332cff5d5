"""``coordinated``: epochs every ``interval`` micro-batches, committed by the driver.

A micro-batch boundary is a natural barrier: a micro-batch ends only when every instance has
processed all of its input, so no marker alignment is needed (the Spark analogue of Flink's
aligned barriers at ``interval`` micro-batches).

Write pattern, epoch ``e``:
  * each instance ``i`` writes checkpoint ``<job>/i<i>/e<e>`` in the job's layout
    (:mod:`spark_integration.layouts`): the keys it changed since epoch ``e-1`` (incremental), or
    all its keys when ``e`` is a full-snapshot epoch (1, 1+F, 1+2F, ... with ``F = fullEvery``);
    the write is durable when the task ends;
  * only after **all** instances' tasks succeeded, the driver writes ``<job>/driver/commit/e<e>``
    with the source offset after the epoch — the epoch exists from then on;
  * once a full-snapshot epoch is committed, older epochs (instance blobs and commit records) are
    deleted; instances delete their own blobs at their next checkpoint (no shared locks).
Recovery: read the last commit record, roll **every** instance back to it (its full snapshot plus
the increments after it) and replay the source from the recorded offset.  The commit records are
all a new driver needs to resume a job whose driver died (:meth:`CoordinatedProtocol.resume`).

Fail points: the instances reach ``spark.worker.during_checkpoint_write`` between the put of their
epoch blob and its flush; the driver reaches ``spark.driver.during_commit`` with the commit record
put and the older epochs' records not yet deleted.  An epoch whose commit record was lost with the
driver is not committed: its blobs are rewritten when the resumed job reaches it again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from backends import failpoints

from ..errors import SparkIntegrationError
from ..keyed_state import KeyedState
from ..layouts.base import Layout
from ..layouts.registry import layout_for
from ..operators import DURING_CHECKPOINT_WRITE, new_state, reach
from ..settings import Settings
from ..orphans import References
from ..store import Scoped, participant_store
from .base import CommitResult, Protocol, Recovery
from .tokens import CheckpointReport, CheckpointToken, InstanceStats, RestoreToken

_COMMIT = "commit/"

DURING_COMMIT = failpoints.declare(
    "spark.driver.during_commit",
    "the driver dies with coordinated's commit record of an epoch put, older records not deleted")


def _epoch_key(epoch: int) -> str:
    return f"e{epoch:010d}"


def _drop_epochs(store: Scoped, layout: Layout, lo: int, hi: int) -> None:
    """An instance's GC: delete its epochs ``[lo, hi)``."""
    for e in range(lo, hi):
        layout.delete(store, _epoch_key(e))


def _drop_commits(store: Scoped, lo: int, hi: int) -> None:
    """The driver's GC: delete the commit records of epochs ``[lo, hi)``."""
    for e in range(lo, hi):
        store.delete(_COMMIT + _epoch_key(e))


@dataclass(frozen=True)
class EpochCheckpoint(CheckpointToken):
    """Write epoch ``epoch`` (a full snapshot or the keys changed since the previous epoch)."""

    epoch: int
    full: bool
    gc_from: int  # instance deletes its epochs [gc_from, gc_below)
    gc_below: int


@dataclass(frozen=True)
class EpochRestore(RestoreToken):
    """Roll back to committed epoch ``epoch``: its full snapshot ``base`` plus the increments."""

    epoch: int  # 0: nothing committed yet -> empty state
    base: int  # the full-snapshot epoch the chain starts from


class CoordinatedProtocol(Protocol[EpochCheckpoint, EpochRestore]):
    name = "coordinated"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.gc_done = 1  # every epoch below this is deleted everywhere
        self.last_committed_epoch = 0

    def base_of(self, epoch: int) -> int:
        return epoch - (epoch - 1) % self.settings.full_every

    # -- driver side ------------------------------------------------------------------------
    def plan_checkpoint(self, batch_seq: int) -> EpochCheckpoint | None:
        if batch_seq % self.settings.interval:
            return None
        epoch = batch_seq // self.settings.interval
        last = self.last_committed_epoch
        gc_below = self.base_of(last) if last else 1
        return EpochCheckpoint(epoch, self.base_of(epoch) == epoch, self.gc_done, max(self.gc_done, gc_below))

    def commit(self, token: EpochCheckpoint | None, end_offset: int,
               stats: list[InstanceStats]) -> list[CommitResult]:
        if token is None:
            return []
        record = {"epoch": token.epoch, "end_offset": end_offset, "base": self.base_of(token.epoch),
                  "instances": len(stats), "time": time.time()}
        with participant_store(self.settings, "driver") as store:
            store.put(_COMMIT + _epoch_key(token.epoch), json.dumps(record).encode())
            committed_at = time.time()
            failpoints.hit(DURING_COMMIT)
            # commit records below the instances' GC bound are no longer needed either
            _drop_commits(store, token.gc_from, token.gc_below)
            ops = store.ops
        self.last_committed_epoch = token.epoch
        self.gc_done = token.gc_below
        starts = [s["ckpt_start"] for s in stats if s["ckpt_start"] > 0]
        return [CommitResult(
            checkpoint_ms=(committed_at - min(starts)) * 1e3 if starts else 0.0,
            bytes=sum(s["ckpt_bytes"] for s in stats) + len(json.dumps(record)),
            ops=ops + sum(s["backend_ops"] for s in stats),
        )]

    def recover(self, failed_batch_start: int, batch_seq: int, parallelism: int) -> Recovery[EpochRestore]:
        with participant_store(self.settings, "driver") as store:
            records = list(store.scan(_COMMIT))
        if not records:
            return Recovery(restore=EpochRestore(0, 0), replay_from=0)
        record = json.loads(records[-1][1])
        self.last_committed_epoch = record["epoch"]
        return Recovery(restore=EpochRestore(record["epoch"], record["base"]), replay_from=record["end_offset"])

    def resume(self, parallelism: int) -> tuple[Recovery[EpochRestore], int]:
        """A new driver of a job whose driver died: the last committed epoch, and the micro-batch
        it ended (the resumed job numbers its micro-batches on from there)."""
        with participant_store(self.settings, "driver") as store:
            oldest = [k for k, _ in store.scan(_COMMIT)][:1]
        recovery = self.recover(0, 0, parallelism)
        # the dead driver's GC may not have finished: collect again from its oldest record on
        self.gc_done = int(oldest[0][len(_COMMIT) + 1:]) if oldest else 1
        return recovery, recovery.restore.epoch * self.settings.interval

    def references(self, parallelism: int) -> dict[str, References]:
        """The last committed epoch's chain (its full snapshot and the increments after it) in
        every instance, and the chain's commit records; nothing before the first commit."""
        last = self.last_committed_epoch
        names = frozenset(_epoch_key(e) for e in range(self.base_of(last), last + 1)) if last else frozenset()
        return {"driver": References(keys=frozenset(_COMMIT + n for n in names)),
                **{f"i{i}": References(checkpoints=names) for i in range(parallelism)}}

    def collect(self, parallelism: int) -> None:
        """What the next epoch's checkpoints and commit would delete: the epochs (and their
        commit records) before the last committed epoch's full snapshot."""
        below = self.base_of(self.last_committed_epoch) if self.last_committed_epoch else 1
        if below <= self.gc_done:
            return
        layout = layout_for(self.settings)
        for i in range(parallelism):
            with participant_store(self.settings, f"i{i}") as store:
                _drop_epochs(store, layout, self.gc_done, below)
                store.flush()
        with participant_store(self.settings, "driver") as store:
            _drop_commits(store, self.gc_done, below)
        self.gc_done = below

    # -- instance side ----------------------------------------------------------------------
    def checkpoint(self, settings: Settings, instance: int, state: KeyedState, token: EpochCheckpoint,
                   batch_seq: int) -> CheckpointReport:
        start = time.time()
        t = time.perf_counter()
        layout = layout_for(settings)
        with layout.encoded(state, only_dirty=not token.full) as encoded, \
                participant_store(settings, f"i{instance}") as store:
            layout.write(store, _epoch_key(token.epoch), encoded)
            reach(settings, instance, DURING_CHECKPOINT_WRITE)
            store.flush()
            _drop_epochs(store, layout, token.gc_from, token.gc_below)
            ops = store.ops
        state.dirty[:] = False
        return {"ckpt_start": start, "ckpt_ms": (time.perf_counter() - t) * 1e3,
                "ckpt_bytes": encoded.nbytes, "backend_ops": ops}

    def restore(self, settings: Settings, instance: int, token: EpochRestore) -> KeyedState:
        state = new_state(settings)
        if token.epoch == 0:
            return state
        names = [_epoch_key(e) for e in range(token.base, token.epoch + 1)]
        layout = layout_for(settings)
        with participant_store(settings, f"i{instance}") as store:
            found = layout.find_many(store, names)
            missing = [n for n in names if n not in found]
            if missing:
                raise SparkIntegrationError(
                    f"coordinated: instance {instance} of job {settings.job_id} misses checkpoint(s) "
                    f"{', '.join(missing)} of committed epoch {token.epoch}; the backend lost data"
                )
            for name in names:  # full snapshot first, then the increments in epoch order
                layout.load(store, found[name], state)
        state.dirty[:] = False
        return state
