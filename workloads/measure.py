"""Latency recording: one HdrHistogram per operation name, exact merging, YCSB's summary numbers.

Units are microseconds, 3 significant digits, trackable range 1 µs .. 1 hour (YCSB's settings).
``hdrh``'s ``record_value`` costs ~2 µs in pure Python, which alone would cap a single client
thread near 100,000 ops/s; so a :class:`Recorder` appends raw values to a list (~50 ns) and
moves them into the histogram in bulk (``numpy.unique`` + ``record_value(v, count)``).  That
is exact: the histogram ends up with the same counts as recording one value at a time.

Names follow YCSB: ``READ`` etc. for the latency of successful ops, ``READ-FAILED`` for the
latency of failed ones, ``Intended-READ`` for latency measured from the *intended* start time
when a target rate is set (coordinated-omission correction).  Status counts (``Return=OK``,
``Return=ERROR``, ``Return=NOT_FOUND``) are kept per operation name, failed or not.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable

import numpy as np
from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3
#: pending values per name before they are moved into the histogram (bounds memory)
BATCH = 1 << 16

OK = "OK"
ERROR = "ERROR"
NOT_FOUND = "NOT_FOUND"


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_bulk(hist: HdrHistogram, values: Iterable[int]) -> None:
    """Record many values exactly, one ``record_value`` call per distinct value."""
    arr = np.fromiter(values, dtype=np.int64)
    if not arr.size:
        return
    np.clip(arr, 0, HIGHEST_US, out=arr)
    distinct, counts = np.unique(arr, return_counts=True)
    for value, count in zip(distinct.tolist(), counts.tolist()):
        hist.record_value(value, count)


class Measurements:
    """Histograms and status counts per operation name; mergeable across threads and processes."""

    def __init__(self) -> None:
        self.histograms: dict[str, HdrHistogram] = {}
        self.statuses: dict[str, Counter] = defaultdict(Counter)

    def histogram(self, name: str) -> HdrHistogram:
        hist = self.histograms.get(name)
        if hist is None:
            hist = self.histograms[name] = new_histogram()
        return hist

    def record(self, name: str, value_us: int) -> None:
        """Record one value directly (slow path; hot loops use a :class:`Recorder`)."""
        self.histogram(name).record_value(min(max(int(value_us), 0), HIGHEST_US))

    def count_status(self, name: str, status: str, n: int = 1) -> None:
        self.statuses[name][status] += n

    # -- merging ------------------------------------------------------------------------
    def merge(self, other: "Measurements") -> "Measurements":
        """Add ``other`` into this one (exact: histogram bucket counts are summed)."""
        for name, hist in other.histograms.items():
            self.histogram(name).add(hist)
        for name, counts in other.statuses.items():
            self.statuses[name].update(counts)
        return self

    def encode(self) -> dict[str, Any]:
        """A JSON/pickle-friendly form for sending measurements between processes."""
        return {
            "histograms": {n: h.encode().decode("ascii") for n, h in self.histograms.items()},
            "statuses": {n: dict(c) for n, c in self.statuses.items()},
        }

    @classmethod
    def decode(cls, data: dict[str, Any]) -> "Measurements":
        out = cls()
        for name, text in data["histograms"].items():
            out.histogram(name).decode_and_add(text.encode("ascii"))
        for name, counts in data["statuses"].items():
            out.statuses[name].update(counts)
        return out

    # -- summaries ----------------------------------------------------------------------
    def names(self) -> list[str]:
        """Every name with a histogram or a status count, in a stable YCSB-like order."""
        return sorted(set(self.histograms) | set(self.statuses), key=_name_order)

    def summary(self, name: str) -> dict[str, Any]:
        """The numbers YCSB prints for ``name``; latencies in µs (None when nothing recorded)."""
        hist = self.histograms.get(name)
        statuses = self.statuses.get(name, Counter())
        count = hist.get_total_count() if hist is not None else 0
        out: dict[str, Any] = {
            "count": count,
            "ok": statuses.get(OK, 0),
            "errors": sum(n for s, n in statuses.items() if s != OK),
            "statuses": dict(statuses),
        }
        if count:
            out.update(
                mean_us=hist.get_mean_value(),
                min_us=hist.get_min_value(),
                max_us=hist.get_max_value(),
                p50_us=hist.get_value_at_percentile(50),
                p95_us=hist.get_value_at_percentile(95),
                p99_us=hist.get_value_at_percentile(99),
                p999_us=hist.get_value_at_percentile(99.9),
            )
        else:
            out.update(mean_us=None, min_us=None, max_us=None, p50_us=None, p95_us=None,
                       p99_us=None, p999_us=None)
        return out


def _name_order(name: str) -> tuple:
    base = name.removeprefix("Intended-").removesuffix("-FAILED")
    order = ["READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"]
    return (
        order.index(base) if base in order else len(order),
        base,
        name.startswith("Intended-"),
        name.endswith("-FAILED"),
    )


class Recorder:
    """One client thread's recorder: cheap appends now, exact histograms on :meth:`drain`.

    ``ok(op, us)`` records a successful op (its ``Return=OK`` is counted from the number of
    values at drain time, which saves a dict update per op); ``failed(op, status, us)`` records
    into ``<op>-FAILED`` and counts ``Return=<status>``; ``record`` adds a value with no status
    (``Intended-<op>``).  Not thread-safe on purpose: each thread owns one, the runner merges.
    """

    __slots__ = ("measurements", "_pending", "_status", "_ok")

    def __init__(self) -> None:
        self.measurements = Measurements()
        self._pending: dict[str, list[int]] = {}
        self._status: dict[tuple[str, str], int] = {}
        self._ok: dict[str, int] = {}

    def record(self, name: str, value_us: int) -> None:
        pending = self._pending.get(name)
        if pending is None:
            pending = self._pending[name] = []
        pending.append(value_us)
        if len(pending) >= BATCH:
            self._drain_one(name, pending)

    def ok(self, op: str, value_us: int) -> None:
        pending = self._pending.get(op)
        if pending is None:
            pending = self._pending[op] = []
            self._ok[op] = 0
        pending.append(value_us)
        if len(pending) >= BATCH:
            self._drain_one(op, pending)

    def with_status(self, name: str, status: str, value_us: int) -> None:
        """Record a value under ``name`` itself with any status (YCSB's ``VERIFY``)."""
        self.record(name, value_us)
        key = (name, status)
        self._status[key] = self._status.get(key, 0) + 1

    def failed(self, op: str, status: str, value_us: int) -> None:
        self.record(op + "-FAILED", value_us)
        key = (op, status)
        self._status[key] = self._status.get(key, 0) + 1

    def _drain_one(self, name: str, pending: list[int]) -> None:
        record_bulk(self.measurements.histogram(name), pending)
        if name in self._ok:
            self._ok[name] += len(pending)
        pending.clear()

    def drain(self) -> Measurements:
        """Move everything pending into the histograms and return them."""
        for name, pending in self._pending.items():
            if pending:
                self._drain_one(name, pending)
        for name, n in self._ok.items():
            if n:
                self.measurements.count_status(name, OK, n)
            self._ok[name] = 0
        for (name, status), n in self._status.items():
            self.measurements.count_status(name, status, n)
        self._status.clear()
        return self.measurements


__all__ = [
    "BATCH",
    "ERROR",
    "HIGHEST_US",
    "Measurements",
    "NOT_FOUND",
    "OK",
    "Recorder",
    "new_histogram",
    "record_bulk",
]
