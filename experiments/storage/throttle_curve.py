"""``bench throttle-curve``: checkpoint writes on an object store against the request rate it
allows per prefix, with and without ``prefix_entropy``.

What is measured: the ``write-heavy`` workload with only updates (``--read-proportion 0``) on the
``minio`` backend, each point on a fresh store prefix through the throttling relay
(``--opt throttle_rps=R``, :mod:`backends.minio.throttle`): every update is one key's checkpoint
written by one ``PutObject``, so an update's latency is what one checkpoint write costs and the
run's operations a second are the checkpoint throughput.  ``write-heavy`` rather than a Spark
run: it sends the store the same single-key ``PutObject`` requests a per-key checkpoint sends, at a
steady rate the relay's limit acts on directly, and its latency percentiles show the retry
backoff itself (a refused request waits botocore's backoff before it is sent again); a Spark run
adds minutes of start-up and batching per point around the same requests.

Every allowed rate is measured twice, on one prefix and on ``entropy`` prefixes (the keys hashed
over them), after one run straight to the server and one through the relay without a limit
(``inf``: what the relay itself costs).  Each point reports the throughput, the update latency (p50,
p99, max), the requests, how many were answered ``503 SlowDown``, the retries and their backoff,
and the updates that failed after the last retry (a throttled write that fails is counted, never
lost silently: the run's error counts are the workload runner's).  Each point's keys are deleted
after it (its ``prefix-entropy`` marker object stays: a few bytes).

The points run one after the other on a shared machine: the document records the load average
(its :class:`~experiments.core.document.Environment`) so a disturbed curve can be told.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from backends import open_backend
from backends.minio.throttle import BURST_SECONDS
from workloads import core
from workloads.runner import ClientSettings

from experiments.core.compare import run_workload
from experiments.core.document import Document, Environment, optional
from experiments.core.format import md_table, num
from experiments.core.spec import ProgressFactory, no_progress

BACKEND = "minio"
WORKLOAD = "write-heavy"


@dataclass
class Point:
    """One run: ``rate`` requests a second allowed per prefix (``None``: no limit), ``relay``
    false for the run straight to the server."""

    rate: float | None
    entropy: int
    relay: bool = True
    throughput: float = 0.0  # updates a second
    operations: int = 0
    failed: int = 0  # updates that failed after the last retry
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    requests: int = 0
    throttled: int = 0  # answers that were 503 SlowDown
    retries: int = 0
    retry_wait_s: float = 0.0  # backoff slept before the retries, summed over the threads
    prefixes: int | None = None  # prefixes the relay saw (the bucket's own among them)
    error: str | None = optional()  # the most frequent failure's message, when updates failed
    skipped: str | None = optional()

    @property
    def label(self) -> str:
        if not self.relay:
            return "direct"
        return "unlimited" if self.rate is None else f"{self.rate:g}"


@dataclass(kw_only=True)
class ThrottleCurve(Document):
    """``ckptbench.throttle-curve/1``: the settings and every point."""

    SCHEMA = "ckptbench.throttle-curve/1"

    backend: str = BACKEND
    workload: str = WORKLOAD
    records: int
    operations: int
    threads: int
    value_size: int
    entropy: int
    retry_mode: str
    max_attempts: int
    burst_seconds: float = BURST_SECONDS
    points: list[Point] = field(default_factory=list)
    environment: Environment = field(default_factory=Environment.here)

    def point(self, rate: float | None, entropy: int, relay: bool = True) -> Point | None:
        return next((p for p in self.points if p.rate == rate and p.entropy == entropy
                     and p.relay == relay), None)

    @property
    def rates(self) -> list[float]:
        return sorted({p.rate for p in self.points if p.rate is not None})


def measure(options: dict[str, Any], rates: list[float], entropy: int, *, records: int,
            operations: int, threads: int, value_size: int, retries: int, retry_mode: str,
            seed: int = 1, progress: ProgressFactory = no_progress,
            say: Callable[[Point], None] = lambda _p: None) -> ThrottleCurve:
    """Every point (module doc), in order: straight to the server; the relay without a limit;
    each rate on one prefix then on ``entropy``.  ``rates`` may hold ``inf`` (the same as the
    unlimited point, which then is not run twice).  ``say`` hears each point as it ends."""
    spec = core.preset(WORKLOAD, records=records, operations=operations, value_size=value_size,
                       read=0.0, update=1.0)
    clients = ClientSettings(threads=threads, operations=operations, seed=seed)
    doc = ThrottleCurve(records=records, operations=operations, threads=threads,
                        value_size=value_size, entropy=entropy, retry_mode=retry_mode,
                        max_attempts=retries)
    base = {**options, "retries": retries, "retry_mode": retry_mode}
    run_id = uuid.uuid4().hex[:8]
    # the references first: a long curve's end is not what they are measured under alone
    plan = [(0.0, 1, False), (math.inf, 1, True)]
    plan += [(r, e, True) for r in rates if math.isfinite(r) for e in (1, entropy)]
    for rate, e, relay in plan:
        point = Point(None if math.isinf(rate) or not relay else rate, e, relay)
        prefix = f"{options.get('prefix', 'ckpt/')}throttle-curve-{run_id}/{point.label}-e{e}/"
        point_options = {**base, "prefix": prefix, "prefix_entropy": e,
                         "throttle_rps": rate if relay else 0.0}
        outcome = run_workload(BACKEND, point_options, spec, clients, progress=progress)
        if outcome.skipped:
            point.skipped = outcome.skipped
        else:
            _fill(point, outcome.run, outcome.backend_stats or {})
            _clean(point_options)
        doc.points.append(point)
        say(point)
    return doc


def _fill(point: Point, run: Any, stats: dict[str, Any]) -> None:
    """The point's figures from its run phase and the store's statistics."""
    update = run.measurements.summary("UPDATE")
    ledger = (stats.get("ledger_by_phase") or {}).get("run") or {}
    point.throughput = run.throughput
    point.operations = run.operations
    point.failed = sum(run.errors.values())
    if run.errors:
        point.error = max(run.errors.items(), key=lambda kv: kv[1])[0]
    for name in ("p50", "p99", "max"):
        value = update[f"{name}_us"]
        setattr(point, f"{name}_ms", None if value is None else value / 1e3)
    point.requests = sum((ledger.get("requests") or {}).values())
    point.throttled = ledger.get("throttled", 0)
    point.retries = ledger.get("retries", 0)
    point.retry_wait_s = ledger.get("retry_wait_ms", 0.0) / 1e3
    point.prefixes = (stats.get("throttle") or {}).get("prefixes")


def _clean(options: dict[str, Any]) -> None:
    """Delete the point's keys (unthrottled: the cleanup is no part of the figures)."""
    with open_backend(BACKEND, **{**options, "throttle_rps": 0.0}) as store:
        store.delete_many(store.keys())


# ------------------------------------------------------------------------------ presentation
def point_line(p: Point) -> str:
    """One stderr line as a point ends."""
    if p.skipped:
        return f"throttle-curve: {p.label} req/s, entropy {p.entropy}: skipped: {p.skipped}"
    return (f"throttle-curve: {p.label} req/s a prefix, entropy {p.entropy}: "
            f"{p.throughput:,.0f} updates/s, p99 {num(p.p99_ms)} ms, {p.throttled} SlowDown, "
            f"{p.retries} retries, {p.failed} failed" + (f" ({p.error})" if p.error else ""))


def table(doc: ThrottleCurve) -> list[str]:
    """The markdown table: one row per allowed rate (one prefix beside ``entropy`` prefixes),
    then the unlimited relay and the direct run."""
    n = doc.entropy

    def pair(a: Point | None, b: Point | None, get: Callable[[Point], Any]) -> str:
        shown = [("skipped" if p.skipped else num(get(p))) if p else "–" for p in (a, b)]
        return " / ".join(shown) if b is not None else shown[0]

    rows = []
    for rate in [*doc.rates, None]:
        one, many = doc.point(rate, 1), doc.point(rate, n) if rate is not None else None
        rows.append([f"{rate:g}" if rate is not None else "unlimited (relay)",
                     pair(one, many, lambda p: p.throughput),
                     pair(one, many, lambda p: p.p50_ms), pair(one, many, lambda p: p.p99_ms),
                     pair(one, many, lambda p: p.throttled), pair(one, many, lambda p: p.retries),
                     pair(one, many, lambda p: p.retry_wait_s), pair(one, many, lambda p: p.failed)])
    direct = doc.point(None, 1, relay=False)
    if direct is not None:
        rows.append(["direct (no relay)", pair(direct, None, lambda p: p.throughput),
                     pair(direct, None, lambda p: p.p50_ms), pair(direct, None, lambda p: p.p99_ms),
                     "0", "0", "0", pair(direct, None, lambda p: p.failed)])
    split = f" (1 prefix / {n} prefixes)"
    return md_table([f"allowed req/s per prefix", f"updates/s{split}", f"p50 ms{split}",
                     f"p99 ms{split}", f"503 SlowDown{split}", f"retries{split}",
                     f"retry backoff s{split}", f"failed{split}"], rows)


def headline(doc: ThrottleCurve) -> str:
    """The README's line: the lowest rate's throughput on one prefix and on N, against the
    unlimited relay's."""
    unlimited = doc.point(None, 1)
    if not doc.rates or unlimited is None:
        return "no throttled point ran"
    low = doc.rates[0]
    one, many = doc.point(low, 1), doc.point(low, doc.entropy)
    if one is None or many is None or one.skipped or many.skipped:
        return "the lowest rate's points were skipped"
    return (f"at {low:g} requests/s per prefix, {num(one.throughput)} checkpoint writes/s on one "
            f"prefix ({one.throttled} × 503 SlowDown) and {num(many.throughput)} with "
            f"prefix_entropy={doc.entropy}, against {num(unlimited.throughput)} unthrottled")
