"""``uncoordinated``: instances checkpoint on their own schedules; senders log their messages.

Write pattern (one module per part of the protocol):
  * the stage feeding the keyed stage (the source partitions, *senders*) **logs** every message
    before the shuffle (:mod:`..sender_log`: ``<job>/log-s<s>/d<i>/b<b>``, channel ``s -> i``,
    sequence number ``b``);
  * instance ``i`` checkpoints every ``interval`` micro-batches, staggered by ``i`` and moved by up
    to ``jitter`` micro-batches either way per round (:mod:`.schedule`: its own clock, not aligned
    with the others; CheckMate: every interval +- 1 s), **asynchronously** (:mod:`.writer`: the
    task hands a copy of its state to its worker's writer thread and goes on); the checkpoint
    ``<job>/i<i>/c<b>`` records the last sequence number processed on every channel (``b``: each
    channel carries one message per micro-batch);
  * every ``fullEvery``-th checkpoint of an instance is its whole state, the others increments
    over the one before, each taken once the one before is durable (:mod:`.chain`; ``fullEvery``
    1: every checkpoint whole, as CheckMate's);
  * log GC: once instance ``i``'s checkpoint at ``b`` is durable, senders delete ``d<i>/b<=b``.
Fencing of dead incarnations (:mod:`.fence`): recovery (``discard``, and ``restore`` from the
backend) bumps the instance's incarnation, after which no checkpoint of the old incarnation is in
flight and none can start: the instance's backend namespace is its own.

Recovery of a failed instance, **alone**: compute the recovery line (:mod:`.recovery`: the
checkpoint graph of the instance and the senders feeding it, then rollback propagation) over its
restorable checkpoints (those whose chain is whole), restore the line's checkpoint (its chain),
replay the logged range of every channel the line names (each sender's
``d<i>/b`` after what the checkpoint processed), and go on; instances that had already applied the
failed micro-batch skip it on the re-run (deduplication by sequence number).  The senders are
stateless and have logged every channel up to the micro-batch before the failed one, and the keyed
instances send nothing to each other, so the line is normally the latest durable checkpoint; one
that claims to have processed more than the senders logged (an orphan) is rolled back past and
counted as *useless* (``[SPARK], UselessCheckpoints``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from ...errors import SparkIntegrationError
from ...keyed_state import KeyedState, replay_log
from ...layouts.base import Encoded
from ...layouts.registry import layout_for
from ... import phases
from ...operators import armed_point, load_state, new_state
from ...orphans import References
from ...settings import Settings
from ...source import Tap
from ...store import participant_store
from ..base import CommitResult, Protocol, Recovery
from ..sender_log import SENDER_POINTS, LogPlan, collect_logs, log_key, log_tails, log_tap, sender_owner
from ..tokens import BatchPlan, CheckpointReport, InstanceStats, RestoreToken
from .chain import chains, forget_note, next_base, taken
from .fence import fence, new_incarnation
from .recovery import line_for, sender_id
from .schedule import InstanceSchedule
from .writer import WRITER, WriteRequest, checkpoint_bases, checkpoint_key, forget_durable, read_durable, read_failed


@dataclass(frozen=True)
class LogRestore(RestoreToken):
    """Re-run of micro-batch ``batch_seq``: each instance keeps, skips or recovers alone."""

    batch_seq: int  # the micro-batch being re-run
    senders: int  # channels into every instance


def submit_checkpoint(settings: Settings, instance: int, batch_seq: int, encoded: Encoded) -> None:
    """Hand ``encoded`` (instance ``instance``'s state after ``batch_seq``) to the writer thread,
    stamped with the instance's current incarnation (so a fenced-off writer cannot land it) and
    the fail point this task is armed for (so the writer can die at it)."""
    with fence(settings, instance) as f:
        incarnation = f.current
    WRITER.submit(WriteRequest(settings, instance, batch_seq, encoded, time.time(), incarnation, armed_point()))


class UncoordinatedProtocol(Protocol[InstanceSchedule, LogRestore]):
    name = "uncoordinated"
    sender_points = SENDER_POINTS

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.durable: dict[int, int] = {}  # instance -> latest durable checkpoint batch seen
        self.gc_done: dict[int, int] = {}  # instance -> log entries below this are deleted

    # -- driver side ------------------------------------------------------------------------
    def plan_checkpoint(self, batch_seq: int) -> InstanceSchedule:
        s = self.settings  # each instance decides on its own clock
        return InstanceSchedule(s.interval, s.jitter, s.job_id)

    def source_tap(self, plan: BatchPlan, parallelism: int) -> Tap:
        return log_tap(self.settings, LogPlan.of(plan, self._log_gc()), parallelism)

    def _log_gc(self) -> tuple[tuple[int, int, int], ...]:
        """The senders' log entries to delete now, taken as deleted: every channel's entries
        up to each instance's latest checkpoint the driver heard was durable."""
        gc = tuple((i, self.gc_done.get(i, 1), d + 1) for i, d in self.durable.items()
                   if d + 1 > self.gc_done.get(i, 1))
        for i, lo, hi in gc:
            self.gc_done[i] = hi
        return gc

    def references(self, parallelism: int) -> dict[str, References]:
        """Each instance's recovery line (:mod:`.recovery`, from the checkpoints in the store, as
        its restore computes it: the line's chain) and the senders' log entries after it."""
        layout = layout_for(self.settings)
        refs: dict[str, References] = {}
        lines: dict[int, int] = {}
        for i in range(parallelism):
            with participant_store(self.settings, f"i{i}") as store:
                found = chains(checkpoint_bases(store, layout))
            line = sorted(found)
            lines[i] = line_for(i, line, parallelism, line[-1] if line else 0).line[i]
            refs[f"i{i}"] = References(checkpoints=frozenset(
                checkpoint_key(b) for b in found.get(lines[i], [])))
        return {**refs, **log_tails(lines, parallelism)}

    def collect(self, parallelism: int) -> None:
        """What the next checkpoints and micro-batch would delete: each instance's checkpoints
        older than its latest restorable one and not in its chain (the writer's step), the log
        entries its durable checkpoints cover."""
        layout = layout_for(self.settings)
        for i in range(parallelism):
            with participant_store(self.settings, f"i{i}") as store:
                bases = checkpoint_bases(store, layout)
                found = chains(bases)
                if found:
                    latest = max(found)
                    for b in bases:
                        if b < latest and b not in found[latest]:
                            layout.delete(store, checkpoint_key(b))
                store.flush()
        collect_logs(self.settings, self._log_gc(), parallelism)

    def commit(self, token: InstanceSchedule | None, end_offset: int,
               stats: list[InstanceStats]) -> list[CommitResult]:
        out = []
        for s in stats:
            if s["durable"] > self.durable.get(s["instance"], 0):
                self.durable[s["instance"]] = s["durable"]
                out.append(CommitResult(s["ckpt_ms"], s["ckpt_bytes"], s["backend_ops"]))
        return out

    def recover(self, failed_batch_start: int, batch_seq: int, parallelism: int) -> Recovery[LogRestore]:
        # no rewind: each instance decides alone (keep, skip as duplicate, or restore + log replay)
        return Recovery(restore=LogRestore(batch_seq, parallelism), replay_from=failed_batch_start)

    # -- instance side ----------------------------------------------------------------------
    def checkpoint(self, settings: Settings, instance: int, state: KeyedState, token: InstanceSchedule,
                   batch_seq: int) -> CheckpointReport:
        durable = read_durable(settings, instance)
        if token.due(instance, batch_seq):  # this instance's own clock
            base = next_base(settings, instance, batch_seq, durable.get("durable", 0),
                             read_failed(settings, instance))
            if base is not None:  # None: the one before is still being written (see .chain)
                encoded = layout_for(settings).encode(state, only_dirty=base > 0)
                submit_checkpoint(settings, instance, batch_seq, dataclasses.replace(encoded, base=base))
                taken(settings, instance, batch_seq, base)
                state.dirty[:] = False
        return durable

    def discard(self, settings: Settings, instance: int, batch_seq: int) -> None:
        """A cancelled task may have checkpointed ``batch_seq`` from a partial input: fence its
        incarnation off (its writer can no longer write, nor is it writing), then drop the record
        and the durable note that names it (the writer kept the checkpoint before it)."""
        new_incarnation(settings, instance)
        with participant_store(settings, f"i{instance}") as store:
            layout_for(settings).delete(store, checkpoint_key(batch_seq))
            store.flush()
        forget_durable(settings, instance, batch_seq)
        forget_note(settings, instance)  # the chain it would have gone on from may be this one

    def restore(self, settings: Settings, instance: int, token: LogRestore) -> KeyedState:
        local = load_state(settings, instance)
        if local is not None and local.version >= token.batch_seq - 1:
            return local  # intact (applies the batch) or already applied it (skipped as duplicate)
        new_incarnation(settings, instance)  # before reading: the dead one's writes are over
        forget_note(settings, instance)  # the restored state's changes are in no checkpoint
        state = new_state(settings)
        layout = layout_for(settings)
        with participant_store(settings, f"i{instance}") as store:
            found = {int(key[1:]): m for key, m in layout.list(store, "c").items()}
            restorable = chains({b: m.base for b, m in found.items()})
            line = line_for(instance, sorted(restorable), token.senders, token.batch_seq - 1)
            at = line.line[instance]
            for b in restorable.get(at, []):  # the full checkpoint, then the increments in order
                layout.load(store, found[b], state)
        state.version = at
        state.useless = line.useless_count
        for sender in range(token.senders):  # replay each channel s -> instance the line names
            after, upto = line.replay.get((sender_id(sender), instance), (at, at))
            names = [log_key(instance, b) for b in range(after + 1, upto + 1)]
            with participant_store(settings, sender_owner(sender)) as store:
                blobs = store.get_many(names) if names else {}
            missing = [name for name in names if name not in blobs]
            if missing:  # a sender logs every destination every micro-batch, empty or not
                raise SparkIntegrationError(
                    f"uncoordinated: instance {instance} of job {settings.job_id}: its recovery line "
                    f"(checkpoint {at}) needs sender {sender}'s messages {', '.join(missing)}, which its log "
                    f"no longer holds; restoring without them would lose their events")
            with phases.replaying():
                for name in names:
                    replay_log(state, blobs[name])
        state.version = token.batch_seq - 1
        state.dirty[:] = False
        return state
