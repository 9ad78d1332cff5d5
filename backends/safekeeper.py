"""S4's asynchronous checkpointer (the SafeKeeper of the S4 thesis, Fig 3.1).

A processing element hands its state over and returns to work at once; the SafeKeeper serializes
it on a serialization queue, puts the bytes on a bounded **storage queue**, and writer threads
consume that queue into the backend.  When a queue is full the **oldest** entry is dropped in
favour of the newest (S4's default), because only the latest checkpoint of a PE matters.  A
callback reports each storage operation's outcome and latency — the thesis measures write latency
this way, and counts drops to find the rate a backend sustains (Fig 4.7).
"""

from __future__ import annotations

import collections
import pickle
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Deque, Generic, TypeVar

from .base import Backend

T = TypeVar("T")

#: callback(key, ok, latency_seconds, error_or_None)
Callback = Callable[[str, bool, float, BaseException | None], None]


class DropOldestQueue(Generic[T]):
    """A bounded FIFO whose ``put`` never blocks: when full it evicts the oldest item and counts it."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("queue capacity must be >= 1")
        self.capacity = capacity
        self._items: Deque[T] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0

    def put(self, item: T) -> T | None:
        """Append ``item``; return the item evicted to make room for it (None: none was)."""
        evicted = None
        with self._cond:
            if len(self._items) >= self.capacity:
                evicted = self._items.popleft()
                self.dropped += 1
            self._items.append(item)
            self._cond.notify()
        return evicted

    def get(self) -> T | None:
        """The oldest item; ``None`` once the queue is closed and empty."""
        with self._cond:
            while not self._items and not self._closed:
                self._cond.wait()
            return self._items.popleft() if self._items else None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class SafeKeeperStats:
    submitted: int = 0
    serialized: int = 0
    written: int = 0
    failed: int = 0
    dropped_serialization: int = 0
    dropped_storage: int = 0

    @property
    def dropped(self) -> int:
        return self.dropped_serialization + self.dropped_storage


class SafeKeeper:
    """Serialization queue -> bounded storage queue (drop-oldest) -> writer threads -> backend."""

    def __init__(
        self,
        store: Backend,
        *,
        storage_queue: int = 1000,
        serialization_queue: int = 1000,
        writers: int = 1,
        serializer: Callable[[Any], bytes] = pickle.dumps,
        callback: Callback | None = None,
    ) -> None:
        self.store = store
        self.serializer = serializer
        self.callback = callback
        self._serial_q: DropOldestQueue[tuple[str, Any]] = DropOldestQueue(serialization_queue)
        self._storage_q: DropOldestQueue[tuple[str, bytes]] = DropOldestQueue(storage_queue)
        self._counts = SafeKeeperStats()
        self._lock = threading.Lock()
        self._serializer_thread = threading.Thread(target=self._serialize_loop, name="sk-serialize", daemon=True)
        self._writers = [
            threading.Thread(target=self._write_loop, name=f"sk-writer-{i}", daemon=True) for i in range(writers)
        ]
        self._serializer_thread.start()
        for w in self._writers:
            w.start()

    def checkpoint(self, key: str, state: Any) -> None:
        """Hand over ``state`` of PE ``key``; returns immediately (the PE goes back to work)."""
        with self._lock:
            self._counts.submitted += 1
        self._serial_q.put((key, state))

    def _serialize_loop(self) -> None:
        while (item := self._serial_q.get()) is not None:
            key, state = item
            data = self.serializer(state)
            with self._lock:
                self._counts.serialized += 1
            self._storage_q.put((key, data))
        self._storage_q.close()

    def _write_loop(self) -> None:
        while (item := self._storage_q.get()) is not None:
            key, data = item
            start = time.perf_counter()
            try:
                self.store.put(key, data)
            except Exception as exc:  # reported, never fatal to the PE
                latency = time.perf_counter() - start
                with self._lock:
                    self._counts.failed += 1
                if self.callback:
                    self.callback(key, False, latency, exc)
                continue
            latency = time.perf_counter() - start
            with self._lock:
                self._counts.written += 1
            if self.callback:
                self.callback(key, True, latency, None)

    @property
    def stats(self) -> SafeKeeperStats:
        with self._lock:
            s = SafeKeeperStats(**vars(self._counts))
        s.dropped_serialization = self._serial_q.dropped
        s.dropped_storage = self._storage_q.dropped
        return s

    def close(self) -> SafeKeeperStats:
        """Drain both queues (every queued checkpoint is written) and stop the threads."""
        self._serial_q.close()
        self._serializer_thread.join()
        for w in self._writers:
            w.join()
        return self.stats

    def __enter__(self) -> "SafeKeeper":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
