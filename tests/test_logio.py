"""LOG.io protocol logic against a real indexed_fs backend (no Spark: the tasks are played by hand).

Two senders log their events per destination, two keyed instances acknowledge, process and commit
Input Sets; instance 0 dies between acknowledgement and commit while instance 1 keeps running
and committing; instance 0 then recovers alone from the backend.
"""

from __future__ import annotations

import numpy as np
import pytest

from spark_integration.conf import PREFIX, from_conf
from spark_integration.layouts.registry import layout_for
from spark_integration.operators import KeyedState, drop_state, load_state, save_state
from spark_integration.protocols.logio import LogioProtocol, committed_state as _committed_state
from spark_integration.protocols.sender_log import log_key as _log_key
from spark_integration.store import participant_store

SENDERS = 2


@pytest.fixture
def settings(tmp_path):
    return from_conf({PREFIX + "protocol": "logio", PREFIX + "backend": "indexed_fs",
                      PREFIX + "backend.path": str(tmp_path / "store"), PREFIX + "stateDir": str(tmp_path / "work"),
                      PREFIX + "fullEvery": "3", PREFIX + "jobId": "lg"})


def events(b: int, sender: int, dest: int) -> np.ndarray:
    rng = np.random.default_rng(1000 * b + 10 * sender + dest)
    return rng.integers(dest * 100, dest * 100 + 50, size=200).astype(np.int64)


def log_senders(settings, b: int) -> None:
    """The senders' step: log every output event before it is sent."""
    for s in range(SENDERS):
        with participant_store(settings, f"log-s{s}") as store:
            for d in range(2):
                store.put(_log_key(d, b), events(b, s, d).astype("<i8").tobytes())


def run_instance(proto, settings, i: int, b: int, die_before_commit: bool = False) -> None:
    """One task of instance ``i`` for micro-batch ``b`` (what process_partition does)."""
    state = load_state(settings, i) or KeyedState()
    assert state.version == b - 1
    proto.acknowledge(settings, i, b)
    for s in range(SENDERS):
        state.apply(events(b, s, i))
    if die_before_commit:
        drop_state(settings, i)  # the crash loses the working state
        return
    proto.checkpoint(settings, i, state, proto.plan_checkpoint(b), b)
    state.version = b
    save_state(settings, i, state)


def expected(i: int, upto: int) -> np.ndarray:
    st = KeyedState()
    for b in range(1, upto + 1):
        for s in range(SENDERS):
            st.apply(events(b, s, i))
    return st.counts


def same(a: np.ndarray, b: np.ndarray) -> bool:
    n = max(len(a), len(b))
    return np.array_equal(np.pad(a, (0, n - len(a))), np.pad(b, (0, n - len(b))))


def committed_state(store):
    """The committed state in the default layout (the one the ``settings`` fixture uses)."""
    return _committed_state(store, layout_for(from_conf({})))


def test_torn_or_corrupt_commit_record_is_not_a_commit(settings):
    proto = LogioProtocol(settings)
    for b in (1, 2):
        log_senders(settings, b)
        run_instance(proto, settings, 0, b)
    with participant_store(settings, "i0") as store:
        record = store.get("c/b0000000002")
        store.put("c/b0000000002", record[:-3])  # torn
        assert committed_state(store)[1] == 1
        store.put("c/b0000000002", record[:-1] + bytes([record[-1] ^ 1]))  # corrupt
        assert committed_state(store)[1] == 1
        store.put("c/b0000000002", record)
        assert committed_state(store)[1] == 2


def test_failed_instance_recovers_alone_while_neighbour_runs(settings):
    proto = LogioProtocol(settings)
    proto._senders = SENDERS
    for b in (1, 2, 3, 4):
        log_senders(settings, b)
        run_instance(proto, settings, 0, b)
        run_instance(proto, settings, 1, b)
    # batch 5: instance 0 acknowledges its Input Set, processes, and dies before the commit
    log_senders(settings, 5)
    run_instance(proto, settings, 0, 5, die_before_commit=True)
    # its neighbour is not disturbed: it keeps processing and committing batches 5 and 6
    run_instance(proto, settings, 1, 5)
    log_senders(settings, 6)
    run_instance(proto, settings, 1, 6)
    with participant_store(settings, "i0") as store:
        _, head = committed_state(store)
        acks = [k for k, _ in store.scan("ack/")]
    assert head == 4 and "ack/b0000000005" in acks  # Input Set 5: acknowledged, undone

    # instance 0 recovers alone, in the re-run of batch 5 (and then of 6 for the 2nd half)
    recovery = proto.recover(0, 5, SENDERS)
    state = proto.restore(settings, 0, recovery.restore)
    assert state.version == 5 and state.replayed == 2 * 200  # re-processed from the senders' log
    assert same(state.counts, expected(0, 5))
    save_state(settings, 0, state)
    # the neighbour, asked to restore for the same re-run, keeps its own working state
    neighbour = proto.restore(settings, 1, recovery.restore)
    assert neighbour.version == 6 and neighbour.replayed == 0
    run_instance(proto, settings, 0, 6)
    assert same(load_state(settings, 0).counts, expected(0, 6))

    # the recovery commit is durable: a second crash without local state rebuilds the same state
    drop_state(settings, 0)
    with participant_store(settings, "i0") as store:
        rebuilt, head = committed_state(store)
    assert head == 6 and same(rebuilt.counts, expected(0, 6))


def test_gc_deletes_done_records_on_full_commit(settings):
    proto = LogioProtocol(settings)
    proto._senders = SENDERS
    for b in range(1, 8):  # fullEvery=3: full commits at 1, 4, 7
        log_senders(settings, b)
        run_instance(proto, settings, 0, b)
    with participant_store(settings, "i0") as store:
        assert [k for k, _ in store.scan("c/")] == ["c/b0000000007"]
        assert [k for k, _ in store.scan("ack/")] == []
        state, head = committed_state(store)
    assert head == 7 and same(state.counts, expected(0, 7))


def test_full_commits_come_as_often_as_coordinated_full_snapshots(settings):
    """logio commits every Input Set whatever ``interval`` says, so its full commits are spaced
    ``fullEvery`` intervals apart, as coordinated's full snapshots are (``fullEvery`` epochs of
    ``interval`` micro-batches): with fullEvery 3 and interval 2, every 6 micro-batches."""
    from dataclasses import replace
    from spark_integration.protocols.coordinated import CoordinatedProtocol

    def fulls(protocol) -> list[int]:
        tokens = {b: protocol.plan_checkpoint(b) for b in range(1, 26)}
        return [b for b, token in tokens.items() if token is not None and token.full]

    assert fulls(LogioProtocol(settings)) == [1, 4, 7, 10, 13, 16, 19, 22, 25]  # interval 1
    spaced = replace(settings, interval=2)
    logio, coordinated = fulls(LogioProtocol(spaced)), fulls(CoordinatedProtocol(spaced))
    assert logio == [1, 7, 13, 19, 25] and coordinated == [2, 8, 14, 20]
    assert {b - a for a, b in zip(logio, logio[1:])} == {b - a for a, b in zip(coordinated, coordinated[1:])}


def test_unacknowledged_logged_events_are_resent_from_the_log(settings):
    proto = LogioProtocol(settings)
    proto._senders = SENDERS
    log_senders(settings, 1)
    run_instance(proto, settings, 0, 1)
    log_senders(settings, 2)  # logged by the senders, instance 0 died before acknowledging
    drop_state(settings, 0)
    state = proto.restore(settings, 0, proto.recover(0, 2, SENDERS).restore)
    assert state.version == 2 and same(state.counts, expected(0, 2))
    with participant_store(settings, "i0") as store:
        assert committed_state(store)[1] == 2
