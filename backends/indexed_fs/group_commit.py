"""Group commit: concurrent writers share one sync of the log.

A writer appends its record, notes where the log now ends (:meth:`appended`), and waits until
that many bytes are durable (:meth:`wait`).  One syncer at a time is the *leader*: it syncs
everything appended so far (its own bytes and those of the writers queued behind it) and wakes
the writers that sync covered; then the next sync is led by the first writer still queued
(:class:`PyCommit`) or by the C committer's sync thread.  Bytes are a store-wide clock, so a sync
of the segment holding the newest bytes covers everything before it (older segments were synced
when they were sealed: :meth:`covered`).

Two committers with one interface:

* the C committer (``_commit.c``, ``GroupCommit``) for local segments: the wait and the
  ``fdatasync`` run in C with the GIL released once per put, and the append is a ``pwrite`` that
  keeps the GIL.  In Python a durable put releases and re-takes the GIL three or four times (the
  append, the commit lock, the wait, the wake-up), and many writer threads spend their time
  handing it around rather than waiting for the disk.  Once writers queue, the C committer hands
  the syncing to a thread of its own that runs syncs back to back (it is already on a CPU when a
  sync ends; a woken writer may first wait for one); :meth:`close` stops that thread.
* :class:`PyCommit` for segments whose sync is a Python call (NFS, where it is a WRITE+COMMIT
  round trip), and for local ones where the C extension was not built (no compiler).

Test hooks, free when off (one global load per sync or per committer made):

* :func:`set_sync_delay` sleeps before every sync, in both committers, so that writers queue
  behind a sync on any medium (a tmpfs sync takes no time) rather than when the disk is slow;
* :data:`ack_log`, when a list, makes :func:`committer` wrap each committer so that every
  acknowledgement appends ``(target, synced)``: the bytes the writer waited for and the bytes the
  committer had synced when it let the writer go.  ``target <= synced`` for each is the promise.

For experiments, the floors a durable store is measured against use the same machinery without a
store: :class:`PyCommit` around any object with a ``sync()`` method, and :func:`bare_threads`,
the C committer driven by C threads with no Python in the loop (where :data:`native_available`).
The figures these give belong in the results, not here.
"""

from __future__ import annotations

import threading
import time
from _thread import allocate_lock as _new_lock
from typing import Any

try:
    from ._commit import GroupCommit as _NativeGroupCommit
    from ._commit import Putter as _Putter
    from ._commit import bare_threads as _native_bare_threads
    from ._commit import pwrite_all
    from ._commit import set_sync_delay as _native_set_sync_delay
except ImportError:  # built without a C compiler: the pure-Python committer serves all media
    _NativeGroupCommit = _native_bare_threads = _native_set_sync_delay = _Putter = None
    pwrite_all = None

#: whether the C extension was built: local segments get the C committer and
#: :func:`bare_threads` runs (tests switch it off to exercise PyCommit in a store)
native_available = _NativeGroupCommit is not None

__all__ = ["PyCommit", "ack_log", "bare_threads", "committer", "native_available", "putter",
           "pwrite_all", "set_sync_delay"]

#: test hook: seconds PyCommit sleeps before each sync (see set_sync_delay)
_sync_delay = 0.0
#: test hook: when a list, every acknowledgement of a committer made from now on appends
#: ``(target, synced)`` to it (see the module docstring)
ack_log: list[tuple[int, int]] | None = None


def set_sync_delay(seconds: float) -> float:
    """Test hook: sleep ``seconds`` before every group-commit sync, in the Python and the C
    committer alike (0 turns it off); returns the previous delay.  It makes writers queue
    behind a sync deterministically, whatever the medium; nothing else should set it."""
    global _sync_delay
    if seconds < 0:
        raise ValueError("set_sync_delay: seconds >= 0")
    previous, _sync_delay = _sync_delay, float(seconds)
    if _native_set_sync_delay is not None:
        _native_set_sync_delay(round(seconds * 1e6))
    return previous


class PyCommit:
    """Group commit in Python; the leader calls ``handle.sync()`` (a segment, or any object with
    a ``sync()`` method).  Each queued writer sleeps on a lock of its own, so a sync wakes
    exactly the writers it covered.

    Use: after appending, ``appended(handle, written, nwrites)`` with the log's new end
    (``written``: bytes or any count that grows with every append; ``nwrites``: records), then
    ``wait(written)`` to return once a sync covered it.  Thread-safe."""

    def __init__(self, handle: Any, written: int = 0, nwrites: int = 0) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._tail = (handle, written, nwrites)
        self._synced, self._synced_writes = written, nwrites
        self._syncing = False
        self._queue: list[list] = []  # waiting writers: [target, lock, "you lead next"]
        self._in_sync: Any = None  # the handle being synced now
        self._syncs = self._requests = self._max_batch = 0

    def appended(self, handle: Any, written: int, nwrites: int) -> None:
        self._tail = (handle, written, nwrites)  # one tuple store: atomic under the GIL

    def covered(self, written: int, nwrites: int) -> None:
        with self._lock:
            if written > self._synced:
                self._synced, self._synced_writes = written, nwrites
            self._release_covered()

    def wait(self, target: int) -> None:
        lock = self._lock
        lock.acquire()
        self._requests += 1
        if self._synced >= target:
            lock.release()
            return
        if self._syncing:
            me = [target, _new_lock(), False]
            me[1].acquire()
            self._queue.append(me)
            lock.release()
            me[1].acquire()  # released by a leader: our bytes are durable, or we lead next
            if not me[2]:
                return
            lock.acquire()
        else:
            self._syncing = True
        try:
            while self._synced < target:
                handle, goal, nwrites = self._tail
                self._in_sync = handle
                lock.release()
                try:
                    if _sync_delay:
                        time.sleep(_sync_delay)
                    handle.sync()
                finally:
                    lock.acquire()
                    self._in_sync = None
                    self._idle.notify_all()
                if goal > self._synced:
                    self._max_batch = max(self._max_batch, nwrites - self._synced_writes)
                    self._synced, self._synced_writes = goal, nwrites
                    self._syncs += 1
                self._release_covered()
        finally:  # also after a failed sync: the next writer tries (and reports) on its own
            if self._queue:
                nxt = self._queue.pop(0)
                nxt[2] = True
                nxt[1].release()
            else:
                self._syncing = False
            lock.release()

    def _release_covered(self) -> None:
        synced, left = self._synced, []
        for w in self._queue:
            if w[0] <= synced:
                w[1].release()
            else:
                left.append(w)
        self._queue = left

    def idle(self, handle: Any) -> None:
        with self._lock:
            while self._in_sync is handle:
                self._idle.wait()

    def close(self) -> None:
        """Nothing to stop: the Python committer has no thread of its own."""

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(syncs=self._syncs, sync_requests=self._requests, synced=self._synced,
                        synced_writes=self._synced_writes, group_commit_max_batch=self._max_batch)


class _Observed:
    """A committer whose acknowledgements are recorded in :data:`ack_log` (test hook)."""

    def __init__(self, inner: Any, log: list[tuple[int, int]]) -> None:
        self._inner, self._log = inner, log

    def wait(self, target: int) -> None:
        self._inner.wait(target)
        self._log.append((target, self._inner.stats()["synced"]))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def bare_threads(path: str, threads: int, operations: int, record_size: int) -> tuple[float, int]:
    """The C committer's ceiling, with no Python in the loop: ``threads`` pthreads append
    ``operations`` records of ``record_size`` bytes in all to the file ``path`` (created or
    emptied, zero-filled and synced before the clock starts; left in place) and wait for each to
    be durable, sharing ``fdatasync`` calls through the same committer a store uses.  Returns
    ``(seconds, syncs)``.  Raises ``RuntimeError`` where the C extension was not built (see
    :data:`native_available`), ``ValueError`` on arguments out of range (threads 1..1024,
    operations and record_size >= 1) and ``OSError`` on an I/O failure.  The GIL is released
    for the whole run."""
    if _native_bare_threads is None:
        raise RuntimeError("the C group committer (backends/indexed_fs/_commit.c) was not built; "
                           "install a C compiler and run `pip install -e .` again")
    return _native_bare_threads(path, threads, operations, record_size)


def committer(segment: Any, written: int = 0, nwrites: int = 0) -> tuple[Any, Any, str]:
    """The committer for a store whose active segment is ``segment``: ``(committer, handle_of,
    kind)``, where ``handle_of(segment)`` is what to pass to ``appended``/``idle`` for a segment
    (its fd for the C committer, the segment itself for :class:`PyCommit`)."""
    if native_available and getattr(segment, "fd", None) is not None:
        made, handle_of, kind = _NativeGroupCommit(segment.fd, written, nwrites), _fd_of, "native"
    else:
        made, handle_of, kind = PyCommit(segment, written, nwrites), _self, "python"
    log = ack_log
    return (made if log is None else _Observed(made, log)), handle_of, kind


def putter(store: Any, made: Any) -> tuple[Any, list[tuple[int, int]] | None]:
    """The C put path of ``store`` (:class:`._commit.Putter`: a put's append and its wait in one
    call) over ``made``, a C committer from :func:`committer`, and the :data:`ack_log` its
    acknowledgements go to (None when they are not observed).  The Putter waits on the
    committer itself, so an observed committer's log is handed to the store, which appends each
    ``(target, synced)`` the Putter returns."""
    inner, log = (made._inner, made._log) if isinstance(made, _Observed) else (made, None)
    return _Putter(store, inner), log


def _fd_of(segment: Any) -> int:
    return segment.fd


def _self(segment: Any) -> Any:
    return segment
