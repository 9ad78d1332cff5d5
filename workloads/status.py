"""What a phase reports while it runs: YCSB's status lines (``-s``) and HdrHistogram interval logs.

YCSB's status thread prints, every interval, the operations done, the current rate, the
estimated time left and, per operation, the statistics of *that interval* only
(``[READ: Count=…, Max=…, Min=…, Avg=…, 90=…, 99=…, 99.9=…, 99.99=…]``); with
``hdrhistogram.fileoutput=true`` each interval histogram is also appended to one HdrHistogram log
per operation (``<hdrhistogram.output.path><NAME>.hdr``), and the last, partial interval when the
phase ends.  Without status lines the log holds one interval: the whole phase.  The histograms
are encoded in HdrHistogram's V1 format (:mod:`workloads.hdr_v1`), which YCSB's own
HdrHistogram 2.1.4 reads as well as every later version.

Interval histograms need the client threads' values while they run, so with status lines each
client thread records into a :class:`LiveRecorder`: a :class:`~workloads.measure.Recorder` with
a lock, from which the watching thread takes everything recorded so far (:meth:`LiveRecorder.
take`).  Every value lands in exactly one interval, and the phase's total is the sum of its
intervals (:class:`Intervals`), so the final result is the same as without status lines.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from datetime import datetime
from typing import Sequence, TextIO

from hdrh.log import HistogramLogWriter

from . import hdr_v1
from .measure import Measurements, Recorder


class _Stderr:
    """``sys.stderr`` as it is at each write, for status lines: a progress display on the
    terminal puts its own stream there while it draws, and prints what is written to it above
    the bars; a stream taken before the display started would write into them."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


#: where status lines go: stderr, whatever stands for it when the line is printed
STDERR: TextIO = _Stderr()  # type: ignore[assignment]


class LiveRecorder(Recorder):
    """A recorder whose values can be taken while its thread records (one lock per recorder,
    uncontended but for the watching thread's :meth:`take`)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()

    def record(self, name: str, value_us: int) -> None:
        with self._lock:
            Recorder.record(self, name, value_us)

    def ok(self, op: str, value_us: int) -> None:
        with self._lock:
            Recorder.ok(self, op, value_us)

    def failed(self, op: str, status: str, value_us: int) -> None:
        with self._lock:
            Recorder.failed(self, op, status, value_us)

    def with_status(self, name: str, status: str, value_us: int) -> None:
        with self._lock:
            Recorder.with_status(self, name, status, value_us)

    def take(self) -> Measurements:
        """Everything recorded since the last take, as measurements of their own."""
        with self._lock:
            taken = Recorder.drain(self)
            self.measurements = Measurements()
        return taken

    def drain(self) -> Measurements:
        return self.take()


class HdrLogs:
    """One HdrHistogram interval log per measurement name, ``<prefix><NAME>.hdr`` as YCSB names
    them (``prefix`` is concatenated, so a directory prefix ends with a separator)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.base_ms = float(int(time.time() * 1000))  # whole ms: histograms stamp whole ms
        self._files: dict[str, tuple[TextIO, HistogramLogWriter]] = {}
        self.paths: list[str] = []

    def _writer(self, name: str) -> HistogramLogWriter:
        if name not in self._files:
            path = f"{self.prefix}{name}.hdr"
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            writer = HistogramLogWriter(fh)
            writer.output_comment(f"[Logging for: {name}]")
            writer.output_log_format_version()
            # the package's own StartTime writer formats the date wrongly; same line by hand
            stamp = datetime.fromtimestamp(self.base_ms / 1000.0).isoformat(" ")
            fh.write(f"#[StartTime: {self.base_ms / 1000.0:f} (seconds since epoch), {stamp}]\n")
            writer.output_base_time(self.base_ms)
            writer.base_time = self.base_ms
            writer.output_legend()
            self._files[name] = (fh, writer)
            self.paths.append(path)
        return self._files[name][1]

    def interval(self, measurements: Measurements, start_ms: float, end_ms: float) -> None:
        """Append each histogram of ``measurements`` as the interval ``[start_ms, end_ms]``
        (wall-clock milliseconds since the epoch)."""
        for name, hist in measurements.histograms.items():
            writer = self._writer(name)
            # the writer's own line, with the V1 payload instead of hdrh's V2 encoding
            start = (int(start_ms) - writer.base_time) / 1000.0
            length = (int(end_ms) - int(start_ms)) / 1000.0
            writer.log.write(f"{start:f},{length:f},{hist.get_max_value() // 1000000.0:f},"
                             f"{hdr_v1.encode(hist)}\n")

    def close(self) -> None:
        for fh, _writer in self._files.values():
            fh.close()
        self._files.clear()


class Intervals:
    """The watching thread's view of live recorders: :meth:`tick` takes one interval from all
    of them; :attr:`total` is the sum of every interval taken.

    With ``granularity_ms`` (YCSB's ``measurementtype=timeseries``), :meth:`sample` is called
    at each bucket's end and adds, per measurement, the bucket's operation count and latency sum
    to :attr:`series` (``name -> {bucket start ms: [count, sum µs]}``, bucket starts counted
    from the phase's start as in YCSB's OneMeasurementTimeSeries; empty buckets are left out,
    as YCSB leaves them out).  A bucket's sum is its histogram's mean times its count, so its
    average is exact to the histogram's precision.  What a sample takes waits in the pending
    interval until the next :meth:`tick`, so status lines and logs see every value once."""

    def __init__(self, recorders: Sequence[LiveRecorder], logs: HdrLogs | None,
                 granularity_ms: int | None = None) -> None:
        self.recorders = recorders
        self.logs = logs
        self.total = Measurements()
        self.granularity_ms = granularity_ms
        self.series: dict[str, dict[int, list[float]]] = {}
        self._since_ms = time.time() * 1000.0
        self._start = time.perf_counter()
        self._pending = Measurements()

    def sample(self, boundary: bool = False) -> None:
        """Take what the recorders hold into the pending interval (and the time series: into
        the bucket that ends at the nearest boundary when ``boundary``, as the watching thread
        samples just after one, else into the bucket under way)."""
        taken = Measurements()
        for rec in self.recorders:
            taken.merge(rec.take())
        if self.granularity_ms:
            elapsed_ms = (time.perf_counter() - self._start) * 1000.0
            g = self.granularity_ms
            bucket = max(0, round(elapsed_ms / g) - 1) * g if boundary else int(elapsed_ms // g) * g
            for name, hist in taken.histograms.items():
                count = hist.get_total_count()
                if count:
                    cell = self.series.setdefault(name, {}).setdefault(bucket, [0, 0.0])
                    cell[0] += count
                    cell[1] += hist.get_mean_value() * count
        self._pending.merge(taken)

    def averages(self) -> dict[str, list[tuple[int, float]]]:
        """The time series: per measurement, ``(bucket start ms, average latency µs)``."""
        return {name: [(t, total / n) for t, (n, total) in sorted(buckets.items())]
                for name, buckets in self.series.items()}

    def tick(self) -> Measurements:
        self.sample()
        interval, self._pending = self._pending, Measurements()
        now_ms = time.time() * 1000.0
        if self.logs is not None:
            self.logs.interval(interval, self._since_ms, now_ms)
        self._since_ms = now_ms
        # the interval's own histograms go to the status line; the total gets copies
        self.total.merge(interval)
        return interval


# ---------------------------------------------------------------------------------- formatting
def _fmt(value: float) -> str:
    """Java's ``DecimalFormat("#.##")``: at most two decimals, no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def op_summary(name: str, measurements: Measurements) -> str:
    """``[NAME: Count=…, Max=…, Min=…, Avg=…, 90=…, 99=…, 99.9=…, 99.99=…]`` of one interval."""
    hist = measurements.histograms.get(name)
    count = hist.get_total_count() if hist is not None else 0
    if not count:
        return f"[{name}: Count=0, Max=0, Min=0, Avg=0, 90=0, 99=0, 99.9=0, 99.99=0]"
    pct = {p: hist.get_value_at_percentile(p) for p in (90, 99, 99.9, 99.99)}
    return (f"[{name}: Count={count}, Max={hist.get_max_value()}, Min={hist.get_min_value()}, "
            f"Avg={_fmt(hist.get_mean_value())}, 90={_fmt(pct[90])}, 99={_fmt(pct[99])}, "
            f"99.9={_fmt(pct[99.9])}, 99.99={_fmt(pct[99.99])}]")


def remaining(seconds: int) -> str:
    """YCSB's RemainingFormatter: days, hours, minutes (under a day), seconds (under a minute)."""
    out = []
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        out.append(f"{days} day{'s' if days != 1 else ''} ")
    if hours:
        out.append(f"{hours} hour{'s' if hours != 1 else ''} ")
    if days < 1 and minutes:
        out.append(f"{minutes} minute{'s' if minutes != 1 else ''} ")
    if seconds < 60:
        out.append(f"{secs} second{'s' if secs != 1 else ''} ")
    return "".join(out)


def status_line(elapsed_s: float, ops: int, interval_rate: float, total: int | None,
                interval: Measurements | None) -> str:
    """One status line as YCSB's StatusThread prints it (the per-operation part only when
    ``interval`` is given: processes and Spark tasks report counts only)."""
    now = datetime.now()
    stamp = now.strftime("%Y-%m-%d %H:%M:%S:") + f"{now.microsecond // 1000:03d}"
    line = f"{stamp} {int(elapsed_s)} sec: {ops} operations; "
    if ops:
        line += f"{_fmt(interval_rate)} current ops/sec; "
    todo = (total - ops) if total else 0
    if todo > 0 and ops and elapsed_s > 0:
        line += "est completion in " + remaining(int(-(-todo // (ops / elapsed_s))))
    if interval is not None:
        names = interval.names()
        names = [n for n in names if not n.startswith("Intended-")] + \
            [n for n in names if n.startswith("Intended-")]
        line += "".join(op_summary(n, interval) + " " for n in names
                        if n in interval.histograms)
    return line.rstrip()


def watch(
    workers: Sequence[threading.Thread],
    done: list[int],
    total: int | None,
    progress,
    status_interval: float | None,
    status_out: TextIO | None,
    start: float,
    intervals: Intervals | None = None,
) -> None:
    """Poll the workers' op counters until they finish; report progress and status lines.
    Every phase driver calls it from the thread that started the workers, which only watches.
    With ``intervals``, each status line carries the per-operation statistics of its interval,
    and a time series is sampled at each of its buckets' ends."""
    granularity = (intervals.granularity_ms or 0) / 1000.0 if intervals is not None else 0.0
    tick = min(0.1, granularity / 10) if granularity else 0.1
    next_sample = start + granularity if granularity else None
    next_status = start + status_interval if status_interval else None
    last_ops, last_t = 0, start
    while True:
        alive = [w for w in workers if w.is_alive()]
        if not alive:
            break
        alive[0].join(tick)
        ops = sum(done)
        if progress is not None:
            progress(ops)
        now = time.perf_counter()
        if next_sample is not None and now >= next_sample:
            intervals.sample(boundary=True)
            next_sample += granularity * max(1, int((now - next_sample) // granularity) + 1)
        if next_status is not None and now >= next_status and status_out is not None:
            rate = (ops - last_ops) / (now - last_t) if now > last_t else 0.0
            interval = intervals.tick() if intervals is not None else None
            print(status_line(now - start, ops, rate, total, interval), file=status_out,
                  flush=True)
            last_ops, last_t = ops, now
            next_status += status_interval
    if progress is not None:
        progress(sum(done))
    if next_status is not None and status_out is not None:  # YCSB's final status line
        now, ops = time.perf_counter(), sum(done)
        rate = (ops - last_ops) / (now - last_t) if now > last_t else 0.0
        interval = intervals.tick() if intervals is not None else None
        print(status_line(now - start, ops, rate, total, interval), file=status_out, flush=True)
