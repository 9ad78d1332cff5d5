"""``close()`` while other threads use the store, checked on every registered backend.

The contract (:meth:`backends.base.Backend.close`): an operation that started before ``close()``
either completes normally or raises :class:`StoreClosedError`; one that starts after it raises
:class:`StoreClosedError`; ``close()`` returns in bounded time, raising nothing (a typed error
of the base module where the medium fails it: :class:`StorageFullError` on a full disk); no
thread is left waiting; every write acknowledged before ``close()`` returned is there after a
reopen (persistent backends); and what the store holds (the directory lock, the server
connection) is released, so a fresh open succeeds at once.

The race is timing-dependent, so each case runs several rounds with a random delay before
``close()``; the local stores, which are quick to open, run more rounds than the networked ones.
Every wait is bounded: a thread that does not end fails the test instead of hanging the run
(the threads are daemons).

Besides the races: close() on a full disk (every local store), the C group committer serving
writers after its own close, and, deterministically, the base class's ordering (close waits for
an operation in flight before tearing down) and its bound (an operation that hangs does not
hold close() past ``CLOSE_DRAIN_S``).
"""

from __future__ import annotations

import os
import random
import threading
import time
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from backends import (
    Backend,
    StorageFullError,
    StoreClosedError,
    backend_class,
    backend_names,
    open_backend,
)
from backends import base
from backends.indexed_fs import group_commit
from backends.memory import MemoryBackend

WRITERS = 8
#: how long close() and every thread may take before the test calls it a hang
BOUND_S = 15.0
#: rounds per backend: the local stores open in milliseconds, the networked ones do not
ROUNDS = {"memory": 20, "indexed_fs": 40, "default_fs": 20, "rocksdb": 8, "lmdb": 20,
          "sqlite": 20}
NETWORK_ROUNDS = 4


def rounds_for(backend_param: str) -> int:
    return ROUNDS.get(backend_param, NETWORK_ROUNDS)


class Worker(threading.Thread):
    """A daemon thread that runs ``step(i)`` for i = 0, 1, ... until the store is closed,
    recording what returned (``done``) and every exception other than the one that ends it."""

    def __init__(self, name: str, step: Callable[[int], Any]) -> None:
        super().__init__(name=name, daemon=True)
        self.step = step
        self.done: list[int] = []
        self.errors: list[BaseException] = []
        self.closed_seen = False

    def run(self) -> None:
        i = 0
        while True:
            try:
                self.step(i)
            except StoreClosedError:
                self.closed_seen = True
                return
            except BaseException as exc:  # anything else breaks the contract
                self.errors.append(exc)
                return
            self.done.append(i)
            i += 1


class Call(threading.Thread):
    """``fn()`` once on a daemon thread, keeping what it raised."""

    def __init__(self, name: str, fn: Callable[[], Any]) -> None:
        super().__init__(name=name, daemon=True)
        self.fn = fn
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.fn()
        except BaseException as exc:
            self.error = exc

    def check(self) -> None:
        """It returned within BOUND_S and raised nothing."""
        self.join(BOUND_S)
        assert not self.is_alive(), f"{self.name} did not return within {BOUND_S} s"
        assert self.error is None, f"{self.name} raised {self.error!r}"


def join_all(workers: list[Worker]) -> None:
    """Every worker ends within the bound, and each ended by StoreClosedError only."""
    deadline = time.monotonic() + BOUND_S
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    hung = [w.name for w in workers if w.is_alive()]
    assert not hung, f"threads still running {BOUND_S} s after close(): {hung}"
    for w in workers:
        assert not w.errors, f"{w.name} got {w.errors[0]!r}, not StoreClosedError"
        assert w.closed_seen, f"{w.name} ended without StoreClosedError"


def writers(store: Backend, round_: int) -> list[Worker]:
    def writer(n: int) -> Worker:
        return Worker(f"writer-{n}", lambda i: store.put(f"r{round_}-w{n}-{i}", b"v%d" % i))

    return [writer(n) for n in range(WRITERS)]


def check_acknowledged(store: Backend, round_: int, workers: list[Worker]) -> None:
    """Every put that returned is readable with its value (``workers`` starts with the
    writers of :func:`writers`)."""
    want = {f"r{round_}-w{n}-{i}": b"v%d" % i for n, w in enumerate(workers[:WRITERS])
            for i in w.done}
    got = store.get_many(list(want))
    lost = [k for k, v in want.items() if got.get(k) != v]
    assert not lost, f"{len(lost)} of {len(want)} acknowledged puts lost, e.g. {lost[:3]}"


def race(store_factory, backend_name: str, backend_param: str,
         extra: Callable[[Backend], list[Worker]] = lambda s: [],
         closers: int = 1) -> None:
    """Rounds of: open, writers (and ``extra`` workers) running, ``closers`` threads call
    close() after a random delay, then the checks of the module docstring."""
    rng = random.Random(28)
    persistent = backend_class(backend_name).persistent
    store = store_factory()
    for r in range(rounds_for(backend_param)):
        workers = writers(store, r) + extra(store)
        for w in workers:
            w.start()
        time.sleep(rng.uniform(0.0, 0.03))
        closing = [Call(f"close() #{k} of round {r}", store.close) for k in range(closers)]
        for c in closing:
            c.start()
        for c in closing:
            c.check()
        assert store.closed
        join_all(workers)
        with pytest.raises(StoreClosedError):
            store.put("after-close", b"x")
        store = store_factory()  # the lock is released: a fresh open succeeds at once
        if persistent:
            check_acknowledged(store, r, workers)
    store.close()


def test_close_with_writers_in_flight(store_factory, backend_name, backend_param):
    race(store_factory, backend_name, backend_param)


def test_close_twice_at_once_with_writers_in_flight(store_factory, backend_name, backend_param):
    race(store_factory, backend_name, backend_param, closers=2)


def test_close_racing_flush(store_factory, backend_name, backend_param):
    def flushers(store: Backend) -> list[Worker]:
        return [Worker(f"flusher-{n}", lambda i: store.flush()) for n in range(2)]

    race(store_factory, backend_name, backend_param, extra=flushers)


def test_close_after_close_is_a_no_op(store_factory):
    store = store_factory()
    store.put("k", b"v")
    store.close()
    store.close()
    assert store.closed
    for op in (lambda: store.put("k", b"w"), lambda: store.get("k"), store.flush,
               lambda: list(store.scan(""))):
        with pytest.raises(StoreClosedError):
            op()


def test_scan_iterator_after_close_raises_store_closed(store_factory):
    store = store_factory()
    store.put_many({f"k{i}": b"v" for i in range(10)})
    it = store.scan("")
    next(it)
    store.close()
    with pytest.raises(StoreClosedError):
        for _ in it:
            pass



@pytest.mark.skipif(not group_commit.native_available, reason="the C committer was not built")
def test_group_commit_serves_writers_after_its_close(tmp_path):
    """The C committer's ``close()`` stops its sync thread; writers that queue behind a leader
    then (a store closed under a late writer, or the committer's own teardown) are still
    served: their leader syncs for them instead of handing over to a thread that is gone."""
    fd = os.open(tmp_path / "log", os.O_RDWR | os.O_CREAT, 0o644)
    made, _, kind = group_commit.committer(SimpleNamespace(fd=fd))
    assert kind == "native"
    end, append_lock, stop = [0], threading.Lock(), threading.Event()

    def step(i: int) -> None:
        if stop.is_set():
            raise StoreClosedError("done")
        with append_lock:
            os.pwrite(fd, b"x", end[0])
            end[0] += 1
            target = end[0]
            made.appended(fd, target, target)
        made.wait(target)

    previous = group_commit.set_sync_delay(0.002)  # writers queue behind every sync
    try:
        workers = [Worker(f"committer-writer-{n}", step) for n in range(WRITERS)]
        for w in workers:
            w.start()
        time.sleep(0.05)
        made.close()
        time.sleep(0.2)  # writers go on queueing behind leaders after the close
        stop.set()
        join_all(workers)
    finally:
        group_commit.set_sync_delay(previous)
        os.close(fd)
    assert all(w.done for w in workers)


#: the stores on a local directory, whose close() writes to a disk that may be full
LOCAL_STORES = [n for n in backend_names()
                if backend_class(n).persistent and "path" in backend_class(n).all_options()]


@pytest.mark.parametrize("name", LOCAL_STORES)
def test_close_on_a_full_disk_raises_only_storage_full_and_releases_the_store(name, small_tmpfs):
    """A close that must write (a memtable, a snapshot, a hint) on a full disk raises nothing
    but :class:`StorageFullError`, is closed all the same, and leaves the directory free: once
    there is space again a fresh open succeeds and every acknowledged write is there."""
    path = str(small_tmpfs / "store")
    modes = backend_class(name).durability_modes
    store = open_backend(name, path=path, durability="none" if "none" in modes else modes[0])
    acked = {}
    for i in range(40):
        acked[f"k{i}"] = os.urandom(8000)
        store.put(f"k{i}", acked[f"k{i}"])
    filler = small_tmpfs / "filler"
    with open(filler, "wb", buffering=0) as f:
        with pytest.raises(OSError):
            while True:
                f.write(bytes(4096))
    try:
        store.close()
    except StorageFullError as exc:
        assert "no space left" in str(exc)
    assert store.closed
    filler.unlink()
    with open_backend(name, path=path) as again:
        assert again.get_many(list(acked)) == acked


class _SlowPut(MemoryBackend):
    """A memory store whose puts wait for ``release``, noting whether ``_close`` had run by then
    (the ordering and the bound of close() are pure logic of the base class)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()
        self.closed_under_put = False
        self.torn_down = False

    def _put(self, key: str, value: bytes) -> None:
        self.entered.set()
        self.release.wait(BOUND_S)
        self.closed_under_put = self.torn_down
        super()._put(key, value)

    def _close(self) -> None:
        self.torn_down = True


def test_close_waits_for_an_operation_in_flight_before_tearing_down():
    store = _SlowPut()
    writer = Worker("slow-writer", lambda i: store.put(f"k{i}", b"v"))
    writer.start()
    assert store.entered.wait(BOUND_S)
    closer = threading.Thread(target=store.close, daemon=True)
    closer.start()
    time.sleep(0.05)
    assert closer.is_alive() and not store.torn_down  # waiting for the put
    store.release.set()
    closer.join(BOUND_S)
    join_all([writer])
    assert writer.done == [0] and not store.closed_under_put and store.torn_down


def test_close_is_bounded_when_an_operation_hangs(monkeypatch):
    monkeypatch.setattr(base, "CLOSE_DRAIN_S", 0.2)
    store = _SlowPut()
    writer = Worker("stuck-writer", lambda i: store.put(f"k{i}", b"v"))
    writer.start()
    assert store.entered.wait(BOUND_S)
    started = time.monotonic()
    store.close()
    assert store.torn_down and time.monotonic() - started < 5
    store.release.set()
    join_all([writer])
