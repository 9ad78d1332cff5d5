"""``logio``: LOG.io's log-based protocol — every failed instance recovers alone, nothing blocks.

Mapping of LOG.io's tables onto this job (senders = source partitions, receivers = the keyed
instances; an *event* is one sender's message to one instance in one micro-batch, so its id is
the per-output-port sequence number ``b`` = the micro-batch):

* EVENT_LOG/EVENT_DATA of the senders: sender ``s`` **logs** its output event to instance ``i``
  (``log-s<s>/d<i>/b<b>``, the keys) *before* it is shuffled — the same sender logging as
  ``uncoordinated`` (:mod:`.sender_log`); logged and not yet acknowledged =
  status *undone, no Input Set*.
* Acknowledgement: instance ``i`` durably assigns the events it receives (``(s, b)`` for every
  sender ``s``) to its Input Set ``b``: one put of ``i<i>/ack/b<b>``, written while the events
  arrive and are applied to the working state, and durable before the instance commits, reports
  or reaches any fail point (:class:`~spark_integration.operators.Acknowledgement`: applying
  changes nothing but working state a crash loses, so no step that can be observed finds it
  otherwise than when the put came first).
* Commit: after processing, **one atomic commit per Input Set**: a checkpoint ``i<i>/c/b<b>`` in
  the job's layout (:mod:`spark_integration.layouts`) holding the Input Set's output events (the
  new counts of the keys it touched, output port sequence number ``b``), the operator state (those
  same pairs are its delta; every ``fullEvery x interval`` Input Sets (:func:`full_span`), and at
  every recovery commit, the full state instead), and — in its commit record, as the layout's
  ``extra`` — the per-input-port high-water marks and the *done* marks (the Input Set's event
  ids).  The commit is its commit record's ONE ``put``, which every backend makes atomic on its
  own terms — an indexed_fs record with its CRC, a Redis ``SET``, an HBase row, a MinIO object —
  written after the state's pieces are durable and carrying its own CRC-32, so a torn or corrupt
  record, or pieces without one, are never taken as committed (the Input Set then stays
  acknowledged-undone and is re-processed).  One record instead of a per-backend transaction
  (Redis MULTI, HBase row mutations, ...) keeps the protocol identical on every backend; its cost
  is rewriting the output pairs as state, which for a keyed count is the same bytes.

Recovery of a failed instance ``i``, **alone** (its neighbours keep their working state):
restore the latest full state + the later commit deltas; **re-process** the acknowledged but
undone Input Sets from the senders' logs; **resend** the logged events nobody acknowledged yet
(the failed batch's own events, read from the log, not recomputed); commit each of them.

The failed micro-batch is not fed again (``Recovery.from_log``) when the senders' log holds all
of it: the driver then runs only the P instances, with no input — no source read, no logging
stage, no shuffle — and each brings itself to the end of the batch from the backend.  The log
holds all of it once any instance acknowledged the batch: a keyed task starts only after every
sender task of the batch finished, and a sender task finishes only once its entries are put and
flushed (:mod:`.sender_log`, "When a message is logged").  (Without that evidence — the batch failed before any instance acknowledged it, or
every acknowledgement was collected by a full commit — the batch is re-run from the source as a
whole, and an instance that already processed it drops the live delivery by high-water mark.)
A neighbour's working state at the batch counts as processed only if it applied as many events
as the log holds for it: a task of the failed job cancelled by Spark can end its input early and
still save and commit a partial batch, which is discarded and recovered like a failed instance.

GC of done events: once every instance committed micro-batch ``b`` (the driver saw the batch
succeed), the senders delete their log entries up to ``b``; an instance writing a full-state
commit deletes its older commit and acknowledgement records.

Fail points: ``spark.logio.before_log_commit`` (the Input Set acknowledged and processed, its
commit record not written) and ``spark.worker.during_checkpoint_write`` (the commit record put, not
flushed, older records not collected).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from backends import failpoints

from .. import phases
from ..errors import SparkIntegrationError
from ..keyed_state import KeyedState, replay_log
from ..layouts.base import Layout, Manifest
from ..layouts.registry import layout_for
from ..operators import DURING_CHECKPOINT_WRITE, load_state, reach, state_class
from ..orphans import References
from ..settings import Settings
from ..source import Tap
from ..store import Scoped, participant_store
from .base import CommitResult, Protocol, Recovery
from .sender_log import SENDER_POINTS, LogPlan, collect_logs, log_key, log_tails, log_tap, sender_owner
from .tokens import BatchPlan, CheckpointReport, CheckpointToken, InstanceStats, RestoreToken

BEFORE_LOG_COMMIT = failpoints.declare(
    "spark.logio.before_log_commit",
    "a logio instance dies with its Input Set acknowledged and processed, before its atomic commit")


def _ack_key(b: int) -> str:
    return f"ack/b{b:010d}"


def _commit_key(b: int) -> str:
    return f"c/b{b:010d}"


@dataclass(frozen=True)
class InputSetToken(CheckpointToken):
    """Commit this micro-batch's Input Set."""

    full: bool  # commit the full state (else the Input Set's outputs = the state delta)


@dataclass(frozen=True)
class LogioRestore(RestoreToken):
    """Re-run of micro-batch ``batch_seq``: a failed instance recovers alone (module doc)."""

    batch_seq: int  # the micro-batch being re-run
    senders: int
    full_every: int
    #: a ``from_log`` re-run: events each instance gets in ``batch_seq``, as the senders logged
    #: them (empty: the batch is fed again from the source)
    logged: tuple[int, ...] = ()


def full_span(settings: Settings) -> int:
    """Input Sets from one full commit to the next: ``fullEvery`` checkpoint intervals.

    LOG.io commits every Input Set (every micro-batch), whatever ``interval`` says, so counting
    ``fullEvery`` in Input Sets would rewrite the whole state ``interval`` times as often as
    ``coordinated`` does under the same settings (its full snapshot comes every ``fullEvery``
    epochs of ``interval`` micro-batches).  Counted in intervals, both protocols rewrite the state
    once per ``fullEvery x interval`` micro-batches, and what differs between them is what the
    protocols themselves do: a commit per Input Set against one per epoch."""
    return settings.full_every * settings.interval


def commit_input_set(store: Scoped, layout: Layout, state: KeyedState, b: int, senders: int, full: bool,
                     on_put: Callable[[], None] | None = None) -> tuple[int, int]:
    """The atomic step: outputs + state + high-water marks + done marks, committed by one put
    (the checkpoint's commit record, :mod:`spark_integration.layouts.base`).

    Returns (record bytes, number of output pairs).  A full commit also garbage-collects the
    instance's older commit and acknowledgement records (everything they describe is done).
    """
    outputs = int(np.count_nonzero(state.dirty))
    meta = {"inset": b, "full": full, "hwm": {str(s): b for s in range(senders)},
            "done": [[s, b] for s in range(senders)], "outputs": outputs}
    extra = json.dumps(meta, separators=(",", ":")).encode()
    with layout.encoded(state, only_dirty=not full, extra=extra) as encoded:
        size = layout.write(store, _commit_key(b), encoded)
    if on_put is not None:  # a fail point between the put and the flush
        on_put()
    store.flush()
    if full:
        collect_before(store, layout, b)
    state.dirty[:] = False
    return size, outputs


def collect_before(store: Scoped, layout: Layout, b: int) -> None:
    """A full commit's GC: the instance's commit records before Input Set ``b``'s and its
    acknowledgements up to ``b`` (everything they describe is done)."""
    for k in [k for k, _ in store.scan("c/") if k < _commit_key(b)]:
        layout.delete(store, k)
    for k in [k for k, _ in store.scan("ack/") if k <= _ack_key(b)]:
        store.delete(k)


def commit_chain(store: Scoped, layout: Layout) -> tuple[list[Manifest], int]:
    """The commits a restore loads (the latest full one and the deltas after it, up to a gap)
    and the last Input Set they cover (0: none)."""
    records = [(json.loads(m.extra), m) for m in layout.list(store, "c/").values()]
    fulls = [n for n, (meta, _) in enumerate(records) if meta["full"]]
    chain, head = [], 0
    for meta, manifest in records[fulls[-1] if fulls else 0:]:
        if meta["inset"] != head + 1 and head and not meta["full"]:
            break  # a gap: a later delta cannot be applied without the missing one
        chain.append(manifest)
        head = meta["inset"]
    return chain, head


def committed_state(store: Scoped, layout: Layout,
                    state_cls: type[KeyedState] = KeyedState) -> tuple[KeyedState, int]:
    """The state after the latest valid commit (latest full + later deltas) and its Input Set."""
    chain, head = commit_chain(store, layout)
    state = state_cls()
    for manifest in chain:
        layout.load(store, manifest, state)
    state.version = head
    state.dirty[:] = False
    return state, head


class LogioProtocol(Protocol[InputSetToken, LogioRestore]):
    name = "logio"
    sender_points = SENDER_POINTS

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.done_below = 1  # sender log entries below this micro-batch are deleted
        self.last_ok = 0  # the last micro-batch every instance committed
        #: source partitions feeding every instance; set by prepare() before the protocol is
        #: pickled into the keyed stage's tasks
        self.senders = 2

    # -- driver side ------------------------------------------------------------------------
    def plan_checkpoint(self, batch_seq: int) -> InputSetToken:
        return InputSetToken((batch_seq - 1) % full_span(self.settings) == 0)

    def source_tap(self, plan: BatchPlan, parallelism: int) -> Tap:
        self.senders = parallelism
        return log_tap(self.settings, LogPlan.of(plan, self._log_gc(parallelism)), parallelism)

    def _log_gc(self, parallelism: int) -> tuple[tuple[int, int, int], ...]:
        """The senders' log entries to delete now, taken as deleted: the events of the Input
        Sets every instance committed."""
        gc: tuple[tuple[int, int, int], ...] = ()
        if self.last_ok + 1 > self.done_below:  # events of committed Input Sets are done
            gc = tuple((d, self.done_below, self.last_ok + 1) for d in range(parallelism))
            self.done_below = self.last_ok + 1
        return gc

    def references(self, parallelism: int) -> dict[str, References]:
        """Each instance's commit chain (what its restore loads), its acknowledgements after
        the chain (the Input Sets a recovery re-processes) and the senders' log entries after it."""
        layout = layout_for(self.settings)
        refs: dict[str, References] = {}
        heads: dict[int, int] = {}
        for i in range(parallelism):
            with participant_store(self.settings, f"i{i}") as store:
                chain, heads[i] = commit_chain(store, layout)
            refs[f"i{i}"] = References(checkpoints=frozenset(m.name for m in chain),
                                       tails=(("ack/", _ack_key(heads[i] + 1)),))
        return {**refs, **log_tails(heads, parallelism)}

    def collect(self, parallelism: int) -> None:
        """What the next micro-batch and full commits would delete: the log entries of Input
        Sets every instance committed, and before each instance's latest full commit its older
        commits and acknowledgements (a full commit's GC, which later deltas do not repeat)."""
        layout = layout_for(self.settings)
        for i in range(parallelism):
            with participant_store(self.settings, f"i{i}") as store:
                chain, _ = commit_chain(store, layout)
                first = json.loads(chain[0].extra) if chain else {"full": False}
                if first["full"]:
                    collect_before(store, layout, first["inset"])
                    store.flush()
        collect_logs(self.settings, self._log_gc(parallelism), parallelism)

    def commit(self, token: InputSetToken | None, end_offset: int,
               stats: list[InstanceStats]) -> list[CommitResult]:
        # the job succeeded: every instance committed this micro-batch (live, at recovery, or
        # earlier — a duplicate), so its events are done everywhere
        self.last_ok = max(self.last_ok, max((s["durable"] for s in stats), default=0))
        timed = [s for s in stats if s["ckpt_start"] > 0]
        if not timed:
            return []
        start = min(s["ckpt_start"] for s in timed)
        end = max(s["ckpt_start"] + s["ckpt_ms"] / 1e3 for s in timed)
        return [CommitResult(checkpoint_ms=(end - start) * 1e3, bytes=sum(s["ckpt_bytes"] for s in stats),
                             ops=sum(s["backend_ops"] for s in stats))]

    def recover(self, failed_batch_start: int, batch_seq: int, parallelism: int) -> Recovery[LogioRestore]:
        # no rewind of anyone: each instance decides alone (keep, or recover from the log)
        logged = self.logged_batch(batch_seq, parallelism)
        return Recovery(restore=LogioRestore(batch_seq, parallelism, self.settings.full_every, logged or ()),
                        replay_from=failed_batch_start, from_log=logged is not None)

    def logged_batch(self, b: int, parallelism: int) -> tuple[int, ...] | None:
        """Events per instance in micro-batch ``b`` as the senders logged them, if the log holds
        all of ``b`` (an instance acknowledged it: see the module doc); None otherwise."""
        acked = False
        for i in range(parallelism):
            with participant_store(self.settings, f"i{i}") as store:
                acked = store.get(_ack_key(b)) is not None
            if acked:
                break
        if not acked:
            return None
        columns = len(state_class(self.settings).COLUMNS)
        counts = [0] * parallelism
        names = [log_key(d, b) for d in range(parallelism)]
        for sender in range(parallelism):
            with participant_store(self.settings, sender_owner(sender)) as log:
                found = log.get_many(names)
            if len(found) < parallelism:
                return None
            for d, name in enumerate(names):
                counts[d] += len(found[name]) // (8 * columns)
        return tuple(counts)

    # -- instance side ----------------------------------------------------------------------
    def acknowledge(self, settings: Settings, instance: int, batch_seq: int) -> int:
        """Assign this micro-batch's events (one per sender) to Input Set ``batch_seq``, durably."""
        ack = json.dumps({"inset": batch_seq, "events": [[s, batch_seq] for s in range(self.senders)]})
        with participant_store(settings, f"i{instance}") as store:
            store.put(_ack_key(batch_seq), ack.encode())
            store.flush()
            return store.ops

    def discard(self, settings: Settings, instance: int, batch_seq: int) -> None:
        """A cancelled task committed Input Set ``batch_seq`` from a partial input: not a commit."""
        with participant_store(settings, f"i{instance}") as store:
            layout_for(settings).delete(store, _commit_key(batch_seq))
            store.flush()

    def checkpoint(self, settings: Settings, instance: int, state: KeyedState, token: InputSetToken,
                   batch_seq: int) -> CheckpointReport:
        start = time.time()
        t = time.perf_counter()
        reach(settings, instance, BEFORE_LOG_COMMIT)
        with participant_store(settings, f"i{instance}") as store:
            size, _ = commit_input_set(store, layout_for(settings), state, batch_seq, self.senders, token.full,
                                       on_put=lambda: reach(settings, instance, DURING_CHECKPOINT_WRITE))
            ops = store.ops
        return {"ckpt_start": start, "ckpt_ms": (time.perf_counter() - t) * 1e3, "ckpt_bytes": size,
                "backend_ops": ops, "durable": batch_seq}

    def restore(self, settings: Settings, instance: int, token: LogioRestore) -> KeyedState:
        local = load_state(settings, instance)
        if token.logged:  # a from_log re-run: nothing else brings this instance its events
            b = token.batch_seq
            if local is not None and (local.version > b or (
                    local.version == b and local.last_events == token.logged[instance])):
                local.replayed = 0
                return local  # a neighbour that processed the whole batch: intact
            if local is not None:  # at b - 1, or a partial b: a cancelled task's commit is not one
                self.discard(settings, instance, b)
            with participant_store(settings, f"i{instance}") as store:
                return recover_instance(settings, store, instance, token)
        with participant_store(settings, f"i{instance}") as store:
            heads = list(layout_for(settings).list(store, "c/"))
            head = int(heads[-1][3:]) if heads else 0
            if local is not None and local.version >= max(head, token.batch_seq - 1):
                local.replayed = 0
                return local  # a neighbour: intact, or already processed the batch (duplicate)
            return recover_instance(settings, store, instance, token)


def recover_instance(settings: Settings, store: Scoped, instance: int, token: LogioRestore) -> KeyedState:
    """Bring a failed instance back from the backend alone (see the module docstring)."""
    layout = layout_for(settings)
    state, head = committed_state(store, layout, state_class(settings))
    acked = {int(k[5:]) for k, _ in store.scan("ack/")}
    for b in range(head + 1, token.batch_seq + 1):
        names = [log_key(instance, b)]
        chunks = []
        for sender in range(token.senders):
            with participant_store(settings, sender_owner(sender)) as log:
                blob = log.get(names[0])
            if blob is None:
                break
            chunks.append(blob)
        if len(chunks) < token.senders:
            if b < token.batch_seq or token.logged:
                raise SparkIntegrationError(
                    f"logio: instance {instance} of job {settings.job_id} acknowledged Input Set {b} "
                    f"but a sender's log entry {names[0]} is gone; the backend lost data")
            break  # not logged yet: the live delivery of the re-run batch brings it
        if b not in acked:  # resend of logged, unacknowledged events: acknowledge them now
            store.put(_ack_key(b), json.dumps({"inset": b, "events": [[s, b] for s in range(token.senders)]}).encode())
        # re-process the Input Set
        with phases.replaying():
            state.last_events = sum(replay_log(state, blob) for blob in chunks)
        commit_input_set(store, layout, state, b, token.senders, full=True)
        state.version = b
    return state
