"""Orphans: what a protocol leaves in the store that its recovery line does not reference.

Pure logic: a key's kind (a checkpoint off the line, pieces without their commit record before or
after the line, a done log entry) and when a series of counts is growing.

Real stores (seconds, no Spark): each protocol that collects its garbage is driven through its
own steps — the instances' checkpoints and the driver's commits, the senders' log entries — on a
real indexed_fs directory and on MinIO; after the protocol's GC (``Protocol.collect``) the census
finds nothing it does not reference, as its docs claim (logio, whose full commits collect, keeps
the acknowledgements of the Input Sets since its latest full commit until the next one: those,
and only those, stay).  Planted orphans — a checkpoint written past the recovery line, the pieces
of a checkpoint whose commit record never came — are found, with their bytes.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest

from conftest import server_options
from spark_integration import orphans
from spark_integration.conf import PREFIX, from_conf
from spark_integration.keyed_state import KeyedState
from spark_integration.layouts.registry import layout_for
from spark_integration.orphans import References, census, classify, growing
from spark_integration.protocols.coordinated import CoordinatedProtocol
from spark_integration.protocols.logio import LogioProtocol
from spark_integration.protocols.sender_log import log_key, sender_owner
from spark_integration.protocols.uncoordinated.fence import fence
from spark_integration.protocols.uncoordinated.protocol import UncoordinatedProtocol
from spark_integration.protocols.uncoordinated.writer import WriteRequest, _write
from spark_integration.store import drop_job, participant_store

P = 2  # instances, and senders
KEYS = 40


# ------------------------------------------------------------------------------ pure logic
def test_kinds_of_orphans():
    refs = References(checkpoints=frozenset({"c05"}), keys=frozenset({"ack/b07"}),
                      tails=(("d0/", "d0/b06"),))
    keys = ["c03", "pieces/c03/1", "pieces/c04/1", "c05", "pieces/c05/1", "pieces/c05/index",
            "pieces/c09/1", "ack/b07", "ack/b02"]
    assert classify("i0", keys, refs) == {"c03": "stale", "pieces/c03/1": "stale", "pieces/c04/1": "torn",
                                          "pieces/c09/1": "unfinished", "ack/b02": "stale"}
    assert classify("log-s0", ["d0/b05", "d0/b06", "d1/b01"], References(tails=(("d0/", "d0/b06"),))) == \
        {"d0/b05": "log", "d1/b01": "log"}
    assert classify("x", ["a"], None) == {"a": "other"}


def test_growing_is_a_rising_floor_not_a_sawtooth():
    assert not growing([0, 0, 9, 0, 0, 9, 0, 0, 9])  # lazy GC: collected a checkpoint later
    assert not growing([0, 9, 9, 9, 9])  # one checkpoint always waiting for the next's GC
    assert growing([0, 0, 4, 4, 9, 9, 9])  # left behind at each failure, never collected
    assert not growing([5, 5, 5])


# ------------------------------------------------------------------------ real stores
@pytest.fixture(params=["indexed_fs", pytest.param("minio", marks=[pytest.mark.minio, pytest.mark.server])])
def store_conf(request, tmp_path):
    job = f"orph{uuid.uuid4().hex[:8]}"
    conf = {PREFIX + "jobId": job, PREFIX + "stateDir": str(tmp_path / "work"), PREFIX + "layout": "per-key",
            PREFIX + "fullEvery": "2", PREFIX + "backend": request.param}
    if request.param == "indexed_fs":
        conf[PREFIX + "backend.path"] = str(tmp_path / "store")
    else:
        conf.update({PREFIX + f"backend.{k}": str(v) for k, v in server_options("minio", job).items()})
    yield conf
    drop_job(from_conf({**conf, PREFIX + "protocol": "coordinated"}))


def _settings(conf, protocol):
    return from_conf({**conf, PREFIX + "protocol": protocol})


def _state(batch: int) -> KeyedState:
    """An instance's state after ``batch``: every key counted, a few of them changed by it."""
    state = KeyedState()
    ids = np.arange(KEYS, dtype=np.int64)
    state.set(ids, ids + 1 + batch * (ids % 7 == batch % 7))
    return state


def _stats(durable: int = 0, ckpt_bytes: int = 0) -> list[dict]:
    return [{"instance": i, "ckpt_start": time.time(), "ckpt_ms": 1.0, "ckpt_bytes": ckpt_bytes,
             "backend_ops": 1, "durable": durable} for i in range(P)]


def _log(settings, batch: int) -> None:
    """The senders log micro-batch ``batch`` to every instance (what the logging stage writes)."""
    for s in range(P):
        with participant_store(settings, sender_owner(s)) as store:
            for d in range(P):
                store.put(log_key(d, batch), b"x" * 64)


def _plant(settings, owner: str, name: str) -> int:
    """Pieces of checkpoint ``name`` in ``owner``'s namespace without its commit record (a write
    cut short between them); returns their bytes."""
    layout = layout_for(settings)
    with participant_store(settings, owner) as store:
        layout.write(store, name, layout.encode(_state(1)))
        store.delete(name)
        store.flush()
        keys = [k for k in store.keys(f"pieces/{name}/")]
        return sum(len(v) for v in store.get_many(keys).values())


def test_coordinated_collects_everything_off_its_line(store_conf):
    settings = _settings(store_conf, "coordinated")
    proto, layout = CoordinatedProtocol(settings), layout_for(settings)
    series = []
    for batch in range(1, 6):
        token = proto.plan_checkpoint(batch)
        for i in range(P):
            proto.checkpoint(settings, i, _state(batch), token, batch)
        proto.commit(token, batch * 100, _stats())
        series.append(census(settings, proto.references(P)).objects)
    assert series[2] > 0 and not growing(series)  # the previous chain waits for the next checkpoint
    proto.collect(P)
    after = census(settings, proto.references(P))
    assert after.objects == 0 and after.referenced > 0, after
    # a checkpoint past the line (written, never committed) and pieces without a commit record
    token = proto.plan_checkpoint(6)
    proto.checkpoint(settings, 0, _state(6), token, 6)
    torn = _plant(settings, "i1", "e0000000003")
    found = census(settings, proto.references(P))
    with participant_store(settings, "i0") as store:  # e6: its commit record, its pieces and their index
        e6 = store.get_many(store.keys("pieces/e0000000006/") + ["e0000000006"])
    assert found.kinds["stale"] == [len(e6), sum(map(len, e6.values()))]
    assert found.kinds["torn"] == [KEYS + 1, torn]  # a piece a key, and their index
    assert found.objects == len(e6) + KEYS + 1


def test_uncoordinated_collects_older_checkpoints_and_done_log_entries(store_conf):
    settings = _settings(store_conf, "uncoordinated")
    proto, layout = UncoordinatedProtocol(settings), layout_for(settings)
    for batch in range(1, 5):
        _log(settings, batch)
        for i in range(P):
            with fence(settings, i) as f:
                incarnation = f.current
            _write(WriteRequest(settings, i, batch, layout.encode(_state(batch)), time.time(), incarnation))
        proto.commit(None, batch * 100, _stats(durable=batch))
    before = census(settings, proto.references(P))
    # the writer deleted older checkpoints as it went, but the newest before each one it wrote (a
    # checkpoint of a batch not committed yet may be discarded): one stale checkpoint an instance
    assert set(before.kinds) == {"log", "stale"}, before
    for i in range(P):
        with participant_store(settings, f"i{i}") as store:
            assert [k for k, _ in store.scan("c")] == ["c0000000003", "c0000000004"]
    proto.collect(P)
    after = census(settings, proto.references(P))
    assert after.objects == 0 and after.referenced > 0, after
    # what a writer killed mid-checkpoint leaves: pieces without their commit record, which the
    # writer (finding checkpoints by their commit records) never deletes
    torn = _plant(settings, "i0", "c0000000003")
    proto.collect(P)
    left = census(settings, proto.references(P))
    assert left.kinds == {"torn": [KEYS + 1, torn]}


def test_logio_collects_but_keeps_acknowledgements_since_its_latest_full_commit(store_conf):
    settings = _settings(store_conf, "logio")
    proto = LogioProtocol(settings)
    proto.senders = P
    for batch in range(1, 5):  # fullEvery 2: Input Sets 1 and 3 are full commits
        _log(settings, batch)
        token = proto.plan_checkpoint(batch)
        for i in range(P):
            proto.acknowledge(settings, i, batch)
            proto.checkpoint(settings, i, _state(batch), token, batch)
        proto.commit(token, batch * 100, _stats(durable=batch))
    proto.collect(P)
    after = census(settings, proto.references(P))
    # Input Set 3's full commit deleted the acknowledgements up to its own; Input Set 4's is
    # committed too (no recovery reads it), and only the next full commit deletes it
    assert set(after.kinds) == {"stale"} and after.objects == P, after
    with participant_store(settings, "i0") as store:
        assert store.keys("ack/") == ["ack/b0000000004"]


def test_the_run_end_waits_for_a_writer_still_holding_a_participant(tmp_path, monkeypatch):
    """An executor's asynchronous writer (uncoordinated) can still be writing the run's last
    checkpoint, holding the instance's directory, when the driver measures the job's footprint
    and drops its records: the driver waits for it to let go instead of failing the run (a
    checkpoint of gigabytes holds it far longer than a participant's usual wait)."""
    import subprocess
    import sys
    from os.path import join

    from spark_integration import store as spark_store
    from backends.base import StoreLockedError

    settings = from_conf({PREFIX + "protocol": "uncoordinated", PREFIX + "backend": "indexed_fs",
                          PREFIX + "backend.path": str(tmp_path / "store"), PREFIX + "jobId": "held",
                          PREFIX + "stateDir": str(tmp_path / "work")})
    with participant_store(settings, "i0") as store:
        store.put("c0000000004", b"x" * 100)
        store.flush()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from backends.registry import open_backend; "
         "s = open_backend('indexed_fs', path=sys.argv[1]); print('held', flush=True); "
         "time.sleep(2.0); s.close()", join(str(tmp_path / "store"), "held", "i0")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreLockedError):
            with participant_store(settings, "i0", lock_wait=0.1):
                pass
        monkeypatch.setattr(spark_store, "LOCK_WAIT", 0.2)  # shorter than the holder's write
        monkeypatch.setattr(spark_store, "DRIVER_LOCK_WAIT", 60.0)
        t = time.monotonic()
        before, _after = spark_store.job_footprint(settings)
        assert before and before > 0 and time.monotonic() - t > 0.5  # waited for the holder
        assert drop_job(settings) == 1
    finally:
        holder.wait(timeout=30)


@pytest.mark.slow
def test_a_spark_run_reports_orphans_before_and_after_gc(spark, tmp_path):
    """The runner's census after every checkpoint and at the end, on a real job with a failure."""
    from spark_integration.runner import JobSpec, run_job

    entries = {PREFIX + "protocol": "coordinated", PREFIX + "backend": "indexed_fs",
               PREFIX + "backend.path": str(tmp_path / "store"), PREFIX + "layout": "chunks",
               PREFIX + "fullEvery": "2", PREFIX + "failAt": "12000", PREFIX + "stateDir": str(tmp_path / "work")}
    m = run_job(spark, from_conf(entries), JobSpec(events=30_000, keys=300, max_batch=5_000, timeout=120,
                                                  orphans=True))
    report = m.orphans
    assert m.failures == 1 and len(report["each"]) == m.checkpoints
    assert report["after_gc"]["objects"] == 0 and report["after_gc"]["referenced"] > 0
    assert not report["growing"]
    names = [name for name, _ in orphans.lines(report)]
    assert names[0] == "AfterEachCheckpoint" and "AfterGC.Bytes" in names
