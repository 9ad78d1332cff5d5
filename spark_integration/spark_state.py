"""The "what users would pick instead" baseline: the same keyed count on Spark's own state store.

``groupBy("key").agg(count, max(seq))`` in *update* mode on the same deterministic source, with
the RocksDB state store provider and changelog checkpointing, Spark's checkpoint location in a
temporary directory.  Spark checkpoints its state itself (per micro-batch, per state partition),
so no ckptbench backend or protocol is involved.  The sink (``foreachBatch``) writes each updated
key's count into a driver-side array: the final array is the job's result, compared with
:mod:`.verify`'s ground truth.  ``max(seq)`` over the updated keys is the batch's last offset.

Reported like the protocols' runs: throughput (steady state, from the end of the first
micro-batch), latency = micro-batch duration, CheckpointTime = the state operator's commit time
per micro-batch (Spark's ``stateOperators[].commitTimeMs``: RocksDB changelog upload included),
CheckpointBytes from RocksDB's ``rocksdbBytesCopied`` when Spark reports it.  No failure injection.
Registered as the baseline protocol ``spark-state`` (:class:`SparkStateBaseline`).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from typing import Any

import numpy as np

from .errors import SparkIntegrationError
from .job import JobSpec, Metrics
from .protocols.base import Baseline
from .queries import query as job_query
from .source import source_options
from .verify import compare

STATE_CONF = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


def run_spark_state(spark: Any, spec: JobSpec) -> Metrics:
    """Run ``spec`` on Spark's built-in stateful aggregation; returns the same :class:`Metrics`."""
    from pyspark.sql import functions as F

    from .source import CkptSource  # built on first use: importing this module needs no pyspark

    if job_query(spec.kind).operator != "count":
        raise SparkIntegrationError(
            f"the {spec.kind} job has no Spark state-store baseline here (it covers the keyed counts: "
            f"wordcount, bids); run it with a protocol instead")
    spark.dataSource.register(CkptSource)
    for k, v in STATE_CONF.items():
        spark.conf.set(k, v)
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.conf.set("spark.sql.shuffle.partitions", str(spec.parallelism))
    metrics = Metrics()
    counts = np.zeros(spec.keys, np.int64)
    done, box = threading.Event(), {"first": None, "warm": None, "error": None}

    def sink(df: Any, batch_id: int) -> None:
        try:
            t_start = time.time()
            box["first"] = box["first"] or t_start
            rows = df.toArrow() if hasattr(df, "toArrow") else None
            if rows is not None:
                keys = rows.column("key").to_numpy()
                values = rows.column("n").to_numpy()
                last = int(rows.column("last").to_numpy().max()) if rows.num_rows else -1
            else:
                pdf = df.toPandas()
                keys, values = pdf["key"].to_numpy(), pdf["n"].to_numpy()
                last = int(pdf["last"].max()) if len(pdf) else -1
            if len(keys) == 0:
                return
            nonlocal counts
            if int(keys.max()) >= len(counts):
                counts = np.concatenate([counts, np.zeros(int(keys.max()) + 1 - len(counts), np.int64)])
            counts[keys] = values
            t_done = time.time()
            metrics.batches += 1
            metrics.latencies_ms.append(((t_done - t_start) * 1e3, len(keys)))
            end = last + 1
            if box["warm"] is None:
                box["warm"] = (t_done, end)
            if end >= spec.events:
                t_from, offset = box["warm"] if metrics.batches > 1 else (box["first"], 0)
                metrics.seconds, metrics.events = t_done - t_from, spec.events - offset
                metrics.wall_seconds = t_done - box["first"]
                done.set()
        except BaseException as exc:  # surfaced below; Spark would only log it
            box["error"] = exc
            done.set()
            raise

    ckpt_dir = tempfile.mkdtemp(prefix="ckptbench-sparkstate-")
    opts = source_options(spec.kind, spec.events, spec.keys, spec.skew, spec.seed, spec.rate, spec.max_batch,
                          spec.parallelism)
    agg = (spark.readStream.format("ckptbench").options(**opts).load()
           .groupBy("key").agg(F.count("*").alias("n"), F.max("seq").alias("last")))
    query = (agg.writeStream.outputMode("update").foreachBatch(sink)
             .option("checkpointLocation", ckpt_dir).start())
    try:
        deadline = time.time() + spec.timeout
        while not done.wait(0.2):
            if not query.isActive or time.time() > deadline:
                break
        progress = list(query.recentProgress)
        # the last batch's progress is posted after its sink returns: wait for it (briefly), so
        # every micro-batch's state commit is counted
        settle = time.time() + 5
        while done.is_set() and len(progress) < metrics.batches and time.time() < settle:
            time.sleep(0.05)
            progress = list(query.recentProgress)
    finally:
        query.stop()
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    if box["error"] is not None:
        raise box["error"]
    if not done.is_set():
        raise SparkIntegrationError(f"spark-state baseline did not finish within {spec.timeout:.0f}s "
                                    f"(query exception: {query.exception()})")
    for p in progress:
        for op in p.get("stateOperators", []) if isinstance(p, dict) else _as_dict(p).get("stateOperators", []):
            metrics.checkpoints += 1
            metrics.checkpoint_ms.append(float(op.get("commitTimeMs", 0)))
            metrics.checkpoint_bytes += int((op.get("customMetrics") or {}).get("rocksdbBytesCopied", 0))
    if spec.verify:
        expected = job_query(spec.kind).ground_truth(spec.seed, spec.keys, spec.skew, spec.events)
        nz = np.flatnonzero(counts)
        result = compare(expected, nz.astype(np.int64), counts[nz])
        metrics.exactly_once, metrics.verify_detail = result.exactly_once, result.describe()
    return metrics


def _as_dict(progress: Any) -> dict:
    import json

    return json.loads(progress.json) if hasattr(progress, "json") else {}


class SparkStateBaseline(Baseline):
    """``spark-state``: :func:`run_spark_state` as a registered baseline."""

    name = "spark-state"
    session_conf = STATE_CONF

    def run(self, spark: Any, spec: JobSpec) -> Metrics:
        return run_spark_state(spark, spec)
