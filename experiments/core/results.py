"""Results as data: the documents every run writes, as types, and their CSV form.

Schemas: ``ckptbench.result/1`` (:class:`Result`: one run: config, environment, phases, backend
stats), ``ckptbench.compare/1`` and ``ckptbench.sweep/1`` (:class:`Compare`, :class:`Sweep`: a
list of :class:`Entry`, one per backend or point).  They are
:class:`~experiments.core.document.Document` dataclasses, so tables and plots read attributes
and a file read back (:func:`read_run`) is the same object that was written.  Every document
carries an :class:`~experiments.core.document.Environment`, so a figure can always be traced to
the machine, the CPUs it was allowed, the code and the command line that produced it.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from experiments.core.document import Document, Environment, dump, load, optional, parse
from workloads.checkpoint import CheckpointSpec
from workloads.measure import Measurements
from workloads.runner import PhaseResult

SCHEMA = "ckptbench.result/1"


COMPARE_SCHEMA = "ckptbench.compare/1"


SWEEP_SCHEMA = "ckptbench.sweep/1"


@dataclass
class OpStats:
    """One operation's numbers, as YCSB prints them (:meth:`Measurements.summary`): counts, and
    latencies in µs (``None`` when nothing was recorded)."""

    count: int = 0
    ok: int = 0
    errors: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    mean_us: float | None = None
    min_us: int | None = None
    max_us: int | None = None
    p50_us: int | None = None
    p95_us: int | None = None
    p99_us: int | None = None
    p999_us: int | None = None


@dataclass
class Phase:
    """One phase (load, run, recovery) of a run: time, throughput and every operation's numbers."""

    runtime_ms: float = 0.0
    throughput_ops_sec: float = 0.0
    operations_done: int = 0
    operations: dict[str, OpStats] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    #: keys written, when the phase loaded them in batches
    records: int | None = optional()

    @classmethod
    def of(cls, phase: PhaseResult) -> Phase:
        m = phase.measurements
        return cls(runtime_ms=phase.runtime_ms, throughput_ops_sec=phase.throughput,
                   operations_done=phase.operations,
                   operations={name: stats(m, name) for name in m.names()},
                   errors=dict(phase.errors), records=phase.keys or None)

    def ran(self) -> dict[str, OpStats]:
        """The operations this phase really did (no intended or failed sections): what tables
        and charts show per operation."""
        return {n: s for n, s in self.operations.items()
                if s.count and not n.startswith("Intended-") and not n.endswith("-FAILED")}

    def busiest(self) -> OpStats:
        """The operation done most often (what a write-only or read-only run did); an empty
        :class:`OpStats` when none ran."""
        ops = self.ran()
        return max(ops.values(), key=lambda s: s.count) if ops else OpStats()


def stats(measurements: Measurements, name: str) -> OpStats:
    return load(OpStats, measurements.summary(name))


@dataclass
class NativeFloor:
    """The bare append+fdatasync loop in C beside a run (:mod:`experiments.core.baselines`)."""

    throughput: float
    runtime_ms: float
    operations: int
    ratio: float | None
    legs_throughput: list[float] = field(default_factory=list)


@dataclass(kw_only=True)
class BaselineFloor(Phase):
    """The bare append+fdatasync loop in Python bracketing a run (its phase), its ratio to the
    run, and the C loop's (``native``) where it was built."""

    directory_parent: str = ""
    ratio: float | None = None
    legs_throughput: list[float] = field(default_factory=list)
    native: NativeFloor | None = None


@dataclass
class Reopen:
    """``bench recovery``'s reopen: how long the store took to open, and what it lost."""

    crash: bool
    eager: bool
    open_ms: float
    missing: int
    corrupt: int
    #: every round's open time, when the reopen was repeated
    open_ms_rounds: list[float] | None = optional()


@dataclass
class CheckpointSummary:
    """``bench checkpoint``: the checkpoints offered, written and dropped, and the rates."""

    spec: CheckpointSpec
    submitted: int
    written: int
    dropped: int
    dropped_serialization: int
    failed: int
    event_rate: float
    write_rate: float

    @classmethod
    def of(cls, result: Any) -> CheckpointSummary:
        """The summary of a :class:`workloads.checkpoint.CheckpointResult`."""
        return load(cls, result.summary())


@dataclass
class SparkClients:
    """Where a run's clients ran as Spark tasks, and how far apart each phase started."""

    master: str
    clients: int
    start_skew_ms: dict[str, float] = field(default_factory=dict)


@dataclass(kw_only=True)
class ClientPhase(Phase):
    """One Spark client's phase: its numbers, when it started (wall clock) and its CPU time."""

    start_unix: float = 0.0
    cpu_s: float = 0.0


@dataclass
class SparkClient:
    """One Spark client task: where it ran, its share of the keys (``plan``) and its phases."""

    client: int
    host: str
    pid: int
    plan: Any
    phases: dict[str, ClientPhase] = field(default_factory=dict)


@dataclass(kw_only=True)
class Result(Document):
    """``ckptbench.result/1``: one run (``bench run``, ``load``, ``recovery``, ``checkpoint``,
    ``ycsb``): the settings as given (``config``), every phase, the store's own statistics, and
    the sections only some commands have."""

    SCHEMA = SCHEMA

    workload: str
    backend: str
    #: the command's settings as the user gave them (free-form: each command records its own)
    config: dict[str, Any] = field(default_factory=dict)
    environment: Environment = field(default_factory=Environment.here)
    phases: dict[str, Phase] = field(default_factory=dict)
    #: the store's own statistics (each backend reports its own)
    backend_stats: dict[str, Any] | None = None
    recovery: Reopen | None = optional()
    checkpoint: CheckpointSummary | None = optional()
    spark: SparkClients | None = optional()
    clients: list[SparkClient] | None = optional()
    seed: int | None = optional()
    baseline: BaselineFloor | None = optional()

    @property
    def run(self) -> Phase:
        return self.phases["run"]


@dataclass
class Point:
    """A sweep point's setting: a target rate or a thread count (neither for a compare entry)."""

    target: float | None = optional()
    threads: int | None = optional()


@dataclass
class Entry:
    """One backend (at one point) of a compare or sweep: ``skipped`` with the reason, or its
    throughput, its all-ops summaries (``overall``; ``intended``: from the intended start,
    queueing included) and its phases."""

    backend: str
    params: Point = field(default_factory=Point)
    skipped: str | None = None
    throughput_ops_sec: float | None = optional()
    overall: OpStats | None = optional()
    intended: OpStats | None = optional()
    phases: dict[str, Phase] | None = optional()
    #: every round's throughput (compare with ``--rounds``: this entry is the median run)
    rounds_ops_sec: list[float] | None = optional()
    #: the round this point belongs to (sweep with ``--rounds``)
    round: int | None = optional()
    #: the store's own statistics after the run (the durability it really used among them)
    backend_stats: dict[str, Any] | None = optional()

    def ran(self) -> dict[str, OpStats]:
        """The operations the run phase really did (:meth:`Phase.ran`)."""
        return self.phases["run"].ran() if self.phases and "run" in self.phases else {}


@dataclass
class Ratio:
    """A throughput ratio over rounds: its median and every round's value (with ``over``, the
    backend divided by, and the range, for a compare's)."""

    what: str
    median: float
    rounds: list[float] = field(default_factory=list)
    over: str | None = optional()
    min: float | None = optional()
    max: float | None = optional()


@dataclass(kw_only=True)
class Compare(Document):
    """``ckptbench.compare/1``: several backends under identical settings."""

    SCHEMA = COMPARE_SCHEMA

    workload: str
    config: dict[str, Any] = field(default_factory=dict)
    environment: Environment = field(default_factory=Environment.here)
    results: list[Entry] = field(default_factory=list)
    #: the first backend over each other, per round (``--rounds`` > 1)
    ratios: list[Ratio] | None = optional()
    #: whether every backend ran once, unmeasured, before the measured runs
    warmup: bool | None = optional()


@dataclass(kw_only=True)
class Sweep(Document):
    """``ckptbench.sweep/1``: each backend's points (target rates or thread counts)."""

    SCHEMA = SWEEP_SCHEMA

    #: the thesis experiment this sweep reproduces, if any
    experiment: str | None = optional()
    workload: str = ""
    quick: bool | None = optional()
    config: dict[str, Any] | None = optional()
    environment: Environment = field(default_factory=Environment.here)
    results: list[Entry] = field(default_factory=list)
    ratios: list[Ratio] | None = optional()
    #: the thesis experiment's summary (each backend's highest throughput)
    summary: dict[str, dict[str, float]] | None = optional()


def read_run(doc: Any) -> Result | Compare | Sweep:
    """A parsed JSON object as the result, compare or sweep document it is; ValueError naming
    the schema for anything else (the thesis and Spark documents are not runs)."""
    if isinstance(doc, dict) and doc.get("schema") in (SCHEMA, COMPARE_SCHEMA, SWEEP_SCHEMA):
        return parse(doc)  # type: ignore[return-value]
    schema = doc.get("schema") if isinstance(doc, dict) else None
    raise ValueError(f"not a ckptbench result (schema {schema!r})")


def phase_json(phase: PhaseResult) -> dict[str, Any]:
    """A phase in its JSON form (for the Spark clients' payloads, which are JSON)."""
    return dump(Phase.of(phase))


def result(*, workload: str, backend: str, config: dict[str, Any],
           phases: dict[str, PhaseResult], backend_stats: dict[str, Any] | None,
           **sections: Any) -> Result:
    """The ``ckptbench.result/1`` document of a run's phases; ``sections`` are the
    :class:`Result` fields only some commands fill (``recovery``, ``checkpoint``, ...)."""
    return Result(workload=workload, backend=backend, config=config,
                  phases={name: Phase.of(p) for name, p in phases.items()},
                  backend_stats=backend_stats, **sections)


def write_json(path: str, document: Document) -> None:
    """Write ``document``'s JSON atomically (temp file + rename) so a reader never sees half a
    result.  The temp file sits beside ``path`` in its own directory, and is removed if the
    write fails.  Only a typed :class:`Document` is written: a result's shape is its type's."""
    if not isinstance(document, Document):
        raise TypeError(f"write_json takes a result Document, not {type(document).__name__}")
    doc = document.to_json()
    if path == "-":  # the usual spelling of standard output
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
        sys.stdout.flush()
        return
    write_text(path, json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temp file beside it in its own directory,
    renamed into place (removed if the write fails), so a reader never sees half a file."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; give a file name for the results")
    directory, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide results from other users
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def overall(measurements: Measurements, intended: bool = False) -> OpStats:
    """All successful ops merged: count, mean, p50, p99 in µs.  ``intended``: the
    ``Intended-<OP>`` histograms instead (latency from the intended start, queueing included)."""
    merged = Measurements()
    merged.histogram("ALL")
    names = [name for name in measurements.histograms
             if not name.endswith("-FAILED") and name.startswith("Intended-") == intended]
    for name in names:
        merged.histogram("ALL").add(measurements.histograms[name])
    out = stats(merged, "ALL")
    for part in (stats(measurements, name) for name in names):  # the outcomes are per operation
        out.ok += part.ok
        out.errors += part.errors
        for status, n in part.statuses.items():
            out.statuses[status] = out.statuses.get(status, 0) + n
    return out


def entry(outcome: Any) -> Entry:
    """One backend's entry in a compare/sweep document: ``skipped`` + reason, or its phases and
    the all-ops summary (``overall``: count, mean/p50/p99 µs)."""
    params = load(Point, outcome.params)
    if outcome.skipped:
        return Entry(outcome.backend, params, outcome.skipped)
    run = outcome.run
    return Entry(outcome.backend, params, None, throughput_ops_sec=run.throughput,
                 overall=overall(run.measurements),
                 intended=overall(run.measurements, intended=True),
                 phases={name: Phase.of(p) for name, p in outcome.phases.items()},
                 backend_stats=getattr(outcome, "backend_stats", None))


def sweep_ratios(entries: list[Entry]) -> list[Ratio]:
    """The ratios a thread sweep is run for, per round and their median: each backend's
    throughput at the most threads over the fewest, and at each thread count the first
    backend's throughput over each other's.  (Empty for target-rate sweeps.)"""
    tput: dict[tuple[int, str, int], float] = {}
    for e in entries:
        threads = e.params.threads
        if threads is None or e.skipped:
            continue
        tput[(e.round or 1, e.backend, threads)] = e.throughput_ops_sec or 0.0
    if not tput:
        return []
    rounds = sorted({k[0] for k in tput})
    backends = list(dict.fromkeys(k[1] for k in tput))
    counts = sorted({k[2] for k in tput})
    wanted = [(f"{b} threads {counts[-1]}/{counts[0]}", (b, counts[-1]), (b, counts[0]))
              for b in backends if len(counts) > 1]
    wanted += [(f"{backends[0]}/{b} threads {t}", (backends[0], t), (b, t))
               for t in counts for b in backends[1:]]
    out = []
    for what, num, den in wanted:
        per_round = [tput[(r, *num)] / tput[(r, *den)] for r in rounds
                     if (r, *num) in tput and tput.get((r, *den))]
        if per_round:
            out.append(Ratio(what, statistics.median(per_round), per_round))
    return out


def write_csv(path: str, doc: Result | Compare | Sweep) -> None:
    """One row per (backend, point, phase, operation): counts, throughput and latencies in µs."""
    import csv

    if isinstance(doc, Result):
        entries = [Entry(doc.backend, phases=doc.phases)]
    else:
        entries = doc.results
    cols = ["backend", "target", "threads", "phase", "operation", "count", "throughput_ops_sec",
            "mean_us", "p50_us", "p95_us", "p99_us", "p999_us", "errors", "skipped"]
    ensure_parent(path)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for e in entries:
            p = e.params
            if e.skipped:
                w.writerow([e.backend, p.target, p.threads] + [""] * 10 + [e.skipped])
                continue
            for phase, pj in (e.phases or {}).items():
                for op, s in pj.operations.items():
                    w.writerow([e.backend, p.target, p.threads, phase, op, s.count,
                                pj.throughput_ops_sec, s.mean_us, s.p50_us, s.p95_us, s.p99_us,
                                s.p999_us, s.errors, ""])


def ensure_parent(path: str) -> None:
    """Create the directory that will hold ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
