"""What a job run is asked to do (:class:`JobSpec`) and what it reports (:class:`Metrics`).

Shared by every way of running a job — a protocol under the driver of :mod:`.runner`, or a
baseline on Spark's own state store (:mod:`.spark_state`) — so their results compare line by
line (``[SPARK], <name>, <value>``, :func:`print_metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


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


@dataclass
class Metrics:
    """What a run measured; :meth:`summary` is the ``[SPARK]`` line set and the JSON ``metrics``."""

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
    protocol_counters: dict = field(default_factory=dict)  # the protocol's own totals (Protocol.counters)
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
            **self.protocol_counters,
        }


def print_metrics(metrics: Metrics, tag: str = "[SPARK]") -> None:
    for name, value in metrics.summary().items():
        print(f"{tag}, {name}, {value}")
    if metrics.exactly_once is not None:
        print(f"{tag}, ExactlyOnce, {str(metrics.exactly_once).lower()}")
