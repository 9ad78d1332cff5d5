"""The S4 SafeKeeper model: drop-oldest bounded queues, writer threads, per-write callbacks."""

from __future__ import annotations

import threading

from backends import open_backend
from backends.safekeeper import DropOldestQueue, SafeKeeper


def test_drop_oldest_queue_keeps_newest_and_counts_drops():
    q: DropOldestQueue[int] = DropOldestQueue(3)
    for i in range(5):
        q.put(i)
    assert q.dropped == 2
    q.close()
    assert [q.get(), q.get(), q.get(), q.get()] == [2, 3, 4, None]


def test_every_checkpoint_written_when_queue_never_fills():
    seen = []
    with open_backend("memory") as store:
        with SafeKeeper(store, storage_queue=10_000, callback=lambda k, ok, lat, err: seen.append((k, ok))) as sk:
            for i in range(500):
                sk.checkpoint(f"pe-{i % 50}", {"count": i})
        stats = sk.stats
        assert stats.submitted == 500 and stats.written == 500 and stats.dropped == 0
        assert len(seen) == 500 and all(ok for _, ok in seen)
        import pickle

        assert pickle.loads(store.get("pe-49")) == {"count": 499}  # FIFO: the latest state wins


class _SlowStore:
    """Wraps a real store; blocks writes until released, so the storage queue must overflow."""

    def __init__(self, store):
        self.store, self.gate = store, threading.Event()

    def put(self, key, value):
        self.gate.wait()
        self.store.put(key, value)


def test_full_storage_queue_drops_oldest_and_failures_are_reported(tmp_path):
    with open_backend("default_fs", path=str(tmp_path)) as real:
        slow = _SlowStore(real)
        sk = SafeKeeper(slow, storage_queue=5, serialization_queue=10_000)
        for i in range(200):
            sk.checkpoint("pe", i)
        # let the serializer run dry, then release the writer
        while sk.stats.serialized < 200:
            threading.Event().wait(0.01)
        slow.gate.set()
        stats = sk.close()
        assert stats.dropped_storage > 0
        assert stats.written + stats.dropped_storage == 200
        import pickle

        assert pickle.loads(real.get("pe")) == 199  # the newest is never the one dropped

    errors = []
    with open_backend("memory") as mem:
        mem.close()  # writes now fail with StoreClosedError
        with SafeKeeper(mem, callback=lambda k, ok, lat, err: errors.append(err)) as sk:
            sk.checkpoint("pe", 1)
        assert sk.stats.failed == 1 and type(errors[0]).__name__ == "StoreClosedError"
