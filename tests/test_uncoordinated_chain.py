"""uncoordinated's incremental checkpoints (:mod:`spark_integration.protocols.uncoordinated.chain`):
which checkpoints a restore can use, what the writer keeps, when the next one is full, an
increment or waits; then the protocol's own writer and a real indexed_fs store."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from spark_integration.conf import PREFIX, from_conf
from spark_integration.layouts.registry import layout_for
from spark_integration.operators import KeyedState
from spark_integration.protocols.uncoordinated.chain import chains, kept, next_base, read_note, this_process, write_note
from spark_integration.protocols.uncoordinated.protocol import LogRestore, UncoordinatedProtocol
from spark_integration.protocols.uncoordinated.schedule import InstanceSchedule
from spark_integration.protocols.uncoordinated.writer import WRITER, checkpoint_bases, read_durable
from spark_integration.store import participant_store


def test_a_checkpoint_is_restorable_when_its_whole_chain_is_there():
    assert chains({2: 0, 4: 2, 6: 4, 8: 0, 10: 8}) == {2: [2], 4: [2, 4], 6: [2, 4, 6], 8: [8], 10: [8, 10]}
    assert chains({4: 2, 6: 4, 8: 0}) == {8: [8]}  # 2 is gone: 4 and 6 cannot be restored
    assert chains({2: 0, 4: 3, 6: 6}) == {2: [2]}  # a base that is missing, or not older


def test_the_writer_keeps_the_new_chain_and_the_one_before():
    assert kept({2: 0, 4: 2, 6: 4}, 6) == {2, 4, 6}
    assert kept({2: 0, 4: 2, 6: 4, 8: 0}, 8) == {2, 4, 6, 8}  # 8 may still be discarded
    assert kept({2: 0, 4: 2, 6: 4, 8: 0, 10: 8}, 10) == {8, 10}
    assert kept({2: 0, 4: 2, 6: 0}, 6) == {2, 4, 6}


@pytest.fixture
def settings(tmp_path):
    return from_conf({PREFIX + "protocol": "uncoordinated", PREFIX + "backend": "indexed_fs",
                      PREFIX + "backend.path": str(tmp_path / "store"), PREFIX + "stateDir": str(tmp_path / "work"),
                      PREFIX + "jobId": "chain", PREFIX + "fullEvery": "3"})


def test_the_next_checkpoint_is_full_an_increment_or_waits(settings):
    assert next_base(settings, 0, 2, durable=0, failed=0) == 0  # no chain yet
    write_note(settings, 0, 2, 1)
    assert next_base(settings, 0, 4, durable=0, failed=0) is None  # 2 is being written
    assert next_base(settings, 0, 4, durable=2, failed=0) == 2
    assert next_base(settings, 0, 4, durable=0, failed=2) == 0  # 2 failed: start afresh
    assert next_base(settings, 0, 2, durable=2, failed=0) == 0  # a re-run of batch 2
    write_note(settings, 0, 6, 3)
    assert next_base(settings, 0, 8, durable=6, failed=0) == 0  # fullEvery 3 reached
    every = dataclasses.replace(settings, full_every=1)
    write_note(every, 0, 2, 1)
    assert next_base(every, 0, 4, durable=0, failed=0) == 0  # CheckMate's: every one full, when due


def test_a_checkpoint_lost_with_its_writers_process_starts_a_new_chain(settings):
    """An injected failure ends a Python worker with ``os._exit``, and the writer thread there
    dies with whatever request it held, of any instance, leaving no note: the instance must not
    wait for that checkpoint forever."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=write_note, args=(settings, 0, 2, 1))  # the note names the child
    child.start()
    child.join()
    assert child.exitcode == 0 and read_note(settings, 0)[2] != this_process()
    assert next_base(settings, 0, 4, durable=0, failed=0) == 0  # its writer is gone
    write_note(settings, 0, 2, 1)  # this process's writer: alive, so 2 may yet be written
    assert next_base(settings, 0, 4, durable=0, failed=0) is None


def test_a_request_the_full_queue_drops_is_noted_failed(settings):
    from spark_integration.protocols.uncoordinated.writer import CheckpointWriter, WriteRequest, read_failed

    writer = CheckpointWriter(capacity=1)
    state = KeyedState()
    state.apply(np.array([1]))
    with participant_store(settings, "i0"):  # held: the writer cannot drain its queue
        for batch in (2, 3, 4):  # 2 is taken by the thread, 3 dropped by 4
            writer.submit(WriteRequest(settings, 0, batch, layout_for(settings).encode(state), time.time(), 0))
            time.sleep(0.2)
        assert read_failed(settings, 0) == 3


def _wait_durable(settings, batch: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while read_durable(settings, 0).get("durable", 0) < batch:
        assert time.monotonic() < deadline, f"checkpoint {batch} did not become durable ({WRITER.stats})"
        time.sleep(0.01)


def _bases(settings) -> dict[int, int]:
    with participant_store(settings, "i0") as store:
        return checkpoint_bases(store, layout_for(settings))


def test_increments_write_the_changed_keys_and_a_restore_loads_the_chain(settings):
    proto = UncoordinatedProtocol(settings)
    state = KeyedState()
    state.apply(np.arange(1000) % 500)
    sizes = {}
    for batch in (2, 4, 6, 8):
        if batch > 2:
            state.apply(np.array([batch, batch, 7]))  # three events, two keys changed
        proto.checkpoint(settings, 0, state, InstanceSchedule(1), batch)
        _wait_durable(settings, batch)
        sizes[batch] = read_durable(settings, 0)["ckpt_bytes"]
    # 2 full, 4 and 6 increments, 8 full (fullEvery 3); the writer kept 2's chain beside 8
    assert _bases(settings) == {2: 0, 4: 2, 6: 4, 8: 0}
    assert sizes[4] < sizes[2] / 10 and sizes[8] > sizes[4] * 10
    for batch in (10, 12):
        state.apply(np.array([batch]))
        proto.checkpoint(settings, 0, state, InstanceSchedule(1), batch)
        _wait_durable(settings, batch)
    assert _bases(settings) == {8: 0, 10: 8, 12: 10}  # 2's chain went once 10 was durable
    restored = proto.restore(settings, 0, LogRestore(batch_seq=13, senders=0))
    assert np.array_equal(restored.counts, state.counts[:len(restored.counts)])
    assert not state.counts[len(restored.counts):].any()
    assert read_note(settings, 0) is None  # after a restore the next checkpoint is full


def test_a_due_checkpoint_waits_while_the_one_before_is_written_and_keeps_its_changes(settings):
    proto = UncoordinatedProtocol(settings)
    state = KeyedState()
    state.apply(np.array([1, 2, 3]))
    with participant_store(settings, "i0"):  # held: the writer cannot write checkpoint 2 yet
        proto.checkpoint(settings, 0, state, InstanceSchedule(1), 2)
        state.apply(np.array([4]))
        proto.checkpoint(settings, 0, state, InstanceSchedule(1), 3)  # due, but 2 is in flight
        assert read_note(settings, 0) == (2, 1, this_process()) and state.dirty[4]
    _wait_durable(settings, 2)
    state.apply(np.array([5]))
    proto.checkpoint(settings, 0, state, InstanceSchedule(1), 4)  # over 2: keys 4 and 5
    _wait_durable(settings, 4)
    assert _bases(settings) == {2: 0, 4: 2}
    restored = proto.restore(settings, 0, LogRestore(batch_seq=5, senders=0))
    assert restored.counts.tolist()[:6] == [0, 1, 1, 1, 1, 1]


def test_a_failed_write_is_noted_apart_from_the_instances_failure_record(settings, tmp_path):
    """The writer's note of a checkpoint it could not write makes the next checkpoint full; it is
    not the injected-failure record, which would make the instance's next task a failed one."""
    from spark_integration.operators import failure_instant
    from spark_integration.protocols.uncoordinated.writer import WriteRequest, read_failed
    (tmp_path / "not-a-dir").write_text("")
    broken = dataclasses.replace(settings, backend_options={**settings.backend_options,
                                                            "path": str(tmp_path / "not-a-dir")})
    state = KeyedState()
    state.apply(np.array([1]))
    failed = WRITER.stats.failed
    WRITER.submit(WriteRequest(broken, 0, 2, layout_for(broken).encode(state), time.time(), 0))
    deadline = time.monotonic() + 20
    while WRITER.stats.failed == failed:
        assert time.monotonic() < deadline, f"the write did not fail ({WRITER.stats})"
        time.sleep(0.01)
    assert read_failed(settings, 0) == 2 and failure_instant(settings, 0) == 0.0
    write_note(settings, 0, 2, 1)
    assert next_base(settings, 0, 4, durable=0, failed=read_failed(settings, 0)) == 0
