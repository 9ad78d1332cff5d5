"""The request ledger: what a store sent to its medium, by request type, in bytes and in retries.

Every backend keeps one :class:`Ledger` (``Backend.ledger``) and counts, at the one place where
its client hands a request to the medium, what it sends:

* ``minio``: every HTTP request botocore sends, by S3 operation (``PutObject``, ``GetObject``,
  ``ListObjectsV2``, ``DeleteObject``, ``DeleteObjects``, ``HeadBucket``, ``UploadPart``, …),
  retries included, the time botocore slept before each retry, and the answers that were S3's
  ``503 SlowDown`` (``throttled``);
* ``redis``: every command the client writes to the socket, by name (a pipeline counts each of
  its commands; ``MULTI``/``EXEC`` too);
* ``hbase``: every Thrift RPC, by method name;
* the file backends: the system calls their Python code issues on the store's files (``write``,
  ``fsync``, ``rename``, ``unlink``, ``open``, ``read``, …), at the call sites (``indexed_fs``'s
  C group committer counts its own syncs, which the store adds to its totals); over HDFS, every
  WebHDFS request by operation; over NFS, every call of the nfs-rs client by kind.

A ledger's numbers are totals since the store was opened; a caller that wants what one
checkpoint or one restore cost takes the difference of two :meth:`Ledger.snapshot`\\ s, or opens
a :func:`tap` in its thread, which receives a copy of everything recorded in that thread while it
is open (how ``bench spark`` attributes requests to the checkpoint or restore that issued them;
work a store does in a thread of its own is in its totals, not in a tap).

Invariants and cost: counting never changes what a store does (it adds no request, no system
call and no ordering); a record is a few dictionary updates.  :meth:`Ledger.record` is not
atomic: a store records under a lock of its own or from one thread at a time, or uses
:meth:`Ledger.record_shared`, which takes the ledger's lock (the networked clients, whose
requests run in pools of threads and are network round trips, which the lock does not slow).
While no tap is open in any thread, a record reads no thread-local state at all.
:func:`summarize` turns many ledgers (one per checkpoint) into their median, mean and total.

This module imports nothing of the project: the backends and their callers all use it.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Mapping


class _Taps(threading.local):
    """This thread's open taps; the class attribute answers a thread that opened none (a
    missing thread-local attribute costs an exception inside ``getattr``, on every record)."""

    taps: tuple["Ledger", ...] = ()


_local = _Taps()
#: taps open in all threads together (a plain global read costs less than a thread-local one)
_open_taps = 0
_count_lock = threading.Lock()


class Ledger:
    """Requests by type, bytes sent and received, retries and the time spent waiting on them,
    and the requests the medium refused as over its rate (S3's ``503 SlowDown``)."""

    __slots__ = ("requests", "sent", "received", "retries", "retry_wait_s", "throttled", "_lock")

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}
        self.sent = 0  # bytes sent to the medium (request bodies, data written)
        self.received = 0  # bytes received from it (response bodies, data read)
        self.retries = 0  # requests sent again after a failed attempt
        self.retry_wait_s = 0.0  # time slept before those retries
        self.throttled = 0  # requests answered "slow down" (each is retried or fails)
        self._lock = threading.Lock()

    # -- recording -----------------------------------------------------------------------
    def record(self, kind: str, sent: int = 0, received: int = 0, n: int = 1) -> None:
        """``n`` requests of type ``kind`` that sent and received these bytes (the caller
        serializes: see the module doc)."""
        requests = self.requests  # _count's body, inlined: this is every write's path
        requests[kind] = requests.get(kind, 0) + n
        if sent:
            self.sent += sent
        if received:
            self.received += received
        if _open_taps:  # in any thread: only then is this thread's own list worth a look
            for ledger in _local.taps:
                if ledger is not self:
                    ledger._count(kind, sent, received, n)

    def _count(self, kind: str, sent: int, received: int, n: int) -> None:
        requests = self.requests
        requests[kind] = requests.get(kind, 0) + n
        if sent:
            self.sent += sent
        if received:
            self.received += received

    def record_shared(self, kind: str, sent: int = 0, received: int = 0, n: int = 1) -> None:
        """:meth:`record` under the ledger's lock, for a store whose threads record at once."""
        with self._lock:
            self.record(kind, sent, received, n)

    def received_more(self, nbytes: int) -> None:
        """Bytes of a response read after its request was recorded (a streamed body)."""
        with self._lock:
            self._count_more(nbytes, 0, 0.0, 0)

    def retried(self, wait_s: float) -> None:
        """One request will be sent again after waiting ``wait_s`` seconds."""
        with self._lock:
            self._count_more(0, 1, wait_s, 0)

    def refused(self) -> None:
        """One request was answered "slow down" (S3's ``503 SlowDown``): over the rate the
        medium allows; it is counted as a request already, and as a retry if it is sent again."""
        with self._lock:
            self._count_more(0, 0, 0.0, 1)

    def _count_more(self, received: int, retries: int, wait_s: float, throttled: int) -> None:
        for ledger in (self, *(t for t in _local.taps if t is not self)):
            ledger.received += received
            ledger.retries += retries
            ledger.retry_wait_s += wait_s
            ledger.throttled += throttled

    # -- arithmetic ----------------------------------------------------------------------
    @property
    def total(self) -> int:
        """Requests of every type."""
        return sum(self.requests.values())

    def __bool__(self) -> bool:
        return bool(self.requests or self.sent or self.received or self.retries
                    or self.throttled)

    def snapshot(self) -> "Ledger":
        """A copy of the numbers now (for a difference later)."""
        out = Ledger()
        with self._lock:
            out.requests = dict(self.requests)
            out.sent, out.received = self.sent, self.received
            out.retries, out.retry_wait_s = self.retries, self.retry_wait_s
            out.throttled = self.throttled
        return out

    def add(self, other: "Ledger") -> "Ledger":
        """Add ``other``'s numbers to this ledger (no tap sees them: they were counted once
        already); returns ``self``."""
        for kind, n in other.requests.items():
            self.requests[kind] = self.requests.get(kind, 0) + n
        self.sent += other.sent
        self.received += other.received
        self.retries += other.retries
        self.retry_wait_s += other.retry_wait_s
        self.throttled += other.throttled
        return self

    def since(self, earlier: "Ledger") -> "Ledger":
        """What was recorded after ``earlier`` (a :meth:`snapshot` of this ledger) was taken."""
        out = Ledger()
        now = self.snapshot()
        out.requests = {k: n - earlier.requests.get(k, 0) for k, n in now.requests.items()
                        if n != earlier.requests.get(k, 0)}
        out.sent, out.received = now.sent - earlier.sent, now.received - earlier.received
        out.retries = now.retries - earlier.retries
        out.retry_wait_s = now.retry_wait_s - earlier.retry_wait_s
        out.throttled = now.throttled - earlier.throttled
        return out

    # -- as data -------------------------------------------------------------------------
    def as_dict(self) -> dict[str, Any]:
        """The numbers as JSON takes them: ``requests`` by type (sorted), ``sent_bytes``,
        ``received_bytes``, ``retries``, ``retry_wait_ms``, ``throttled``."""
        return {"requests": dict(sorted(self.requests.items())), "sent_bytes": self.sent,
                "received_bytes": self.received, "retries": self.retries,
                "retry_wait_ms": round(self.retry_wait_s * 1e3, 3), "throttled": self.throttled}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Ledger":
        """The ledger :meth:`as_dict` described."""
        out = cls()
        out.requests = {str(k): int(v) for k, v in (data.get("requests") or {}).items()}
        out.sent, out.received = int(data.get("sent_bytes", 0)), int(data.get("received_bytes", 0))
        out.retries = int(data.get("retries", 0))
        out.retry_wait_s = float(data.get("retry_wait_ms", 0.0)) / 1e3
        out.throttled = int(data.get("throttled", 0))
        return out

    def __repr__(self) -> str:
        return f"Ledger({self.as_dict()!r})"


@contextlib.contextmanager
def tap(into: Ledger | None = None) -> Iterator[Ledger]:
    """Until the ``with`` ends, every request any store records *in this thread* is also
    recorded in ``into`` (a fresh ledger if not given), which is yielded.  Taps nest: an outer
    tap sees what an inner one sees."""
    global _open_taps
    ledger = Ledger() if into is None else into
    before = _local.taps
    _local.taps = (*before, ledger)
    with _count_lock:
        _open_taps += 1
    try:
        yield ledger
    finally:
        _local.taps = before
        with _count_lock:
            _open_taps -= 1


def current_taps() -> tuple[Ledger, ...]:
    """The taps open in this thread: a pool that runs a caller's requests in its own threads
    re-opens them there (:func:`tapped`), so they still reach the caller's taps."""
    return _local.taps


@contextlib.contextmanager
def tapped(taps: tuple[Ledger, ...]) -> Iterator[None]:
    """Open ``taps`` (from :func:`current_taps` of another thread) in this thread for a ``with``."""
    if not taps:
        yield
        return
    with contextlib.ExitStack() as stack:
        for ledger in taps:
            stack.enter_context(tap(ledger))
        yield


#: a ledger's numbers besides its requests, as :meth:`Ledger.as_dict` names them
_NUMBERS = ("sent_bytes", "received_bytes", "retries", "retry_wait_ms", "throttled")


def summarize(ledgers: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Several ledgers (as :meth:`Ledger.as_dict` gives them: one per checkpoint, say) in
    three numbers each: ``median``, ``mean`` and ``total`` of every request type (a ledger
    without a type counts 0 of it), of the bytes each way, the retries and their wait and the
    throttled answers; and ``count``, how many ledgers.  The median of each number is taken by itself, so a median's
    types need not add up to its total requests."""
    keys = sorted({k for d in ledgers for k in (d.get("requests") or {})})
    columns: dict[str, list[float]] = {f"requests.{k}": [] for k in keys}
    for name in _NUMBERS:
        columns[name] = []
    for d in ledgers:
        requests = d.get("requests") or {}
        for k in keys:
            columns[f"requests.{k}"].append(float(requests.get(k, 0)))
        for name in _NUMBERS:
            columns[name].append(float(d.get(name, 0)))

    def shape(agg: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"requests": {k: agg(columns[f"requests.{k}"]) for k in keys}}
        for name in _NUMBERS:
            out[name] = agg(columns[name])
        return out

    n = len(ledgers)
    return {"count": n,
            "median": shape(_median) if n else {},
            "mean": shape(lambda xs: sum(xs) / n) if n else {},
            "total": shape(sum) if n else {}}


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
