"""The "what users would pick instead" baseline: the same keyed count, and the same per-key state,
on Spark's own state store, with the same failure injection.

**What runs.**  The same deterministic source, grouped by key, in *update* mode, with the RocksDB
state store provider and changelog checkpointing (:data:`STATE_CONF`).  Without a state size
(``stateBytes`` 0) it is Spark's built-in aggregation, ``groupBy(key).agg(count, max(seq))``: its
state is a count per key, like the protocols' counts-only state, and it is the
fastest stateful path Spark has.  With a size ``B`` every key keeps what the protocols' sized count
keeps (:mod:`.sized_state`): its count and a ring of ``B / 8`` int64 slots, event ``seq`` of the key
raising slot ``seq % R`` to ``seq + 1`` — the same sizes per key id (:mod:`.state_size`), the same
bytes (little-endian).  That state lives in Spark's store as one row per key, ``(n long, ring
binary)``, a value state of ``transformWithState`` (the Row flavour of ``transformWithStateInPandas``):
PySpark's stateful APIs all call Python once per key and micro-batch, and this one is the cheapest
per call — ``applyInPandasWithState`` and ``transformWithStateInPandas`` build pandas frames of
each key's events, state and output, which costs more than this processor's two state calls
(a get, an update) and its one output row.  Spark checkpoints its state itself: at the end of
every micro-batch each state store instance commits a version and writes its changelog to the
checkpoint location, so ``--interval`` has no meaning here (reported as ``CheckpointEvery``).

**Where the checkpoints go.**  ``Settings.checkpoint_location`` (``bench spark --medium``): a fresh
directory made under it, a directory or an ``hdfs://`` URL (Spark writes there through Hadoop's
client); without one, a fresh directory on the local disk (:func:`backends.media.local.disk_directory`,
never tmpfs).  The directory is removed after the run unless ``retainCheckpoints``.

**The failure.**  ``failAt M``: the micro-batch whose events pass offset ``M`` fails in its sink,
after its stateful stage ran (the state store instances committed the batch's version) and after
the sink delivered *half* of the batch's output, so before Spark writes the batch to its commit
log.  That is a driver crash between a batch's state commit and its completion, and as close to a
crash as one Spark session allows: the exception ends the streaming query (a killed Python worker
would only make Spark retry the task, and the built-in aggregation has no Python worker to kill).
The query is then started again on the same checkpoint location — with ``coldRestore`` the
location's files dropped from the page cache first (:meth:`backends.media.Medium.evict`, as the
protocols' restores) — and, as after a restart of the application, Spark re-runs the uncommitted
batch from its offset log on the state version before it, which its new state store instances
load from the checkpoint (the last snapshot, then the changelogs after it).

**Exactly-once.**  The sink is idempotent per batch id: it writes each updated key's running
count by assignment (a replayed batch writes the same values over a partial write) and skips a
batch id it already applied whole; a replayed batch's stateful stage still runs, since that is
where Spark commits its state version.  The check compares the counts the sink delivered with
the ground truth (:mod:`.verify`), and, with a state size, reads the rings back from Spark's store
(the ``statestore`` data source, at the last committed batch) and compares them byte for byte with
the failure-free rings (:func:`.sized_state.ring_mismatches`).

**What is reported**, beside the protocols' lines (:class:`~.job.Metrics`): a checkpoint is one
micro-batch's state commit — its time is ``stateOperators[].commitTimeMs`` over the state store
instances (Spark sums the instances, which commit in parallel: the mean instance's), its write
part ``rocksdbChangeLogWriterCommitLatencyMs`` likewise, its bytes what the batch added to the
checkpoint location (offset and commit log entries, the state's changelog files of that version,
snapshot files with the snapshot's version).  ``StateBytes`` is the live state by the protocols'
rule (:meth:`~.keyed_state.KeyedState.encoded_size`, one header per instance); ``StoreBytes`` the
bytes the checkpoint location holds (:meth:`backends.media.Medium.bytes_held`: ``du``'s blocks on a
local disk), as for the protocols' file stores.  A recovery is cut into the protocols' phases (:mod:`.phases`):
detect = the failure -> the re-run batch reaches the sink (the query's end, the eviction, the
restart and the batch's planning); load = ``rocksdbLoadLatencyMs`` less the changelog replay (the
state store instance opened on the checkpoint location, its latest snapshot fetched:
``rocksdbLoadFromSnapshotLatencyMs``, 0 before the first snapshot); restore =
``rocksdbReplayChangeLogLatencyMs`` (the changelogs after that snapshot read and re-applied: Spark
does not split their reads from their applying); ``Recovery.LoadBytes`` the files those read;
replay = the rest of the re-run batch; catch-up as the runner measures it (a re-run that fails
again extends its episode).  Spark's per-instance
latencies are summed over the instances like ``commitTimeMs``, so load and restore are the mean
instance's.  What Spark does not expose is reported as ``n/a (why)`` (:attr:`.job.Metrics.unmeasured`).
Registered as the baseline protocol ``spark-state`` (:class:`SparkStateBaseline`).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from backends.media import is_nfs_url, join, open_medium
from backends.media.local import disk_directory

from . import phases
from .conf import build
from .errors import SparkIntegrationError
from .job import JobSpec, Metrics, RecoveryPhases
from .operators import state_class
from .protocols.base import Baseline
from .queries import query as job_query
from .settings import Settings
from .sized_state import ring_mismatches
from .skew import parse_skew
from .source import source_options
from .state_size import parse_state_size
from .verify import compare

STATE_CONF = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
#: what the sink's injected failure says (the query's exception carries it)
INJECTED = "ckptbench: injected failure of micro-batch"
#: the sink's output: each updated key's running count and its latest event's offset (the
#: batch's last offset is the greatest; its first is where the previous batch ended)
OUTPUT = "key long, n long, last long"
#: a sized key's state in Spark's store: its count and its ring (little-endian int64 slots)
STATE = "n long, ring binary"
#: the name of that value state (what the ``statestore`` source reads back)
STATE_VAR = "sized_count"
#: what the run loop waits for at a time (how late a failed query is noticed, at most)
POLL_S = 0.02


class InjectedFailure(RuntimeError):
    """The failure ``failAt`` asks for, raised by the sink (see the module doc)."""


def run_spark_state(spark: Any, spec: JobSpec, settings: Settings | None = None) -> Metrics:
    """Run ``spec`` on Spark's own state store as ``settings`` asks (state size, failures, a cold
    restore, the checkpoint location); returns the same :class:`Metrics` as a protocol's run."""
    settings = settings or build("spark-state")
    _check(spec, settings)
    with checkpoint_location(settings) as location:
        try:
            return _Run(spark, spec, settings, location).execute()
        finally:
            _unload_state_stores(spark)


def _unload_state_stores(spark: Any) -> None:
    """Stop the state stores of this JVM before their location is removed: a stopped query's
    providers stay loaded, and the maintenance task uploads their snapshots into the location up
    to a maintenance interval later, re-making a directory already removed.  Spark starts the
    stores again for the next query.  Only a local master's executor shares the driver's JVM: a
    cluster's executors keep theirs until their own maintenance finds the query gone, and may
    write one more snapshot into the removed location before."""
    if spark.sparkContext.master.startswith("local"):
        spark._jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()


def _check(spec: JobSpec, settings: Settings) -> None:
    """What this baseline cannot do, one line each."""
    if job_query(spec.kind).operator != "count":
        raise SparkIntegrationError(
            f"the {spec.kind} job has no Spark state-store baseline here (it covers the keyed counts: "
            f"wordcount, bids); run it with a protocol instead")
    if spec.resume:
        raise SparkIntegrationError("spark-state starts a fresh checkpoint location every run, so there "
                                    "is no dead driver's job to take over: drop --resume")
    if settings.window_events:
        raise SparkIntegrationError("spark-state keeps a key's state for ever: drop "
                                    "spark.ckptbench.windowEvents (--window-events)")
    if settings.fail_point:
        raise SparkIntegrationError(
            f"spark-state fails a micro-batch in its sink; the fail point {settings.fail_point!r} "
            f"belongs to the protocols' instances: drop spark.ckptbench.failPoint")
    if settings.fail_instance:
        raise SparkIntegrationError(
            "spark-state fails the whole query (Spark's state store instances recover together): "
            "drop spark.ckptbench.failInstance (--fail-instance)")
    if is_nfs_url(settings.checkpoint_location):
        raise SparkIntegrationError(
            f"Spark writes its checkpoint location through Hadoop's file systems, and "
            f"{settings.checkpoint_location} is not one: mount the export and give its directory "
            f"(--medium local:/mnt/...), or use --medium hdfs")


@contextlib.contextmanager
def checkpoint_location(settings: Settings) -> Iterator[str]:
    """A fresh checkpoint location: a new directory under ``settings.checkpoint_location``, or on
    the local disk; removed when the block ends unless ``settings.retain_checkpoints`` (only the
    directory made here: nothing else under a given location is touched)."""
    if settings.checkpoint_location:
        location = join(settings.checkpoint_location, f"spark-state-{uuid.uuid4().hex[:8]}")
    else:
        location = tempfile.mkdtemp(prefix="ckptbench-spark-state-", dir=disk_directory())
    try:
        yield location
    finally:
        if not settings.retain_checkpoints:
            _remove(location)


def _remove(location: str) -> None:
    if location.startswith("hdfs://"):
        with contextlib.suppress(Exception), open_medium(location, "spark-state") as medium:
            medium.remove_tree()
    else:
        shutil.rmtree(location, ignore_errors=True)


def spark_path(location: str) -> str:
    """The location as Spark's Hadoop client names it: an ``hdfs://`` URL without the query the
    project's media carry (``?webhdfs=PORT``)."""
    if not location.startswith("hdfs://"):
        return location
    p = urlsplit(location)
    return urlunsplit((p.scheme, p.netloc, p.path, "", ""))


def files(location: str) -> list[tuple[str, int]]:
    """Every file under ``location`` (relative path, bytes), on its medium."""
    out: list[tuple[str, int]] = []
    with open_medium(location, "spark-state") as medium:
        def walk(rel: str) -> None:
            names = set(medium.list_files(rel))
            for name in medium.listdir(rel):
                sub = f"{rel}/{name}" if rel else name
                if name in names:
                    out.append((sub, medium.size(sub)))
                else:
                    walk(sub)
        walk("")
    return out


#: a state store file of a version: ``<v>.changelog``, ``<v>.zip`` (a snapshot), and their
#: checksum files ``.<v>.changelog.crc``
_VERSIONED = re.compile(r"^\.?(\d+)\.(changelog|zip)(\.crc)?$")
#: an entry of the offset or commit log: ``offsets/<batch>``, ``commits/.<batch>.crc``
_LOG_ENTRY = re.compile(r"^(offsets|commits)/\.?(\d+)(\.crc)?$")


def checkpoint_bytes(listing: list[tuple[str, int]]) -> dict[int, int]:
    """Bytes each micro-batch added to the checkpoint location, by batch id: its offset and
    commit log entries, the state's files of version ``batch + 1`` (a snapshot's SST files with
    the latest snapshot, which references them)."""
    per: dict[int, int] = {}
    ssts, latest_zip = 0, None
    for rel, size in listing:
        log = _LOG_ENTRY.match(rel)
        name = rel.rsplit("/", 1)[-1]
        versioned = _VERSIONED.match(name) if rel.startswith("state/") else None
        if log:
            batch = int(log.group(2))
        elif versioned:
            batch = int(versioned.group(1)) - 1
            if versioned.group(2) == "zip":
                latest_zip = max(latest_zip if latest_zip is not None else -1, batch)
        elif rel.startswith("state/") and name.endswith(".sst"):
            ssts += size
            continue
        else:
            continue
        per[batch] = per.get(batch, 0) + size
    if ssts and latest_zip is not None:
        per[latest_zip] += ssts
    return per


def restore_bytes(listing: list[tuple[str, int]], version: int) -> int:
    """Bytes a restore of state ``version`` reads from the checkpoint location: per state store
    instance, its latest snapshot at or below ``version`` (with every SST file: an upper bound)
    and the changelogs after it."""
    parts: dict[str, dict[int, dict[str, int]]] = {}
    ssts: dict[str, int] = {}
    for rel, size in listing:
        if not rel.startswith("state/"):
            continue
        folder, name = rel.rsplit("/", 1)
        m = _VERSIONED.match(name)
        if m and not m.group(3):
            parts.setdefault(folder, {}).setdefault(int(m.group(1)), {})[m.group(2)] = size
        elif name.endswith(".sst"):
            owner = folder.rsplit("/", 1)[0] if folder.endswith("SSTs") else folder
            ssts[owner] = ssts.get(owner, 0) + size
    total = 0
    for folder, versions in parts.items():
        snaps = [v for v, kinds in versions.items() if "zip" in kinds and v <= version]
        base = max(snaps, default=0)
        if base:
            total += versions[base]["zip"] + ssts.get(folder, 0)
        total += sum(k.get("changelog", 0) for v, k in versions.items() if base < v <= version)
    return total


@dataclass
class _Batch:
    """One micro-batch as the sink saw it."""

    batch_id: int
    start: int
    end: int
    t_start: float
    t_rows: float
    t_done: float
    recovered: bool  # the re-run of a batch that failed


class _Run:
    """One run: the query, its sink, its restarts after injected failures, and its metrics."""

    def __init__(self, spark: Any, spec: JobSpec, settings: Settings, location: str) -> None:
        self.spark, self.spec, self.settings, self.location = spark, spec, settings, location
        self.size = parse_state_size(settings.state_bytes)
        self.pending = sorted(settings.fail_at)
        self.counts = np.zeros(spec.keys, np.int64)
        self.applied: set[int] = set()  # batch ids whose output the sink applied whole
        self.batches: list[_Batch] = []
        self.failures: list[tuple[float, int]] = []  # (instant, failed batch id)
        self.rerun_next = False
        self.done, self.failed = threading.Event(), threading.Event()
        self.error: BaseException | None = None
        self.metrics = Metrics()

    # -- the stream -----------------------------------------------------------------------
    def _stream(self) -> Any:
        from pyspark.sql import functions as F

        from .source import CkptSource  # built on first use: importing this module needs no pyspark

        spark, s = self.spark, self.spec
        spark.dataSource.register(CkptSource)
        for k, v in STATE_CONF.items():
            spark.conf.set(k, v)
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        spark.conf.set("spark.sql.shuffle.partitions", str(s.parallelism))
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")  # every batch's
        opts = source_options(job_query(s.kind).source, s.events, s.keys, s.skew, s.seed, s.rate, s.max_batch,
                              s.parallelism)
        events = spark.readStream.format("ckptbench").options(**opts).load().select("key", "seq")
        if not self.size.sized:
            return events.groupBy("key").agg(F.count("*").alias("n"), F.max("seq").alias("last"))
        return events.groupBy("key").transformWithState(sized_processor(self.size), OUTPUT, "Update", "None")

    def _start(self, stream: Any) -> Any:
        return (stream.writeStream.outputMode("update").foreachBatch(self._sink)
                .option("checkpointLocation", spark_path(self.location)).start())

    def _sink(self, df: Any, batch_id: int) -> None:
        try:
            t_start = time.time()
            rows = df.toArrow()  # runs the stateful stage: the state store commits its version here
            t_rows = time.time()
            if rows.num_rows == 0:
                return
            keys, values = rows.column("key").to_numpy(), rows.column("n").to_numpy()
            start = self.batches[-1].end if self.batches else 0  # offsets are contiguous
            end = int(rows.column("last").to_numpy().max()) + 1
            if self.pending and end > self.pending[0]:  # the batch passed the failure's offset
                self.pending.pop(0)
                half = len(keys) // 2
                self._write(keys[:half], values[:half])  # a partial output, as a crash leaves it
                self.failures.append((time.time(), batch_id))
                self.failed.set()
                raise InjectedFailure(f"{INJECTED} {batch_id} (events {start}..{end - 1})")
            if batch_id not in self.applied:  # idempotent per batch id (module doc)
                self._write(keys, values)
                self.applied.add(batch_id)
            self.batches.append(_Batch(batch_id, start, end, t_start, t_rows, time.time(), self.rerun_next))
            self.rerun_next = False
            if end >= self.spec.events:
                self.done.set()
        except InjectedFailure:
            raise
        except BaseException as exc:  # surfaced by execute(); Spark would only log it
            self.error = exc
            self.done.set()
            raise

    def _write(self, keys: np.ndarray, values: np.ndarray) -> None:
        if len(keys) and int(keys.max()) >= len(self.counts):
            self.counts = np.concatenate([self.counts, np.zeros(int(keys.max()) + 1 - len(self.counts), np.int64)])
        self.counts[keys] = values

    # -- the run --------------------------------------------------------------------------
    def execute(self) -> Metrics:
        stream = self._stream()
        progress: list[dict] = []
        runs = 0
        query = self._start(stream)
        deadline = time.time() + self.spec.timeout
        try:
            while not self.done.wait(POLL_S):
                if time.time() > deadline:
                    raise SparkIntegrationError(f"spark-state baseline did not finish within {self.spec.timeout:.0f}s")
                if query.isActive:
                    continue
                if not self.failed.is_set() or INJECTED not in str(query.exception()):
                    raise SparkIntegrationError(f"the streaming query stopped early: {query.exception()}")
                self.failed.clear()  # the injected failure ended the query: restart it, as after a crash
                progress += _progress(query)
                runs += 1
                if self.settings.cold_restore:
                    self.metrics.restore_cache = self._evict()
                self.rerun_next = True
                query = self._start(stream)
            # the last batch's progress is posted after its sink returns: wait for it (briefly)
            settle = time.time() + 5
            while self.error is None and not _posted(query, self.batches[-1].batch_id) and time.time() < settle:
                time.sleep(0.05)
        finally:
            with contextlib.suppress(Exception):
                query.stop()
        if self.error is not None:
            raise self.error
        progress += _progress(query)
        return self._measure(progress)

    def _evict(self) -> str:
        with open_medium(self.location, "spark-state") as medium:
            why = medium.evict()
        return "cold" if why is None else f"warm: {why}"

    # -- the metrics ----------------------------------------------------------------------
    def _measure(self, progress: list[dict]) -> Metrics:
        m, s = self.metrics, self.spec
        by_batch = {p["batchId"]: p for p in progress}  # a re-run batch: its second run's report
        listing = files(self.location)
        written = checkpoint_bytes(listing)
        first = self.batches[0]
        for b in self.batches:
            m.latencies_ms.append(((b.t_done - b.t_start) * 1e3, b.end - b.start))
            op = _state_operator(by_batch.get(b.batch_id))
            if op is None:  # its report was not posted before the run ended
                continue
            instances = max(1, int(op.get("numStateStoreInstances") or s.parallelism))
            custom = op.get("customMetrics") or {}
            m.checkpoints += 1
            m.checkpoint_ms.append(float(op.get("commitTimeMs", 0)) / instances)
            m.checkpoint_write_ms.append(float(custom.get("rocksdbChangeLogWriterCommitLatencyMs", 0)) / instances)
            m.checkpoint_sizes.append(written.get(b.batch_id, 0))
        m.checkpoint_bytes = sum(m.checkpoint_sizes)
        m.batches = len(self.batches)
        last = self.batches[-1]
        t_from, offset = (first.t_done, first.end) if m.batches > 1 else (first.t_start, 0)
        m.seconds, m.events = last.t_done - t_from, s.events - offset
        m.wall_seconds = last.t_done - first.t_start
        self._recoveries(by_batch, listing)
        m.live_state_bytes = self._state_bytes()
        with open_medium(self.location, "spark-state") as medium:  # du's figure: blocks held, locally
            m.store_bytes = medium.bytes_held()
        if self.settings.retain_checkpoints:
            m.protocol_counters["CheckpointLocation"] = self.location
        m.protocol_counters["CheckpointEvery"] = (
            "micro-batch (Spark commits its state store at the end of each; --interval is not used)")
        m.unmeasured.update({
            "Checkpoint.Encode(ms)": "RocksDB keeps the state encoded; Spark reports the commit, not an encoding",
            "BackendOps": "no ckptbench backend: Spark writes its checkpoint location itself",
            "UselessCheckpoints": "every committed version is on Spark's recovery line",
            "LoggedBytes": "Spark logs no events, only its offsets",
            "StoreBytesAfterGC": "Spark deletes a version's files itself, once it is older than "
                                 "spark.sql.streaming.minBatchesToRetain batches",
        })
        if s.verify:
            self._verify()
        return m

    def _recoveries(self, by_batch: dict[int, dict], listing: list[tuple[str, int]]) -> None:
        """Steady state, and every failure's recovery by phase (module doc); the catch-up and the
        steady micro-batches as :class:`~.runner.JobRunner` counts them (:mod:`.phases`)."""
        m, load_end = self.metrics, parse_skew(self.spec.skew).load_events(self.spec.keys)
        m.failures = len(self.failures)
        rates: list[tuple[float, int]] = []
        catching: tuple[RecoveryPhases, float, tuple[float, float] | None] | None = None
        for i, b in enumerate(self.batches):
            events, seconds = b.end - b.start, max(b.t_done - b.t_start, 1e-9)
            steady = False
            if b.recovered:
                if catching is not None:
                    self._finish(catching, b.t_start)
                # the failures of this batch: a re-run that failed again extends the episode
                t_fail = min(t for t, failed in self.failures if failed == b.batch_id)
                op = _state_operator(by_batch.get(b.batch_id)) or {}
                custom = op.get("customMetrics") or {}
                instances = max(1, int(op.get("numStateStoreInstances") or self.spec.parallelism))
                restore_ms = float(custom.get("rocksdbReplayChangeLogLatencyMs", 0)) / instances
                load_ms = max(0.0, float(custom.get("rocksdbLoadLatencyMs", 0)) / instances - restore_ms)
                episode = RecoveryPhases(
                    detect_ms=(b.t_start - t_fail) * 1e3, load_ms=load_ms,
                    load_bytes=restore_bytes(listing, b.batch_id),
                    restore_ms=restore_ms,
                    replay_ms=max(0.0, (b.t_done - b.t_start) * 1e3 - load_ms - restore_ms),
                    replay_events=events, failures=sum(failed == b.batch_id for _, failed in self.failures))
                m.replayed_events += events
                m.restart_ms.append(episode.detect_ms + load_ms + restore_ms)
                catching = (episode, b.t_done, phases.reference(rates))
            elif i > 0 and b.start >= load_end:
                steady = catching is None or phases.back_at_rate(events / seconds, events, catching[2],
                                                                  self.spec.rate > 0)
                if steady and catching is not None:
                    self._finish(catching, b.t_start)
                    catching = None
            if steady:
                rates.append((events / seconds, events))
                m.steady_events += events
                m.steady_seconds += b.t_done - b.t_start
            m.timeline.append({"end": b.end, "events": events, "ms": round((b.t_done - b.t_start) * 1e3, 1),
                               "checkpoint_ms": round(self._commit_ms(by_batch.get(b.batch_id)), 1),
                               "recovered": b.recovered, "steady": steady})
        if catching is not None:  # the run ended before the rate was back
            self._finish(catching, self.batches[-1].t_done)

    def _finish(self, catching: tuple[RecoveryPhases, float, Any], t_back: float) -> None:
        episode, t_end, _ = catching
        episode.catch_up_ms = max(0.0, t_back - t_end) * 1e3
        self.metrics.recoveries.append(episode)
        self.metrics.recovery_ms.append(episode.total_ms)

    def _commit_ms(self, report: dict | None) -> float:
        op = _state_operator(report)
        if op is None:
            return 0.0
        return float(op.get("commitTimeMs", 0)) / max(1, int(op.get("numStateStoreInstances") or self.spec.parallelism))

    def _state_bytes(self) -> int:
        """The live state by the protocols' rule: every held key's encoded size, plus the
        header of each of the ``parallelism`` instances that would hold them."""
        cls = state_class(self.settings)
        return cls(self.counts).encoded_size() + (self.spec.parallelism - 1) * cls().encoded_size()

    def _verify(self) -> None:
        s = self.spec
        expected = job_query(s.kind).ground_truth(s.seed, s.keys, s.skew, s.events)
        held = np.flatnonzero(self.counts)
        result = compare(expected, held.astype(np.int64), self.counts[held])
        detail = result.describe()
        if self.size.sized:  # the state itself, read back from Spark's store
            stored = self._check_stored(expected)
            detail = f"Spark's state store: {stored.describe()}; the sink's output: {detail}"
            result.exactly_once = result.exactly_once and stored.exactly_once
        self.metrics.exactly_once, self.metrics.verify_detail = result.exactly_once, detail

    def _check_stored(self, expected: np.ndarray) -> Any:
        """The state Spark's store holds at the last committed batch (the ``statestore`` data
        source) against the ground truth: each state partition's rings are compared on the
        executor that reads them (:func:`stored_rings_check`), so only keys and counts reach
        the driver, whatever the state's size."""
        s = self.spec
        check = stored_rings_check(job_query(s.kind).source, s.seed, s.keys, str(parse_skew(s.skew)), s.events,
                                   self.settings.state_bytes)
        table = (self.spark.read.format("statestore").option("stateVarName", STATE_VAR)
                 .load(spark_path(self.location))
                 .selectExpr("key.key AS key", "value.n AS n", "value.ring AS ring")
                 .mapInArrow(check, "key long, n long, wrong long, compared long").toArrow())
        return compare(expected, table.column("key").to_numpy(), table.column("n").to_numpy(),
                       _column_sum(table, "wrong"), _column_sum(table, "compared"))


def _column_sum(table: Any, column: str) -> int:
    return int(np.sum(table.column(column).to_numpy())) if table.num_rows else 0


def stored_rings_check(kind: str, seed: int, keys: int, skew: str, events: int, size: str):
    """The ``mapInArrow`` function of :meth:`_Run._check_stored`: one state partition's rows
    ``(key, n, ring)`` become the protocols' sized count state (:mod:`.sized_state`), whose rings
    :func:`.sized_state.ring_mismatches` compares with the failure-free ones; yields the keys and
    counts, and the partition's ``(wrong, compared)`` rings on its first row."""

    def check(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        table = pa.Table.from_batches(list(batches))
        if table.num_rows == 0:
            return
        state = rows_as_state(table, size)
        held, counts = state.items()
        wrong, compared = ring_mismatches(kind, seed, keys, skew, events, size, state)
        flags = np.zeros(len(held), np.int64)
        yield pa.RecordBatch.from_pydict({"key": held, "n": counts, "wrong": np.r_[wrong, flags[1:]],
                                          "compared": np.r_[compared, flags[1:]]})

    return check


def rows_as_state(table: Any, size: str) -> Any:
    """Rows ``(key, n, ring)`` of Spark's store as a sized count state of ``size``."""
    import pyarrow as pa

    from .sized_state import sized_count_state

    keys = table.column("key").to_numpy()
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], table.column("n").to_numpy()[order]
    rings = table.column("ring").cast(pa.large_binary()).combine_chunks().take(pa.array(order))
    offsets = np.frombuffer(rings.buffers()[1], np.int64)[rings.offset:rings.offset + len(rings) + 1]
    slots = np.frombuffer(rings.buffers()[2], np.uint8)[offsets[0]:offsets[-1]].view("<i8")
    state = sized_count_state(size)()
    lens = 1 + parse_state_size(size).slots(keys)
    rows = np.empty(int(lens.sum()), np.int64)
    is_count = np.zeros(len(rows), bool)
    is_count[np.cumsum(lens) - lens] = True
    rows[is_count], rows[~is_count] = counts, slots
    state.load_rows(keys, rows)
    return state


def sized_processor(size: Any) -> Any:
    """The ``transformWithState`` processor of a sized count (module doc): one key's events of a
    micro-batch applied to its value state ``(n, ring)``; yields its running count and its latest
    event's offset.  Built here, so importing this module needs no pyspark."""
    from pyspark.sql import Row
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class SizedCount(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.state = handle.getValueState(STATE_VAR, STATE)

        def handleInputRows(self, key: tuple, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            k = int(key[0])
            held = self.state.get()
            if held is None:
                n, ring = 0, np.zeros(int(size.slots(np.array([k]))[0]), "<i8")
            else:
                n, ring = held[0], np.frombuffer(held[1], "<i8").copy()
            seq = np.fromiter((r.seq for r in rows), np.int64)
            np.maximum.at(ring, seq % len(ring), seq + 1)
            self.state.update((n + len(seq), ring.tobytes()))
            yield Row(key=k, n=n + len(seq), last=int(seq.max()))

        def close(self) -> None:
            pass

    return SizedCount()


def _progress(query: Any) -> list[dict]:
    return [p if isinstance(p, dict) else json.loads(p.json) for p in query.recentProgress]


def _posted(query: Any, batch_id: int) -> bool:
    return any(p.get("batchId") == batch_id for p in _progress(query))


def _state_operator(report: dict | None) -> dict | None:
    ops = (report or {}).get("stateOperators") or []
    return ops[0] if ops else None


class SparkStateBaseline(Baseline):
    """``spark-state``: :func:`run_spark_state` as a registered baseline."""

    name = "spark-state"
    session_conf = STATE_CONF

    @classmethod
    def check(cls, spec: JobSpec, settings: Settings) -> None:
        _check(spec, settings)

    def run(self, spark: Any, spec: JobSpec, settings: Settings) -> Metrics:
        return run_spark_state(spark, spec, settings)
