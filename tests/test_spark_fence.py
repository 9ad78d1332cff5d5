"""The uncoordinated protocol's incarnation fence: a dead incarnation's writer never writes.

Real parts: the protocol's own writer thread and queue, a real indexed_fs backend, real ``flock``s.
The race being closed: a cancelled task of a failed job has handed a checkpoint built from partial
input to the writer thread of its (still alive, reused) Python worker; recovery then discards the
instance's record of that batch and restores — and the writer must not write afterwards.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from spark_integration.conf import PREFIX, from_conf
from spark_integration.layouts.base import Encoded
from spark_integration.layouts.registry import layout_class, layout_for
from spark_integration.operators import KeyedState
from spark_integration.protocols.uncoordinated.fence import fence, new_incarnation
from spark_integration.protocols.uncoordinated.protocol import LogRestore, UncoordinatedProtocol
from spark_integration.protocols.uncoordinated.schedule import InstanceSchedule
from spark_integration.protocols.uncoordinated.writer import WRITER, WriteRequest, read_durable
from spark_integration.store import participant_store


@pytest.fixture
def settings(tmp_path):
    return from_conf({PREFIX + "protocol": "uncoordinated", PREFIX + "backend": "indexed_fs",
                      PREFIX + "backend.path": str(tmp_path / "store"), PREFIX + "stateDir": str(tmp_path / "work"),
                      PREFIX + "jobId": "fence"})


def checkpoints(settings, instance=0) -> list[str]:
    with participant_store(settings, f"i{instance}") as store:
        return [k for k, _ in store.scan("c")]


def wait_for(stat: str, before: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while getattr(WRITER.stats, stat) <= before:
        assert time.monotonic() < deadline, f"the writer did not get to the item ({WRITER.stats})"
        time.sleep(0.01)


def blob() -> Encoded:
    state = KeyedState()
    state.set(np.array([1, 2]), np.array([10, 20]))
    return layout_class("changelog")(0).encode(state)


def test_live_incarnation_writes(settings):
    written = WRITER.stats.written
    with fence(settings, 0) as f:
        current = f.current
    WRITER.submit(WriteRequest(settings, 0, 3, blob(), time.time(), current))
    wait_for("written", written)
    assert checkpoints(settings) == ["c0000000003"]
    assert read_durable(settings, 0)["durable"] == 3


def test_write_in_flight_is_finished_or_fenced_before_recovery_goes_on(settings):
    """The zombie's item reaches the writer while recovery holds the fence: the writer waits,
    recovery bumps the incarnation, and the item is then dropped — never written after."""
    old = new_incarnation(settings, 0)
    fenced = WRITER.stats.fenced
    recovery = fence(settings, 0, exclusive=True)
    f = recovery.__enter__()  # recovery has started
    WRITER.submit(WriteRequest(settings, 0, 5, blob(), time.time(), old))  # the dead task's checkpoint
    time.sleep(0.3)
    assert WRITER.stats.fenced == fenced  # the writer is blocked on the fence...
    assert checkpoints(settings) == []  # ...and has written nothing
    assert f.bump() == old + 1
    recovery.__exit__(None, None, None)
    wait_for("fenced", fenced)
    assert checkpoints(settings) == [] and read_durable(settings, 0) == {}


def test_discard_fences_the_cancelled_task_and_restore_ignores_it(settings):
    """The whole path: zombie checkpoint queued, driver-side recovery runs discard + restore,
    then the zombie's writer gets the item: nothing lands, the restore used the good checkpoint."""
    proto = UncoordinatedProtocol(settings)
    good = KeyedState()
    good.apply(np.array([1, 1, 2]))
    proto.checkpoint(settings, 0, good, InstanceSchedule(1), 4)  # batch 4: a real checkpoint
    deadline = time.monotonic() + 10
    while checkpoints(settings) != ["c0000000004"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with fence(settings, 0) as f:
        zombie_incarnation = f.current
    partial = KeyedState()
    partial.apply(np.array([1]))  # batch 5 from a partial input, not yet handed to the writer

    proto.discard(settings, 0, 5)  # the re-run's discard_zombie_work
    state = proto.restore(settings, 0, LogRestore(batch_seq=5, senders=0))
    assert state.counts[1] == 2 and state.counts[2] == 1

    fenced = WRITER.stats.fenced
    WRITER.submit(WriteRequest(settings, 0, 5, layout_for(settings).encode(partial), time.time(), zombie_incarnation))
    wait_for("fenced", fenced)
    assert checkpoints(settings) == ["c0000000004"]  # the GC of older records did not run either


def test_a_restore_whose_recovery_line_needs_a_message_the_log_lost_fails_loudly(settings):
    """The line restores checkpoint 2 and replays channel 0 -> 0 over batches 3 and 4; the log
    holds batch 3 only (a sender writes every destination every batch, empty or not), so a restore
    without batch 4 would silently lose its events: it must fail, naming what is missing."""
    from spark_integration.errors import SparkIntegrationError
    from spark_integration.keyed_state import encode_log
    from spark_integration.protocols.sender_log import log_key, sender_owner

    proto = UncoordinatedProtocol(settings)
    state = KeyedState()
    state.apply(np.array([1, 2]))
    written = WRITER.stats.written
    proto.checkpoint(settings, 0, state, InstanceSchedule(1), 2)
    wait_for("written", written)
    assert checkpoints(settings) == ["c0000000002"]
    with participant_store(settings, sender_owner(0)) as store:
        store.put(log_key(0, 3), encode_log([np.array([1, 1])]))
        store.flush()
    lost = r"instance 0 of job \S+: .*sender 0's messages d0/b0000000004, which its log no longer holds"
    with pytest.raises(SparkIntegrationError, match=lost):
        proto.restore(settings, 0, LogRestore(batch_seq=5, senders=1))
    with participant_store(settings, sender_owner(0)) as store:  # with it, the line replays both
        store.put(log_key(0, 4), encode_log([np.array([2])]))
        store.flush()
    restored = proto.restore(settings, 0, LogRestore(batch_seq=5, senders=1))
    assert restored.counts[1] == 3 and restored.counts[2] == 2 and restored.version == 4


def test_a_cancelled_tasks_checkpoint_keeps_the_one_before_it_and_the_log_after_it(settings):
    """A job fails; a cancelled task of it checkpoints batch 4 from a partial input and its writer
    makes that durable.  The writer keeps checkpoint 2 (batch 4 is not committed), the re-run's
    discard drops checkpoint 4 and the durable note naming it (so the driver never deletes the
    log up to 4), and the restore rebuilds batch 3 from checkpoint 2 and the log of batch 3."""
    from spark_integration.keyed_state import encode_log
    from spark_integration.protocols.sender_log import log_key, sender_owner

    proto = UncoordinatedProtocol(settings)
    good = KeyedState()
    good.apply(np.array([1, 1, 2]))
    written = WRITER.stats.written
    proto.checkpoint(settings, 0, good, InstanceSchedule(1), 2)
    wait_for("written", written)  # durable before the next is due (else that one waits: .chain)
    with participant_store(settings, sender_owner(0)) as store:
        store.put(log_key(0, 3), encode_log([np.array([1])]))
        store.flush()
    partial = good  # batch 3 and part of batch 4, on top of what checkpoint 2 holds
    partial.apply(np.array([1, 2]))
    proto.checkpoint(settings, 0, partial, InstanceSchedule(1), 4)
    wait_for("written", written + 1)  # both written, in order
    assert read_durable(settings, 0)["durable"] == 4
    assert checkpoints(settings) == ["c0000000002", "c0000000004"]

    proto.discard(settings, 0, 4)
    assert checkpoints(settings) == ["c0000000002"] and read_durable(settings, 0) == {}
    state = proto.restore(settings, 0, LogRestore(batch_seq=4, senders=1))
    assert (state.counts[1], state.counts[2], state.version) == (3, 1, 3)
