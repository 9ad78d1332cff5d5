"""``bench spark-matrix``'s result as a document, ``ckptbench.spark-matrix/2``.

One :class:`Row` per protocol x backend (:mod:`experiments.spark.matrix`): the medians over the
rounds with their :class:`Spread`, the per-round ratios to every reference protocol
(``ratio_<reference>`` keys, one per reference: the references come from the protocol registry,
so the row holds them as a mapping written flat), the work done, the job's ``[SPARK]`` metrics
and each round's own figures (:class:`RoundRun`).  A skipped row has its reason and no figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_integration.job import JobSpec

from experiments.core.document import Document, Environment, flattened, optional
from experiments.core.format import Runs, md_table, num, target, times

#: the work counters of a run (``events``, ``checkpoints``, ``checkpoint_bytes``, ...), as counted
Work = dict[str, int | float]

#: a checkpointing run with fewer checkpoints than this, or any run with fewer seconds of steady
#: state, is too short to separate a protocol's cost from no checkpoints at all: a ratio to
#: ``none`` over it measures the run's start and end, not the protocol
MIN_CHECKPOINTS = 3
MIN_STEADY_SECONDS = 10.0
#: what a table prints in place of such a ratio
TOO_SHORT = "too short"
#: the protocol without checkpoints every ratio divides by
NO_CHECKPOINTS = "none"
#: the ``[SPARK]`` line a run's events/s is taken from: all its micro-batches, or (a job with a
#: load phase) those after the load (:func:`experiments.spark.matrix.measured_line`)
ALL_LINE = "Throughput(events/sec)"
STEADY_LINE = "SteadyThroughput(events/sec)"


def too_short(metrics: dict[str, Any] | None, protocol: str) -> str | None:
    """Why a run of ``protocol`` with these ``[SPARK]`` lines cannot be compared with ``none``
    (None when it can, or nothing is known): fewer than :data:`MIN_CHECKPOINTS` checkpoints
    (``none`` takes none), or fewer than :data:`MIN_STEADY_SECONDS` of steady state
    (``SteadySeconds``; a document from before that line: its wall time, an upper bound)."""
    if not metrics:
        return None
    checkpoints = metrics.get("Checkpoints")
    if protocol != NO_CHECKPOINTS and isinstance(checkpoints, (int, float)) and checkpoints < MIN_CHECKPOINTS:
        return f"{checkpoints:.0f} checkpoints < {MIN_CHECKPOINTS}"
    steady = metrics.get("SteadySeconds", metrics.get("WallTime(s)"))
    if isinstance(steady, (int, float)) and steady < MIN_STEADY_SECONDS:
        return f"{steady:.1f} s of steady state < {MIN_STEADY_SECONDS:.0f} s"
    return None


def overhead_us(throughput: float, none_throughput: float) -> float:
    """What a protocol adds to each event, in µs, over ``none`` at these throughputs (events/s):
    the difference of their times per event.  Unlike the ratio it does not shrink as the job
    around the protocol gets slower, so it compares rows of different jobs and machines."""
    return 1e6 / throughput - 1e6 / none_throughput


def ratio_to_none(ratio: float | None, mine: dict[str, Any] | None, protocol: str,
                  none: dict[str, Any] | None, fmt: Any = times) -> str:
    """A table's ratio to ``none``: ``fmt(ratio)``, or :data:`TOO_SHORT` when either run is
    (:func:`too_short`)."""
    if ratio is not None and (too_short(mine, protocol) or too_short(none, NO_CHECKPOINTS)):
        return TOO_SHORT
    return fmt(ratio)


@dataclass(kw_only=True)
class JobFigures:
    """What one job run measured, from its ``[SPARK]`` lines: the figures the papers' tables
    compare (CheckMate's grid and LOG.io's straggler runs each add their own), the metrics
    themselves, and whether the output was exactly once (``None``: not checked)."""

    throughput: float
    latency_p50_ms: float
    latency_p99_ms: float
    checkpoint_ms: float
    recovery_ms: float
    restart_ms: float
    replayed: int
    exactly_once: bool | None
    #: the job's ``[SPARK]`` lines, named as it prints them
    metrics: dict[str, Any] = field(default_factory=dict)
    #: what the exactly-once check found (which keys differ, and how), kept for a failed check
    verify_detail: str = ""

    @staticmethod
    def of(raw: dict[str, Any]) -> dict[str, Any]:
        """These fields of a run of :func:`experiments.spark.matrix.run_one`."""
        m = raw["metrics"]
        return dict(throughput=m["Throughput(events/sec)"], latency_p50_ms=m["LatencyP50(ms)"],
                    latency_p99_ms=m["LatencyP99(ms)"], checkpoint_ms=m["CheckpointTime(ms)"],
                    recovery_ms=m["RecoveryTime(ms)"], restart_ms=m["RestartTime(ms)"],
                    replayed=m["ReplayedEvents"], exactly_once=raw["exactly_once"], metrics=m,
                    verify_detail=raw.get("verify_detail", "") if raw["exactly_once"] is False else "")


@dataclass
class Spread:
    """A figure over the rounds: its median, range, and every round's value."""

    median: float
    min: float
    max: float
    rounds: list[float] = field(default_factory=list)


@dataclass
class RoundRun:
    """One round's run of a combination: where it ran in the round and what it measured."""

    round: int
    position: int | None
    throughput: float | None
    checkpoint_ms: float | None
    recovery_ms: float | None
    exactly_once: bool | None
    work: Work | None
    seconds: float | None
    jvm_cpu_s: float | None
    #: the ``Recovery.*`` lines of the run's metrics
    recovery_phases: dict[str, float] = field(default_factory=dict)


@dataclass(kw_only=True)
class Row:
    """One combination over its rounds (or why it was skipped)."""

    protocol: str
    backend: str
    skipped: str | None = None
    #: a combination that ran in some rounds and then lost its backend: why the later rounds
    #: are missing (its figures are the rounds that ran)
    lost: str | None = optional()
    throughput: float | None = None
    throughput_spread: Spread | None = optional()
    checkpoint_ms: float | None = None
    checkpoint_ms_spread: Spread | None = optional()
    recovery_ms: float | None = None
    recovery_ms_spread: Spread | None = optional()
    restart_ms: float | None = None
    restart_ms_spread: Spread | None = optional()
    #: reference protocol (``-`` as ``_``) -> the median of the per-round throughput ratios
    ratio: dict[str, float | None] = flattened("ratio_")
    ratio_spread: dict[str, Spread] = flattened("ratio_", "_spread")
    #: µs each event costs over ``none``'s (:func:`overhead_us`), per round against ``none`` in
    #: the same round, then the median over the rounds (None: no ``none`` ran beside it)
    overhead_us: float | None = optional()
    exactly_once: bool | None = None
    failures: float | None = optional()
    work: Work | None = None
    #: the medians of the job's ``[SPARK]`` lines, named as it prints them
    metrics: dict[str, Any] | None = optional()
    recovery_phases: dict[str, Spread] | None = optional()
    #: with ``--orphans``: each round's orphans before and after the protocol's GC
    #: (:func:`experiments.spark.matrix.orphan_summary`)
    orphans: list[dict[str, Any]] | None = optional()
    #: the last round's requests per checkpoint (mean, by type) and bytes the store held, what
    #: ``bench advise --optimize cost`` prices (:func:`experiments.spark.advise.cost_inputs`)
    cost: dict[str, Any] | None = optional()
    rounds: list[RoundRun] = field(default_factory=list)

    def spread(self, figure: str) -> Spread | None:
        """``figure``'s spread (``throughput``, ``checkpoint_ms``, ...)."""
        return getattr(self, figure + "_spread")


@dataclass
class WarmupRun:
    """A warm-up run: kept in the document, never in a median."""

    warmup: int
    protocol: str
    backend: str
    throughput: float
    jvm_cpu_s: float | None = None


@dataclass(kw_only=True)
class Matrix(Document):
    """``ckptbench.spark-matrix/2``: the method (rounds, warm-up, order) and the rows."""

    SCHEMA = "ckptbench.spark-matrix/2"

    job: JobSpec
    state_bytes: str = "0"
    #: how the runs' checkpoints were laid out (``bench spark --layout``), and whether each
    #: restore was made cold
    layout: str = "changelog"
    chunk_bytes: int = 4 << 20
    cold_restore: bool = False
    fail_at: list[int] = field(default_factory=list)
    interval: int = 1
    rounds: int = 1
    warmup_rounds: int = 0
    order: str = ""
    warmup: list[WarmupRun] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    #: the ``[SPARK]`` line every row's events/s and ratios are of (:data:`ALL_LINE`,
    #: :data:`STEADY_LINE`)
    measured: str = ALL_LINE
    environment: Environment = field(default_factory=Environment.here)

    @property
    def after_load(self) -> bool:
        """Whether the events/s are of the micro-batches after the job's load phase."""
        return self.measured == STEADY_LINE


# ---------------------------------------------------------------------------- table and headline
#: the events/s over ``none`` a protocol is held to in the matrix, at its own sizes and with the
#: state issue's (a protocol not named has no target)
X_NONE_TARGETS = {"coordinated": 0.97, "uncoordinated": 0.85, "logio": 0.85}


def spark_matrix(runs: Runs) -> list[str]:
    """The matrix's table (step ``run``) and, where it ran, the same protocols with sized state
    (step ``state``), each judged against :data:`X_NONE_TARGETS`."""
    lines = matrix_table(Matrix.from_json(runs["run"]))
    if "state" in runs:
        doc = Matrix.from_json(runs["state"])
        lines += ["", f"With state that matters: {state_setting(doc)}.", ""] + matrix_table(doc)
    return lines


def state_setting(doc: Matrix) -> str:
    """The sized-state run's setting in words: keys, state a key, skew, layout, rounds."""
    job = doc.job
    rounds = f"{doc.rounds} round{'s' if doc.rounds != 1 else ''}"
    measured = (f"; events/s and ratios are of the micro-batches after the load phase (its first "
                f"{num(job.keys)} events visit every key once), as the state experiment's steady x none"
                if doc.after_load else "")
    return (f"{num(job.keys)} keys with {doc.state_bytes} bytes of state each, {num(job.events)} events "
            f"(skew {job.skew}), micro-batches of {num(job.max_batch)}, a checkpoint every "
            f"{doc.interval} of them in the {doc.layout} layout; {rounds} after {doc.warmup_rounds} warm-up"
            f"{measured}")


def matrix_table(doc: Matrix) -> list[str]:
    """Medians of the rounds with their range; a skipped row shows its reason and no figures."""
    rows = []
    none = reference_metrics(doc.rows)
    for r in doc.rows:
        eo = "-" if r.exactly_once is None else str(r.exactly_once).lower()
        spread = r.throughput_spread
        rng = f"{num(spread.min)}–{num(spread.max)}" if spread and len(spread.rounds) > 1 else "-"
        work = r.work or {}
        mb = (lambda k: num(round(work[k] / 1e6, 2)) if k in work else "-")  # noqa: E731
        rows.append([r.protocol, r.backend, num(r.throughput), rng,
                     ratio_to_none(r.ratio.get("none"), r.metrics, r.protocol, none),
                     ratio_to_none(r.overhead_us, r.metrics, r.protocol, none, num),
                     times(r.ratio.get("spark_state")), num(r.checkpoint_ms), num(r.recovery_ms),
                     num(work.get("checkpoints")), mb("checkpoint_bytes"), mb("logged_bytes"),
                     (eo if not r.skipped else f"skipped: {r.skipped}")
                     + (f"; later rounds lost: {r.lost}" if r.lost else ""), x_none_target(r, none)])
    return md_table(["protocol", "backend", "events/s after the load (median)" if doc.after_load
                     else "events/s (median)", "range over rounds", "x none",
                     "µs/event over none", "x spark-state", "checkpoint ms", "recovery ms", "checkpoints", "checkpointed MB",
                     "logged MB", "exactly once", "target"], rows)


def x_none_target(r: Row, none: dict[str, Any] | None) -> str:
    """The row's target cell: its ratio to ``none`` against :data:`X_NONE_TARGETS` ("" where
    the protocol has none, the row was skipped, or the run is too short to judge)."""
    goal, ratio = X_NONE_TARGETS.get(r.protocol), r.ratio.get("none")
    if goal is None or r.skipped or ratio is None or \
            ratio_to_none(ratio, r.metrics, r.protocol, none) == TOO_SHORT:
        return ""
    return target(ratio >= goal, f"≥ {goal:g}x none")


def reference_metrics(rows: list[Row]) -> dict[str, Any] | None:
    """The ``[SPARK]`` lines of the ``none`` row, if it ran."""
    return next((r.metrics for r in rows if r.protocol == NO_CHECKPOINTS and not r.skipped), None)


def spark_matrix_headline(runs: Runs) -> str:
    """Each protocol's events/s over ``none``, as its range over the stores it ran on (rows too
    short to compare left out)."""
    doc = Matrix.from_json(runs["run"])
    by: dict[str, list[float]] = {}
    stores: dict[str, None] = {}
    none = reference_metrics(doc.rows)
    for r in doc.rows:
        if r.protocol != "none" and not r.skipped and r.ratio.get("none") is not None \
                and ratio_to_none(r.ratio["none"], r.metrics, r.protocol, none) != TOO_SHORT:
            by.setdefault(r.protocol, []).append(r.ratio["none"])
            if r.backend != "-":
                stores[r.backend] = None
    span = (lambda v: times(v[0]) if times(min(v)) == times(max(v))  # noqa: E731
            else f"{min(v):.2f}–{max(v):.2f}x")
    if not by:
        return f"events/s × none: every row {TOO_SHORT} to compare with none"
    return (f"events/s × none: " + ", ".join(f"{p} {span(v)}" for p, v in by.items())
            + (f" (on {', '.join(stores)})" if stores else ""))
