"""What a job run is asked to do (:class:`JobSpec`) and what it reports (:class:`Metrics`).

Shared by every way of running a job — a protocol under the driver of :mod:`.runner`, or a
baseline on Spark's own state store (:mod:`.spark_state`) — so their results compare line by
line (``[SPARK], <name>, <value>``, :func:`print_metrics`).

A recovery is reported by phase (:class:`RecoveryPhases`, measured as :mod:`.phases` says): the
``Recovery.<Phase>(ms)`` lines are means over the run's recovery episodes, and ``RecoveryTime(ms)``
is the mean of the same episodes' phase sums, so the phases add up to it.  Checkpoints are also
described as Flink's REST API describes them (:meth:`Metrics.checkpoint_statistics`:
``end_to_end_duration``, ``checkpointed_size``, ``state_size``), so dashboards reading Flink's
checkpoint statistics read ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import latency_series


@dataclass
class JobSpec:
    """The job and its input: which query, how many events of which keys, how they are cut."""

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
    #: take over a job whose driver died: recover from what the protocol left in the backend
    #: (same jobId, stateDir and backend) instead of starting from the first event
    resume: bool = False
    #: count what the protocol leaves in the store that its recovery line does not reference,
    #: after every checkpoint and at the end before and after the protocol's GC (:mod:`.orphans`);
    #: the census lists the store between micro-batches, which the run's time includes
    orphans: bool = False


#: a host's loss: the kill -> Spark's driver dropped the host's executor, the mean over the
#: episodes that began with one (printed after ``Recovery.Detect(ms)``; it overlaps the phases,
#: see :attr:`RecoveryPhases.executor_loss_ms`)
EXECUTOR_LOSS_LINE = "Recovery.ExecutorLoss(ms)"
#: the phases of a recovery episode, in order (see :mod:`.phases`)
PHASES = ("detect", "load", "restore", "replay", "catch_up")
#: ``[SPARK]`` line name of each phase
PHASE_LINES = {"detect": "Recovery.Detect(ms)", "load": "Recovery.Load(ms)", "restore": "Recovery.Restore(ms)",
               "replay": "Recovery.Replay(ms)", "catch_up": "Recovery.CatchUp(ms)"}


@dataclass
class RecoveryPhases:
    """One recovery episode: failure -> throughput back, cut into consecutive phases (ms)."""

    detect_ms: float = 0.0
    load_ms: float = 0.0
    load_bytes: int = 0  # read from the backend by the driver and every instance
    restore_ms: float = 0.0
    replay_ms: float = 0.0
    replay_events: int = 0  # source events re-processed + logged events re-applied
    catch_up_ms: float = 0.0
    #: the re-run's task of the failed instance, and the longest of the others' (ms): how much
    #: of the episode the instances that did not fail spent working (not a phase)
    failed_task_ms: float = 0.0
    others_task_ms: float = 0.0
    failures: int = 1  # failures in the episode (a re-run that failed again extends it)
    #: the requests the stores sent for it: the driver's and every instance's restore
    #: (:meth:`backends.ledger.Ledger.as_dict`)
    requests: dict = field(default_factory=dict)
    #: a host's loss (:mod:`.node_loss`): from the kill until Spark's driver dropped the host's
    #: executor (ms; None: no host was lost).  Not a slice of the sum: until then Spark may still
    #: hand tasks to the dead host, which stall whichever phase they belong to (detect, or replay)
    executor_loss_ms: float | None = None

    @property
    def total_ms(self) -> float:
        return sum(getattr(self, f"{p}_ms") for p in PHASES)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"{p}_ms": round(getattr(self, f"{p}_ms"), 2) for p in PHASES}
        out.update(load_bytes=self.load_bytes, replay_events=self.replay_events, failures=self.failures,
                   failed_task_ms=round(self.failed_task_ms, 2), others_task_ms=round(self.others_task_ms, 2),
                   total_ms=round(self.total_ms, 2), requests=self.requests)
        if self.executor_loss_ms is not None:
            out["executor_loss_ms"] = round(self.executor_loss_ms, 2)
        return out


def distribution(values: list[float]) -> dict[str, float]:
    """min/max/avg and percentiles of ``values``, as Flink's checkpoint statistics summarize them."""
    if not values:
        return {"min": 0, "max": 0, "avg": 0, "p50": 0, "p90": 0, "p95": 0, "p99": 0, "p999": 0}
    a = np.asarray(values, dtype=float)
    out = {"min": float(a.min()), "max": float(a.max()), "avg": float(a.mean())}
    for name, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9)):
        out[name] = float(np.percentile(a, q))
    return {k: round(v, 2) for k, v in out.items()}


@dataclass
class Metrics:
    """What a run measured; :meth:`summary` is the ``[SPARK]`` line set and the JSON ``metrics``."""

    events: int = 0  # events in the measured (steady-state) part of the run
    batches: int = 0
    seconds: float = 0.0  # duration of the measured part
    wall_seconds: float = 0.0  # first micro-batch start -> last result
    #: the micro-batches run at the normal level: not the first (warm-up), not a recovery's
    #: re-run, not its catch-up — a run with a failure compares with a run without on these
    steady_events: int = 0
    steady_seconds: float = 0.0
    latencies_ms: list = field(default_factory=list)  # (value, weight)
    #: a paced run: its rate (events/s; 0: unpaced), every micro-batch's commit
    #: (:class:`.latency_series.Commit`, seconds since the pacing started) and every failure's
    #: instant on the same clock — the per-second latency and the recovery read off it
    rate: float = 0.0
    commits: list = field(default_factory=list)
    failure_s: list = field(default_factory=list)
    checkpoints: int = 0
    checkpoint_ms: list = field(default_factory=list)
    checkpoint_bytes: int = 0
    checkpoint_sizes: list = field(default_factory=list)  # bytes written per checkpoint
    #: per micro-batch whose tasks took a checkpoint: the slowest instance's time encoding it,
    #: and writing it (backend puts, deletes, flushes inside the task)
    checkpoint_encode_ms: list = field(default_factory=list)
    checkpoint_write_ms: list = field(default_factory=list)
    state_sizes: list = field(default_factory=list)  # full state size at each checkpoint (bytes)
    #: the full state's size after the last micro-batch (bytes): the live state of a run whose
    #: checkpoints were not confirmed durable while it ran (uncoordinated's writer lags its tasks)
    live_state_bytes: int = 0
    backend_ops: int = 0
    #: per micro-batch whose commit made checkpoints durable: the requests the stores sent for
    #: them since the previous one (the instances' checkpoint and logging steps, the driver's
    #: commits; :meth:`backends.ledger.Ledger.as_dict`)
    checkpoint_requests: list = field(default_factory=list)
    #: the requests of the run's end: measuring the store's footprint and deleting the job's
    #: records (None: none sent)
    cleanup_requests: dict | None = None
    failures: int = 0
    restart_ms: list = field(default_factory=list)
    recovery_ms: list = field(default_factory=list)  # per episode: the sum of its phases
    recoveries: list = field(default_factory=list)  # RecoveryPhases per episode
    replayed_events: int = 0
    #: keys whose state was dropped (their window closed or moved on); None: keys never expire
    dropped_keys: int | None = None
    useless_checkpoints: int = 0
    exactly_once: bool | None = None
    protocol_counters: dict = field(default_factory=dict)  # the protocol's own totals (Protocol.counters)
    verify_detail: str = ""
    #: bytes the store held for the job when it ended, and after the store's GC (None: the
    #: store cannot attribute bytes to a job, or the run wrote no checkpoints)
    store_bytes: int | None = None
    store_bytes_after_gc: int | None = None
    #: with ``JobSpec.orphans``: the orphan report (:func:`.orphans.report`)
    orphans: dict | None = None
    #: with ``coldRestore``: ``cold``, or ``warm: WHY`` (see :func:`.store.evict_job`)
    restore_cache: str = ""
    #: every micro-batch, in order: its end offset, events, wall time (ms), the checkpoint it
    #: took (ms; 0: none), the slowest instance's operator task (``task_ms``: its Python body,
    #: from the state's load to its save) and the driver's commit (``commit_ms``), whether it
    #: counted as steady state — the timeline behind the means, as Spark's per-batch query
    #: progress and Flink's checkpoint history give one.  The wall time less those two is
    #: Spark's: planning, the source stage, the shuffle, scheduling, Python workers' starts.
    timeline: list = field(default_factory=list)
    #: ``[SPARK]`` lines this run cannot measure -> why: printed as ``n/a (WHY)`` in place of a
    #: number, so a figure never reads as measured when it was not (a baseline on Spark's own
    #: store has no backend operations to count, for one)
    unmeasured: dict = field(default_factory=dict)
    #: every host killed (``--fail-node``): what died and which instances' working state with it
    #: (:mod:`.node_loss`), one text each
    node_losses: list = field(default_factory=list)

    @property
    def state_bytes(self) -> int:
        """The full state's size at the last checkpoint, or after the last micro-batch when no
        checkpoint was confirmed while the run lasted."""
        return self.state_sizes[-1] if self.state_sizes else self.live_state_bytes

    @property
    def throughput(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def latency(self, q: float) -> float:
        return latency_series.weighted_quantile(self.latencies_ms, q)

    def latency_per_second(self) -> list[dict]:
        """A paced run's p50/p99 end-to-end latency per second of event creation
        (:func:`.latency_series.per_second`); empty for an unpaced run."""
        return latency_series.per_second(self.commits, self.rate)

    def recovery_by_latency(self) -> list[float | None]:
        """Per failure of a paced run: failure to p50 back within 10 % of its pre-failure median
        (:func:`.latency_series.recovery_by_latency`; ms, None: not back before the run ended
        or the next failure).  The normal level is taken after the first micro-batch (warm-up)."""
        series = self.latency_per_second()
        normal_from = latency_series.warmup_seconds(self.commits, self.rate)
        marks = sorted(self.failure_s)
        return [latency_series.recovery_by_latency(series, f, normal_from, nxt)
                for f, nxt in zip(marks, marks[1:] + [None])]

    def latency_lines(self) -> dict[str, Any]:
        """``SteadySeconds`` (the time the steady-state micro-batches took) and, for a paced run
        with failures, ``RecoveryByLatency(ms)``: the mean over its failures, or ``n/a (why)``."""
        out: dict[str, Any] = {"SteadySeconds": round(self.steady_seconds, 2)}
        if self.rate > 0 and self.failure_s:
            found = self.recovery_by_latency()
            out["RecoveryByLatency(ms)"] = (round(sum(found) / len(found), 1) if None not in found else
                                            "n/a (p50 not back within 10 % of its pre-failure median "
                                            "before the run ended)")
        return out

    def phase_means(self) -> dict[str, float]:
        """The ``Recovery.*`` lines: each phase's mean over the episodes (0 without any)."""
        n = len(self.recoveries)
        out: dict[str, float] = {}
        for p in PHASES:
            out[PHASE_LINES[p]] = round(sum(getattr(r, f"{p}_ms") for r in self.recoveries) / n, 1) if n else 0.0
            lost = [r.executor_loss_ms for r in self.recoveries if r.executor_loss_ms is not None]
            if p == "detect" and lost:  # a host's loss: how long Spark took to notice it
                out[EXECUTOR_LOSS_LINE] = round(sum(lost) / len(lost), 1)
            if p == "load":
                out["Recovery.LoadBytes"] = round(sum(r.load_bytes for r in self.recoveries) / n) if n else 0
            if p == "replay":
                out["Recovery.ReplayEvents"] = round(sum(r.replay_events for r in self.recoveries) / n) if n else 0
        for line, name in (("Recovery.FailedTask(ms)", "failed_task_ms"),
                           ("Recovery.OthersTask(ms)", "others_task_ms")):
            out[line] = round(sum(getattr(r, name) for r in self.recoveries) / n, 1) if n else 0.0
        return out

    def checkpoint_statistics(self) -> dict[str, Any]:
        """Checkpoints as Flink's REST API reports them (``/jobs/:id/checkpoints``): counts, a
        summary of ``end_to_end_duration`` (ms), ``checkpointed_size`` (bytes written, the
        increment for incremental checkpoints) and ``state_size`` (the full state's size), and the
        latest completed checkpoint."""
        latest = None
        if self.checkpoint_ms:
            latest = {"end_to_end_duration": round(self.checkpoint_ms[-1], 2),
                      "checkpointed_size": self.checkpoint_sizes[-1] if self.checkpoint_sizes else 0,
                      "state_size": self.state_sizes[-1] if self.state_sizes else 0}
        return {"counts": {"completed": self.checkpoints, "restored": len(self.recoveries)},
                "summary": {"end_to_end_duration": distribution(self.checkpoint_ms),
                            "checkpointed_size": distribution(self.checkpoint_sizes),
                            "state_size": distribution(self.state_sizes)},
                "latest": {"completed": latest}}

    def checkpoint_lines(self) -> dict[str, float]:
        """What a checkpoint costs beyond its mean: its tail (p50, p99, max over the run's
        checkpoints, as Flink's changelog backend was judged), the rate it wrote at (bytes
        written / time taken, over all checkpoints, and for the largest alone: the full
        checkpoint, when the run took one) and the full state's latest size; and where the
        tasks' part of it went: encoding (``Checkpoint.Encode``) and the backend's writes
        (``Checkpoint.Write``), the slowest instance's, a mean over the micro-batches that
        checkpointed — the rest of a checkpoint's time is waiting for the slowest instance and
        for the driver's commit."""
        d = distribution(self.checkpoint_ms)
        seconds = sum(self.checkpoint_ms) / 1e3
        largest = max(range(len(self.checkpoint_sizes)), key=self.checkpoint_sizes.__getitem__, default=None)
        rate = (self.checkpoint_sizes[largest] / self.checkpoint_ms[largest] / 1e3
                if largest is not None and self.checkpoint_ms[largest] > 0 else 0.0)
        return {"CheckpointP50(ms)": d["p50"], "CheckpointP99(ms)": d["p99"], "CheckpointMax(ms)": d["max"],
                "CheckpointMB/s": round(sum(self.checkpoint_sizes) / seconds / 1e6, 2) if seconds else 0.0,
                "Checkpoint.Encode(ms)": round(float(np.mean(self.checkpoint_encode_ms)), 1)
                if self.checkpoint_encode_ms else 0.0,
                "Checkpoint.Write(ms)": round(float(np.mean(self.checkpoint_write_ms)), 1)
                if self.checkpoint_write_ms else 0.0,
                "LargestCheckpointBytes": self.checkpoint_sizes[largest] if largest is not None else 0,
                "LargestCheckpointMB/s": round(rate, 2),
                "StateBytes": self.state_bytes}

    def summary(self) -> dict[str, Any]:
        mean = lambda xs: float(np.mean(xs)) if xs else 0.0  # noqa: E731
        out = {
            "Throughput(events/sec)": round(self.throughput, 1),
            "SteadyThroughput(events/sec)": round(self.steady_events / self.steady_seconds, 1)
            if self.steady_seconds > 0 else 0.0,
            "LatencyP50(ms)": round(self.latency(0.5), 1),
            "LatencyP99(ms)": round(self.latency(0.99), 1),
            "CheckpointTime(ms)": round(mean(self.checkpoint_ms), 2),
            **self.checkpoint_lines(),
            "CheckpointBytes": self.checkpoint_bytes,
            "BackendOps": self.backend_ops,
            "RestartTime(ms)": round(mean(self.restart_ms), 1),
            "RecoveryTime(ms)": round(mean(self.recovery_ms), 1),
            **self.phase_means(),
            **self.latency_lines(),
            "ReplayedEvents": self.replayed_events,
            "UselessCheckpoints": self.useless_checkpoints,
            **({"DroppedKeys": self.dropped_keys} if self.dropped_keys is not None else {}),
            "Checkpoints": self.checkpoints,
            "Failures": self.failures,
            "Batches": self.batches,
            "Events": self.events,
            "WallTime(s)": round(self.wall_seconds, 2),
            **self.protocol_counters,
            **self.space_lines(),
            **({"RestoreCache": self.restore_cache} if self.restore_cache else {}),
            **({"NodeLoss": "; ".join(self.node_losses)} if self.node_losses else {}),
        }
        out.update({name: f"n/a ({why})" for name, why in self.unmeasured.items()})
        return out

    def space_lines(self) -> dict[str, Any]:
        """Space amplification (bytes the store holds for the job ÷ the live state's bytes), as
        the run left the store and after its GC, as Flink's changelog backend was judged."""
        live = self.state_bytes
        if self.store_bytes is None or not live:
            return {}
        out = {"StoreBytes": self.store_bytes,
               "SpaceAmplification": round(self.store_bytes / live, 3)}
        if self.store_bytes_after_gc is not None:
            out["StoreBytesAfterGC"] = self.store_bytes_after_gc
            out["SpaceAmplificationAfterGC"] = round(self.store_bytes_after_gc / live, 3)
        return out


def print_metrics(metrics: Metrics, tag: str = "[SPARK]") -> None:
    for name, value in metrics.summary().items():
        print(f"{tag}, {name}, {value}")
    if metrics.exactly_once is not None:
        print(f"{tag}, ExactlyOnce, {str(metrics.exactly_once).lower()}")
