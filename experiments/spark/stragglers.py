"""``bench logio-stragglers``: LOG.io's straggler experiment on PySpark, beside the paper's numbers.

LOG.io (Sections 9.3-9.4) finds that with a straggler operator (>= 10x slower than the others on
its path) and a moderate event rate (1 event per 100 ms), LOG.io costs about what Flink-style
barrier snapshots (ABS) cost in normal processing and recovers with less overhead, because a
failed operator recovers alone while the others go on; with fast events and no straggler ABS
wins.  Here: the keyed word count with **one straggling instance** — every event of one hot key,
a share ``hot`` of the stream, lands on one instance, so it does ``hot`` of the work and the
other instance the rest — fed at a moderate, paced rate; ``logio`` against ``coordinated``
(our ABS: epochs at micro-batch boundaries) and ``none`` (the baseline of the overheads), each
once without a failure and once with the straggler killed mid-run.

The paper's overheads are relative to its failure-free run without recovery protocol; ours are too:
  * normal-processing overhead = (wall time of the protocol's failure-free run) / (that of
    ``none``) - 1, and the same with p50 latency;
  * recovery overhead = (wall time of the run with the failure) / (``none``'s failure-free wall
    time) - 1, beside the recovery time the driver measured (failure -> batch done again).
At a paced rate the wall time is mostly the pacing, so overheads are small for every protocol;
what separates them is the latency of the micro-batches and the work redone after the failure.
Spark's micro-batches are barriers for every protocol: the instance that is not straggling cannot
run ahead of the straggler, which LOG.io's engine lets it do — the non-blocking half of LOG.io's
advantage cannot show here, only the part that comes from recovering one instance instead of
rolling every instance back.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from spark_integration.job import JobSpec
from spark_integration.protocols.registry import registration

from experiments.core.document import Document, Environment
from experiments.spark.matrix import run_one
from experiments.spark.matrix_result import JobFigures
from experiments.spark.session import spark_run

SCHEMA = "ckptbench.logio-stragglers/1"
PROTOCOLS = ("none", "coordinated", "logio")
SECTION = "[LOGIO-STRAGGLERS]"
PLOT = "plot_stragglers"

#: the paper's figures (LOG.io, Section 9.3, first use case unless noted): overhead in % of the
#: failure-free run without recovery, normal processing and after 1/2/3 failures
PAPER = {
    "straggler_moderate": {  # 1 event / 100 ms, OP3 10x slower than OP2, failure in OP4 (Fig 5)
        "logio": {"normal": "< 1", "failures": ["< 1", "3.5", "12"]},
        "abs": {"normal": "2-3", "failures": ["21.2", "59", "88.4"]}},
    "straggler_fig7": {  # 1000 events of 10 KB every 100 ms, OP3 500 ms, failure in OP4
        "logio": {"normal": "6", "failures": ["18.9", "25", "36.5"]},
        "abs": {"normal": "2.8", "failures": ["24.6", "42.5", "63.6"]}},
    "no_straggler_fast": {  # 5000 events every 30 ms, OP3 only 4x slower (Fig 9)
        "logio": {"normal": "42.5", "failures": ["51", "68", "71"]},
        "abs": {"normal": "3", "failures": ["24.5", "42", "58.5"]}},
}


@dataclass(frozen=True)
class Sizes:
    events: int
    rate: float  # events/s: moderate, so the pacing, not the machine, sets the pace
    keys: int
    batch: int
    hot: float  # share of the events on the straggling instance's hot key
    interval: int  # coordinated: micro-batches per epoch


#: ``batch`` caps a micro-batch far above what the rate brings in while one runs, so a protocol
#: whose micro-batches are slower takes bigger ones (and shows it as latency) instead of falling
#: behind the paced source because of the cap
FULL = Sizes(events=120_000, rate=2_000, keys=10_000, batch=40_000, hot=0.9, interval=3)
QUICK = Sizes(events=12_000, rate=1_000, keys=1_000, batch=6_000, hot=0.9, interval=2)


def straggler(spark: Any, parallelism: int) -> int:
    """The instance that holds key 0 (the hot key), by the keyed stage's own partitioning."""
    return int(spark.sql(f"SELECT pmod(hash(CAST(0 AS BIGINT)), {parallelism}) AS d").first()["d"])


@dataclass(kw_only=True)
class Row(JobFigures):
    """One protocol's run, with the straggler killed (``failure``) or not: its figures and the
    overheads against ``none``'s failure-free run."""

    protocol: str
    failure: bool
    wall_s: float
    overhead_pct: float | None = None
    latency_vs_none: float | None = None


@dataclass(kw_only=True)
class Stragglers(Document):
    """``ckptbench.logio-stragglers/1``: the runs, the straggling instance, and the paper's
    figures they stand beside."""

    SCHEMA = SCHEMA

    quick: bool
    backend: str
    parallelism: int
    straggler: int
    straggler_share: float
    sizes: Sizes
    seconds: float
    rows: list[Row] = field(default_factory=list)
    #: the paper's overheads, quoted (:data:`PAPER`)
    paper: dict[str, Any] = field(default_factory=dict)
    environment: Environment = field(default_factory=Environment.here)


def _row(raw: dict[str, Any], failure: bool) -> Row:
    return Row(protocol=raw["protocol"], failure=failure, wall_s=raw["metrics"]["WallTime(s)"],
               **JobFigures.of(raw))


def run(quick: bool = False, backend: str = "indexed_fs", parallelism: int = 2, master: str = "local[2]",
        say: Callable[[str], None] = print) -> Stragglers:
    sizes = QUICK if quick else FULL
    rows: list[Row] = []
    with spark_run(master, PROTOCOLS, "ckptbench-stragglers-") as session:
        spark, tmp = session.spark, session.tmp
        victim = straggler(spark, parallelism)
        spec = JobSpec(kind="wordcount", events=sizes.events, keys=sizes.keys, skew=f"hot:{sizes.hot}:1",
                       rate=sizes.rate, parallelism=parallelism, max_batch=sizes.batch, verify=True, timeout=900)
        run_one(spark, "none", backend, replace(spec, events=2 * sizes.batch, rate=0.0, verify=False), [], 1,
                tmp, victim)
        fail_at = sizes.events // 2
        for failure in (False, True):  # interleaved: each protocol's two runs far apart in time
            for protocol in PROTOCOLS if not failure else PROTOCOLS[::-1]:
                verify = registration(protocol).exactly_once
                row = _row(run_one(spark, protocol, backend, replace(spec, verify=verify),
                                   [fail_at] if failure else [], sizes.interval, tmp, victim), failure)
                rows.append(row)
                say(f"logio-stragglers: {protocol} {'1 failure' if failure else 'no failure'}: wall "
                    f"{row.wall_s:.1f} s, p50 {row.latency_p50_ms:.0f} ms, recovery {row.recovery_ms:.0f} ms")
    base = next(r for r in rows if r.protocol == "none" and not r.failure)
    for r in rows:
        r.overhead_pct = round(100.0 * (r.wall_s / base.wall_s - 1), 1) if base.wall_s else None
        r.latency_vs_none = (round(r.latency_p50_ms / base.latency_p50_ms, 2)
                             if base.latency_p50_ms else None)
    return Stragglers(quick=quick, backend=backend, parallelism=parallelism, straggler=victim,
                      straggler_share=sizes.hot + (1 - sizes.hot) / parallelism, sizes=sizes,
                      seconds=session.seconds(), rows=rows, paper=PAPER)


def _doc(doc: Stragglers | dict[str, Any]) -> Stragglers:
    """``doc`` as read from its JSON file (a reproduce run's) or as :func:`run` made it."""
    return doc if isinstance(doc, Stragglers) else Stragglers.from_json(doc)


def markdown(doc: Stragglers | dict[str, Any]) -> list[str]:
    doc = _doc(doc)
    s = doc.sizes
    out = [f"Word count, {s.events:,} events at {s.rate:,.0f} events/s, {doc.parallelism} instances; "
           f"instance {doc.straggler} straggles with {100 * doc.straggler_share:.0f} % of the events "
           f"(hot key share {s.hot}); the failure kills it at event {s.events // 2:,}; backend "
           f"{doc.backend}:", "",
           "| protocol | failure | wall s | overhead % vs none | p50 ms | p99 ms | ckpt ms | recovery ms | "
           "replayed events | exactly-once |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc.rows:
        eo = "–" if not registration(r.protocol).exactly_once else str(r.exactly_once).lower()
        out.append(f"| {r.protocol} | {'1' if r.failure else '0'} | {r.wall_s:.1f} | "
                   f"{r.overhead_pct:+.1f} | {r.latency_p50_ms:.0f} | {r.latency_p99_ms:.0f} | "
                   f"{r.checkpoint_ms:.1f} | {r.recovery_ms:.0f} | {r.replayed:,} | {eo} |")
    p = doc.paper
    out += ["", "The paper's overheads (% of the failure-free run without recovery; LOG.io vs ABS):", "",
            "| setting | LOG.io normal | LOG.io 1/2/3 failures | ABS normal | ABS 1/2/3 failures |",
            "|---|---|---|---|---|"]
    names = {"straggler_moderate": "straggler, 1 event/100 ms, failure downstream (Fig 5)",
             "straggler_fig7": "straggler 10x, 10 KB events, failure downstream (Fig 7)",
             "no_straggler_fast": "no straggler (4x), 1 event/30 ms (Fig 9)"}
    for key, label in names.items():
        lg, ab = p[key]["logio"], p[key]["abs"]
        out.append(f"| {label} | {lg['normal']} | {' / '.join(lg['failures'])} | {ab['normal']} | "
                   f"{' / '.join(ab['failures'])} |")
    return out


def headline(doc: Stragglers | dict[str, Any]) -> str:
    rows = _doc(doc).rows

    def row(p: str, failure: bool) -> Row:
        return next(r for r in rows if r.protocol == p and r.failure == failure)
    lg, co = row("logio", False), row("coordinated", False)
    lgf, cof = row("logio", True), row("coordinated", True)
    return (f"normal processing: logio {lg.overhead_pct:+.1f} %, coordinated {co.overhead_pct:+.1f} % vs "
            f"none; with the straggler killed: logio {lgf.overhead_pct:+.1f} % (recovery {lgf.recovery_ms:.0f} "
            f"ms), coordinated {cof.overhead_pct:+.1f} % (recovery {cof.recovery_ms:.0f} ms)")
