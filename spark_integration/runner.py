"""The driver of a keyed-count job: streaming query, per-micro-batch plan, failures, metrics.

Per micro-batch (``foreachBatch``) the driver runs one Spark job: the batch's events,
``repartition(P, "key")`` into the P instances of the keyed stage, ``mapInArrow`` into
:func:`~spark_integration.operators.process_partition`, and collects one stats row per instance.
When that job fails (an instance was killed, or found its working state lost) the driver asks the
protocol for a recovery point, re-reads ``[replay_from, batch end)`` from the source as a batch
read of the same deterministic source, and re-runs the batch with every instance restoring first.
Only after all instances succeeded does the protocol commit the batch's checkpoint.

Spark's own streaming checkpoint only keeps the query's offsets between micro-batches; all
operator state and its recovery belong to our protocols.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from .conf import Settings, SparkIntegrationError
from .operators import STATS_SCHEMA, BatchPlan, decode_pairs, dump_partition, process_partition
from .protocols import make_protocol
from .queries import query
from .source import source_options

MAX_RECOVERY_ATTEMPTS = 5
#: what a failed job's error says when an instance died or lost its state (anything else is a bug
#: and is raised at once instead of being "recovered" over and over)
INSTANCE_FAILURE_MARKS = ("InstanceStateLost", "Python worker exited unexpectedly", "crashed",
                          "EOFException", "Connection reset")


def is_instance_failure(exc: BaseException) -> bool:
    text = str(exc)
    return any(mark in text for mark in INSTANCE_FAILURE_MARKS)


@dataclass
class JobSpec:
    kind: str = "wordcount"  # a job of :data:`.queries.QUERIES`
    events: int = 1_000_000
    keys: int = 10_000
    skew: float | str = 1.0  # zipfian exponent or "hot:F[:N]" (:mod:`.skew`)
    seed: int = 42
    rate: float = 0.0
    parallelism: int = 2
    max_batch: int = 250_000
    verify: bool = False
    timeout: float = 600.0


@dataclass
class Metrics:
    events: int = 0  # events in the measured (steady-state) part of the run
    batches: int = 0
    seconds: float = 0.0  # duration of the measured part
    wall_seconds: float = 0.0  # first micro-batch start -> last result
    latencies_ms: list = field(default_factory=list)  # (value, weight)
    checkpoints: int = 0
    checkpoint_ms: list = field(default_factory=list)
    checkpoint_bytes: int = 0
    backend_ops: int = 0
    failures: int = 0
    restart_ms: list = field(default_factory=list)
    recovery_ms: list = field(default_factory=list)
    replayed_events: int = 0
    useless_checkpoints: int = 0
    exactly_once: bool | None = None
    verify_detail: str = ""

    @property
    def throughput(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def latency(self, q: float) -> float:
        if not self.latencies_ms:
            return 0.0
        values = np.array([v for v, _ in self.latencies_ms])
        weights = np.array([w for _, w in self.latencies_ms], dtype=float)
        order = np.argsort(values)
        cum = np.cumsum(weights[order])
        return float(values[order][np.searchsorted(cum, q * cum[-1])])

    def summary(self) -> dict[str, Any]:
        mean = lambda xs: float(np.mean(xs)) if xs else 0.0  # noqa: E731
        return {
            "Throughput(events/sec)": round(self.throughput, 1),
            "LatencyP50(ms)": round(self.latency(0.5), 1),
            "LatencyP99(ms)": round(self.latency(0.99), 1),
            "CheckpointTime(ms)": round(mean(self.checkpoint_ms), 2),
            "CheckpointBytes": self.checkpoint_bytes,
            "BackendOps": self.backend_ops,
            "RestartTime(ms)": round(mean(self.restart_ms), 1),
            "RecoveryTime(ms)": round(mean(self.recovery_ms), 1),
            "ReplayedEvents": self.replayed_events,
            "UselessCheckpoints": self.useless_checkpoints,
            "Checkpoints": self.checkpoints,
            "Failures": self.failures,
            "Batches": self.batches,
            "Events": self.events,
            "WallTime(s)": round(self.wall_seconds, 2),
        }


def build_session(master: str = "local[2]", app: str = "ckptbench-spark", conf: dict[str, str] | None = None):
    """A SparkSession for local runs (spark-submit users get theirs from ``getOrCreate``)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # workers must run this interpreter (the venv with numpy/pyarrow and this package)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.python.worker.reuse", "true")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.driver.memory", "1g")
               # deep py4j callback stacks (foreachBatch -> recovery jobs) overflowed the default
               # 1 MB thread stack of the stream execution thread once in a long test session
               .config("spark.driver.extraJavaOptions", "-Xss16m"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


class JobRunner:
    """Runs one keyed job (:mod:`.queries`) under ``settings`` and collects :class:`Metrics`."""

    def __init__(self, spark: Any, settings: Settings, spec: JobSpec) -> None:
        from .source import CkptSource

        self.query = query(spec.kind)
        # the operator's kind of state travels to the executors with the settings
        settings = replace(settings, operator=self.query.operator)
        self.spark, self.settings, self.spec = spark, settings, spec
        self.protocol = make_protocol(settings)
        self.metrics = Metrics()
        self.pending_failures = sorted(settings.fail_at)
        self.batch_seq = 0
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.first_start: float | None = None
        self.warm: tuple[float, int] | None = None
        spark.dataSource.register(CkptSource)
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        spark.conf.set("spark.sql.shuffle.partitions", str(spec.parallelism))
        self.t0: float | None = None  # paced runs: event i is due at t0 + i / rate
        self.source_opts: dict[str, str] = {}

    # -- one Spark job over one range of events ------------------------------------------
    def _select(self, df: Any) -> Any:
        """The job's stage before the shuffle (Q3's filters), if it has one."""
        return df if self.query.select is None else df.mapInArrow(self.query.select, df.schema)

    def _execute(self, df: Any, plan: BatchPlan) -> list[dict]:
        fn = functools.partial(process_partition, self.settings, self.protocol, plan)
        df = self.protocol.prepare(self._select(df), plan, self.spec.parallelism)
        rows = df.repartition(self.spec.parallelism, "key").mapInArrow(fn, STATS_SCHEMA).collect()
        return [r.asDict() for r in rows]

    def _plan(self, restore: Any = None) -> BatchPlan:
        kill = self.pending_failures[0] if self.pending_failures else None
        return BatchPlan(self.batch_seq, restore, self.protocol.plan_checkpoint(self.batch_seq),
                         kill, self.settings.fail_instance)

    def _recover(self, df: Any, plan: BatchPlan, exc: BaseException) -> list[dict]:
        """The failed batch's job died: recover every instance per the protocol and re-run."""
        from pyspark.sql import functions as F

        bounds = df.agg(F.min("seq"), F.max("seq")).first()
        start, end = int(bounds[0]), int(bounds[1]) + 1
        for attempt in range(MAX_RECOVERY_ATTEMPTS):
            t_fail = time.time()
            self.metrics.failures += 1
            if plan.kill_offset is not None and plan.kill_offset < end and self.pending_failures:
                self.pending_failures.pop(0)  # the injected failure happened
            recovery = self.protocol.recover(start, self.batch_seq, self.spec.parallelism)
            replay = (self.spark.read.format("ckptbench").options(**self.source_opts)
                      .option("start", str(recovery.replay_from)).option("end", str(end)).load())
            plan = replace(self._plan(restore=recovery.restore), expected=self._expected_counts(start, end))
            t_run = time.time()
            try:
                stats = self._execute(replay, plan)
            except Exception as again:  # noqa: BLE001
                if not is_instance_failure(again):
                    raise
                exc = again
                continue
            self.metrics.replayed_events += end - recovery.replay_from
            self.metrics.restart_ms.append((t_run - t_fail) * 1e3 + max(s["restore_ms"] for s in stats))
            self.metrics.recovery_ms.append((time.time() - t_fail) * 1e3)
            return stats
        raise SparkIntegrationError(
            f"job {self.settings.job_id}: micro-batch {self.batch_seq} still fails after "
            f"{MAX_RECOVERY_ATTEMPTS} recoveries; last error: {str(exc).splitlines()[0][:500]}"
        ) from exc

    def _expected_counts(self, start: int, end: int) -> dict[int, int]:
        """Events per instance in ``[start, end)`` (same hash as ``repartition(P, "key")``)."""
        from pyspark.sql import functions as F

        p = self.spec.parallelism
        batch = self._select(self.spark.read.format("ckptbench").options(**self.source_opts)
                             .option("start", str(start)).option("end", str(end)).load())
        rows = batch.groupBy(F.expr(f"pmod(hash(key), {p})").alias("d")).count().collect()
        return {int(r["d"]): int(r["count"]) for r in rows}

    def _on_batch(self, df: Any, batch_id: int) -> None:
        try:
            t_start = time.time()
            if self.first_start is None:
                self.first_start = t_start
            self.batch_seq += 1
            plan = self._plan()
            try:
                stats = self._execute(df, plan)
            except Exception as exc:  # noqa: BLE001
                if not is_instance_failure(exc):
                    raise
                stats = self._recover(df, plan, exc)
            seen = [s for s in stats if s["events"] > 0]
            if not seen:
                return
            start = min(s["min_seq"] for s in seen)
            end = max(s["max_seq"] for s in seen) + 1
            results = self.protocol.commit(plan.checkpoint, end, stats)
            t_done = time.time()
            self.metrics.replayed_events += sum(s["replayed"] for s in stats)
            self.metrics.useless_checkpoints += sum(s["useless"] for s in stats)
            for result in results:
                m = self.metrics
                m.checkpoints += 1
                m.checkpoint_ms.append(result.checkpoint_ms)
                m.checkpoint_bytes += result.bytes
                m.backend_ops += result.ops
            self._record_latency(start, end, t_start, t_done)
            self.metrics.batches += 1
            if self.warm is None:  # first micro-batch: Python workers start, imports, JIT
                self.warm = (t_done, end)
            if end >= self.spec.events:
                # steady state: from the end of the first micro-batch (whole run if it had one)
                t_from, offset = self.warm if self.metrics.batches > 1 else (self.first_start, 0)
                self.metrics.seconds = t_done - t_from
                self.metrics.events = self.spec.events - offset
                self.metrics.wall_seconds = t_done - self.first_start
                self.done.set()
        except BaseException as exc:  # surfaced by run(); Spark would only log it
            self.error = exc
            self.done.set()
            raise

    def _record_latency(self, start: int, end: int, t_start: float, t_done: float) -> None:
        n = end - start
        if self.spec.rate > 0 and self.t0 is None:
            # the source started pacing at its first offset request, just before this batch was
            # cut with `end` events due: t0 ~ t_start - end / rate (early by the planning time)
            self.t0 = t_start - end / self.spec.rate
        if self.spec.rate > 0:  # from each event's intended availability time to its result
            sample = np.linspace(start, end - 1, min(n, 64))
            lat = (t_done - (self.t0 + sample / self.spec.rate)) * 1e3
            self.metrics.latencies_ms.extend((float(v), n / len(sample)) for v in lat)
        else:  # unpaced: every event of the batch was available when the batch was cut
            self.metrics.latencies_ms.append(((t_done - t_start) * 1e3, n))

    # -- the whole run ---------------------------------------------------------------------
    def run(self) -> Metrics:
        ckpt_dir = tempfile.mkdtemp(prefix="ckptbench-sparkq-")
        self._clear_local_state()
        self._warm_up()
        s = self.spec
        self.source_opts = source_options(self.query.source, s.events, s.keys, s.skew, s.seed, s.rate, s.max_batch,
                                          s.parallelism)
        df = self.spark.readStream.format("ckptbench").options(**self.source_opts).load()
        query = (df.writeStream.foreachBatch(self._on_batch)
                 .option("checkpointLocation", ckpt_dir).start())
        try:
            deadline = time.time() + self.spec.timeout
            while not self.done.wait(0.2):
                if not query.isActive:
                    break
                if time.time() > deadline:
                    raise SparkIntegrationError(f"job did not finish within {self.spec.timeout:.0f}s")
        finally:
            query.stop()
            shutil.rmtree(ckpt_dir, ignore_errors=True)
        if self.error is not None:
            raise self.error
        if not self.done.is_set():
            raise SparkIntegrationError(f"the streaming query stopped early: {query.exception()}")
        if self.spec.verify:
            self._verify()
        self._clear_local_state()
        return self.metrics

    def _warm_up(self) -> None:
        """Start the Python workers (and their numpy/pyarrow imports) before the clock starts."""
        p = self.spec.parallelism

        def touch(batches):
            import numpy  # noqa: F401
            import pyarrow  # noqa: F401

            yield from batches

        self.spark.range(0, 4 * p, numPartitions=p).mapInArrow(touch, "id long").collect()

    def final_state(self) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """All instances' (keys, counts) and versions, read by one task per instance."""
        settings, p = self.settings, self.spec.parallelism
        rows = (self.spark.sparkContext.parallelize(range(p), p)
                .map(lambda i: dump_partition(settings, i)).collect())
        keys, counts, versions = [], [], []
        for _inst, version, blob in rows:
            k, c = decode_pairs(blob)
            keys.append(k)
            counts.append(c)
            versions.append(version)
        return np.concatenate(keys), np.concatenate(counts), versions

    def _verify(self) -> None:
        from .verify import compare, ground_truth

        s = self.spec
        expected = ground_truth(s.kind, s.seed, s.keys, s.skew, s.events)
        keys, counts, _ = self.final_state()
        result = compare(expected, keys, counts)
        self.metrics.exactly_once = result.exactly_once
        self.metrics.verify_detail = result.describe()

    def _clear_local_state(self) -> None:
        shutil.rmtree(os.path.join(self.settings.state_dir, self.settings.job_id), ignore_errors=True)


def run_job(spark: Any, settings: Settings, spec: JobSpec) -> Metrics:
    return JobRunner(spark, settings, spec).run()


def print_metrics(metrics: Metrics, tag: str = "[SPARK]") -> None:
    for name, value in metrics.summary().items():
        print(f"{tag}, {name}, {value}")
    if metrics.exactly_once is not None:
        print(f"{tag}, ExactlyOnce, {str(metrics.exactly_once).lower()}")


def as_json(metrics: Metrics, settings: Settings, spec: JobSpec) -> dict[str, Any]:
    out = {"settings": {**asdict(settings), "backend_options": dict(settings.backend_options)},
           "job": asdict(spec), "metrics": metrics.summary()}
    if metrics.exactly_once is not None:
        out["metrics"]["ExactlyOnce"] = metrics.exactly_once
        out["verify"] = metrics.verify_detail
    return out
