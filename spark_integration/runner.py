"""The driver of a keyed job under a protocol: streaming query, per-micro-batch plan, failures, metrics.

Per micro-batch (``foreachBatch``) the driver runs one Spark job: the batch's events,
``repartition(P, "key")`` into the P instances of the keyed stage, ``mapInArrow`` into
:func:`~spark_integration.operators.process_partition`, and collects one stats row per instance.
What runs before the shuffle (the query's filter or map, a protocol's message log) runs in the
source's tap, where the events are made (:mod:`.source`): the query's from the stream's options;
a protocol's, whose plan changes every micro-batch, by reading the batch's offsets — which the
driver takes from the query's offset log, written before the batch runs — again as a batch read
with the protocol's tap.  The source is deterministic, so both reads give the same events.
When that job fails (an instance was killed, or found its working state lost) the driver asks the
protocol for a recovery point, re-reads ``[replay_from, batch end)`` from the source as a batch
read of the same deterministic source, and re-runs the batch with every instance restoring first.
A protocol whose durable log holds every event of the failed batch (``Recovery.from_log``) is not
re-fed: the driver runs the keyed stage's P tasks alone, with no input and no shuffle, and each
instance brings itself to the end of the batch from the backend.
Only after all instances succeeded does the protocol commit the batch's checkpoint.

Spark's own streaming checkpoint only keeps the query's offsets between micro-batches; all
operator state and its recovery belong to our protocols.

Recovery by phase (:mod:`.phases`): the driver marks the instants of a recovery episode — the
failure (the instance's failure record, else the moment the driver caught the failed job), each
re-run's submission and end, the start of the first micro-batch back at the pre-failure rate — and
takes load, restore and the log replay from the slowest-restoring instance's row.  The phases are
consecutive slices of ``[failure, back at rate)``, so ``RecoveryTime`` (their sum) is that interval.

A paced run (``JobSpec.rate``) also records every micro-batch's commit on the pacing clock — the
events it made final (a re-run's replay of earlier micro-batches excluded: their results were
committed with them) and when — and every recovery episode's failure instant on the same clock:
the per-second latency and the recovery by latency of :mod:`.latency_series`.

With ``JobSpec.resume`` a new driver takes over a job whose driver died: the protocol's
:meth:`~.protocols.base.Protocol.resume` names the recovery point, every instance restores in the
first micro-batch and the stream starts at the recovery point's offset.  :func:`run_job` is the one entry point
for every registered protocol: a baseline (:class:`~.protocols.base.Baseline`) runs instead of
this driver, on the same job and with the same metrics.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import replace
from typing import Any

import numpy as np

from backends import CkptError
from backends.ledger import Ledger

from . import node_loss, orphans, phases
from .errors import SparkIntegrationError, store_error
from .job import JobSpec, Metrics, RecoveryPhases, print_metrics
from .keyed_state import decode_pairs
from .latency_series import Commit
from .operators import dump_partition, process_partition, restore_partition
from .protocols.base import Protocol
from .protocols.sender_log import count_logged, logged_bytes
from .protocols.registry import baseline_class, protocol_class, registration
from .protocols.tokens import STATS_SCHEMA, BatchPlan, InstanceStats, RestoreToken
from .queries import query
from .queries import QUERIES
from .settings import Settings
from .skew import parse_skew
from .sized_state import ring_mismatches
from .source import Tap, chain, events_per_instance, source_options, tap_option
from .state_size import parse_state_size
from .store import drop_job, evict_job, job_footprint
from .verify import compare

__all__ = ["JobSpec", "Metrics", "JobRunner", "build_session", "print_metrics", "run_job"]

MAX_RECOVERY_ATTEMPTS = 5
#: what a failed job's error says when an instance died or lost its state (anything else is a bug
#: and is raised at once instead of being "recovered" over and over)
INSTANCE_FAILURE_MARKS = ("InstanceStateLost", "Python worker exited unexpectedly", "crashed",
                          "EOFException", "Connection reset", "ExecutorLostFailure")


def is_instance_failure(exc: BaseException) -> bool:
    text = str(exc)
    return any(mark in text for mark in INSTANCE_FAILURE_MARKS)


def read_offset(query_dir: str, batch_id: int) -> int:
    """The source's end offset of micro-batch ``batch_id`` in the offset log under the streaming
    query's ``checkpointLocation`` (``offsets/<batch_id>``: a version line, the batch's metadata,
    then each source's offset as JSON, ours ``{"seq": n}``).  Spark writes it before the batch
    runs, and it is the offset the batch's read of our source ends at."""
    with open(os.path.join(query_dir, "offsets", str(batch_id)), encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    return int(json.loads(lines[-1])["seq"])


def check_fail_point(settings: Settings) -> None:
    """``failPoint`` must be one the instances (or the senders) of this protocol reach (its class
    is loaded, so its points are declared); a driver point ends the driver and is armed by the
    environment."""
    from backends import failpoints

    name = settings.fail_point
    valid = sorted({n for n in failpoints.DECLARED if n.startswith(("spark.worker.", f"spark.{settings.protocol}."))}
                   | set(protocol_class(settings.protocol).sender_points))
    if name and name not in valid:
        hint = (f"; a driver's point ends the driver: arm it with {failpoints.ENV}={name}"
                if name.startswith("spark.driver.") else "")
        raise SparkIntegrationError(
            f"fail point {name!r} is not one the instances of protocol {settings.protocol!r} reach; "
            f"valid: {', '.join(valid)}{hint}")


def build_session(master: str = "local[2]", app: str = "ckptbench-spark", conf: dict[str, str] | None = None):
    """A SparkSession for local runs (spark-submit users get theirs from ``getOrCreate``)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # workers must run this interpreter (the venv with numpy/pyarrow and this package)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.python.worker.reuse", "true")
               # workers forked with the job's modules already imported (.warm_daemon)
               .config("spark.python.daemon.module", "spark_integration.warm_daemon")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.driver.memory", "1g")
               # deep py4j callback stacks (foreachBatch -> recovery jobs) can overflow the default
               # thread stack of the stream execution thread
               .config("spark.driver.extraJavaOptions", "-Xss16m"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def stats_requests(stats: list[InstanceStats], column: str) -> Ledger:
    """The requests the instances' rows report in ``column`` (``ckpt_requests``,
    ``restore_requests``), added up."""
    total = Ledger()
    for row in stats:
        if row[column]:
            total.add(Ledger.from_dict(json.loads(row[column])))
    return total


class JobRunner:
    """Runs one keyed job (:mod:`.queries`) under ``settings`` and collects :class:`Metrics`."""

    def __init__(self, spark: Any, settings: Settings, spec: JobSpec,
                 node_losses: tuple[node_loss.NodeLoss, ...] = ()) -> None:
        from .source import CkptSource  # built on first use: importing this module needs no pyspark

        self.query = query(spec.kind)
        # the operator's kind of state travels to the executors with the settings
        settings = replace(settings, operator=self.query.operator)
        if parse_state_size(settings.state_bytes).sized and not self.query.sizable:
            raise SparkIntegrationError(
                f"spark.ckptbench.stateBytes sizes the state of the keyed count jobs "
                f"({', '.join(q.name for q in QUERIES.values() if q.sizable)}), not {spec.kind}; drop it")
        #: the stream's load phase (``load+`` skews): its micro-batches are not steady state
        self.load_end = parse_skew(spec.skew).load_events(spec.keys)
        if self.load_end and self.query.source == "nexmark":
            raise SparkIntegrationError(f"skew {spec.skew}: a load phase is for the keyed counts "
                                        f"(wordcount, nexmark-bids), not {spec.kind}; drop load+")
        if self.load_end >= spec.events:
            raise SparkIntegrationError(
                f"skew {spec.skew}: the load phase is the first {spec.keys} events (one a key), so "
                f"--events {spec.events} leaves no run phase; give more events than keys")
        self.spark, self.settings, self.spec = spark, settings, spec
        self.protocol: Protocol = protocol_class(settings.protocol)(settings)
        check_fail_point(settings)
        self.metrics = Metrics()
        #: requests sent since the last checkpoint became durable (LOG.io logs between them)
        self.unpaid = Ledger()
        self.pending_failures = sorted(settings.fail_at)
        #: hosts to kill (``--fail-node``), by offset, and those killed with their striking thread
        self.node_losses = sorted(node_losses, key=lambda loss: loss.offset)
        self.struck: list[tuple[node_loss.NodeLoss, threading.Thread]] = []
        self.batch_seq = 0
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.first_start: float | None = None
        self.warm: tuple[float, int] | None = None
        spark.dataSource.register(CkptSource)
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        spark.conf.set("spark.sql.shuffle.partitions", str(spec.parallelism))
        self.t0: float | None = None  # paced runs: event i is due at t0 + i / rate
        self.metrics.rate = spec.rate
        self.failure_times: list[float] = []  # each recovery episode's failure instant (time.time())
        self.source_opts: dict[str, str] = {}
        #: (events/s, events) of the micro-batches run at the normal level
        self.batch_rates: list[tuple[float, int]] = []
        #: the episode whose catch-up is under way: (its phases, re-run end, reference (rate, size))
        self.catching_up: tuple[RecoveryPhases, float, tuple[float, float] | None] | None = None
        self.resume_restore: RestoreToken | None = None  # the first micro-batch of a resumed job
        #: the end offset of the last micro-batch with events: the next one's watermark
        self.watermark = 0
        #: the streaming query's checkpointLocation (its offset log: :func:`read_offset`) and
        #: the offset its stream starts at
        self.query_dir, self.first = "", 0
        #: the highest watermark a completed micro-batch was given: the final state's windows
        #: closed at it (the ground truth of a windowed job needs it)
        self.closed_at = 0
        if settings.window_events:
            self.metrics.dropped_keys = 0
        #: with ``JobSpec.orphans``: the orphan census after every checkpoint (:mod:`.orphans`)
        self.censuses: list[orphans.Census] = []

    # -- one Spark job over one range of events ------------------------------------------
    def _read(self, start: int, end: int, tap: Tap | None) -> Any:
        """Events ``[start, end)`` as a batch read of the source, through ``tap``."""
        opts = dict(self.source_opts, start=str(start), end=str(end))
        if tap is not None:
            opts["tap"] = tap_option(tap)
        return self.spark.read.format("ckptbench").options(**opts).load()

    def _span(self, batch_id: int) -> tuple[int, int]:
        """Micro-batch ``batch_id``'s offsets ``[start, end)``, from the query's offset log."""
        end = read_offset(self.query_dir, batch_id)
        return (read_offset(self.query_dir, batch_id - 1) if batch_id > 0 else self.first), end

    def _execute(self, plan: BatchPlan, span: tuple[int, int], df: Any = None) -> list[InstanceStats]:
        """Batch ``plan`` over the events ``[start, end)`` of ``span`` (``df``: the stream's, with
        the query's tap; None: read here); the senders' tap, if the protocol has one, reads them
        again through it."""
        stage = self.protocol.source_tap(plan, self.spec.parallelism)
        if df is None or stage is not None:
            df = self._read(*span, chain(self.query.select, stage))
        fn = functools.partial(process_partition, self.settings, self.protocol, plan)
        df = self.protocol.prepare(df, plan, self.spec.parallelism)
        rows = df.repartition(self.spec.parallelism, "key").mapInArrow(fn, STATS_SCHEMA).collect()
        stats = [InstanceStats(**r.asDict()) for r in rows]
        if stage is not None:  # every event the instances received was logged
            count_logged(self.settings, sum(s["events"] for s in stats))
        return stats

    def _execute_restore_only(self, plan: BatchPlan) -> list[InstanceStats]:
        """The keyed stage's P instances alone, with no input (a ``from_log`` recovery): one task
        each (partition ``i`` of a P-row range is instance ``i``), no source read, no logging
        stage, no shuffle; Arrow tasks, so the job's warm Python workers run them."""
        p = self.spec.parallelism
        fn = functools.partial(restore_partition, self.settings, self.protocol, plan)
        rows = self.spark.range(0, p, numPartitions=p).mapInArrow(fn, STATS_SCHEMA).collect()
        return [InstanceStats(**r.asDict()) for r in rows]

    def _plan(self, restore: RestoreToken | None = None) -> BatchPlan:
        kill = self.pending_failures[0] if self.pending_failures else None
        return BatchPlan(self.batch_seq, restore, self.protocol.plan_checkpoint(self.batch_seq),
                         kill, self.settings.fail_instance, self.settings.fail_point or None,
                         watermark=self.watermark)

    def _recover(self, span: tuple[int, int], plan: BatchPlan, exc: BaseException,
                 t_caught: float) -> tuple[list[InstanceStats], tuple[int, int] | None]:
        """The failed batch's job (events ``span``) died (the driver caught it at ``t_caught``):
        recover every instance per the protocol and re-run; measure the episode's phases but its
        catch-up.  Returns the re-run's rows and, for a ``from_log`` re-run (whose rows saw no
        events), the failed batch's offsets ``[start, end)``."""
        if self.catching_up is not None:  # a new failure ends the previous episode's catch-up
            self._finish_episode(t_caught)
        start, end = span
        t_first, detect_s, wasted_s, failures = t_caught, 0.0, 0.0, 0
        driver = phases.Meter()  # every attempt's: its load time and bytes, its requests
        for attempt in range(MAX_RECOVERY_ATTEMPTS):
            failures += 1
            self.metrics.failures += 1
            if plan.kill_offset is not None and plan.kill_offset < end and self.pending_failures:
                self.pending_failures.pop(0)  # the injected failure happened
            if self.settings.cold_restore:  # before anything of the restore is read
                self.metrics.restore_cache = evict_job(self.settings)
            with phases.metering() as meter:  # the driver's reads of the protocol's records
                recovery = self.protocol.recover(start, self.batch_seq, self.spec.parallelism)
            driver.add_read(meter.load_s, meter.load_bytes)
            driver.requests.add(meter.requests)
            if recovery.from_log:  # the instances alone: nothing re-read, re-logged or shuffled
                plan, source_events = self._plan(restore=recovery.restore), 0
            else:
                plan = replace(self._plan(restore=recovery.restore), expected=self._expected_counts(start, end))
                source_events = end - recovery.replay_from
            t_run = time.time()
            detect_s += t_run - t_caught
            try:
                stats = (self._execute_restore_only(plan) if recovery.from_log
                         else self._execute(plan, (recovery.replay_from, end)))
            except Exception as again:  # noqa: BLE001
                if not is_instance_failure(again):
                    raise
                t_caught = time.time()
                wasted_s += t_caught - t_run  # a re-run cut short: counted as replay
                exc = again
                continue
            t_end = time.time()
            failed_at = min((s["failed_at"] for s in stats if s["failed_at"] > 0), default=0.0)
            if 0 < failed_at < t_first:  # the instance died before the driver noticed
                detect_s += t_first - failed_at
                t_first = failed_at
            self.metrics.replayed_events += source_events
            crit = max(stats, key=lambda s: s["restore_ms"])  # the slowest-restoring instance
            failed = [s for s in stats if s["failed_at"] > 0] or [crit]
            others = [s for s in stats if s not in failed]
            self.metrics.restart_ms.append((t_run - t_first) * 1e3 + crit["restore_ms"])
            episode = RecoveryPhases(
                detect_ms=(detect_s - driver.load_s) * 1e3,
                load_ms=driver.load_s * 1e3 + crit["load_ms"],
                load_bytes=driver.load_bytes + sum(s["load_bytes"] for s in stats),
                restore_ms=max(0.0, crit["restore_ms"] - crit["load_ms"] - crit["log_replay_ms"]),
                replay_ms=((t_end - t_run) + wasted_s) * 1e3 - crit["restore_ms"] + crit["log_replay_ms"],
                replay_events=source_events + sum(s["replayed"] for s in stats),
                failures=failures,
                failed_task_ms=max(s["task_ms"] for s in failed),
                others_task_ms=max((s["task_ms"] for s in others), default=0.0),
                requests=driver.requests.add(stats_requests(stats, "restore_requests")).as_dict())
            self.catching_up = (episode, t_end, phases.reference(self.batch_rates))
            self.failure_times.append(t_first)
            return stats, ((start, end) if recovery.from_log else None)
        raise SparkIntegrationError(
            f"job {self.settings.job_id}: micro-batch {self.batch_seq} still fails after "
            f"{MAX_RECOVERY_ATTEMPTS} recoveries; last error: {str(exc).splitlines()[0][:500]}"
        ) from exc

    def _finish_episode(self, t_back: float) -> None:
        """The episode under catch-up ends at ``t_back``: back at rate, a new failure, or the end."""
        episode, t_end, _ = self.catching_up
        episode.catch_up_ms = max(0.0, t_back - t_end) * 1e3
        self.metrics.recoveries.append(episode)
        self.metrics.recovery_ms.append(episode.total_ms)
        self.catching_up = None

    def _track_rate(self, start: int, events: int, t_start: float, t_done: float, recovered: bool) -> bool:
        """Per-batch rate: ends a catch-up once a batch runs at the pre-failure level (it then
        starts at that level, so the catch-up ends at its start), and feeds the reference.  A
        paced run is back only once its backlog is gone too: a micro-batch no larger than
        ``CATCH_UP_BACKLOG`` times the pre-failure ones.  Micro-batches of the load phase are
        not the steady state: they insert, and the checkpoints after them write, every key.
        Returns whether the micro-batch counted as steady state."""
        if recovered or self.metrics.batches == 0:  # the first micro-batch includes the warm-up
            return False
        if start < self.load_end:
            return False
        rate = events / max(t_done - t_start, 1e-9)
        if self.catching_up is not None:
            if not phases.back_at_rate(rate, events, self.catching_up[2], self.spec.rate > 0):
                return False
            self._finish_episode(t_start)
        self.batch_rates.append((rate, events))
        self.metrics.steady_events += events
        self.metrics.steady_seconds += t_done - t_start
        return True

    def _expected_counts(self, start: int, end: int) -> dict[int, int]:
        """Events per instance in ``[start, end)``: the batch's events through the query's select,
        counted in the driver (the source is a function of the offsets; no job, so none of the
        recovery's time is a Spark job's)."""
        return events_per_instance(self.source_opts, start, end, chain(self.query.select), self.spec.parallelism)

    def _on_batch(self, df: Any, batch_id: int) -> None:
        try:
            t_start = time.time()
            if self.first_start is None:
                self.first_start = t_start
            self.batch_seq += 1
            plan, self.resume_restore = self._plan(restore=self.resume_restore), None
            recovered, bounds = False, None
            span = self._span(batch_id)
            self._arm_node_loss(span)
            try:
                stats = self._execute(plan, span, df)
            except Exception as exc:  # noqa: BLE001
                if not is_instance_failure(exc):
                    raise
                stats, bounds = self._recover(span, plan, exc, time.time())
                recovered = True
            self.closed_at = max(self.closed_at, plan.watermark)
            if self.metrics.dropped_keys is not None:
                self.metrics.dropped_keys += sum(s["dropped"] for s in stats)
            seen = [s for s in stats if s["events"] > 0]
            if seen:
                start = min(s["min_seq"] for s in seen)
                end = max(s["max_seq"] for s in seen) + 1
            elif bounds is not None:  # a from_log re-run: its events came from the log, not the source
                start, end = bounds
            else:
                return
            # the events this commit makes final: a re-run also reports what it replayed of
            # earlier micro-batches, whose results were committed with them
            first_new = max(start, self.watermark)
            self.watermark = end
            t_commit = time.time()
            with phases.metering() as committed:  # the driver's commit records, their GC
                results = self.protocol.commit(plan.checkpoint, end, stats)
            t_done = time.time()
            self.unpaid.add(committed.requests).add(stats_requests(stats, "ckpt_requests"))
            if results:  # a checkpoint's requests: the instances' and the commit's since the last
                self.metrics.checkpoint_requests.append(self.unpaid.as_dict())
                self.unpaid = Ledger()
            self.metrics.replayed_events += sum(s["replayed"] for s in stats)
            self.metrics.useless_checkpoints += sum(s["useless"] for s in stats)
            for result in results:
                m = self.metrics
                m.checkpoints += 1
                m.checkpoint_ms.append(result.checkpoint_ms)
                m.checkpoint_bytes += result.bytes
                m.checkpoint_sizes.append(result.bytes)
                m.state_sizes.append(result.state_bytes if result.state_bytes is not None
                                     else sum(s["state_bytes"] for s in stats))
                m.backend_ops += result.ops
            if results and self.spec.orphans and self.settings.writes_checkpoints:
                self.censuses.append(self._census(sizes=False))  # a count: reads no value
            self.metrics.live_state_bytes = sum(s["state_bytes"] for s in stats)
            if any(s["encode_ms"] or s["write_ms"] for s in stats):
                self.metrics.checkpoint_encode_ms.append(max(s["encode_ms"] for s in stats))
                self.metrics.checkpoint_write_ms.append(max(s["write_ms"] for s in stats))
            self._record_latency(start, end, t_start, t_done)
            if self.t0 is not None:
                self.metrics.commits.append(Commit(first_new, end, round(t_done - self.t0, 4)))
            steady = self._track_rate(start, end - start, t_start, t_done, recovered)
            self.metrics.timeline.append({
                "end": end, "events": end - start, "ms": round((t_done - t_start) * 1e3, 1),
                "checkpoint_ms": round(sum(r.checkpoint_ms for r in results), 1),
                "task_ms": round(max((s["task_ms"] for s in stats), default=0.0), 1),
                "commit_ms": round((t_done - t_commit) * 1e3, 1),
                "recovered": recovered, "steady": steady})
            self.metrics.batches += 1
            if self.warm is None:  # first micro-batch: Python workers start, imports, JIT
                self.warm = (t_done, end)
            if end >= self.spec.events:
                # steady state: from the end of the first micro-batch (whole run if it had one)
                t_from, offset = self.warm if self.metrics.batches > 1 else (self.first_start, 0)
                self.metrics.seconds = t_done - t_from
                self.metrics.events = self.spec.events - offset
                self.metrics.wall_seconds = t_done - self.first_start
                if self.catching_up is not None:  # the run ended before the rate was back
                    self._finish_episode(t_done)
                self.done.set()
        except BaseException as exc:  # surfaced by run(); Spark would only log it
            self.error = exc
            self.done.set()
            raise

    def _arm_node_loss(self, span: tuple[int, int]) -> None:
        """If this micro-batch (events ``span``) holds the next ``--fail-node`` offset, its host
        dies while the batch's job runs (:func:`.node_loss.strike_when_running`)."""
        for loss, _ in self.struck:
            if loss.error is not None:
                raise loss.error
        if not self.node_losses or span[1] <= self.node_losses[0].offset:
            return
        loss = self.node_losses.pop(0)
        self.struck.append((loss, node_loss.strike_when_running(self.spark, self.settings, loss,
                                                                self.spec.parallelism)))

    def _attribute_node_losses(self) -> None:
        """Each host loss's executor-loss time goes to the recovery episode that began at its
        kill (the first whose failure instant is not before it)."""
        for loss, thread in self.struck:
            loss.cancel.set()  # a host not killed yet stays alive: the job is over
            thread.join(node_loss.EXECUTOR_WATCH_S)
            if loss.error is not None:
                raise loss.error
            self.metrics.node_losses.append(loss.describe())
            lost = loss.executor_lost_s
            if lost is None:
                continue
            for t_fail, episode in zip(self.failure_times, self.metrics.recoveries):
                if t_fail >= loss.killed_at - 1e-3 and episode.executor_loss_ms is None:
                    episode.executor_loss_ms = lost * 1e3
                    break

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
        """The job, start to end; the executor-local state goes with it when it ends, and a run
        that fails leaves none of its instances' working state behind (:meth:`_drop_working_state`).
        Spark's own query directory (offsets and commits, driver-local) goes however the run ends;
        it lives in the job's working state, so that even a killed driver's goes with the job's
        next run, fresh or resumed, which removes that state when it ends."""
        try:
            return self._run()
        except BaseException:
            self._drop_working_state()
            raise
        finally:
            if self.query_dir:
                shutil.rmtree(self.query_dir, ignore_errors=True)

    def _new_query_dir(self) -> str:
        """A fresh directory for Spark's offsets and commits, inside the job's working state."""
        base = os.path.join(self.settings.state_dir, self.settings.job_id)
        os.makedirs(base, exist_ok=True)
        self.query_dir = tempfile.mkdtemp(prefix="sparkq-", dir=base)
        return self.query_dir

    def _run(self) -> Metrics:
        first = self.first = 0
        if self.spec.resume:  # the working state of the dead driver's run is what recovery sees
            recovery, self.batch_seq = self.protocol.resume(self.spec.parallelism)
            self.resume_restore, first = recovery.restore, recovery.replay_from
            self.first = first
            if first >= self.spec.events:
                raise SparkIntegrationError(
                    f"job {self.settings.job_id}: the last commit covers all {self.spec.events} events; "
                    f"nothing is left to resume")
        else:
            self._clear_local_state()
        ckpt_dir = self._new_query_dir()  # after the clearing, which would take it
        self._warm_up()
        s = self.spec
        self.source_opts = source_options(self.query.source, s.events, s.keys, s.skew, s.seed, s.rate, s.max_batch,
                                          s.parallelism)
        select = chain(self.query.select)  # the query's stage before the shuffle, in the source
        df = (self.spark.readStream.format("ckptbench").options(**self.source_opts)
              .options(**({"tap": tap_option(select)} if select else {}))
              .option("start", str(first)).load())
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
        if self.error is not None:
            raise store_error(self.error) or self.error
        if not self.done.is_set():
            raise SparkIntegrationError(f"the streaming query stopped early: {query.exception()}")
        self._attribute_node_losses()
        if self.t0 is not None:  # failures on the paced clock (the first may precede t0's estimate)
            self.metrics.failure_s = [round(t - self.t0, 4) for t in self.failure_times]
        self.metrics.protocol_counters.update(self.protocol.counters())
        # the senders' log volume is work the protocol did, beside the bytes it checkpointed
        self.metrics.protocol_counters.setdefault("LoggedBytes", logged_bytes(self.settings.job_id))
        if self.spec.verify:
            self._verify()
        with phases.metering() as cleanup:  # measuring what the run left
            if self.metrics.checkpoints:  # after the verify, which must see the store as the run left it
                self.metrics.store_bytes, self.metrics.store_bytes_after_gc = job_footprint(self.settings)
        if self.spec.orphans and self.settings.writes_checkpoints:  # its requests are the census'
            orphans.settle(self.settings)  # an asynchronous writer's last checkpoints
            before = self._census()
            self.protocol.collect(self.spec.parallelism)
            self.metrics.orphans = orphans.report(self.censuses, before, self._census())
        with phases.metering() as dropping:
            self._drop_records()
        cleanup.requests.add(dropping.requests)
        if cleanup.requests:
            self.metrics.cleanup_requests = cleanup.requests.as_dict()
        self._clear_local_state()
        return self.metrics

    def _census(self, sizes: bool = True) -> orphans.Census:
        """What the job holds in the store that the protocol's recovery line does not reference
        (:mod:`.orphans`)."""
        return orphans.census(self.settings, self.protocol.references(self.spec.parallelism), sizes)

    def _drop_records(self) -> None:
        """The job's records deleted, once measured (unless retained)."""
        if self.settings.writes_checkpoints and not self.settings.retain_checkpoints:
            try:
                drop_job(self.settings)
            except CkptError as exc:  # the run is done and measured: its leftovers are not its result
                print(f"[SPARK], warning: the job's records stay in the store ({exc}); delete the keys "
                      f"under {self.settings.job_id}/ when it answers", file=sys.stderr)

    def _warm_up(self) -> None:
        """Start the Python workers (and their numpy/pyarrow imports) before the clock starts."""
        p = self.spec.parallelism

        def touch(batches):
            import numpy  # noqa: F401
            import pyarrow  # noqa: F401

            yield from batches

        self.spark.range(0, 4 * p, numPartitions=p).mapInArrow(touch, "id long").collect()

    def final_state(self, check: Any = None) -> tuple[np.ndarray, np.ndarray, list[int], tuple[int, int]]:
        """All instances' (keys, counts), versions and the sum of ``check(state)`` over them
        (run on the executors, see :func:`.operators.dump_partition`), one task per instance."""
        settings, p = self.settings, self.spec.parallelism
        rows = (self.spark.sparkContext.parallelize(range(p), p)
                .map(lambda i: dump_partition(settings, i, check)).collect())
        keys, counts, versions, wrong, compared = [], [], [], 0, 0
        for _inst, version, blob, (bad, seen) in rows:
            k, c = decode_pairs(blob)
            keys.append(k)
            counts.append(c)
            versions.append(version)
            wrong, compared = wrong + bad, compared + seen
        return np.concatenate(keys), np.concatenate(counts), versions, (wrong, compared)

    def _verify(self) -> None:
        s = self.spec
        window = self.settings.window_events
        expected = self.query.ground_truth(s.seed, s.keys, s.skew, s.events, window, self.closed_at)
        rings = None
        if parse_state_size(self.settings.state_bytes).sized:
            rings = functools.partial(ring_mismatches, self.query.source, s.seed, s.keys, s.skew, s.events,
                                      self.settings.state_bytes, window=window, watermark=self.closed_at)
        keys, counts, _, (wrong_rings, ring_keys) = self.final_state(rings)
        result = compare(expected, keys, counts, wrong_rings, ring_keys)
        self.metrics.exactly_once = result.exactly_once
        self.metrics.verify_detail = result.describe()

    def _clear_local_state(self) -> None:
        shutil.rmtree(os.path.join(self.settings.state_dir, self.settings.job_id), ignore_errors=True)

    def _drop_working_state(self) -> None:
        """After a failed run: the instances' working state files, which live in memory (tmpfs)
        and may hold gigabytes — nothing reads them again (a resumed driver restores every
        instance from the protocol's checkpoints).  The store's directory, logs and marks stay
        as the failure left them."""
        base = os.path.join(self.settings.state_dir, self.settings.job_id)
        for name in os.listdir(base) if os.path.isdir(base) else ():
            if name.endswith(".state"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(base, name))


def run_job(spark: Any, settings: Settings, spec: JobSpec,
            node_losses: tuple[node_loss.NodeLoss, ...] = ()) -> Metrics:
    """Run job ``spec`` under ``settings.protocol`` — this driver, or the protocol's baseline run;
    ``node_losses``: hosts of a cluster to kill at event offsets (:mod:`.node_loss`)."""
    reg = registration(settings.protocol)
    operator = query(spec.kind).operator
    if not reg.supports(operator):
        raise SparkIntegrationError(
            f"protocol {reg.name!r} does not cover the {spec.kind} job ({operator} state); it covers "
            f"the jobs with {', '.join(reg.operators)} state")
    if reg.baseline:
        if node_losses:
            raise SparkIntegrationError(f"protocol {reg.name!r} runs without injected failures; "
                                        f"drop --fail-node")
        return baseline_class(reg.name)().run(spark, spec, settings)
    return JobRunner(spark, settings, spec, node_losses).run()
