"""When ``indexed_fs`` writes its index deltas: the due mark, the delta thread that writes them,
and the backpressure that keeps writers from running away from it.

What a delta holds and how it is written is :mod:`.delta`'s (the format) and the store's
(``IndexedFSBackend._write_delta``, which walks the log under the store's locks); this module
decides only *when*.  A delta is due once ``delta_records`` records were appended past the
newest one (or past the snapshot it is built on).  The write that reaches that count wakes the
delta thread, which writes the delta at once rather than at the maintenance thread's next round,
so that a crash finds few records past it.  The thread is started by the first such write, never
by an open: an open that only reads starts no thread for deltas.

:class:`DeltaScheduler` keeps, for the store that holds it:

* ``state``: the delta in the making (:class:`.delta.State`, built on the newest snapshot);
  ``None``: no deltas until the next snapshot (the active segment rotated, the records could not
  be resolved, snapshots are held back, or the store has none yet);
* ``due_at``: the count of appended records at which the next delta is due; the write that
  reaches it calls :meth:`DeltaScheduler.wake`, which moves it to never until the next
  :meth:`~DeltaScheduler.reset` (a written delta or snapshot);
* ``stall_at``: 1.25 × ``delta_records`` past the newest delta, where writers wait for the
  thread (:meth:`~DeltaScheduler.wait_if_lagging`).

Both marks are never reached while deltas are off: ``delta_records`` 0, or no periodic snapshots
(``index_flush_interval`` 0), which deltas build on.

Writers wait at ``stall_at`` until the thread has written the next delta, so that a crash leaves
at most about that many records for the open to walk.  Why they must: a writer thread that keeps
the interpreter busy (``durability=none``, no sync to wait in) lets the delta thread take the GIL
back only once per switch interval after each of its calls into C or the kernel, and the delta
then falls behind without bound; waiting hands it the GIL.  Writers that sync rarely meet the
wait.  It is bounded (``STALL_MAX_S``) in case the thread is stuck, and a delta that fails
releases every waiter and lifts the stall mark until the next delta or snapshot re-arms it:
writers wait only for deltas that can come.

Locking.  The store's order is ``_snap_lock`` → ``_lock`` → this scheduler's condition, which is
a leaf: no lock is taken while it is held.

* :meth:`~DeltaScheduler.reset` takes the condition (to wake waiting writers) and is called with
  ``_snap_lock`` and ``_lock`` held (the delta writer found the segment rotated), with only
  ``_snap_lock`` held (a delta or snapshot written), or with neither (the open, a failed delta).
* :meth:`~DeltaScheduler.wake` is called with the store's ``_lock`` held, by the one write that
  reaches ``due_at``: that lock makes it the only starter of the thread, so at most one thread
  is made.  It takes no lock of its own beyond setting an event.
* :meth:`~DeltaScheduler.wait_if_lagging` holds the condition while it waits and reads the count
  of appended records without the store's lock (an int read whole): a count read just before
  another writer's append can only end a wait early, and the wait is bounded either way.
* The marks are plain attributes, read by writers without the condition: each is an int set
  whole.  A wake that loses a race with a reset (a snapshot moving ``due_at`` just as a write
  reaches the old mark) leaves ``due_at`` at never; the maintenance thread's round asks
  :meth:`~DeltaScheduler.is_due` and writes the delta then, which resets it.

References: the scheduler reaches the store only through weak references to its methods.  The
store holds the scheduler, and a cycle would keep a store that failed to open, or was dropped
after its close, alive (its mapped snapshot file open among it) until the garbage collector
runs rather than until its last reference goes.

Stopping: the store's stop event, shared with its other background threads, is set before
:meth:`~DeltaScheduler.stop`; once it is set no thread is started, the thread's loop ends at its
next wake, and no writer waits.  :meth:`~DeltaScheduler.stop` wakes both and joins the thread.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from .delta import State

#: a count of appended records never reached
NEVER = 1 << 62
#: the longest a writer waits for a lagging index delta (see DeltaScheduler.wait_if_lagging): a
#: bound, in case the delta thread is stuck or failing, not a delay anyone should meet
STALL_MAX_S = 2.0
#: the delta thread's name (one per store, started by the first write a delta is due at)
THREAD_NAME = "indexed_fs-delta"


class DeltaScheduler:
    """The due mark, the delta thread and the writers' stall mark of one store (see the module
    docstring for when each moves and under which lock).

    ``every``: the store's ``delta_records``; ``background``: whether deltas are written in the
    background at all (``index_flush_interval`` > 0); ``stop``: the store's stop event.  The
    store's methods, kept weakly (see the module docstring): ``write`` writes the delta now
    (``_write_delta``); ``appended`` returns the count of records appended since the open, read
    afresh while a writer waits (every writer's records count); ``report(what, exc)`` counts an
    exception the delta thread met in the store's stats."""

    def __init__(self, every: int, background: bool, stop: threading.Event,
                 write: Callable[[], object], appended: Callable[[], int],
                 report: Callable[[str, Exception], None]) -> None:
        self._every = every
        self._on = bool(every) and background
        self._stop = stop
        self._write = weakref.WeakMethod(write)
        self._appended = weakref.WeakMethod(appended)
        self._report = weakref.WeakMethod(report)
        #: the delta being built on the newest snapshot; None: no deltas until the next snapshot
        self.state: State | None = None
        #: the count of appended records at which the next delta is due
        self.due_at = NEVER
        #: the count of appended records at which writers wait for the delta thread
        self.stall_at = NEVER
        self._wake = threading.Event()
        self._cv = threading.Condition()  # where writers wait for the thread
        self._thread: threading.Thread | None = None

    @property
    def on(self) -> bool:
        """Whether the store writes deltas at all (``delta_records`` > 0, periodic snapshots on)."""
        return self._on

    def reset(self, state: State | None) -> None:
        """Make ``state`` the delta in the making (``None``: none until the next snapshot), set
        when the next one is due and when writers wait for it, and wake writers waiting."""
        self.state = state
        every = self._every
        if state is not None and self._on:
            self.due_at = state.mark + every
            self.stall_at = state.mark + every + every // 4
        else:
            self.due_at = self.stall_at = NEVER
        with self._cv:
            self._cv.notify_all()

    def is_due(self, appended: int) -> bool:
        """Whether ``delta_records`` records of the ``appended`` ones lie past the newest delta."""
        st, every = self.state, self._every
        return bool(st is not None and every and appended - st.mark >= every)

    def wake(self) -> None:
        """A write reached ``due_at`` (caller holds the store's ``_lock``): wake the delta
        thread, started here on first use."""
        self.due_at = NEVER  # until the delta (or a snapshot) resets it
        if self._thread is None and not self._stop.is_set():
            t = threading.Thread(target=self._loop, name=THREAD_NAME, daemon=True)
            t.start()
            self._thread = t  # once started: stop() joins only a started thread
        self._wake.set()

    def wait_if_lagging(self) -> None:
        """Backpressure: return once the records appended are below ``stall_at`` again (the
        thread wrote the next delta), the store stops, or ``STALL_MAX_S`` passed."""
        deadline = time.monotonic() + STALL_MAX_S
        appended = self._appended()
        if appended is None:  # the store is gone: never while one of its writers is here
            return
        with self._cv:
            while appended() >= self.stall_at and not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cv.wait(left)

    def stop(self) -> None:
        """Stop the thread and release waiting writers (the store's stop event is set first, by
        the store or here); return once the thread, if one was started, has ended."""
        self._stop.set()
        self._wake.set()
        with self._cv:  # no writer waits for a delta that will not come
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            write, appended, report = self._write(), self._appended(), self._report()
            if self._stop.is_set() or write is None or appended is None or report is None:
                return  # stopped, or the store is gone
            try:
                if self.is_due(appended()):
                    write()
            except Exception as exc:  # reported in stats; the next write past due retries
                report("delta", exc)
                st = self.state
                if st is not None:
                    self.reset(st)
                    # no writer waits for deltas that fail; the next one that succeeds re-arms
                    self.stall_at = NEVER
                    with self._cv:
                        self._cv.notify_all()
