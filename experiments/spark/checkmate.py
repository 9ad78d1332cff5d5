"""``bench checkmate``: CheckMate's experiment (ICDE 2024) on PySpark, beside the paper's numbers.

CheckMate compares no checkpoints, coordinated, uncoordinated and communication-induced (CIC)
checkpointing on NexMark Q1, Q3, Q8 and Q12 under uniform and skewed (hot-item) input with one
failure per run, and on a cyclic reachability query.  This runs the same grid on our Spark jobs
(:mod:`spark_integration.queries`: ``q1``, ``q3``, ``q8``, ``q12``) with one injected failure per
run, through :func:`experiments.spark.matrix.run_one` (one combination = one row, exactly-once
verified for every protocol that promises it), and the cyclic query through its emulation over
the message log (:mod:`spark_integration.cyclic`: no Spark, counts only — see its docstring).

At full size the grid runs as the paper's does: first each protocol's maximum sustainable
throughput (MST) per query on uniform input, searched by :func:`experiments.spark.mst.find`
(the paper searched by hand), then every row paced at :attr:`Sizes.load` of its protocol's MST
with a warm-up, the failure 30 % into the run, and each row's end-to-end latency per second kept
for the paper's Figs 9-10 (:func:`latency_panels`).  ``--quick`` has no MST step and runs
unpaced: a smoke run, whose ratios to ``none`` read ``too short``
(:func:`experiments.spark.matrix_result.too_short`).

Differences from the paper that the numbers must be read with (``docs/checkmate.md``):
  * 2 instances on a 2-core machine shared with other work, not 10-100 workers;
  * micro-batches are barriers for every protocol, so a straggler stalls all four alike (the
    paper's coordinated protocol suffers from skew through marker alignment, which a micro-batch
    engine does in every batch whatever the protocol);
  * CIC's piggyback is HMNR's ``8 + 10 n`` bytes per row with ``n = 2P`` processes (senders and
    instances), so the message-bytes ratio is a function of the row size and ``P``.
One run per cell, in a rotating protocol order after a warm-up run of every protocol; figures are
noisy (the machine is shared), so ratios, not absolute rates, are what to compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from spark_integration import cyclic
from spark_integration.job import JobSpec
from spark_integration.protocols.cic.hmnr import piggyback_size
from spark_integration.protocols.registry import registration
from spark_integration.queries import query
from spark_integration.source import SCHEMAS

from experiments.core.document import Document, Environment, dump, load, optional
from experiments.spark import mst as mst_mod
from experiments.spark.matrix import run_one
from experiments.spark.matrix_result import TOO_SHORT, JobFigures, ratio_to_none, too_short
from experiments.spark.session import spark_run

SCHEMA = "ckptbench.checkmate/1"
QUERIES = ("q1", "q3", "q8", "q12")
PROTOCOLS = ("none", "coordinated", "uncoordinated", "cic")
#: skewed: NexMark's hot items are one hot auction at a time; 30 % of the events go to one key
SKEWS = {"uniform": 0.0, "skewed": "hot:0.3:1"}
LOGGING = ("uncoordinated", "cic")  # senders log every message

#: the paper's figures (CheckMate, ICDE 2024), quoted where ours stand beside them
PAPER = {
    # Table II: message bytes relative to no checkpoints, 10 and 50 workers
    "message_ratio": {"10": {"coordinated": [1.00, 1.00, 1.00, 1.00], "uncoordinated": [1.00, 1.00, 1.00, 1.00],
                             "cic": [2.10, 1.82, 1.74, 1.79]},
                      "50": {"coordinated": [1.00, 1.00, 1.00, 1.00], "uncoordinated": [1.00, 1.01, 1.01, 1.00],
                             "cic": [2.53, 2.58, 2.49, 2.58]}},
    # Table III, 10 workers: total checkpoints and % invalid, per query (q1, q3, q8, q12)
    "checkpoints_10": {"uncoordinated": [(303, 0), (455, 4), (384, 2), (282, 3)],
                       "cic": [(285, 0), (471, 3), (386, 3), (282, 4)],
                       "coordinated": [(240, 0), (400, 0), (360, 0), (240, 0)]},
    # Table IV, cyclic query: checkpoint time (ms), restart time (ms), invalid checkpoints (%)
    "cyclic": {"5": {"uncoordinated": (0.01, 620, 1.4), "cic": (2.73, 347, 1.7)},
               "10": {"uncoordinated": (1.38, 344, 1.4), "cic": (8.39, 399, 1.6)}},
}


@dataclass(frozen=True)
class Sizes:
    events: int
    keys: int
    batch: int
    fail_at: int  # the one failure of every run (CheckMate: second 18 of 60, i.e. at 30 %)
    interval: int  # micro-batches per basic checkpoint / coordinated epoch
    cyclic_runs: int
    cyclic_batches: int
    skewed: tuple[str, ...]  # the queries also run on skewed input (CheckMate: Q3, Q8, Q12)
    #: the MST step (:mod:`experiments.spark.mst`) for every query x protocol on uniform input;
    #: None: no MST, and the grid runs unpaced (``events`` as fast as they go)
    mst: mst_mod.Sizes | None = None
    #: with an MST: every row paced at ``load`` x its protocol's uniform MST, ``warmup_seconds``
    #: then ``run_seconds`` of input, the failure ``fail_fraction`` into the run (CheckMate:
    #: 80 %, 30 s then 60 s, second 18)
    load: float = 0.8
    warmup_seconds: float = 30.0
    run_seconds: float = 60.0
    fail_fraction: float = 0.3

    def paced(self, mst: float) -> tuple[float, int, int]:
        """The rate, events and failure offset of a row whose protocol's MST is ``mst``."""
        rate = self.load * mst
        return rate, int(rate * (self.warmup_seconds + self.run_seconds)), \
            int(rate * (self.warmup_seconds + self.fail_fraction * self.run_seconds))


#: what a ``--quick`` document's tables say first
SMOKE = ("*Smoke run (`--quick`): each row is a few seconds of Spark with one or two checkpoints, too "
         "short to separate a protocol from `none`; its ratios read `too short`.*")

FULL = Sizes(events=600_000, keys=10_000, batch=50_000, fail_at=180_000, interval=2, cyclic_runs=50,
             cyclic_batches=60, skewed=("q3", "q8", "q12"), mst=mst_mod.FULL)
QUICK = Sizes(events=12_000, keys=1_000, batch=6_000, fail_at=8_000, interval=1, cyclic_runs=20,
              cyclic_batches=60, skewed=("q12",))


def row_bytes(kind: str) -> int:
    """Bytes of one row the senders send in job ``kind`` (its source's int64 columns)."""
    return 8 * len(SCHEMAS[query(kind).source].split(","))


@dataclass(kw_only=True)
class Row(JobFigures):
    """One query on one input under one protocol, with one failure: its figures, the
    checkpoints it took (forced by CIC, useless after the failure) and what its messages
    carried."""

    query: str
    skew: str
    protocol: str
    backend: str
    checkpoints: int
    basic: int
    forced: int
    useless: int
    logged_messages: int
    piggybacked_bytes: int
    message_bytes_ratio: float
    failures: int
    throughput_vs_none: float | None = None
    #: the rate the row was paced at (events/s; 0: unpaced), its protocol's uniform MST over
    #: ``none``'s (CheckMate's Fig 7), and its latency over time (per second, the failure,
    #: recovery by latency: :func:`experiments.spark.job.latency_over_time`)
    rate: float = 0.0
    mst_vs_none: float | None = None
    latency: dict[str, Any] | None = optional()


@dataclass
class CyclicMeans:
    """One protocol on the emulated cyclic query: means over the seeds
    (:func:`spark_integration.cyclic.compare`)."""

    checkpoints: float
    basic: float
    forced: float
    useless: float
    useless_pct: float
    rolled_back: float
    rollback_batches: float
    replayed_messages: float
    messages: float
    piggybacked_bytes: float
    message_bytes_ratio: float
    domino_runs: int


@dataclass(kw_only=True)
class Checkmate(Document):
    """``ckptbench.checkmate/1``: the grid of queries x inputs x protocols, the cyclic query
    emulated by instance count, and the paper's figures they stand beside."""

    SCHEMA = SCHEMA

    quick: bool
    backend: str
    parallelism: int
    sizes: Sizes
    skews: dict[str, str] = field(default_factory=dict)
    piggyback_bytes_per_row: int = 0
    seconds: float = 0.0
    rows: list[Row] = field(default_factory=list)
    #: instance count (as text: a JSON key) -> protocol -> means
    cyclic: dict[str, dict[str, CyclicMeans]] = field(default_factory=dict)
    #: the paper's figures, quoted (:data:`PAPER`, in its JSON form)
    paper: dict[str, Any] = field(default_factory=dict)
    #: the MST step: query -> protocol -> its search (the rate, the bracket, why it stopped,
    #: every probe), on uniform input
    mst: dict[str, dict[str, mst_mod.Search]] = field(default_factory=dict)
    environment: Environment = field(default_factory=Environment.here)


def _row(kind: str, skew: str, raw: dict[str, Any], rate: float = 0.0) -> Row:
    m = raw["metrics"]
    protocol = raw["protocol"]
    ckpts = m.get("Checkpoints", 0)
    logged = m.get("Events", 0) if protocol in LOGGING else 0
    pb = m.get("PiggybackedBytes", 0)
    pb_msgs = m.get("PiggybackedMessages", 0)
    ratio = 1.0 + pb / (pb_msgs * row_bytes(kind)) if pb_msgs else 1.0
    return Row(query=kind, skew=skew, protocol=protocol, backend=raw["backend"],
               checkpoints=ckpts, basic=m.get("BasicCheckpoints", ckpts),
               forced=m.get("ForcedCheckpoints", 0), useless=m["UselessCheckpoints"],
               logged_messages=logged, piggybacked_bytes=pb, message_bytes_ratio=round(ratio, 3),
               failures=m["Failures"], rate=rate, latency=raw.get("latency"), **JobFigures.of(raw))


def run(quick: bool = False, backend: str = "indexed_fs", parallelism: int = 2, master: str = "local[2]",
        queries: tuple[str, ...] = QUERIES, protocols: tuple[str, ...] = PROTOCOLS,
        skews: dict[str, Any] | None = None, say: Callable[[str], None] = print,
        sizes: Sizes | None = None) -> Checkmate:
    """The MST step (when the sizes have one), the whole grid on one session, then the cyclic
    emulation; the ``ckptbench.checkmate/1`` document."""
    sizes = sizes or (QUICK if quick else FULL)
    skews = SKEWS if skews is None else skews
    rows: list[Row] = []
    msts: dict[str, dict[str, mst_mod.Search]] = {}
    with spark_run(master, protocols, "ckptbench-checkmate-") as session:
        spark, tmp = session.spark, session.tmp
        base = JobSpec(kind="q1", events=sizes.events, keys=sizes.keys, parallelism=parallelism,
                       max_batch=sizes.batch, verify=True, timeout=900)
        # warm the JVM and the Python workers on every protocol's path (the session's JVM is
        # still compiling during its first runs: whichever ran first would look slower)
        for protocol in protocols:
            run_one(spark, protocol, backend, replace(base, events=2 * sizes.batch, verify=False), [],
                    sizes.interval, tmp)
        if sizes.mst is not None:  # CheckMate's MST, per query and protocol, on uniform input
            for kind in queries:
                # none first: its MST is where the others' searches start (a protocol rarely
                # sustains more than no checkpoints), which saves the ramp from the start rate
                for protocol in sorted(protocols, key=lambda p: p != "none"):
                    say(f"checkmate: MST of {kind} under {protocol} ...")
                    ref = msts.get(kind, {}).get("none")
                    search_sizes = replace(sizes.mst, start_rate=ref.mst) if ref and ref.mst else sizes.mst
                    found = mst_mod.find(spark, tmp, protocol, backend,
                                         replace(base, kind=kind, skew=skews.get("uniform", 0.0)),
                                         search_sizes, sizes.interval, say=say)
                    msts.setdefault(kind, {})[protocol] = found
                    say(f"checkmate: MST of {kind} under {protocol}: {found.mst or 0:,.0f} events/s ({found.stop})")
        turn = 0
        for skew_name, skew in skews.items():
            for kind in queries:
                if skew_name != "uniform" and kind not in sizes.skewed:
                    continue
                order = protocols[turn % len(protocols):] + protocols[:turn % len(protocols)]
                turn += 1
                for protocol in order:
                    spec = replace(base, kind=kind, skew=skew, verify=registration(protocol).exactly_once)
                    fail_at = sizes.fail_at
                    found = msts.get(kind, {}).get(protocol)
                    if found is not None and found.mst:
                        rate, events, fail_at = sizes.paced(found.mst)
                        spec = replace(spec, rate=rate, events=events, max_batch=events,
                                       timeout=max(900.0, 10 * events / rate))
                    raw = run_one(spark, protocol, backend, spec, [fail_at], sizes.interval, tmp)
                    row = _row(kind, skew_name, raw, spec.rate)
                    rows.append(row)
                    say(f"checkmate: {kind} {skew_name} {protocol}: {row.throughput:,.0f} events/s, "
                        f"recovery {row.recovery_ms:.0f} ms, exactly-once {row.exactly_once}")
    order_of = {p: i for i, p in enumerate(protocols)}
    rows.sort(key=lambda r: (list(skews).index(r.skew), queries.index(r.query), order_of[r.protocol]))
    none = {(r.query, r.skew): r.throughput for r in rows if r.protocol == "none"}
    for r in rows:
        ref = none.get((r.query, r.skew))
        r.throughput_vs_none = round(r.throughput / ref, 3) if ref else None
        ref_mst = msts.get(r.query, {}).get("none")
        mine = msts.get(r.query, {}).get(r.protocol)
        if ref_mst and ref_mst.mst and mine and mine.mst:
            r.mst_vs_none = round(mine.mst / ref_mst.mst, 3)
    cyc = {str(n): load(dict[str, CyclicMeans], cyclic.compare(
        n, sizes.cyclic_runs, batches=sizes.cyclic_batches,
        fail_batch=int(sizes.cyclic_batches * 0.8))) for n in (5, 10)}
    return Checkmate(quick=quick, backend=backend, parallelism=parallelism, sizes=sizes,
                     skews={k: str(v) for k, v in skews.items()},
                     piggyback_bytes_per_row=piggyback_size(2 * parallelism),
                     seconds=session.seconds(), rows=rows, cyclic=cyc, paper=dump(PAPER), mst=msts)


# ------------------------------------------------------------------------------ tables
def _fmt(v: Any, spec: str = ",.0f") -> str:
    return "–" if v is None else format(v, spec)


def _cell(rows: list[Row], kind: str, skew: str, protocol: str) -> Row | None:
    return next((r for r in rows if (r.query, r.skew, r.protocol) == (kind, skew, protocol)), None)


def _doc(doc: Checkmate | dict[str, Any]) -> Checkmate:
    """``doc`` as read from its JSON file (a reproduce run's) or as :func:`run` made it."""
    return doc if isinstance(doc, Checkmate) else Checkmate.from_json(doc)


def markdown(doc: Checkmate | dict[str, Any]) -> list[str]:
    """The document's tables: the grid per skew, message overhead and checkpoints beside the
    paper's Tables II and III, the cyclic query beside Table IV."""
    doc = _doc(doc)
    rows = doc.rows
    queries = [q for q in QUERIES if any(r.query == q for r in rows)]
    protocols = [p for p in PROTOCOLS if any(r.protocol == p for r in rows)]
    out: list[str] = []
    if doc.quick:
        out += [SMOKE, ""]
    sz = doc.sizes
    for skew in doc.skews:
        paced = any(r.rate for r in rows if r.skew == skew)
        how = (f"each row paced at {sz.load:.0%} of its protocol's uniform MST for {sz.warmup_seconds:g} s of "
               f"warm-up and a {sz.run_seconds:g} s run, one failure {sz.fail_fraction:.0%} into the run"
               if paced else f"{sz.events:,} events as fast as they go, one failure at event {sz.fail_at:,}")
        out += [f"**{skew} input** ({doc.skews[skew]}), {how}, backend {doc.backend}, {doc.parallelism} "
                f"instances:", "",
                "| query | protocol | events/s | × none | p50 ms | p99 ms | ckpt ms | recovery ms | recovery by p50 ms "
                "| checkpoints (forced) | useless | logged msgs | piggybacked B | exactly-once |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for kind in queries:
            none = _cell(rows, kind, skew, "none")
            for p in protocols:
                r = _cell(rows, kind, skew, p)
                if r is None:
                    continue
                eo = "–" if not registration(p).exactly_once else str(r.exactly_once).lower()
                ratio = ratio_to_none(r.throughput_vs_none, r.metrics, p, none and none.metrics,
                                      lambda v: _fmt(v, ".2f"))
                out.append(f"| {kind} | {p} | {_fmt(r.throughput)} | {ratio} | "
                           f"{r.latency_p50_ms:.0f} | {r.latency_p99_ms:.0f} | {r.checkpoint_ms:.1f} | "
                           f"{r.recovery_ms:.0f} | {_by_latency(r)} | {r.checkpoints} ({r.forced}) | {r.useless} | "
                           f"{r.logged_messages:,} | {r.piggybacked_bytes:,} | {eo} |")
        out.append("")
    if doc.mst:
        out += mst_table(doc) + [""]
    paper = doc.paper
    out += ["Message bytes relative to no checkpoints (paper: Table II, 10 workers):", "",
            "| protocol | " + " | ".join(f"{q} ours | {q} paper" for q in queries) + " |",
            "|---|" + "---|---|" * len(queries)]
    for p in ("coordinated", "uncoordinated", "cic"):
        cells = []
        for q in queries:
            r = _cell(rows, q, "uniform", p)
            cells.append(f"{_fmt(r and r.message_bytes_ratio, '.2f')}× | "
                         f"{paper['message_ratio']['10'][p][QUERIES.index(q)]:.2f}×")
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    out += ["", "Checkpoints and useless (invalid) ones, uniform input (paper: Table III, 10 workers, total (invalid %)):",
            "", "| protocol | " + " | ".join(f"{q} ours | {q} paper" for q in queries) + " |",
            "|---|" + "---|---|" * len(queries)]
    for p in ("uncoordinated", "cic", "coordinated"):
        cells = []
        for q in queries:
            r = _cell(rows, q, "uniform", p)
            total, pct = paper["checkpoints_10"][p][QUERIES.index(q)]
            ours = "–" if r is None else f"{r.checkpoints} ({r.useless})"
            cells.append(f"{ours} | {total} ({pct} %)")
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    out += ["", "Cyclic query (reachability through the message log, emulated; means over "
            f"{doc.sizes.cyclic_runs} seeds, failure at 80 % of {doc.sizes.cyclic_batches} micro-batches) "
            "beside the paper's Table IV:", "",
            "| instances | protocol | checkpoints | forced | useless % (paper invalid %) | instances rolled back | "
            "batches undone | messages replayed | message bytes × | paper restart ms |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for n, by in doc.cyclic.items():
        for p, c in by.items():
            ct, rt, ic = paper["cyclic"][n][p]
            out.append(f"| {n} | {p} | {c.checkpoints:.1f} | {c.forced:.1f} | {c.useless_pct:.1f} ({ic}) | "
                       f"{c.rolled_back:.2f} | {c.rollback_batches:.1f} | {c.replayed_messages:.1f} | "
                       f"{c.message_bytes_ratio:.2f} | {rt} |")
    return out


def _by_latency(r: Row) -> str:
    """The row's recovery by latency (failure to p50 back): ms, ``not back`` or ``–`` (unpaced)."""
    v = r.metrics.get("RecoveryByLatency(ms)")
    return "–" if v is None else "not back" if isinstance(v, str) else f"{v:.0f}"


def mst_table(doc: Checkmate) -> list[str]:
    """The MST per query and protocol (uniform input) and its ratio to ``none``'s, beside the
    paper's Fig 7, with what stopped each search above its MST."""
    queries = [q for q in QUERIES if q in doc.mst]
    protocols = [p for p in PROTOCOLS if any(p in doc.mst[q] for q in queries)]
    out = ["Maximum sustainable throughput, uniform input (events/s; × none: ÷ none's MST).  Paper, Fig 7: "
           "coordinated reaches none's MST up to 50 workers (about 0.9 at 70-100), uncoordinated about 10 % "
           "lower than coordinated, CIC below 0.5 at high parallelism; Q3 below none for every protocol.", "",
           "| query | " + " | ".join(f"{p} MST | {p} × none" for p in protocols) + " |",
           "|---|" + "---|---|" * len(protocols)]
    for q in queries:
        none = doc.mst[q].get("none")
        cells = []
        for p in protocols:
            found = doc.mst[q].get(p)
            rate = found.mst if found else None
            ratio = rate / none.mst if rate and none and none.mst else None
            cells.append(f"{_fmt(rate)} | {_fmt(ratio, '.2f')}")
        out.append(f"| {q} | " + " | ".join(cells) + " |")
    out += ["", "What stopped each search above its MST (the first unsustainable probe at the bracket's top):", ""]
    for q in queries:
        for p in protocols:
            found = doc.mst[q].get(p)
            if found is None:
                continue
            top = next((x for x in found.probes if not x.sustainable and x.rate == found.high), None)
            reason = mst_mod.why(top, mst_mod.Criterion()) if top else "no unsustainable probe"
            out.append(f"- {q} {p}: {found.stop}; {reason}")
    return out


def latency_panels(doc: Checkmate | dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The paced uniform rows' latency over time, labelled ``query protocol`` in grid order:
    the panels of CheckMate's Figs 9-10 (:func:`experiments.report.plots.plot_latency_over_time`)."""
    return {f"{r.query} {r.protocol}": r.latency for r in _doc(doc).rows
            if r.skew == "uniform" and r.latency}


def comparable(rows: list[Row], r: Row) -> bool:
    """Whether ``r`` and the ``none`` run of its query and input are long enough to compare
    (:func:`experiments.spark.matrix_result.too_short`)."""
    none = _cell(rows, r.query, r.skew, "none")
    return not (too_short(r.metrics, r.protocol) or too_short(none and none.metrics, "none"))


def headline(doc: Checkmate | dict[str, Any]) -> str:
    doc = _doc(doc)
    all_rows = doc.rows
    rows = [r for r in all_rows if r.skew == "uniform" and r.throughput_vs_none and comparable(all_rows, r)]

    def mean(p: str) -> str:
        xs = [r.throughput_vs_none for r in rows if r.protocol == p]
        return f"{sum(xs) / len(xs):.2f}" if xs else TOO_SHORT
    eo = all(r.exactly_once for r in all_rows if registration(r.protocol).exactly_once)
    return (("smoke run (--quick): " if doc.quick else "")
            + f"uniform input, throughput × none: coordinated {mean('coordinated')}, uncoordinated "
            f"{mean('uncoordinated')}, cic {mean('cic')}; exactly-once after a failure: "
            f"{'every run' if eo else 'NOT every run'}")


#: the ``[SECTION]`` of ``bench checkmate``'s lines and the chart drawn by :mod:`experiments.report.plots`
SECTION = "[CHECKMATE]"
PLOT = "plot_checkmate"
