"""Recovery time by phase: what a restore read and replayed (instance side), and the episode's
timeline (driver side).

A *recovery episode* starts when an instance fails and ends when the job's throughput is back at
its pre-failure level.  The driver cuts it into five consecutive phases, so that they add up to the
episode's ``RecoveryTime`` by construction (every instant of the episode is in exactly one phase):

  detect    failure instant -> the re-run of the failed micro-batch is submitted (Spark noticing
            the dead task, the driver's planning of the re-run; a failed re-run's own detection);
  load      checkpoints, commit records and logged messages read from the backend (store opens
            included) — by the driver's ``recover`` and by the slowest-restoring instance;
  restore   that instance's working state rebuilt from what was read (decode, merge);
  replay    the rest of the re-run: logged events re-applied, the source's events from the
            recovery point re-processed, and any re-run cut short by a further failure;
  catch-up  the re-run's end -> the start of the first micro-batch that runs at >= 90 % of the
            pre-failure rate (the commit of the recovered batch and any slow batches after it);
            in a paced run (``--rate``) that micro-batch must also be no larger than 1.5 times
            the pre-failure ones (the backlog the failure built up is drained).

A checkpoint is cut the same way, into ``encode`` (the layout turning the state into pieces) and
``write`` (the backend's puts, deletes and flushes); the rest of a checkpoint's time, trigger to
commit, is waiting: for the slowest instance and for the driver's commit.

``load``, ``restore`` and the log part of ``replay`` happen inside the instance's Spark task: the
:class:`Meter` here measures them without any help from the protocol.  Every backend read goes
through :mod:`spark_integration.store`, which reports it to the meter of its thread (time and
bytes); a protocol that re-applies logged messages wraps that loop in :func:`replaying` (one
``with``).  What remains of the restore is rebuilding.  The meter is thread-local, so an
asynchronous checkpoint writer in the same Python worker never counts as a restore's read.

A meter also opens a request tap (:func:`backends.ledger.tap`) in its thread: ``requests`` holds
every request any store sent from this thread (and the pools it runs a call on) while it meters,
so a restore's and a checkpoint's requests are counted where their time is.

This module imports nothing of the project but the backends' request ledger: the store, the
operators and the protocols all use it.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator

from backends.ledger import Ledger, tap

_local = threading.local()


@dataclass
class Meter:
    """What one restore (or the driver's ``recover``, or one checkpoint) did, in this thread."""

    load_s: float = 0.0  # time in backend reads (and opens of path backends)
    load_bytes: int = 0  # bytes those reads returned
    replay_s: float = 0.0  # time re-applying logged events, backend reads excluded
    encode_s: float = 0.0  # a checkpoint: time turning the state into pieces (layouts)
    write_s: float = 0.0  # a checkpoint: time in backend writes, deletes and flushes
    requests: Ledger = field(default_factory=Ledger)  # what the stores sent meanwhile

    def add_read(self, seconds: float, nbytes: int) -> None:
        self.load_s += seconds
        self.load_bytes += nbytes


def current() -> Meter | None:
    """The meter of this thread, if a restore is being measured."""
    return getattr(_local, "meter", None)


@contextlib.contextmanager
def metering() -> Iterator[Meter]:
    """Measure what this thread reads and replays until the ``with`` ends."""
    previous, meter = current(), Meter()
    _local.meter = meter
    try:
        with tap(meter.requests):
            yield meter
    finally:
        _local.meter = previous


@contextlib.contextmanager
def reading() -> Iterator[list[int]]:
    """Time a backend read for the current meter; append the bytes read to the yielded list."""
    meter = current()
    nbytes: list[int] = []
    if meter is None:
        yield nbytes
        return
    t = time.perf_counter()
    try:
        yield nbytes
    finally:
        meter.add_read(time.perf_counter() - t, sum(nbytes))


@contextlib.contextmanager
def timed(what: str) -> Iterator[None]:
    """Add the time of the ``with`` block to the current meter's ``what`` (``encode_s``,
    ``write_s``): where a checkpoint's time goes, measured where it is spent."""
    meter = current()
    if meter is None:
        yield
        return
    t = time.perf_counter()
    try:
        yield
    finally:
        setattr(meter, what, getattr(meter, what) + time.perf_counter() - t)


@contextlib.contextmanager
def replaying() -> Iterator[None]:
    """Wrap the re-application of logged events in a restore: its time counts as replay (the
    backend reads inside it still count as load)."""
    meter = current()
    if meter is None:
        yield
        return
    t, load_before = time.perf_counter(), meter.load_s
    try:
        yield
    finally:
        meter.replay_s += max(0.0, (time.perf_counter() - t) - (meter.load_s - load_before))


#: a micro-batch after a recovery runs "at the pre-failure level" from this fraction of its rate on
CATCH_UP_FRACTION = 0.9
#: pre-failure micro-batches whose median rate is the reference
CATCH_UP_REFERENCE_BATCHES = 5
#: a paced run's micro-batch larger than this many times the pre-failure median still drains a backlog
CATCH_UP_BACKLOG = 1.5


def reference(recent: list[tuple[float, int]]) -> tuple[float, float] | None:
    """The pre-failure level a recovery's catch-up must get back to: the median rate (events/s)
    and size (events) of the last :data:`CATCH_UP_REFERENCE_BATCHES` micro-batches run at the
    normal level, given as ``(rate, events)`` in order; None when none ran (then any next
    micro-batch is back)."""
    recent = recent[-CATCH_UP_REFERENCE_BATCHES:]
    if not recent:
        return None
    return float(statistics.median(r for r, _ in recent)), float(statistics.median(n for _, n in recent))


def back_at_rate(rate: float, events: int, level: tuple[float, float] | None, paced: bool) -> bool:
    """Whether a micro-batch after a recovery runs at the pre-failure ``level`` (:func:`reference`):
    at :data:`CATCH_UP_FRACTION` of its rate, and in a paced run no larger than
    :data:`CATCH_UP_BACKLOG` times its size (the backlog drained)."""
    if level is None:
        return True
    slow = rate < CATCH_UP_FRACTION * level[0]
    backlog = paced and events > CATCH_UP_BACKLOG * level[1] + 1
    return not (slow or backlog)
