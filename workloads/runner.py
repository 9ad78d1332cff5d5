"""Load and run phases: client threads, pacing to a target rate, intended start times, progress.

* **Load** inserts keys ``insertstart .. insertstart + insertcount - 1`` with ``threads``
  threads, split as YCSB splits them: each thread does its share of the insert count (the
  first ones take the remainder) and takes the next key number from the shared key sequence.
  With ``batch > 1`` a thread takes ``batch`` key numbers at once and writes them with
  ``put_many`` (one histogram value per chunk, named ``INSERT-BATCH``); with ``batch == 1`` it
  does one ``put`` per key, recorded as ``INSERT`` exactly like YCSB's load phase.
* **Run** starts ``threads`` clients.  ``operations`` is split across them as YCSB does;
  ``duration`` (seconds) stops them early.  With ``target`` (ops/s for the whole run) each
  thread paces itself to ``target / threads`` and measures ``Intended-<OP>`` from the time the
  op *should* have started, which corrects coordinated omission.
* A backend exception fails only that op: it is counted ``Return=ERROR`` and its latency goes
  to ``<OP>-FAILED``; the run goes on.  A few distinct error messages are kept for the report.

Also here: :func:`verify` (read back every key after a reopen, counting missing and corrupt
values).

The calling thread only watches (:func:`workloads.status.watch`): it calls ``progress(done)``
and prints YCSB's status line, with each operation's statistics over the interval, every
``status_interval`` seconds while the clients work.  ``hdr_logs`` receives the phase's interval
histograms (:class:`workloads.status.HdrLogs`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence, TextIO

from .core import Client, CoreWorkload, WorkloadError
from .measure import Measurements, Recorder
from .status import HdrLogs, Intervals, LiveRecorder, watch

#: how many distinct error messages a phase keeps
MAX_ERROR_SAMPLES = 5


@dataclass(frozen=True)
class ClientSettings:
    """How a phase's clients behave: YCSB's client properties, apart from the workload itself.

    One object rather than loose keywords, so a run with threads, with processes
    (:mod:`workloads.parallel`) or with Spark tasks (:mod:`workloads.spark_clients`) reads the same
    settings, and a new setting is added in one place.  :meth:`share` is how a run is split
    between processes or tasks: operations and the target rate are divided, the rest is the same.
    """

    #: client threads (per process or task)
    threads: int = 1
    #: operations over all clients; ``None`` with ``duration``: run until the time is up, and
    #: ``None`` without it: the workload's operation count
    operations: int | None = None
    #: seconds after which the run phase stops (with ``operations``: whichever comes first)
    duration: float | None = None
    #: ops/s over all clients (YCSB's ``-target``); adds ``Intended-<OP>`` latencies
    target: float | None = None
    seed: int = 1
    #: keys per ``put_many`` in the load phase; 1 = one ``put`` per key, measured as ``INSERT``
    load_batch: int = 1000
    #: YCSB's ``measurementtype=timeseries``: the run phase keeps each measurement's average
    #: latency per bucket of this many ms (:attr:`PhaseResult.series`)
    timeseries_ms: int | None = None

    def validate(self) -> ClientSettings:
        """Refuse settings no phase can run with (one line naming the setting and the fix)."""
        if self.threads < 1:
            raise WorkloadError(f"--threads must be >= 1 (got {self.threads})")
        if self.load_batch < 1:
            raise WorkloadError(f"--load-batch must be >= 1 (got {self.load_batch}); 1 writes "
                                "one put per key")
        if self.operations is not None and self.operations < 0:
            raise WorkloadError(f"the operation count must be >= 0 (got {self.operations})")
        return self

    def share(self, parts: int, index: int) -> ClientSettings:
        """Client ``index``'s share when the run is split ``parts`` ways (YCSB's split: the
        first ones take the remainder)."""
        ops = self.operations
        if ops is not None:
            ops = ops // parts + (index < ops % parts)
        return replace(self, operations=ops,
                       target=self.target / parts if self.target else None)


@dataclass
class PhaseResult:
    """What one phase did: wall time, operations, measurements, sample errors."""

    name: str
    runtime_ms: float
    operations: int
    measurements: Measurements
    errors: dict[str, int] = field(default_factory=dict)
    #: keys written (load phase; equals operations when batch == 1)
    keys: int = 0
    #: with ``ClientSettings.timeseries_ms``: per measurement, ``(bucket start ms, average
    #: latency µs)`` of each non-empty bucket
    series: dict[str, list[tuple[int, float]]] | None = None

    @property
    def throughput(self) -> float:
        return self.operations / (self.runtime_ms / 1000.0) if self.runtime_ms > 0 else 0.0


class _ErrorLog:
    """Thread-safe sample of distinct error messages with their counts."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"
        with self._lock:
            if text in self.counts or len(self.counts) < MAX_ERROR_SAMPLES:
                self.counts[text] = self.counts.get(text, 0) + 1


# ----------------------------------------------------------------------------------------- load
def _recorders(n: int, live: bool) -> list[Recorder]:
    return [LiveRecorder() if live else Recorder() for _ in range(n)]


def _finish(recorders: list[Recorder], intervals: Intervals | None, hdr_logs: HdrLogs | None,
            start_ms: float) -> Measurements:
    """The phase's measurements once its threads are done; without status lines, the hdr logs
    get the whole phase as one interval."""
    if intervals is not None:
        intervals.tick()  # anything recorded after the last status line
        return intervals.total
    merged = Measurements()
    for rec in recorders:
        merged.merge(rec.drain())
    if hdr_logs is not None:
        hdr_logs.interval(merged, start_ms, time.time() * 1000.0)
    return merged


def load(
    store: Any,
    workload: CoreWorkload,
    *,
    batch: int = 1000,
    threads: int = 1,
    value_for: Callable[[str], bytes] | None = None,
    progress: Callable[[int], None] | None = None,
    status_interval: float | None = None,
    status_out: TextIO | None = None,
    hdr_logs: HdrLogs | None = None,
) -> PhaseResult:
    """Insert the records of ``workload`` (keys in YCSB order) with ``threads`` threads.
    ``value_for(key)`` gives the value; by default a new random value of the workload's record
    model, written as the run reads it: a record of fields as fields (``put_fields``) into a
    store that keeps records of fields, as one value (``put``) into any other."""
    threads = max(1, threads)
    batch = max(1, batch)
    keys = workload.load_keys()  # insertstart .. insertstart + insertcount - 1
    total = len(keys)
    shares = [total // threads + (i < total % threads) for i in range(threads)]
    taken = [0]  # the shared key sequence, as a position in ``keys``
    take_lock = threading.Lock()
    name = "INSERT" if batch == 1 else "INSERT-BATCH"
    live = bool(status_interval and status_out is not None)
    recorders = _recorders(threads, live)
    intervals = Intervals(recorders, hdr_logs) if live else None
    errors = _ErrorLog()
    done = [0] * threads

    def take(n: int) -> list[str]:
        with take_lock:  # one thread's chunk is consecutive key numbers
            at = taken[0]
            taken[0] += n
        return keys[at : at + n]

    def work(index: int) -> None:
        # the load's own random streams: -1, then -2, -3 ... for more threads
        client = workload.client(-1 - index, None if value_for else store)
        if client.native_fields:
            make_value: Callable[[str], Any] = client.fields_for
            put_one, put_batch = store.put_fields, store.put_fields_many
        else:
            make_value = value_for or client.value_for
            put_one, put_batch = store.put, store.put_many
        recorder = recorders[index]
        perf = time.perf_counter_ns
        left = shares[index]
        while left > 0:
            chunk = take(min(batch, left))
            items = [(k, make_value(k)) for k in chunk]
            st = perf()
            try:
                if batch == 1:
                    put_one(items[0][0], items[0][1])
                else:
                    put_batch(items)
                status = "OK"
            except Exception as exc:  # noqa: BLE001 - a failed op is data, not a crash
                errors.add(exc)
                status = "ERROR"
            lat = (perf() - st) // 1000
            if status == "OK":
                recorder.ok(name, lat)
            else:
                recorder.failed(name, status, lat)
            left -= len(chunk)
            done[index] += len(chunk)

    start = time.perf_counter()
    start_ms = time.time() * 1000.0
    workers = [threading.Thread(target=work, args=(i,), name=f"ckptbench-load-{i}", daemon=True)
               for i in range(threads)]
    for w in workers:
        w.start()
    watch(workers, done, total, progress, status_interval, status_out, start, intervals)
    for w in workers:
        w.join()
    runtime_ms = (time.perf_counter() - start) * 1000.0
    merged = _finish(recorders, intervals, hdr_logs, start_ms)
    keys = sum(done)
    # operations = keys written, so throughput is keys/s whatever the batch size
    return PhaseResult("load", runtime_ms, keys, merged, errors.counts, keys)


# ------------------------------------------------------------------------------------------ run
def run(
    store: Any,
    workload: CoreWorkload,
    clients: ClientSettings = ClientSettings(),
    *,
    progress: Callable[[int], None] | None = None,
    status_interval: float | None = None,
    status_out: TextIO | None = None,
    client_offset: int = 0,
    hdr_logs: HdrLogs | None = None,
) -> PhaseResult:
    """The transaction phase, with ``clients.threads`` client threads.  Thread ``i`` uses client
    stream ``client_offset + i`` (several processes use disjoint client streams)."""
    threads, operations, duration, target = (clients.threads, clients.operations,
                                             clients.duration, clients.target)
    threads = max(1, threads)
    if operations is None and duration is None:
        operations = workload.spec.operations
    per_thread: list[int | None] = [
        None if operations is None else operations // threads + (i < operations % threads)
        for i in range(threads)
    ]
    per_thread_rate = target / threads if target else None
    granularity = clients.timeseries_ms
    live = bool(status_interval and status_out is not None) or bool(granularity)
    recorders = _recorders(threads, live)
    intervals = Intervals(recorders, hdr_logs, granularity) if live else None
    clients = [workload.client(client_offset + i, store) for i in range(threads)]
    for client, recorder in zip(clients, recorders):
        client.recorder = recorder  # the store calls inside a read-modify-write
    errors = _ErrorLog()
    done = [0] * threads
    start_ns = [0]
    deadline_ns = [None]
    ready = threading.Barrier(threads + 1)

    def work(i: int) -> None:
        _client_loop(
            i, clients[i], store, recorders[i], errors, done, per_thread[i],
            per_thread_rate, ready, start_ns, deadline_ns,
        )

    workers = [
        threading.Thread(target=work, args=(i,), name=f"ckptbench-client-{i}", daemon=True)
        for i in range(threads)
    ]
    for w in workers:
        w.start()
    start_ns[0] = time.perf_counter_ns()
    if duration is not None:
        deadline_ns[0] = start_ns[0] + int(duration * 1e9)
    ready.wait()  # every client sees the same start time
    start = start_ns[0] / 1e9
    start_ms = time.time() * 1000.0
    watch(workers, done, operations, progress, status_interval, status_out, start, intervals)
    for w in workers:
        w.join()
    runtime_ms = (time.perf_counter_ns() - start_ns[0]) / 1e6
    merged = _finish(recorders, intervals, hdr_logs, start_ms)
    return PhaseResult("run", runtime_ms, sum(done), merged, errors.counts,
                       series=intervals.averages() if granularity else None)


def _client_loop(
    index: int,
    client: Client,
    store: Any,
    recorder: Recorder,
    errors: _ErrorLog,
    done: list[int],
    count: int | None,
    rate: float | None,
    ready: threading.Barrier,
    start_ns: list[int],
    deadline_ns: list[int | None],
) -> None:
    """One client thread.  Kept flat and local-variable heavy: it is the harness's hot path."""
    ready.wait()
    perf = time.perf_counter_ns
    next_op = client.next_op
    ops = client.ops
    record = recorder.record
    record_ok = recorder.ok
    record_failed = recorder.failed
    deadline = deadline_ns[0]
    interval_ns = int(1e9 / rate) if rate else 0
    intended = start_ns[0] - interval_ns  # the first op is intended at the start
    intended_names = {op: "Intended-" + op for op in ops}
    k = 0
    while count is None or k < count:
        if deadline is not None and perf() >= deadline:
            break
        op = next_op()
        if interval_ns:
            intended += interval_ns
            wait = intended - perf()
            if wait > 0:
                time.sleep(wait / 1e9)
        t0 = perf()
        try:
            status, st, en = ops[op](store)
        except Exception as exc:  # noqa: BLE001 - a failed op is counted, the run goes on
            st, en = t0, perf()  # the whole attempt, key choice included
            errors.add(exc)
            status = "ERROR"
        if status == "OK":
            record_ok(op, (en - st) // 1000)
        else:
            record_failed(op, status, (en - st) // 1000)
        if interval_ns:
            record(intended_names[op], (en - intended) // 1000)
        k += 1
        done[index] = k


# ------------------------------------------------------------------------------------ recovery
@dataclass
class VerifyResult:
    """Read-back of every key after a reopen: READ latencies plus what did not match."""

    phase: PhaseResult
    missing: int
    corrupt: int


def verify(
    store: Any,
    keys: Sequence[str],
    value_for: Callable[[str], bytes],
    *,
    eager: bool = False,
    prefetch_batch: int = 1000,
    name: str = "READ",
    progress: Callable[[int], None] | None = None,
) -> VerifyResult:
    """Read every key once (``READ`` latencies) and compare with ``value_for(key)``.

    Lazy (default): one ``get`` per key, as a PE reads its state on first use.  Eager: prefetch
    everything first with ``get_many`` in batches of ``prefetch_batch`` (one latency per batch
    under ``<name>-PREFETCH``), then each read is served from memory.  ``name`` is the section
    the reads are recorded under (``READ``; the checkpoint workload uses ``RECOVERY-READ``).

    A key that reads back ``None`` is *missing*; a different value, or a ``CorruptDataError``
    from the store, is *corrupt*.  Other exceptions count as ``Return=ERROR``.
    """
    from backends.base import CorruptDataError

    recorder = Recorder()
    errors = _ErrorLog()
    counts = {"missing": 0, "corrupt": 0}
    done = [0]

    prefetched: dict[str, bytes] = {}

    def prefetch() -> None:
        perf = time.perf_counter_ns
        for i in range(0, len(keys), prefetch_batch):
            chunk = list(keys[i : i + prefetch_batch])
            st = perf()
            try:
                prefetched.update(store.get_many(chunk))
                recorder.ok(name + "-PREFETCH", (perf() - st) // 1000)
            except Exception as exc:  # noqa: BLE001 - those keys then read back as missing
                errors.add(exc)
                recorder.failed(name + "-PREFETCH", "ERROR", (perf() - st) // 1000)

    def work() -> None:
        perf = time.perf_counter_ns
        if eager:
            prefetch()
        get = prefetched.get if eager else store.get
        for k, key in enumerate(keys):
            st = perf()
            try:
                value = get(key)
                lat = (perf() - st) // 1000
                if value is None:
                    counts["missing"] += 1
                    recorder.failed(name, "NOT_FOUND", lat)
                elif value != value_for(key):
                    counts["corrupt"] += 1
                    recorder.failed(name, "UNEXPECTED_STATE", lat)
                else:
                    recorder.ok(name, lat)
            except CorruptDataError as exc:
                counts["corrupt"] += 1
                errors.add(exc)
                recorder.failed(name, "UNEXPECTED_STATE", (perf() - st) // 1000)
            except Exception as exc:  # noqa: BLE001 - counted, the read-back goes on
                errors.add(exc)
                recorder.failed(name, "ERROR", (perf() - st) // 1000)
            done[0] = k + 1

    start = time.perf_counter()
    worker = threading.Thread(target=work, name="ckptbench-verify", daemon=True)
    worker.start()
    watch([worker], done, len(keys), progress, None, None, start)
    worker.join()
    runtime_ms = (time.perf_counter() - start) * 1000.0
    phase = PhaseResult("verify", runtime_ms, done[0], recorder.drain(), errors.counts)
    return VerifyResult(phase, counts["missing"], counts["corrupt"])
