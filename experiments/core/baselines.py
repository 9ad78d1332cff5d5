"""Baselines a durable store is measured against: bare appends + ``fdatasync`` to one file.

``--baseline`` answers "how close is the store to what this disk gives?" with two floors, both
writing the run's value size into a directory on the same filesystem as the store:

* **In Python** (``[BASELINE]``): ``os.write`` + ``os.fdatasync`` per value.  With several
  threads the writers share fdatasyncs through the store's own pure-Python committer
  (:class:`backends.indexed_fs.group_commit.PyCommit`) without a store around it, so a
  multi-threaded run has a like-for-like floor: the best CPython does with plain syscalls.
* **In C** (``[BASELINE-C]``): the same appends by N pthreads through the store's C group
  committer, no Python and no GIL in the loop: the most this machine's disk and kernel give a
  group commit.  Absent where the C committer was not built.

The two floors **bracket** the run: half of their operations run before it, half after, so a disk
whose speed drifts during the run affects both sides alike; the legs are then joined into one phase
and the run's throughput is divided by it (:class:`Baseline`).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

from backends.indexed_fs import group_commit
from workloads.core import ValueSource
from workloads.measure import Measurements, Recorder
from workloads.runner import PhaseResult, watch

from experiments.core import results
from experiments.core.spec import ProgressFactory, no_progress, with_bar


def fsync_baseline(directory: str, *, operations: int, value_size: int, seed: int = 0,
                   threads: int = 1, progress: Callable[[int], None] | None = None) -> PhaseResult:
    """``operations`` appends of ``value_size`` bytes to one file in ``directory``, each durable
    before the next (shared fdatasyncs with ``threads`` > 1).  Latencies go to ``APPEND``."""
    recorders = [Recorder() for _ in range(threads)]
    path = os.path.join(directory, "baseline.log")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    done = [0] * threads
    lock = threading.Lock()
    log = SimpleNamespace(sync=lambda: os.fdatasync(fd))  # what PyCommit syncs
    group, appends = group_commit.PyCommit(log), [0]

    def durable_append(value: bytes) -> None:
        with lock:
            os.write(fd, value)
            appends[0] = mine = appends[0] + 1  # the commit clock counts appends here
            group.appended(log, mine, mine)
        group.wait(mine)

    def work(i: int, n: int) -> None:
        values = ValueSource(value_size, random.Random(f"{seed}/baseline/{i}"))
        append = durable_append if threads > 1 else None
        perf, rec = time.perf_counter_ns, recorders[i]
        for k in range(n):
            value = values.next()
            st = perf()
            if append is None:
                os.write(fd, value)
                os.fdatasync(fd)
            else:
                append(value)
            rec.ok("APPEND", (perf() - st) // 1000)
            done[i] = k + 1

    shares = [operations // threads + (i < operations % threads) for i in range(threads)]
    try:
        start = time.perf_counter()
        workers = [threading.Thread(target=work, args=(i, n), name=f"ckptbench-baseline-{i}",
                                    daemon=True) for i, n in enumerate(shares)]
        for w in workers:
            w.start()
        watch(workers, done, operations, progress, None, None, start)
        for w in workers:
            w.join()
        runtime_ms = (time.perf_counter() - start) * 1000.0
    finally:
        os.close(fd)
        os.unlink(path)
    merged = Measurements()
    for rec in recorders:
        merged.merge(rec.drain())
    return PhaseResult("baseline", runtime_ms, sum(done), merged)


def native_baseline(directory: str, *, operations: int, value_size: int,
                    threads: int = 1) -> PhaseResult | None:
    """:func:`fsync_baseline`'s appends in C (the file is zero-filled before the clock starts);
    ``None`` where the C committer was not built."""
    if not group_commit.native_available:
        return None
    path = os.path.join(directory, "baseline-c.log")
    seconds, _syncs = group_commit.bare_threads(path, threads, operations, value_size)
    os.unlink(path)
    return PhaseResult("baseline-c", seconds * 1000.0, operations, Measurements())


@dataclass
class Leg:
    """One leg of both floors: the Python loop and (where built) the C loop."""

    python: PhaseResult
    native: PhaseResult | None


def leg(store_path: str | None, *, operations: int, value_size: int, seed: int, threads: int,
        progress: ProgressFactory = no_progress) -> Leg:
    """One leg, in a fresh directory beside the store's (the same filesystem)."""
    parent = os.path.dirname(store_path) if store_path else None
    directory = tempfile.mkdtemp(prefix="ckptbench-baseline-", dir=parent)
    operations = max(1, operations)
    try:
        python = with_bar(progress, "baseline", operations, lambda update: fsync_baseline(
            directory, operations=operations, value_size=value_size, seed=seed, threads=threads,
            progress=update))
        return Leg(python, native_baseline(directory, operations=operations,
                                           value_size=value_size, threads=threads))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def joined(name: str, legs: list[PhaseResult]) -> PhaseResult:
    """Legs of one floor as one phase (time and operations added up, histograms merged)."""
    merged = Measurements()
    for part in legs:
        merged.merge(part.measurements)
    return PhaseResult(name, sum(x.runtime_ms for x in legs), sum(x.operations for x in legs),
                       merged)


@dataclass
class Floor:
    """One floor joined from its legs, and the run's throughput over it."""

    phase: PhaseResult
    ratio: float
    legs_throughput: list[float]

    @classmethod
    def of(cls, name: str, legs: list[PhaseResult], run: PhaseResult) -> Floor:
        phase = joined(name, legs)
        ratio = run.throughput / phase.throughput if phase.throughput else 0.0
        return cls(phase, ratio, [x.throughput for x in legs])


@dataclass
class Baseline:
    """Both floors around one run."""

    python: Floor
    native: Floor | None
    directory_parent: str

    @classmethod
    def of(cls, before: Leg, after: Leg, run: PhaseResult, store_path: str | None) -> Baseline:
        native = None
        if before.native is not None and after.native is not None:
            native = Floor.of("baseline-c", [before.native, after.native], run)
        parent = os.path.dirname(store_path) if store_path else None
        return cls(Floor.of("baseline", [before.python, after.python], run), native,
                   parent or tempfile.gettempdir())

    def floor(self) -> results.BaselineFloor:
        """The ``baseline`` section of the run's result document."""
        native = None
        if self.native is not None:
            native = results.NativeFloor(self.native.phase.throughput,
                                         self.native.phase.runtime_ms,
                                         self.native.phase.operations, self.native.ratio,
                                         self.native.legs_throughput)
        return results.BaselineFloor(**vars(results.Phase.of(self.python.phase)),
                                     directory_parent=self.directory_parent,
                                     ratio=self.python.ratio,
                                     legs_throughput=self.python.legs_throughput, native=native)
