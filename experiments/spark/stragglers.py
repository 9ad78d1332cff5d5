"""``bench logio-stragglers``: LOG.io's experiments (Section 9.3, first use case) on PySpark,
beside the paper's numbers.

LOG.io finds that with a straggler operator (>= 10x slower than the others on its path) and a
moderate event rate, LOG.io costs about what Flink-style barrier snapshots (ABS) cost in normal
processing and recovers with far less overhead, because a failed operator recovers alone while
the others go on (Fig 5: < 1 % against 21.2 % with one failure); with fast events and no
straggler ABS wins (Fig 9: 51 % against 24.5 %).  Here ``logio`` runs against ``coordinated``
(our ABS: epochs at micro-batch boundaries), with ``none`` as the baseline, in two settings of
the keyed word count with 2 instances:

* ``straggler_moderate`` (Fig 5): one hot key takes a share ``hot`` of the stream, so the
  instance that owns it does ``hot + (1 - hot) / P`` of the work (a 19x straggler at 0.9 and
  ``P = 2``); the source is paced at a moderate rate; the failure kills the *other*, fast
  instance — the paper's failed OP4 is a fast operator behind the straggler OP3, which keeps
  working while OP4 recovers.
* ``no_straggler_fast`` (Fig 9): uniform keys, so both instances do the same work, and an
  unpaced source (events as fast as the job takes them); the failure kills instance 0.

Each protocol runs with 0, 1, 2 and 3 failures in one run (the k-th at :data:`FAILURE_POINTS`
of the events, as the paper adds failures to the same execution), ``none`` failure-free only.

Overhead as the paper defines it: a run's total execution time over the failure-free run
without recovery protocol (``none``'s) - 1, in %.  Beside it, per run: p50/p99 latency, the
recovery time per failure cut into its phases (:mod:`spark_integration.phases`), the events
re-processed, and — the measurement of what the instances that did not fail wait on — their
share of the recovery spent working: their tasks in the re-run of the failed micro-batch
(``Recovery.OthersTask(ms)``) against the failed instance's (``Recovery.FailedTask(ms)``).
A micro-batch is a barrier: the next one starts only once every instance finished this one,
so whatever the others could do meanwhile waits for the failed instance's recovery.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from spark_integration.job import JobSpec
from spark_integration.protocols.registry import registration

from experiments.core.document import Document, Environment
from experiments.spark.matrix import run_one
from experiments.spark.matrix_result import NO_CHECKPOINTS, TOO_SHORT, JobFigures, ratio_to_none, too_short
from experiments.spark.session import spark_run

SCHEMA = "ckptbench.logio-stragglers/2"
PROTOCOLS = ("none", "coordinated", "logio")
SECTION = "[LOGIO-STRAGGLERS]"
PLOT = "plot_stragglers"
#: failures per run, as the paper's figures count them
FAILURES = (0, 1, 2, 3)
#: where a run's k-th failure falls, as a share of its events (a run with n failures has the first n)
FAILURE_POINTS = (0.3, 0.55, 0.8)

#: the paper's figures (LOG.io, Section 9.3.2): overhead in % of the failure-free run without
#: recovery, normal processing and after 1/2/3 failures
PAPER = {
    "straggler_moderate": {  # 100 events of 10 KB every 500 ms, OP3 100x slower than OP2, failure in OP4 (Fig 5)
        "logio": {"normal": "< 1", "failures": ["< 1", "3.5", "12"]},
        "abs": {"normal": "2-3", "failures": ["21.2", "59", "88.4"]}},
    "straggler_fig7": {  # 1000 events of 10 KB every 100 ms, OP3 10x slower (500 ms), failure in OP4 (Fig 7)
        "logio": {"normal": "6", "failures": ["18.9", "25", "36.5"]},
        "abs": {"normal": "2.8", "failures": ["24.6", "42.5", "63.6"]}},
    "no_straggler_fast": {  # 5000 events every 30 ms, OP3 only 4x slower than OP2, failure in OP4 (Fig 9)
        "logio": {"normal": "42.5", "failures": ["51", "68", "71"]},
        "abs": {"normal": "3", "failures": ["24.5", "42", "58.5"]}},
}
PAPER_LABELS = {"straggler_moderate": "straggler 100x, 1 event/500 ms, failure downstream (Fig 5)",
                "straggler_fig7": "straggler 10x, 1 event/100 ms, failure downstream (Fig 7)",
                "no_straggler_fast": "no straggler (4x), 1 event/30 ms (Fig 9)"}


@dataclass(frozen=True)
class Setting:
    """One of the paper's settings on our job."""

    name: str  # a key of PAPER
    events: int
    rate: float  # events/s; 0: unpaced (as fast as the job takes them)
    keys: int
    batch: int  # max events per micro-batch
    skew: str  # "hot:F:1" (a straggler) or "0" (uniform)
    interval: int  # coordinated: micro-batches per epoch
    fail_fast: bool  # kill the instance that is not the straggler (else instance 0)


#: ``batch`` of the paced setting caps a micro-batch far above what the rate brings in while one
#: runs, so a protocol whose micro-batches are slower takes bigger ones (and shows it as latency)
#: instead of falling behind because of the cap; the unpaced setting's cap makes its micro-batches
FULL = (Setting("straggler_moderate", events=90_000, rate=2_000, keys=10_000, batch=40_000, skew="hot:0.9:1",
                interval=3, fail_fast=True),
        Setting("no_straggler_fast", events=1_000_000, rate=0, keys=10_000, batch=10_000, skew="0",
                interval=10, fail_fast=False))
QUICK = (Setting("straggler_moderate", events=12_000, rate=1_000, keys=1_000, batch=6_000, skew="hot:0.9:1",
                 interval=2, fail_fast=True),
         Setting("no_straggler_fast", events=60_000, rate=0, keys=1_000, batch=3_000, skew="0",
                 interval=5, fail_fast=False))


def straggler(spark: Any, parallelism: int) -> int:
    """The instance that holds key 0 (the hot key), by the keyed stage's own partitioning."""
    return int(spark.sql(f"SELECT pmod(hash(CAST(0 AS BIGINT)), {parallelism}) AS d").first()["d"])


def hot_share(setting: Setting, parallelism: int) -> float:
    """The share of the events on the straggling instance (1 / P without a hot key)."""
    if not setting.skew.startswith("hot:"):
        return 1 / parallelism
    hot = float(setting.skew.split(":")[1])
    return hot + (1 - hot) / parallelism


def fail_offsets(setting: Setting, failures: int) -> list[int]:
    return [int(setting.events * p) for p in FAILURE_POINTS[:failures]]


@dataclass(kw_only=True)
class Row(JobFigures):
    """One protocol's run in one setting with ``failures`` failures: its figures and the
    overhead against ``none``'s failure-free run in that setting."""

    setting: str
    protocol: str
    failures: int
    wall_s: float
    overhead_pct: float | None = None
    latency_vs_none: float | None = None

    def phase(self, line: str) -> float:
        """A ``Recovery.*`` line of the run's metrics (0 when it has none)."""
        value = self.metrics.get(f"Recovery.{line}", 0)
        return float(value) if not isinstance(value, str) else 0.0


@dataclass(kw_only=True)
class Stragglers(Document):
    """``ckptbench.logio-stragglers/2``: the runs of every setting, the instance killed in each,
    and the paper's figures they stand beside."""

    SCHEMA = SCHEMA

    quick: bool
    backend: str
    parallelism: int
    straggler: int
    settings: list[Setting]
    #: setting name -> the instance its failures kill
    victims: dict[str, int]
    seconds: float
    rows: list[Row] = field(default_factory=list)
    #: the paper's overheads, quoted (:data:`PAPER`)
    paper: dict[str, Any] = field(default_factory=dict)
    environment: Environment = field(default_factory=Environment.here)


def _row(raw: dict[str, Any], setting: str, failures: int) -> Row:
    return Row(setting=setting, protocol=raw["protocol"], failures=failures, wall_s=raw["metrics"]["WallTime(s)"],
               **JobFigures.of(raw))


def run(quick: bool = False, backend: str = "indexed_fs", parallelism: int = 2, master: str = "local[2]",
        say: Callable[[str], None] = print) -> Stragglers:
    settings = QUICK if quick else FULL
    rows: list[Row] = []
    victims: dict[str, int] = {}
    with spark_run(master, PROTOCOLS, "ckptbench-stragglers-") as session:
        spark, tmp = session.spark, session.tmp
        slow = straggler(spark, parallelism)
        for st in settings:
            victim = victims[st.name] = (slow + 1) % parallelism if st.fail_fast else 0
            spec = JobSpec(kind="wordcount", events=st.events, keys=st.keys, skew=st.skew, rate=st.rate,
                           parallelism=parallelism, max_batch=st.batch, verify=True, timeout=900)
            # a warm-up run: the session's first job pays for Spark's and the workers' start-up
            run_one(spark, "none", backend, replace(spec, events=2 * st.batch, rate=0.0, verify=False), [], 1,
                    tmp, victim)
            plan = [("none", 0)] + [(p, n) for n in FAILURES for p in PROTOCOLS[1:][::1 if n % 2 == 0 else -1]]
            for protocol, failures in plan:  # interleaved: the order of the two protocols alternates
                verify = registration(protocol).exactly_once
                raw = run_one(spark, protocol, backend, replace(spec, verify=verify), fail_offsets(st, failures),
                              st.interval, tmp, victim)
                row = _row(raw, st.name, failures)
                rows.append(row)
                say(f"logio-stragglers: {st.name}: {protocol}, {failures} failure(s): wall {row.wall_s:.1f} s, "
                    f"p50 {row.latency_p50_ms:.0f} ms, recovery {row.recovery_ms:.0f} ms")
    for st in settings:
        base = next(r for r in rows if r.setting == st.name and r.protocol == "none")
        for r in rows:
            if r.setting == st.name:
                r.overhead_pct = round(100.0 * (r.wall_s / base.wall_s - 1), 1) if base.wall_s else None
                r.latency_vs_none = (round(r.latency_p50_ms / base.latency_p50_ms, 2)
                                     if base.latency_p50_ms else None)
    return Stragglers(quick=quick, backend=backend, parallelism=parallelism, straggler=slow,
                      settings=list(settings), victims=victims, seconds=session.seconds(), rows=rows, paper=PAPER)


def _doc(doc: Stragglers | dict[str, Any]) -> Stragglers:
    """``doc`` as read from its JSON file (a reproduce run's) or as :func:`run` made it."""
    return doc if isinstance(doc, Stragglers) else Stragglers.from_json(doc)


def _describe(doc: Stragglers, st: Setting) -> str:
    pace = f"at {st.rate:,.0f} events/s" if st.rate else "unpaced (as fast as the job takes them)"
    if st.skew.startswith("hot:"):
        work = (f"instance {doc.straggler} straggles with {100 * hot_share(st, doc.parallelism):.0f} % of the "
                f"events (hot key share {st.skew.split(':')[1]}); the failures kill the fast instance "
                f"{doc.victims[st.name]}")
    else:
        work = f"uniform keys, no straggler; the failures kill instance {doc.victims[st.name]}"
    points = ", ".join(f"{int(100 * p)} %" for p in FAILURE_POINTS)
    return (f"**{PAPER_LABELS[st.name]}.** Word count, {st.events:,} events {pace}, micro-batches of at most "
            f"{st.batch:,}, {doc.parallelism} instances; {work} (at {points} of the events); coordinated "
            f"takes an epoch every {st.interval} micro-batches; backend {doc.backend}:")


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f}"


def markdown(doc: Stragglers | dict[str, Any]) -> list[str]:
    doc = _doc(doc)
    out: list[str] = []
    for st in doc.settings:
        rows = [r for r in doc.rows if r.setting == st.name]
        out += [_describe(doc, st), "",
                "| protocol | failures | wall s | overhead % | p50 ms | p99 ms | recovery ms per failure | "
                "detect | load + restore | re-run | catch-up | failed task ms | others' task ms | "
                "replayed events | exactly-once |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            eo = "–" if not registration(r.protocol).exactly_once else str(r.exactly_once).lower()
            phases = ("| – | – | – | – | – | – | – " if not r.failures else
                      f"| {r.recovery_ms:,.0f} | {r.phase('Detect(ms)'):,.0f} | "
                      f"{r.phase('Load(ms)') + r.phase('Restore(ms)'):,.0f} | {r.phase('Replay(ms)'):,.0f} | "
                      f"{r.phase('CatchUp(ms)'):,.0f} | {r.phase('FailedTask(ms)'):,.0f} | "
                      f"{r.phase('OthersTask(ms)'):,.0f} ")
            out.append(f"| {r.protocol} | {r.failures} | {r.wall_s:.1f} | {overhead(doc, r)} | "
                       f"{r.latency_p50_ms:,.0f} | {r.latency_p99_ms:,.0f} {phases}| {r.replayed:,} | {eo} |")
        out.append("")
    out += ["Overhead in % of the failure-free run without recovery protocol, normal processing and "
            "1 / 2 / 3 failures: the paper's (LOG.io against ABS) beside ours (logio against coordinated):", "",
            "| setting | | LOG.io / logio normal | 1 / 2 / 3 failures | ABS / coordinated normal | "
            "1 / 2 / 3 failures |", "|---|---|---|---|---|---|"]
    for key, label in PAPER_LABELS.items():
        lg, ab = doc.paper[key]["logio"], doc.paper[key]["abs"]
        out.append(f"| {label} | paper | {lg['normal']} | {' / '.join(lg['failures'])} | {ab['normal']} | "
                   f"{' / '.join(ab['failures'])} |")
        if any(r.setting == key for r in doc.rows):
            o = {p: overhead_cells(doc, key, p) for p in ("logio", "coordinated")}
            out.append(f"| | ours | {o['logio'][0]} | {' / '.join(o['logio'][1:])} | "
                       f"{o['coordinated'][0]} | {' / '.join(o['coordinated'][1:])} |")
    mark, reason = verdict(doc)
    out += ["", f"**LOG.io's headline (Fig 5: with a straggler at a moderate rate, LOG.io costs about what ABS "
                f"costs and recovers with far less overhead): {mark}** — {reason}."]
    return out


def _none_row(doc: Stragglers, setting: str) -> Row | None:
    return next((r for r in doc.rows if r.setting == setting and r.protocol == NO_CHECKPOINTS), None)


def short(doc: Stragglers, r: Row) -> str | None:
    """Why ``r`` or its setting's ``none`` run is too short to measure an overhead against
    (:func:`experiments.spark.matrix_result.too_short`), None when both are long enough."""
    base = _none_row(doc, r.setting)
    return too_short(r.metrics, r.protocol) or too_short(base and base.metrics, NO_CHECKPOINTS)


def overhead(doc: Stragglers, r: Row) -> str:
    """``r``'s overhead in %, or ``too short`` (:func:`experiments.spark.matrix_result.ratio_to_none`)."""
    base = _none_row(doc, r.setting)
    return ratio_to_none(r.overhead_pct, r.metrics, r.protocol, base and base.metrics, _fmt)


def overhead_cells(doc: Stragglers, setting: str, protocol: str) -> list[str]:
    """``protocol``'s overheads in ``setting`` with 0, 1, 2, 3 failures as the table prints them."""
    by = {r.failures: r for r in doc.rows if r.setting == setting and r.protocol == protocol}
    return [overhead(doc, by[n]) if n in by else "–" for n in FAILURES]


def overheads(doc: Stragglers, setting: str, protocol: str) -> list[float | None]:
    """``protocol``'s overhead in ``setting`` with 0, 1, 2, 3 failures (None: not run)."""
    by = {r.failures: r.overhead_pct for r in doc.rows if r.setting == setting and r.protocol == protocol}
    return [by.get(n) for n in FAILURES]


def _per_failure(doc: Stragglers, setting: str, protocol: str, value: Callable[[Row], float]) -> float:
    """Mean of ``value`` over ``protocol``'s runs with failures in ``setting``."""
    runs = [r for r in doc.rows if r.setting == setting and r.protocol == protocol and r.failures]
    return sum(value(r) for r in runs) / len(runs) if runs else 0.0


def verdict(doc: Stragglers | dict[str, Any]) -> tuple[str, str]:
    """(*reproduced* or *not reproduced*, the figures that decided it) from the straggler
    setting's runs: reproduced when logio's normal processing is within 2 points of
    coordinated's and its overhead with failures is below coordinated's at every failure count;
    *not yet measured at full size* while any of them is too short to measure
    (:func:`experiments.spark.matrix_result.too_short`)."""
    doc = _doc(doc)
    key = "straggler_moderate"
    lg, co = overheads(doc, key, "logio"), overheads(doc, key, "coordinated")
    if any(v is None for v in lg + co):
        return "*not yet measured at full size*", "the straggler setting's runs are missing"
    brief = [f"{r.protocol} with {r.failures} failure(s): {why}" for r in doc.rows
             if r.setting == key and r.protocol != NO_CHECKPOINTS and (why := short(doc, r))]
    if brief:
        return "*not yet measured at full size*", (f"{len(brief)} of the straggler setting's runs are "
                                                   f"{TOO_SHORT} to measure an overhead ({'; '.join(brief[:3])})")
    normal_ok = lg[0] <= co[0] + 2.0
    recovery_ok = all(a < b for a, b in zip(lg[1:], co[1:]))
    recovery = {p: _per_failure(doc, key, p, lambda r: r.recovery_ms) for p in ("logio", "coordinated")}
    others = _per_failure(doc, key, "logio", lambda r: r.phase("OthersTask(ms)"))
    figures = (f"normal processing logio {lg[0]:+.1f} % vs coordinated {co[0]:+.1f} %; with 1/2/3 failures "
               f"logio {' / '.join(f'{v:+.1f}' for v in lg[1:])} % vs coordinated "
               f"{' / '.join(f'{v:+.1f}' for v in co[1:])} %; recovery per failure logio "
               f"{recovery['logio']:,.0f} ms vs coordinated {recovery['coordinated']:,.0f} ms, of which "
               f"logio's instance that did not fail worked {others:,.0f} ms (its re-run task): it waits at the "
               f"micro-batch barrier for the rest")
    if normal_ok and recovery_ok:
        return "*reproduced*", figures
    why = [w for ok, w in ((normal_ok, "logio's normal processing costs more than coordinated's"),
                           (recovery_ok, "logio's failures do not cost less than coordinated's")) if not ok]
    return "*not reproduced*", f"{'; '.join(why)}: {figures}"


def headline(doc: Stragglers | dict[str, Any]) -> str:
    doc = _doc(doc)
    parts = []
    for st in doc.settings:
        lg, co = overheads(doc, st.name, "logio"), overheads(doc, st.name, "coordinated")
        parts.append(f"{st.name}: logio {' / '.join(overhead_cells(doc, st.name, 'logio'))} %, coordinated "
                     f"{' / '.join(overhead_cells(doc, st.name, 'coordinated'))} % (0/1/2/3 failures, vs none)")
    return "; ".join(parts) + f"; LOG.io's Fig 5 headline: {verdict(doc)[0]}"
