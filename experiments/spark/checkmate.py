"""``bench checkmate``: CheckMate's experiment (ICDE 2024) on PySpark, beside the paper's numbers.

CheckMate compares no checkpoints, coordinated, uncoordinated and communication-induced (CIC)
checkpointing on NexMark Q1, Q3, Q8 and Q12 under uniform and skewed (hot-item) input with one
failure per run, and on a cyclic reachability query.  This runs the same grid on our Spark jobs
(:mod:`spark_integration.queries`: ``q1``, ``q3``, ``q8``, ``q12``) with one injected failure per
run, through :func:`experiments.spark.matrix.run_one` (one combination = one row, exactly-once
verified for every protocol that promises it), and the cyclic query through its emulation over
the message log (:mod:`spark_integration.cyclic`: no Spark, counts only — see its docstring).

The experiment runs in three parts (:data:`PARTS`), each a run of its own that fits a quiet
window of about two hours (:func:`plan` counts a run's work and prints its expected duration
first; :class:`Progress` says after every search and run what is left):

  * ``uniform``, as the paper's grid: first each protocol's maximum sustainable throughput (MST)
    per query on uniform input, searched by :func:`experiments.spark.mst.find` (the paper
    searched by hand), then every row paced at :attr:`Sizes.load` of its protocol's MST with a
    warm-up, the failure 30 % into the run, and each row's end-to-end latency per second kept
    for the paper's Figs 9-10 (:func:`latency_panels`); then the cyclic query.  At another
    parallelism (``local[P]``: P task slots, one an instance) it is the paper's Figs 7-8 at P.
  * ``skew``, the paper's Fig 12: Q3, Q8, Q12 with 10/20/30 % hot items at 50 % and 80 % of each
    protocol's *own* MST on uniform input (the paper: "of the non-skewed execution of every
    protocol"), no failure, p50 latency and average checkpoint time.  Its MSTs come from a full
    uniform run's document (:func:`msts_from`), so the searches are not paid twice.
  * ``paired``, the paper's first headline (coordinated ≈ ``none``) settled where one search
    each cannot: the searches probe each rate once, one protocol after the other, so two MSTs
    within the search's precision — or a protocol above ``none``, a baseline beaten — say
    nothing.  This probes ``none`` and coordinated in turn at the ends of both brackets
    (:func:`experiments.spark.mst.pair`), :attr:`Sizes.paired_rounds` rounds, and
    :func:`paper_verdicts` takes its ratios over the searches' for the queries it ran.

``--quick`` has no MST step and runs unpaced: a smoke run, whose ratios to ``none`` read ``too
short`` (:func:`experiments.spark.matrix_result.too_short`).  A checkpointing protocol above
``none`` by more than :data:`ABOVE_NONE` at MST is marked in the tables with the measurement that
explains it (:func:`above_mst`, :func:`above_grid`): it does more work than no checkpoints, so
such a ratio is the search's resolution or the machine's noise, never a published gain.

Differences from the paper that the numbers must be read with (``docs/checkmate.md``):
  * 2 (and 4) instances on a 2-core machine shared with other work, not 10-100 workers;
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

from experiments.core.document import Document, Environment, dump, optional
from experiments.core.document import load as load_doc
from experiments.spark import mst as mst_mod
from experiments.spark.matrix import run_one
from experiments.spark.matrix_result import TOO_SHORT, JobFigures, ratio_to_none, too_short
from experiments.spark.session import spark_run

SCHEMA = "ckptbench.checkmate/1"
QUERIES = ("q1", "q3", "q8", "q12")
PROTOCOLS = ("none", "coordinated", "uncoordinated", "cic")
#: the input of the uniform part (the MST step and the grid with a failure)
SKEWS = {"uniform": 0.0}
LOGGING = ("uncoordinated", "cic")  # senders log every message
#: the parts of the experiment, each its own run (and ``bench reproduce`` step): ``uniform``
#: (the MST step, the grid with one failure per run, the cyclic query), ``skew`` (the paper's
#: Fig 12: hot items at a share of each protocol's uniform MST, no failure) and ``paired``
#: (coordinated and none probed side by side at the rates of their MST brackets, several rounds)
PARTS = ("uniform", "skew", "paired")
#: the protocols of the paper's skew figure (Fig 12 plots COOR, UNC and CIC; no checkpoint-free line)
SKEW_PROTOCOLS = ("coordinated", "uncoordinated", "cic")
#: the protocols of the paired part: the paper's first headline is coordinated's MST against none's
PAIRED_PROTOCOLS = ("none", "coordinated")
#: the paired part of a ``--quick`` run (which has no MST step): q1 probed at these rates, once
QUICK_PAIRED_RATES = (2000.0, 4000.0)
#: a checkpointing protocol whose MST (or paced rate) is above ``none``'s by more than this is
#: marked in the tables, with the measurement that explains it (:func:`above_mst`, :func:`above_grid`)
ABOVE_NONE = 1.02


def hot(ratio: float) -> tuple[str, str]:
    """The skew part's input with ``ratio`` hot items: its name in the document and its
    :mod:`spark_integration.skew` form.  NexMark's hot items are one hot auction at a time, so
    the share ``ratio`` of the events goes to one key (``hot:RATIO:1``)."""
    return f"hot {ratio:.0%}", f"hot:{ratio:g}:1"

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
    # Fig 7 (MST normalised to none's; drawn, not printed): what the text says of it
    "fig7": ("coordinated reaches none's MST up to 50 workers (about 0.9 at 70-100), uncoordinated about 10 % "
             "lower than coordinated, CIC below 0.5 at high parallelism; Q3 below none for every protocol."),
    # Fig 12 (its values are drawn, not printed): what the text says of it
    "skew_fig12": ("Q3, Q8, Q12 on 10 workers, 10/20/30 % hot items, at 50 % and 80 % of each protocol's MST "
                   "on non-skewed input, no failure: coordinated has the highest p50 latency and average "
                   "checkpoint time at both loads; at 50 % each step up in hot items raises coordinated's p50 "
                   "and checkpoint time by at least an order of magnitude, at 80 % even 10 % hot items hit Q3 "
                   "hard; uncoordinated and CIC keep both low."),
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
    #: the skew part (CheckMate's Fig 12): the hot-item ratios, each at these shares of the
    #: protocol's uniform MST, no failure, on the queries in ``skewed``
    skew_ratios: tuple[float, ...] = (0.1, 0.2, 0.3)
    skew_loads: tuple[float, ...] = (0.5, 0.8)
    #: the paired part: rounds of probes at each rate (a protocol sustains a rate in most of them)
    paired_rounds: int = 3

    def paced(self, mst: float, load: float | None = None) -> tuple[float, int, int]:
        """The rate, events and failure offset of a row whose protocol's MST is ``mst``, paced
        at ``load`` of it (default :attr:`load`)."""
        rate = (self.load if load is None else load) * mst
        return rate, int(rate * (self.warmup_seconds + self.run_seconds)), \
            int(rate * (self.warmup_seconds + self.fail_fraction * self.run_seconds))


#: what a ``--quick`` document's tables say first
SMOKE = ("*Smoke run (`--quick`): each row is a few seconds of Spark with one or two checkpoints, too "
         "short to separate a protocol from `none`; its ratios read `too short`.*")

#: the MST searches start at 256,000 events/s rather than ``bench mst``'s 1,000: each doubling is
#: a probe, and the ramp counts against the search's budget of 10, so it must start near the
#: queries' MSTs (docs/results.md, checkmate) for ``none``'s search to keep the three probes that
#: bisect a factor-2 bracket to 10 %: from 256,000 at most five doublings or halvings bracket any
#: MST between 8,000 and 8,192,000 events/s.  A ``none`` search that runs out of probes leaves
#: its MST low, and the other protocols, which start at it, can then come out above it
FULL = Sizes(events=600_000, keys=10_000, batch=50_000, fail_at=180_000, interval=2, cyclic_runs=50,
             cyclic_batches=60, skewed=("q3", "q8", "q12"), mst=replace(mst_mod.FULL, start_rate=256_000.0))
QUICK = Sizes(events=12_000, keys=1_000, batch=6_000, fail_at=8_000, interval=1, cyclic_runs=20,
              cyclic_batches=60, skewed=("q12",), paired_rounds=1)


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
    #: the skew part: the share of the protocol's uniform MST the row was paced at (None: the
    #: uniform part's :attr:`Sizes.load`, or unpaced)
    load: float | None = optional()


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
    #: which part of the experiment this run is (:data:`PARTS`)
    part: str = "uniform"
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
    #: the skew and paired parts: the uniform run whose MSTs they took (``--mst-from``)
    mst_from: str | None = optional()
    #: the paired part: query -> none and coordinated probed side by side (:func:`mst_mod.pair`)
    paired: dict[str, mst_mod.Pairing] = field(default_factory=dict)
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


class MstSourceError(ValueError):
    """``--mst-from`` names a document the skew part cannot take its MSTs from (one line, the fix)."""


def msts_from(doc: "Checkmate", backend: str, parallelism: int, queries: tuple[str, ...],
              protocols: tuple[str, ...], source: str = "its run") -> dict[str, dict[str, mst_mod.Search]]:
    """The uniform MSTs the skew part paces at, taken from a full uniform run: a clear error when
    it is of another part, size, backend or parallelism, or did not search a query x protocol
    (a search that found no sustainable rate is taken: the skew part leaves its rows out)."""
    fix = f"run `bench checkmate --backend {backend} --parallelism {parallelism}` (full) first"
    if doc.part != "uniform" or doc.quick or not doc.mst:
        raise MstSourceError(f"{source} has no uniform MST step (a --quick or skew run); {fix}")
    if (doc.backend, doc.parallelism) != (backend, parallelism):
        raise MstSourceError(f"{source} measured {doc.backend} with {doc.parallelism} instances, not {backend} "
                             f"with {parallelism}; {fix}")
    missing = [f"{q} {p}" for q in queries for p in protocols if not doc.mst.get(q, {}).get(p)]
    if missing:
        raise MstSourceError(f"{source} has no MST search for {', '.join(missing)}; {fix}")
    return {q: {p: doc.mst[q][p] for p in protocols} for q in queries}


# ------------------------------------------------------------------------------ the time it takes
#: allowances for the estimate printed before a run: the Spark session's start; a Spark job's
#: start, its drain after the input, recovery from its failure and the exactly-once check, on top
#: of its seconds of input; and how much longer than its input a probe runs on average (an
#: unsustainable one drains late)
SESSION_START_S = 60.0
JOB_OVERHEAD_S = 15.0
PROBE_DRAIN = 1.3


def expected_probes(sizes: mst_mod.Sizes) -> int:
    """The probes a search expects when it starts at ``none``'s MST: one there, one a factor 2
    away, then the bisection of that bracket to the precision (``none``'s own search, from the
    start rate, is counted at its probe budget)."""
    import math

    return min(sizes.max_probes, 2 + math.ceil(math.log2(math.log(2) / math.log(1 + sizes.precision))))


@dataclass
class Plan:
    """What a run will do, counted before it starts: its MST searches (``none``'s from the start
    rate, the others' from ``none``'s MST), its paced or unpaced rows, and the seconds each
    is expected to take (:data:`JOB_OVERHEAD_S`, :data:`PROBE_DRAIN`)."""

    searches_from_start: int
    searches_from_none: int
    rows: int
    warmups: int
    seconds_per_row: float
    seconds_per_probe: float
    probes_from_start: int
    probes_from_none: int
    #: the paired part's probes (rates x protocols x rounds, counting three rates a query)
    paired_probes: int = 0

    @property
    def mst_seconds(self) -> float:
        return self.seconds_per_probe * (self.searches_from_start * self.probes_from_start
                                         + self.searches_from_none * self.probes_from_none + self.paired_probes)

    @property
    def seconds(self) -> float:
        return SESSION_START_S + self.warmups * JOB_OVERHEAD_S + self.mst_seconds + self.rows * self.seconds_per_row

    def describe(self) -> str:
        mst = (f"{self.searches_from_start + self.searches_from_none} MST searches "
               f"({self.searches_from_start} of up to {self.probes_from_start} probes, "
               f"{self.searches_from_none} of about {self.probes_from_none}"
               + (f", then {self.paired_probes} paired probes" if self.paired_probes else "")
               + f"; {self.seconds_per_probe:.0f} s a probe): {minutes(self.mst_seconds)}; "
               if self.searches_from_start + self.searches_from_none else
               f"{self.paired_probes} paired probes ({self.seconds_per_probe:.0f} s a probe): "
               f"{minutes(self.mst_seconds)}; " if self.paired_probes else "")
        runs = (f"{self.rows} runs of about {self.seconds_per_row:.0f} s: {minutes(self.rows * self.seconds_per_row)}"
                if self.rows else "")
        return f"expected about {minutes(self.seconds)}: Spark's start and {self.warmups} warm-up runs; {mst}{runs}" \
            .removesuffix("; ")


def minutes(seconds: float) -> str:
    """``1 h 25 min`` / ``40 min`` / ``30 s``."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    m = round(seconds / 60)
    return f"{m // 60} h {m % 60} min" if m >= 60 else f"{m} min"


def plan(sizes: Sizes, part: str = "uniform", queries: tuple[str, ...] = QUERIES,
         protocols: tuple[str, ...] | None = None, msts_given: bool = False) -> Plan:
    """The run :func:`run` will make with these arguments, counted (its estimate of time)."""
    protocols = protocols or part_protocols(part)
    search = sizes.mst is not None and not msts_given
    mst_queries = part_queries(part, queries, sizes)
    paced = sizes.mst is not None
    if part == "uniform":
        rows = len(queries) * len(protocols)
    elif part == "paired":
        rows = 0
    else:
        rows = len(mst_queries) * len(sizes.skew_ratios) * (len(sizes.skew_loads) if paced else 1) * len(protocols)
    row_s = (sizes.warmup_seconds + sizes.run_seconds if paced else 2.0) + JOB_OVERHEAD_S
    probe_sizes = sizes.mst or (mst_mod.QUICK if part == "paired" else None)
    probe_s = probe_sizes.probe_seconds * PROBE_DRAIN + JOB_OVERHEAD_S / 3 if probe_sizes else 0.0
    rates = 3 if sizes.mst else len(QUICK_PAIRED_RATES)
    return Plan(searches_from_start=len(mst_queries) if search else 0,
                searches_from_none=len(mst_queries) * (len(protocols) - 1) if search else 0,
                rows=rows, warmups=len(protocols),
                seconds_per_row=row_s, seconds_per_probe=probe_s,
                probes_from_start=sizes.mst.max_probes if sizes.mst else 0,
                probes_from_none=expected_probes(sizes.mst) if sizes.mst else 0,
                paired_probes=len(mst_queries) * rates * len(protocols) * sizes.paired_rounds
                if part == "paired" else 0)


def part_protocols(part: str) -> tuple[str, ...]:
    """The protocols a part runs unless told otherwise."""
    return {"uniform": PROTOCOLS, "skew": SKEW_PROTOCOLS, "paired": PAIRED_PROTOCOLS}[part]


def part_queries(part: str, queries: tuple[str, ...], sizes: Sizes) -> tuple[str, ...]:
    """The queries a part runs: the skew part those of ``sizes.skewed``, a ``--quick`` paired
    part (no MSTs to pair at) the first only."""
    if part == "skew":
        return tuple(q for q in queries if q in sizes.skewed)
    if part == "paired" and sizes.mst is None:
        return queries[:1]
    return queries


class Progress:
    """Lines on stderr (through ``say``) after every MST search and run: how many are done, the
    time so far and what is left at the pace so far — what a log shows where no bar is drawn."""

    def __init__(self, plan: Plan, say: Callable[[str], None], name: str = "checkmate") -> None:
        import time

        self.plan, self.say, self.name, self.clock = plan, say, name, time.monotonic
        self.start = self.clock()
        self.expected_done = 0.0
        self.units = 0

    def done(self, expected_seconds: float, what: str) -> None:
        self.expected_done += expected_seconds
        self.units += 1
        elapsed = self.clock() - self.start
        pace = elapsed / self.expected_done if self.expected_done else 1.0
        left = max(0.0, self.plan.seconds - self.expected_done) * pace
        self.say(f"{self.name}: progress: {what} done; {minutes(elapsed)} so far, about {minutes(left)} left "
                 f"(of {minutes(self.plan.seconds)} expected, at the pace so far)")


def run(quick: bool = False, backend: str = "indexed_fs", parallelism: int = 2, master: str | None = None,
        queries: tuple[str, ...] = QUERIES, protocols: tuple[str, ...] | None = None,
        skews: dict[str, Any] | None = None, say: Callable[[str], None] = print,
        sizes: Sizes | None = None, part: str = "uniform", mst_from: "Checkmate | None" = None,
        mst_source: str | None = None) -> "Checkmate":
    """One part of the experiment on one session (``master``: ``local[P]`` for P instances, one
    task slot each); the ``ckptbench.checkmate/1`` document.

    ``uniform``: the MST step (when the sizes have one), the grid with one failure per run, then
    the cyclic emulation.  ``skew``: each query of ``sizes.skewed`` at every hot-item ratio and
    load (a share of the protocol's uniform MST, taken from ``mst_from`` — a full uniform run,
    :func:`msts_from` — or searched here), no failure.  ``paired``: ``none`` and coordinated
    probed in turn at the ends of their MST brackets (from ``mst_from`` or searched here; a
    ``--quick`` run: q1 at :data:`QUICK_PAIRED_RATES`)."""
    sizes = sizes or (QUICK if quick else FULL)
    protocols = protocols or part_protocols(part)
    master = master or f"local[{parallelism}]"
    queries = part_queries(part, queries, sizes)
    if part == "skew":
        skews = skews if skews is not None else dict(hot(r) for r in sizes.skew_ratios)
    elif part == "paired":
        skews = {}  # no grid: the probes are the measurement
    else:
        skews = SKEWS if skews is None else skews
    msts: dict[str, dict[str, mst_mod.Search]] = {}
    if mst_from is not None and sizes.mst is not None:
        msts = msts_from(mst_from, backend, parallelism, queries, protocols, "its run")
    work = plan(sizes, part, queries, protocols, msts_given=bool(msts))
    say(f"checkmate: {part} part, {parallelism} instances on {master}: {work.describe()}")
    progress = Progress(work, say)
    rows: list[Row] = []
    paired: dict[str, mst_mod.Pairing] = {}
    with spark_run(master, protocols, "ckptbench-checkmate-") as session:
        spark, tmp = session.spark, session.tmp
        progress.done(SESSION_START_S, "Spark's start")
        base = JobSpec(kind="q1", events=sizes.events, keys=sizes.keys, parallelism=parallelism,
                       max_batch=sizes.batch, verify=True, timeout=900)
        # warm the JVM and the Python workers on every protocol's path (the session's JVM is
        # still compiling during its first runs: whichever ran first would look slower)
        for protocol in protocols:
            run_one(spark, protocol, backend, replace(base, events=2 * sizes.batch, verify=False), [],
                    sizes.interval, tmp)
            progress.done(JOB_OVERHEAD_S, f"warm-up run of {protocol}")
        if sizes.mst is not None and not msts:  # CheckMate's MST, per query and protocol, on uniform input
            for kind in queries:
                # none first: its MST is where the others' searches start (a protocol rarely
                # sustains more than no checkpoints), which saves the ramp from the start rate
                for i, protocol in enumerate(sorted(protocols, key=lambda p: p != "none")):
                    say(f"checkmate: MST of {kind} under {protocol} ...")
                    ref = msts.get(kind, {}).get("none")
                    search_sizes = replace(sizes.mst, start_rate=ref.mst) if ref and ref.mst else sizes.mst
                    found = mst_mod.find(spark, tmp, protocol, backend, replace(base, kind=kind, skew=0.0),
                                         search_sizes, sizes.interval, say=say)
                    msts.setdefault(kind, {})[protocol] = found
                    say(f"checkmate: MST of {kind} under {protocol}: {found.mst or 0:,.0f} events/s ({found.stop})")
                    progress.done(work.seconds_per_probe * (work.probes_from_none if i else work.probes_from_start),
                                  f"MST of {kind} under {protocol}")
        if part == "paired":
            probe_sizes = sizes.mst or mst_mod.QUICK
            for kind in queries:
                rates = (mst_mod.bracket_rates([msts[kind][p] for p in protocols]) if msts
                         else list(QUICK_PAIRED_RATES))
                say(f"checkmate: {kind}: {' and '.join(protocols)} side by side at "
                    f"{', '.join(f'{r:,.0f}' for r in rates)} events/s, {sizes.paired_rounds} rounds ...")
                found = mst_mod.find_paired(spark, tmp, protocols, backend, replace(base, kind=kind, skew=0.0),
                                            probe_sizes, rates, sizes.paired_rounds, sizes.interval, say=say)
                paired[kind] = found
                say(f"checkmate: {kind} paired: " + ", ".join(
                    f"{p} sustains {found.mst(p) or 0:,.0f} events/s" for p in protocols))
                progress.done(work.seconds_per_probe * len(rates) * len(protocols) * sizes.paired_rounds,
                              f"{kind} paired")
        loads: tuple[float | None, ...] = (sizes.load,) if part == "uniform" else sizes.skew_loads
        turn = 0
        for skew_name, skew in skews.items():
            for kind in queries:
                for load in loads if sizes.mst is not None else (None,):
                    order = protocols[turn % len(protocols):] + protocols[:turn % len(protocols)]
                    turn += 1
                    for protocol in order:
                        found = msts.get(kind, {}).get(protocol)
                        if part == "skew" and sizes.mst is not None and not (found and found.mst):
                            say(f"checkmate: {kind} {skew_name} {protocol} left out: no uniform MST to pace it at")
                            continue
                        row = _grid_row(spark, tmp, protocol, backend, replace(base, kind=kind, skew=skew), sizes,
                                        msts.get(kind, {}).get(protocol), load, part == "uniform")
                        row.skew = skew_name
                        rows.append(row)
                        at = f" at {load:.0%} of its MST" if load is not None and row.rate else ""
                        say(f"checkmate: {kind} {skew_name}{at} {protocol}: {row.throughput:,.0f} events/s, "
                            f"p50 {row.latency_p50_ms:,.0f} ms, checkpoint {row.checkpoint_ms:,.1f} ms, "
                            f"recovery {row.recovery_ms:.0f} ms, exactly-once {row.exactly_once}")
                        progress.done(work.seconds_per_row, f"{kind} {skew_name}{at} {protocol}")
    order_of = {p: i for i, p in enumerate(protocols)}
    rows.sort(key=lambda r: (list(skews).index(r.skew), queries.index(r.query), r.load or 0, order_of[r.protocol]))
    none = {(r.query, r.skew, r.load): r.throughput for r in rows if r.protocol == "none"}
    for r in rows:
        ref = none.get((r.query, r.skew, r.load))
        r.throughput_vs_none = round(r.throughput / ref, 3) if ref else None
        ref_mst = msts.get(r.query, {}).get("none")
        mine = msts.get(r.query, {}).get(r.protocol)
        if ref_mst and ref_mst.mst and mine and mine.mst:
            r.mst_vs_none = round(mine.mst / ref_mst.mst, 3)
    cyc = {} if part != "uniform" else {str(n): load_doc(dict[str, CyclicMeans], cyclic.compare(
        n, sizes.cyclic_runs, batches=sizes.cyclic_batches,
        fail_batch=int(sizes.cyclic_batches * 0.8))) for n in (5, 10)}
    return Checkmate(quick=quick, backend=backend, parallelism=parallelism, sizes=sizes, part=part,
                     skews={k: str(v) for k, v in skews.items()},
                     piggyback_bytes_per_row=piggyback_size(2 * parallelism),
                     seconds=session.seconds(), rows=rows, cyclic=cyc, paper=dump(PAPER),
                     mst=msts if part == "uniform" or mst_from is None else {},
                     mst_from=mst_source if mst_from is not None else None, paired=paired)


def _grid_row(spark: Any, tmp: str, protocol: str, backend: str, spec: JobSpec, sizes: Sizes,
              found: mst_mod.Search | None, load: float | None, failure: bool) -> Row:
    """One run of the grid: paced at ``load`` of the protocol's MST ``found`` when there is one
    (else unpaced, ``sizes.events``), with its one failure when ``failure``."""
    spec = replace(spec, verify=registration(protocol).exactly_once)
    fail_at = sizes.fail_at
    if found is not None and found.mst and load is not None:
        rate, events, fail_at = sizes.paced(found.mst, load)
        spec = replace(spec, rate=rate, events=events, max_batch=events, timeout=max(900.0, 10 * events / rate))
    raw = run_one(spark, protocol, backend, spec, [fail_at] if failure else [], sizes.interval, tmp)
    row = _row(spec.kind, "", raw, spec.rate)
    row.load = load if spec.rate else None
    return row


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
    if doc.part == "skew":
        return skew_markdown(doc)
    if doc.part == "paired":
        return paired_markdown(doc)
    rows = doc.rows
    queries = [q for q in QUERIES if any(r.query == q for r in rows)]
    protocols = [p for p in PROTOCOLS if any(r.protocol == p for r in rows)]
    out: list[str] = []
    if doc.quick:
        out += [SMOKE, ""]
    sz = doc.sizes
    notes: list[str] = []
    for skew in doc.skews:
        paced = any(r.rate for r in rows if r.skew == skew)
        how = (f"each row paced at {sz.load:.0%} of its protocol's uniform MST for {sz.warmup_seconds:g} s of "
               f"warm-up and a {sz.run_seconds:g} s run, one failure {sz.fail_fraction:.0%} into the run"
               if paced else f"{sz.events:,} events as fast as they go, one failure at event {sz.fail_at:,}")
        out += [f"**{skew} input** ({doc.skews[skew]}), {how}, backend {doc.backend}, {doc.parallelism} "
                f"instances:", "",
                "| query | protocol | events/s | × none | p50 ms | p99 ms | ckpt ms | recovery ms | recovery by p50 ms "
                "| checkpoints (forced) | useless | logged msgs | piggybacked B | exactly-once | note |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
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
                           f"{r.logged_messages:,} | {r.piggybacked_bytes:,} | {eo} | "
                           f"{_mark(notes, above_grid(doc, r, none, ratio))} |")
        out.append("")
    out += _footnotes(notes)
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


def _mark(notes: list[str], why: str | None, sign: str = "") -> str:
    """A footnote mark for ``why`` (kept in ``notes``), or "" when there is nothing to say."""
    if not why:
        return ""
    notes.append(why)
    return f"[{sign}{len(notes)}]"


def _footnotes(notes: list[str], sign: str = "") -> list[str]:
    return [f"[{sign}{i}] {n}" for i, n in enumerate(notes, 1)] + ([""] if notes else [])


def _bracket(found: mst_mod.Search) -> str:
    return f"{_fmt(found.low)}–{_fmt(found.high)}" if found.high else f"{_fmt(found.low)}– (no unsustainable probe)"


def above_mst(doc: Checkmate, kind: str, protocol: str) -> str | None:
    """Why ``protocol``'s MST on ``kind`` is above ``none``'s by more than :data:`ABOVE_NONE`
    (None when it is not): a checkpointing protocol does more work than no checkpoints, so such a
    ratio is the search's resolution or noise, and the note says which from the two searches'
    brackets — overlapping brackets are within the search's precision; disjoint ones are two
    probes on a shared machine that disagree."""
    by = doc.mst.get(kind, {})
    mine, none = by.get(protocol), by.get("none")
    if protocol == "none" or not (mine and none and mine.mst and none.mst) or mine.mst <= ABOVE_NONE * none.mst:
        return None
    precision = doc.sizes.mst.precision if doc.sizes.mst else 0.0
    overlap = none.high is None or mine.low is None or mine.low < none.high
    said = (f"{kind} {protocol}: MST {mine.mst:,.0f} events/s, {mine.mst / none.mst - 1:.0%} above none's "
            f"{none.mst:,.0f}; its bracket {_bracket(mine)} against none's {_bracket(none)}")
    if overlap:
        return (said + f": the brackets overlap, so the difference is within the search's precision "
                       f"({precision:.0%}), not a gain of the protocol")
    load = doc.environment.loadavg
    return (said + f": the brackets do not overlap — none was unsustainable at {none.high:,.0f} events/s and "
                   f"{protocol} sustainable at {mine.low:,.0f}, one probe per rate on a shared machine: read it as "
                   "the machine's noise" + (f" (load average {load[0]:.2f} at the end of the run)" if load else ""))


def above_grid(doc: Checkmate, r: Row, none: Row | None, ratio: str) -> str | None:
    """Why a grid row's events/s are above ``none``'s by more than :data:`ABOVE_NONE` (None
    when they are not, or the ratio reads ``too short``): a paced row's events/s are its rate,
    set by its protocol's MST, so the note points at that MST; an unpaced row's are noise."""
    if r.protocol == "none" or none is None or ratio == TOO_SHORT or not r.throughput_vs_none \
            or r.throughput_vs_none <= ABOVE_NONE:
        return None
    said = f"{r.query} {r.skew} {r.protocol}: {r.throughput_vs_none:.2f}× none's events/s"
    if r.rate and none.rate:
        mst = above_mst(doc, r.query, r.protocol)
        return (said + f": paced at {r.rate:,.0f} events/s ({doc.sizes.load:.0%} of its own MST) against none's "
                       f"{none.rate:,.0f}, so it follows the MSTs" + (f" — {mst}" if mst else ""))
    if r.rate or none.rate:
        return said + ": one of the two ran paced and the other unpaced (its search found no MST): not comparable"
    return said + ": unpaced runs of one sample each; the ratio is the run-to-run noise of a shared machine"


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
           + doc.paper.get("fig7", PAPER["fig7"]), "",
           "| query | " + " | ".join(f"{p} MST | {p} × none" for p in protocols) + " |",
           "|---|" + "---|---|" * len(protocols)]
    notes: list[str] = []
    for q in queries:
        none = doc.mst[q].get("none")
        cells = []
        for p in protocols:
            found = doc.mst[q].get(p)
            rate = found.mst if found else None
            ratio = rate / none.mst if rate and none and none.mst else None
            mark = _mark(notes, above_mst(doc, q, p), "M")
            cells.append(f"{_fmt(rate)} | {_fmt(ratio, '.2f')}{' ' + mark if mark else ''}")
        out.append(f"| {q} | " + " | ".join(cells) + " |")
    out += [""] + _footnotes(notes, "M")
    out += ["What stopped each search above its MST (the first unsustainable probe at the bracket's top):", ""]
    for q in queries:
        for p in protocols:
            found = doc.mst[q].get(p)
            if found is None:
                continue
            top = next((x for x in found.probes if not x.sustainable and x.rate == found.high), None)
            reason = mst_mod.why(top, mst_mod.Criterion()) if top else "no unsustainable probe"
            out.append(f"- {q} {p}: {found.stop}; {reason}")
    return out


# ------------------------------------------------------------------------------ the skew part
def _skew_cell(rows: list[Row], kind: str, skew: str, load: float | None, protocol: str) -> Row | None:
    return next((r for r in rows if (r.query, r.skew, r.load, r.protocol) == (kind, skew, load, protocol)), None)


def _loads(doc: Checkmate) -> list[float | None]:
    return sorted({r.load for r in doc.rows}, key=lambda v: -1 if v is None else v)


def skew_markdown(doc: Checkmate) -> list[str]:
    """The skew part beside the paper's Fig 12: p50 latency and average checkpoint time per
    query, hot-item ratio and load, for each protocol, and coordinated's p50 over
    uncoordinated's (the latter's relative gain); a run too short to measure reads ``too short``."""
    rows = doc.rows
    queries = [q for q in QUERIES if any(r.query == q for r in rows)]
    protocols = [p for p in PROTOCOLS if any(r.protocol == p for r in rows)]
    sz = doc.sizes
    out: list[str] = [SMOKE, ""] if doc.quick else []
    source = f" (the MSTs of `{doc.mst_from}`)" if doc.mst_from else ""
    for load in _loads(doc):
        how = (f"each protocol paced at {load:.0%} of its own uniform MST{source}, {sz.warmup_seconds:g} s of "
               f"warm-up then {sz.run_seconds:g} s" if load is not None else f"{sz.events:,} events as fast as they go")
        out += [f"**Skewed input (CheckMate Fig 12), {how}, no failure**, one hot key with the given share of the "
                f"events, backend {doc.backend}, {doc.parallelism} instances:", "",
                "| query | hot items | " + " | ".join(f"{p} p50 ms" for p in protocols) + " | "
                + " | ".join(f"{p} ckpt ms" for p in protocols)
                + " | coordinated ÷ uncoordinated p50 | checkpoints (" + " / ".join(protocols) + ") |",
                "|---|---|" + "---|" * (2 * len(protocols) + 2)]
        for kind in queries:
            for skew in doc.skews:
                cells = [_skew_cell(rows, kind, skew, load, p) for p in protocols]
                if not any(cells):
                    continue
                p50 = [_fmt(c and c.latency_p50_ms) for c in cells]
                ckpt = [_fmt(c and c.checkpoint_ms, ",.1f") for c in cells]
                gain = skew_gain(rows, kind, skew, load)
                counts = " / ".join("–" if c is None else str(c.checkpoints) for c in cells)
                out.append(f"| {kind} | {skew} | " + " | ".join(p50) + " | " + " | ".join(ckpt) + f" | "
                           f"{gain if isinstance(gain, str) else _fmt(gain, '.2f')} | {counts} |")
        out.append("")
    out += [f"Paper (Fig 12): {doc.paper.get('skew_fig12', PAPER['skew_fig12'])}", ""]
    mark, reason = skew_verdict(doc)
    out += [f"**CheckMate's skew headline (uncoordinated's relative gain under skew): {mark}** — {reason}."]
    return out


def skew_gain(rows: list[Row], kind: str, skew: str, load: float | None) -> float | str | None:
    """Coordinated's p50 over uncoordinated's in one skew cell: above 1 is uncoordinated's gain;
    :data:`TOO_SHORT` when either run is too short to measure (None: one did not run)."""
    co, un = (_skew_cell(rows, kind, skew, load, p) for p in ("coordinated", "uncoordinated"))
    if co is None or un is None or not un.latency_p50_ms:
        return None
    if too_short(co.metrics, co.protocol) or too_short(un.metrics, un.protocol):
        return TOO_SHORT
    return co.latency_p50_ms / un.latency_p50_ms


REPRODUCED, NOT_REPRODUCED, NOT_MEASURED = "*reproduced*", "*not reproduced*", "*not yet measured at full size*"


def skew_verdict(doc: Checkmate | dict[str, Any] | None) -> tuple[str, str]:
    """(mark, the figures that decided it): *reproduced* when, over the skew cells long enough to
    measure, uncoordinated's p50 is below coordinated's in more than half and its average
    checkpoint time too (the paper: coordinated worst at both loads)."""
    doc = None if doc is None else _doc(doc)
    if doc is None or doc.quick or not any(r.rate for r in doc.rows):
        return NOT_MEASURED, "the skew part has not run paced at the MSTs (`bench reproduce checkmate-skew`)"
    gains, ckpt_wins, cells = [], 0, 0
    for kind in QUERIES:
        for skew in doc.skews:
            for load in _loads(doc):
                gain = skew_gain(doc.rows, kind, skew, load)
                if not isinstance(gain, float):
                    continue
                co, un = (_skew_cell(doc.rows, kind, skew, load, p) for p in ("coordinated", "uncoordinated"))
                cells += 1
                gains.append(gain)
                ckpt_wins += un.checkpoint_ms < co.checkpoint_ms
    if not cells:
        return NOT_MEASURED, f"every skew cell is {TOO_SHORT} to measure"
    import statistics

    p50_wins = sum(g > 1 for g in gains)
    figures = (f"uncoordinated's p50 is below coordinated's in {p50_wins} of {cells} cells (coordinated ÷ "
               f"uncoordinated p50: median {statistics.median(gains):.2f}, range {min(gains):.2f}–{max(gains):.2f}), "
               f"its average checkpoint time in {ckpt_wins} of {cells}")
    if 2 * p50_wins > cells and 2 * ckpt_wins > cells:
        return REPRODUCED, figures
    return NOT_REPRODUCED, (figures + "; a micro-batch is a barrier for every protocol, so a straggling instance "
                                      "holds all of them back alike (docs/checkmate.md)")


# ------------------------------------------------------------------------------ the paired part
def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:+.1%}"


def paired_ratios(doc: Checkmate, protocol: str = "coordinated", over: str = "none") -> dict[str, float]:
    """``protocol``'s paired MST over ``over``'s, per query where both sustained a rate."""
    out = {}
    for q in QUERIES:
        found = doc.paired.get(q)
        a, b = (found.mst(protocol), found.mst(over)) if found else (None, None)
        if a and b:
            out[q] = a / b
    return out


def paired_markdown(doc: Checkmate) -> list[str]:
    """The paired part: per query and rate, how many rounds each protocol sustained and the
    median growth of its backlog, then the MSTs the rounds give beside the searches' ratio."""
    queries = [q for q in QUERIES if q in doc.paired]
    protocols = [p for p in PROTOCOLS if any(p in doc.paired[q].probes for q in queries)]
    probe = doc.sizes.mst or mst_mod.QUICK
    rounds = max((doc.paired[q].rounds for q in queries), default=0)
    source = f" of `{doc.mst_from}`" if doc.mst_from else ""
    out: list[str] = [SMOKE, ""] if doc.quick else []
    out += [f"**{' and '.join(protocols)} side by side**, uniform input, backend {doc.backend}, {doc.parallelism} "
            f"instances: each probed at the ends of both protocols' MST brackets{source}, {rounds} rounds, the "
            f"protocols in turn (the first changing from rate to rate), {probe.probe_seconds:g} s probes judged "
            f"over the {probe.window_seconds:g} s after {probe.warmup_seconds:g} s; sustained: rounds sustainable "
            "of rounds judged; backlog: its median growth per second, as a share of the rate.", "",
            "| query | rate events/s | " + " | ".join(f"{p} sustained | {p} backlog" for p in protocols) + " |",
            "|---|---|" + "---|---|" * len(protocols)]
    for q in queries:
        found = doc.paired[q]
        for rate in found.rates:
            cells = []
            for p in protocols:
                ok, judged = found.held(p, rate)
                cells.append(f"{ok}/{judged} | {_pct(found.median_backlog(p, rate))}")
            out.append(f"| {q} | {rate:,.0f} | " + " | ".join(cells) + " |")
    # the searches' own ratio, where they ran here (with --mst-from they are the other run's,
    # which the paper's headline sets beside the paired one)
    searched = mst_ratios(doc, "coordinated") if doc.mst else None
    out += ["", "| query | " + " | ".join(f"{p} MST (paired)" for p in protocols)
            + " | coordinated × none (paired) | " + ("× none (one search each) | " if searched is not None else "")
            + "probes sustained (" + " / ".join(protocols) + ") |",
            "|---|" + "---|" * (len(protocols) + 2 + (searched is not None))]
    ratios = paired_ratios(doc)
    for q in queries:
        found = doc.paired[q]
        msts = [found.mst(p) for p in protocols]
        held = [[found.held(p, r) for r in found.rates] for p in protocols]
        out.append(f"| {q} | " + " | ".join(_fmt(m) for m in msts) + f" | {_fmt(ratios.get(q), '.2f')} | "
                   + (f"{_fmt(searched.get(q), '.2f')} | " if searched is not None else "")
                   + " / ".join(f"{sum(ok for ok, _ in h)} of {sum(n for _, n in h)}" for h in held) + " |")
    out += ["", "A protocol's paired MST is the highest rate it sustained in most rounds, every lower rate too; "
            "the probes it sustained over all rates say the same more finely, where the MSTs tie. "
            "Paper (Fig 7): " + doc.paper.get("fig7", PAPER["fig7"])]
    return out


# ------------------------------------------------------------------------------ the paper's headlines
def mst_ratios(doc: Checkmate, protocol: str, over: str = "none") -> dict[str, float]:
    """``protocol``'s MST over ``over``'s, per query that has both."""
    out = {}
    for q in QUERIES:
        a, b = doc.mst.get(q, {}).get(protocol), doc.mst.get(q, {}).get(over)
        if a and b and a.mst and b.mst:
            out[q] = a.mst / b.mst
    return out


def wide_brackets(doc: Checkmate, protocol: str, precision: float) -> dict[str, tuple[float, float | None]]:
    """The queries whose ``protocol`` search stopped with its bracket wider than ``precision``
    (its probe budget ran out, or a probe failed), as (low, high), or with no unsustainable
    probe at all, as (low, None): its MST may lie anywhere up to ``high`` (or above ``low``
    without end), so a ratio to it decides nothing."""
    out: dict[str, tuple[float, float | None]] = {}
    for q in QUERIES:
        s = doc.mst.get(q, {}).get(protocol)
        if s and s.low and (s.high is None or s.high / s.low > 1 + precision + 1e-9):
            out[q] = (s.low, s.high)
    return out


def _wide(q: str, start: float, lo: float, hi: float | None) -> str:
    """Why ``q``'s ``none`` search decides nothing, in words."""
    if hi is None:
        return f"{q} (none's search from {start:,.0f} events/s found no unsustainable rate up to {lo:,.0f})"
    return (f"{q} (none's search from {start:,.0f} events/s stopped with a bracket {lo:,.0f}–{hi:,.0f} "
            f"events/s, {hi / lo - 1:.0%} wide)")


def _listed(ratios: dict[str, float]) -> str:
    return ", ".join(f"{q} {v:.2f}" for q, v in ratios.items())


def paper_verdicts(uniform: Checkmate | dict[str, Any] | None, skew: Checkmate | dict[str, Any] | None = None,
                   parallel: Checkmate | dict[str, Any] | None = None,
                   paired: Checkmate | dict[str, Any] | None = None) -> list[tuple[str, str, str]]:
    """CheckMate's headlines, each (claim, mark, the measured reason), from the full documents
    of the uniform part at the default parallelism, the skew part, the uniform part at the
    higher parallelism and the paired part (None, or a ``--quick`` one: *not yet measured at
    full size*).  The paired part, where it ran, decides coordinated ≈ none for its queries: two
    protocols side by side over several rounds resolve what one search each cannot."""
    import statistics

    docs = [None if d is None else _doc(d) for d in (uniform, skew, parallel, paired)]
    uniform, skew, parallel, paired = [
        d if d is not None and not d.quick and (d.part in ("skew", "paired") or d.mst) else None for d in docs]
    out = []
    # the MST search's resolution: ratios within [floor, ceiling] of 1.0 cannot tell two protocols apart
    precision = uniform.sizes.mst.precision if uniform is not None and uniform.sizes.mst else 0.1
    floor, ceiling = 1 / (1 + precision), 1 + precision
    claim = "CheckMate: coordinated ≈ none on uniform input (Fig 7: the same MST up to 50 workers)"
    if uniform is None:
        out.append((claim, NOT_MEASURED, "no full `bench reproduce checkmate` (its MST step) yet"))
    else:
        searched = mst_ratios(uniform, "coordinated")
        side = paired_ratios(paired) if paired is not None else {}
        r = {**searched, **side}
        wide = wide_brackets(uniform, "none", precision)
        decided = {q: v for q, v in r.items() if q not in wide}
        ok = bool(decided) and all(floor <= v <= ceiling for v in decided.values())
        # coordinated clearly below none refutes the claim; clearly above it is a baseline
        # beaten, which says the search is noisier than its precision there, not that
        # checkpointing pays: it decides nothing
        below = any(v < floor for v in decided.values())
        above = {q: v for q, v in decided.items() if v > ceiling}
        mark = NOT_REPRODUCED if below else REPRODUCED if ok and not wide else NOT_MEASURED
        reason = (f"coordinated's MST × none's at {uniform.parallelism} instances: {_listed(r) or 'none found'} "
                  f"({'all' if ok else 'not all'}{' decided' if wide else ''} within the search's precision, "
                  f"{floor:.2f}–{ceiling:.2f})")
        if side:
            rounds = max(f.rounds for f in paired.paired.values())
            reason += (f"; {', '.join(side)} from the two side by side in {rounds} rounds at the ends of both "
                       f"searches' brackets, where one search each gave {_listed({q: searched[q] for q in side if q in searched})}")
        if wide:
            start = uniform.sizes.mst.start_rate
            reason += "; undecided: " + ", ".join(_wide(q, start, lo, hi) for q, (lo, hi) in wide.items())
        if above and not below:
            apart = {q: v for q, v in above.items() if q not in side}
            together = {q: v for q, v in above.items() if q in side}
            if apart:
                reason += ("; undecided: coordinated above none by more than the precision in "
                           + ", ".join(f"{q} ({v:.2f})" for q, v in apart.items())
                           + ", a baseline beaten: one probe per rate on a shared machine varies more "
                             "than the search's precision there (`bench reproduce checkmate-paired` probes the "
                             "two side by side)")
            if together:
                reason += ("; undecided: coordinated above none even side by side in "
                           + ", ".join(f"{q} ({v:.2f})" for q, v in together.items())
                           + ", a baseline beaten that the rounds do not explain")
        out.append((claim, mark, reason))
    claim = "CheckMate: uncoordinated about 10 % below coordinated (Fig 7)"
    if uniform is None:
        out.append((claim, NOT_MEASURED, "no full `bench reproduce checkmate` (its MST step) yet"))
    else:
        r = mst_ratios(uniform, "uncoordinated", "coordinated")
        med = statistics.median(r.values()) if r else None
        # "about 10 % below": measurably below (under the search's precision of 1.0), not far below
        ok = med is not None and 0.8 <= med < floor
        where = ("" if med is None else
                 f"; only a median below {floor:.2f} tells the two apart: "
                 + ("uncoordinated is measurably below coordinated" if ok else
                    "uncoordinated is far more than 10 % below coordinated" if med < 0.8 else
                    "uncoordinated is not measurably below coordinated"))
        out.append((claim, REPRODUCED if ok else NOT_REPRODUCED,
                    f"uncoordinated's MST × coordinated's: {_listed(r) or 'no query where both found an MST'}"
                    + (f" (median {med:.2f}; the search brackets each MST to "
                       f"{precision:.0%}{where})"
                       if med is not None and uniform.sizes.mst else "")))
    claim = "CheckMate: CIC far lower at high parallelism (Fig 7: below 0.5 × none's MST at 70-100 workers)"
    if uniform is None or parallel is None:
        out.append((claim, NOT_MEASURED, "needs full `bench reproduce checkmate` and `checkmate-parallelism`"))
    else:
        low, high = mst_ratios(uniform, "cic"), mst_ratios(parallel, "cic")
        med = statistics.median(high.values()) if high else None
        ok = med is not None and med < 0.5
        lower = sum(1 for q in high if q in low and high[q] < low[q])
        trend = (f" (median {med:.2f} at {parallel.parallelism}, against the paper's 0.5; lower than at "
                 f"{uniform.parallelism} in {lower} of {len(set(high) & set(low))} queries)" if med is not None else "")
        out.append((claim, REPRODUCED if ok else NOT_REPRODUCED,
                    f"CIC's MST × none's at {uniform.parallelism} instances: {_listed(low)}; at "
                    f"{parallel.parallelism}: {_listed(high)}{trend}; its piggyback is {uniform.piggyback_bytes_per_row} "
                    f"and {parallel.piggyback_bytes_per_row} bytes a row (8 + 10 n, n = 2P), where 100 workers "
                    f"would carry {piggyback_size(200)}"))
    mark, reason = skew_verdict(skew)
    out.append(("CheckMate: uncoordinated's relative gain under skew (Fig 12)", mark, reason))
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
    if doc.part == "skew":
        return ("smoke run (--quick): " if doc.quick else "") + "skew (Fig 12): " + skew_verdict(doc)[1]
    if doc.part == "paired":
        rounds = max((f.rounds for f in doc.paired.values()), default=0)
        return (("smoke run (--quick): " if doc.quick else "") + f"none and coordinated side by side, {rounds} "
                f"rounds: coordinated's MST × none's {_listed(paired_ratios(doc)) or 'not found'}")
    all_rows = doc.rows
    rows = [r for r in all_rows if r.skew == "uniform" and r.throughput_vs_none and comparable(all_rows, r)]

    def mean(p: str) -> str:
        xs = [r.throughput_vs_none for r in rows if r.protocol == p]
        return f"{sum(xs) / len(xs):.2f}" if xs else TOO_SHORT

    def mst_mean(p: str) -> str:
        xs = list(mst_ratios(doc, p).values())
        return f"{sum(xs) / len(xs):.2f}" if xs else "–"
    eo = all(r.exactly_once for r in all_rows if registration(r.protocol).exactly_once)
    what = (f"{doc.parallelism} instances, MST × none (mean over queries): coordinated {mst_mean('coordinated')}, "
            f"uncoordinated {mst_mean('uncoordinated')}, cic {mst_mean('cic')}" if doc.mst else
            f"uniform input, throughput × none: coordinated {mean('coordinated')}, uncoordinated "
            f"{mean('uncoordinated')}, cic {mean('cic')}")
    return (("smoke run (--quick): " if doc.quick else "") + what
            + f"; exactly-once after a failure: {'every run' if eo else 'NOT every run'}")


def page_block(part: str, parallelism: int) -> str:
    """The generated block of ``docs/checkmate.md`` a run refreshes (``-quick`` appended for a
    smoke run): one per part, and the uniform part at another parallelism than the default its own."""
    return "checkmate" + ("" if part == "uniform" else f"-{part}") + \
        ("-parallelism" if parallelism != PARALLELISM else "")


#: the instances of the default run (the machine's cores); ``checkmate-parallelism`` runs more
PARALLELISM = 2

#: the ``[SECTION]`` of ``bench checkmate``'s lines and the chart drawn by :mod:`experiments.report.plots`
SECTION = "[CHECKMATE]"
PLOT = "plot_checkmate"
