"""``bench advise``: which protocol on which backend, and how often to checkpoint, from a measured
matrix and the user's failure rate, event rate and recovery-time objective.

The model (docs/advise.md) is Young's first-order optimum (Young 1974) with Daly's accounting of
the restart cost (Daly 2006), for failures that arrive as a Poisson process (exponential times
between failures, mean ``MTBF``):

* ``C``: the cost of one checkpoint, the matrix row's median ``CheckpointTime`` (trigger ->
  durable) measured on this machine;
* ``R``: the restart cost, the row's median ``RecoveryTime`` when the matrix injected failures
  (``--fail-at``), else 0 and reported as not measured;
* ``X``: the row's median throughput (events/s); ``rate``: the user's event rate (by default the
  matrix job's paced rate, or ``X`` for an unpaced matrix: a job running flat out).

For a checkpoint interval ``T`` (seconds):

* expected overhead, as a fraction of the run time:
  ``C / T`` (checkpoints) + ``T / (2 MTBF)`` (half an interval of work lost per failure)
  + ``R / MTBF`` (one restart per failure), minimised at ``T_opt = sqrt(2 C MTBF)``; plus ``P``,
  the protocol's per-event cost in normal processing (logging, acknowledgements), which does not
  depend on ``T``: what remains of its measured slowdown against ``none`` in the same matrix once
  its checkpoints' time is taken out (:func:`per_event_cost`; 0, and said so, without ``none``);
* expected recovery time: ``R`` + the replay of half an interval's events at the measured
  throughput, ``(T / 2) * rate / X``;
* a recovery-time objective ``RTO`` caps the interval at ``T_rto = 2 (RTO - R) X / rate``; the
  overhead is convex in ``T``, so the best interval that meets the RTO is ``min(T_opt, T_rto)``
  (none when ``R >= RTO``).

With ``optimize="cost"`` the ranking is by money instead (:func:`cost_of`): a month (730 hours)
of checkpoints at the longest interval the user's recovery-point objective allows (``T = RPO``,
or ``T_rto`` when an RTO asks for less; fewer checkpoints cost fewer requests), each sending the
requests the row's run measured per checkpoint (its mean, by type, from the ``[COST]`` data),
priced from a price table (:mod:`experiments.core.prices`), plus a month of the bytes the store
held for the job.  A row whose checkpoint takes longer than ``T`` cannot meet the RPO; a row no
provider prices (Redis, HBase) has no list price and is ranked after the priced ones.

Candidates are the matrix rows that took checkpoints; ``none`` (no checkpoints: a failure loses
the state) never is.  A row that cannot keep up with the rate (``X < rate``) or cannot meet the
RTO is ranked after every row that can; within a group the lower overhead wins.  Everything here
is pure: the inputs are a matrix document and numbers, so the arithmetic is tested on its own.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from experiments.core.document import Document, Environment, optional
from experiments.core.format import text_table
from experiments.core.prices import PriceTable, load as load_prices, monthly

SCHEMA = "ckptbench.advise/1"
DEFAULT_JSON = "results/advise.json"
DEFAULT_PNG = "results/advise.png"

_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d|w)?", re.IGNORECASE)


class AdviseError(ValueError):
    """Bad input to the advice (a duration, a rate, a matrix without usable rows): one line."""


def parse_duration(text: str, what: str = "") -> float:
    """``"30m"``, ``"1h"``, ``"2d"``, ``"1h30m"``, ``"250ms"`` or plain seconds -> seconds (> 0);
    ``what`` names the option in the error."""
    s = str(text).strip().lower()
    parts = []
    pos = 0
    while pos < len(s):
        while s[pos].isspace():  # "1h 30m"
            pos += 1
        m = _PART.match(s, pos)
        if not m or (m.group(2) is None and (pos > 0 or m.end() != len(s))):  # "90" alone is seconds
            parts = []
            break
        parts.append(float(m.group(1)) * _UNITS[m.group(2) or "s"])
        pos = m.end()
    if not parts:
        raise AdviseError(f"{what + ' ' if what else ''}{text!r} is not a duration; give a number with a "
                          f"unit (ms, s, m, h, d, w), e.g. 30m, 1h, 2d or 1h30m")
    seconds = sum(parts)
    if not seconds > 0 or math.isinf(seconds):
        raise AdviseError(f"{what + ' ' if what else ''}{text!r} must be more than 0")
    return seconds


def parse_rate(text: str, what: str = "rate") -> float:
    """Events per second (> 0); ``k``/``M`` suffixes allowed (``50k`` = 50000)."""
    s = str(text).strip()
    scale = {"k": 1e3, "m": 1e6}.get(s[-1:].lower(), 1.0)
    try:
        value = float(s[:-1] if scale != 1.0 else s) * scale
    except ValueError:
        raise AdviseError(f"{what} {text!r} is not a number of events per second; give e.g. 20000 or 50k") from None
    if not value > 0 or math.isinf(value):
        raise AdviseError(f"{what} {text!r} must be more than 0 events per second")
    return value


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 1:
        return f"{seconds * 1e3:.0f}ms"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


# ------------------------------------------------------------------------------- the model
def young_interval(cost_s: float, mtbf_s: float) -> float:
    """Young's optimum checkpoint interval, ``sqrt(2 C MTBF)`` (never shorter than C itself)."""
    return max(math.sqrt(2.0 * cost_s * mtbf_s), cost_s)


def overhead(interval_s: float, cost_s: float, mtbf_s: float, restart_s: float = 0.0) -> float:
    """Expected overhead at interval ``T``: ``C/T + T/(2 MTBF) + R/MTBF`` (a fraction)."""
    return cost_s / interval_s + interval_s / (2.0 * mtbf_s) + restart_s / mtbf_s


def per_event_cost(ratio_none: float | None, checkpoints: float, cost_s: float, measured_events: float,
                   events: float, none_throughput: float | None, recovery_s: float = 0.0,
                   none_recovery_s: float = 0.0) -> float | None:
    """``P``: the fraction of processing time a protocol adds per event beyond its checkpoints.

    From the matrix: the row ran at ``ratio_none`` (median of per-round throughput ratios) of
    ``none``, i.e. ``1/ratio - 1`` more time per event.  Its checkpoints in the measured part of
    the run (``k_m = checkpoints * measured_events / events``, each ``cost_s``) account for
    ``k_m * C * X_none / measured_events`` of it; with injected failures its recovery time
    (``recovery_s``, all of the run's failures), less ``none``'s (``none_recovery_s``), is taken out
    the same way.  The rest, never below 0, is per-event work.  Checkpoints written in parallel or
    in the background are counted as if they blocked, so ``P`` is, if anything, too low for those
    protocols.  None when the matrix has no ``none`` row."""
    if not ratio_none or not none_throughput or not measured_events or not events:
        return None
    k_m = checkpoints * measured_events / events
    explained = k_m * cost_s + recovery_s - none_recovery_s
    return max(0.0, (1.0 / ratio_none - 1.0) - explained * none_throughput / measured_events)


def recovery_time(interval_s: float, restart_s: float, rate: float, throughput: float) -> float:
    """Expected recovery: the restart plus the replay of half an interval's events."""
    return restart_s + (interval_s / 2.0) * rate / throughput


def rto_interval(rto_s: float, restart_s: float, rate: float, throughput: float) -> float | None:
    """The longest interval whose expected recovery meets ``rto_s`` (None: not even T -> 0)."""
    if restart_s >= rto_s:
        return None
    return 2.0 * (rto_s - restart_s) * throughput / rate


def advised_interval(cost_s: float, mtbf_s: float, restart_s: float, rate: float, throughput: float,
                     rto_s: float | None) -> tuple[float, float | None, bool | None, float]:
    """``(T_opt, T, meets_rto, at)``: Young's optimum, the interval advised under the RTO
    (``min(T_opt, T_rto)``; None when no interval meets it), whether it does (None: no RTO),
    and the interval the overhead and recovery are reported at (``T``, else ``T_opt``)."""
    t_opt = young_interval(cost_s, mtbf_s)
    t, meets = t_opt, None
    if rto_s is not None:
        cap = rto_interval(rto_s, restart_s, rate, throughput)
        meets = cap is not None and cap >= cost_s
        t = min(t_opt, cap) if meets else None
    return t_opt, t, meets, t if t is not None else t_opt


@dataclass
class Dollars:
    """What a row costs a month at interval ``interval_s`` on ``provider``'s list prices."""

    provider: str | None  # None: no provider in the table prices the row's backend
    interval_s: float
    meets_rpo: bool  # its checkpoint fits in the interval
    requests_per_checkpoint: float  # the run's mean, all types
    stored_bytes: float
    requests: float | None = None  # $ a month
    storage: float | None = None
    total: float | None = None
    prices_date: str = ""

    @property
    def key(self) -> float:
        return self.total if self.total is not None else math.inf


@dataclass
class Advice:
    """One protocol x backend under the user's numbers."""

    protocol: str
    backend: str
    cost_ms: float  # C
    restart_ms: float  # R (0 when not measured)
    recovery_measured: bool
    throughput: float  # X
    rate: float
    optimal_interval_s: float  # Young's T_opt
    interval_s: float | None  # the interval advised: min(T_opt, T_rto); None when the RTO cannot be met
    overhead: float  # at interval_s (at T_opt when the RTO cannot be met), per-event cost included
    per_event: float  # P (0 when not measured)
    per_event_measured: bool
    expected_recovery_s: float
    sustains_rate: bool
    meets_rto: bool | None  # None: no RTO given
    events_per_interval: float
    rank: int = 0
    #: with ``optimize="cost"``: the month's dollars at the RPO's interval (:class:`Dollars`)
    dollars: Dollars | None = optional()
    #: ``protocol/backend`` (the protocol alone without a backend), and whether it keeps up
    #: with the rate and meets the RTO: derived, written for the reader of the document
    name: str = field(init=False)
    feasible: bool = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.protocol if self.backend in ("-", None) else f"{self.protocol}/{self.backend}"
        self.feasible = self.sustains_rate and self.meets_rto is not False


@dataclass
class MatrixRef:
    """The matrix the advice was computed from: its job and method."""

    job: dict[str, Any] | None
    rounds: int | None
    interval: int | None
    fail_at: list[int] | None


@dataclass
class Recommended:
    """The first of the ranking: what to run, at which interval, at what expected cost."""

    name: str
    feasible: bool
    interval_s: float | None
    overhead: float
    expected_recovery_s: float
    dollars_month: float | None = optional()


@dataclass(kw_only=True)
class Advise(Document):
    """``ckptbench.advise/1``: the user's numbers, every candidate ranked, the recommendation."""

    SCHEMA = SCHEMA

    source: str
    mtbf_s: float
    rto_s: float | None
    rate: float | None
    rate_note: str
    matrix: MatrixRef
    recommended: Recommended
    ranking: list[Advice] = field(default_factory=list)
    #: ``cost``: ranked by dollars a month at ``rpo_s`` (absent: by expected overhead)
    optimize: str | None = optional()
    rpo_s: float | None = optional()
    #: with ``optimize="cost"``: the price table and the provider the ranking used
    prices: dict[str, Any] | None = optional()
    environment: Environment = field(default_factory=Environment.here)


def _recovery_total_s(row: dict[str, Any] | None) -> float:
    """All the recovery time inside a row's run: failures x mean recovery time (s)."""
    if not row:
        return 0.0
    return float(row.get("failures") or 0) * float(row.get("recovery_ms") or 0) / 1e3


def advise_row(row: dict[str, Any], mtbf_s: float, rate: float | None, rto_s: float | None,
               none: dict[str, Any] | None = None) -> Advice:
    """The advice for one matrix row (it must have taken checkpoints and have a throughput);
    ``none``: the matrix's ``none`` row, for the per-event cost."""
    cost_s = row["checkpoint_ms"] / 1e3
    work = row.get("work") or {}
    p = per_event_cost(row.get("ratio_none"), work.get("checkpoints", 0), cost_s, work.get("measured_events", 0),
                       work.get("events", 0), none["throughput"] if none else None, _recovery_total_s(row),
                       _recovery_total_s(none))
    measured = bool(row.get("failures")) and bool(row.get("recovery_ms"))
    restart_s = row["recovery_ms"] / 1e3 if measured else 0.0
    x = float(row["throughput"])
    lam = rate if rate else x
    t_opt, t, meets, at = advised_interval(cost_s, mtbf_s, restart_s, lam, x, rto_s)
    return Advice(row["protocol"], row["backend"], row["checkpoint_ms"], restart_s * 1e3, measured, x, lam,
                  t_opt, t, overhead(at, cost_s, mtbf_s, restart_s) + (p or 0.0), p or 0.0, p is not None,
                  recovery_time(at, restart_s, lam, x), x >= lam, meets, at * lam)


# ----------------------------------------------------------------------------- the money
OPTIMIZE = ("time", "cost")


def cost_of(row: dict[str, Any], entry: Advice, table: PriceTable, provider: str | None,
            rpo_s: float) -> Dollars:
    """A row's dollars a month at the RPO's interval (module doc): on ``provider``'s prices, or
    the cheapest provider that prices the row's backend when None."""
    cost = row.get("cost") or {}
    requests = {k: float(v) for k, v in (cost.get("requests") or {}).items()}
    stored = float(cost.get("stored_bytes") or 0)
    interval = min(rpo_s, entry.interval_s) if entry.meets_rto and entry.interval_s else rpo_s
    meets = entry.cost_ms / 1e3 <= interval
    best = Dollars(None, interval, meets, sum(requests.values()), stored)
    for p in table.for_backend(str(cost.get("backend") or "")):
        if provider is not None and p.name != provider:
            continue
        month = monthly(p, requests, interval, stored, table.gb_bytes)
        if best.total is None or month["total"] < best.total:
            best = Dollars(p.name, interval, meets, sum(requests.values()), stored, month["requests"],
                           month["storage"], month["total"], p.date)
    return best


def cost_rank_key(a: Advice) -> tuple[bool, bool, float, float]:
    """Keeps up with the rate, meets the RPO (and the RTO) first, then priced before unpriced,
    then by dollars a month, then by expected overhead."""
    d = a.dollars
    return not (a.feasible and d is not None and d.meets_rpo), d is None or d.total is None, \
        d.key if d else math.inf, a.overhead


def rank_by_cost(advice: list[Advice]) -> list[Advice]:
    ordered = sorted(advice, key=cost_rank_key)
    for i, a in enumerate(ordered, 1):
        a.rank = i
    return ordered


# ------------------------------------------------------------------------------ the input
#: the numeric fields the model reads: of a row, of its ``work`` and ``metrics``, of the ``job``;
#: each is absent, null (not measured: a skipped row) or a finite number >= 0
ROW_NUMBERS = ("throughput", "checkpoint_ms", "recovery_ms", "failures", "ratio_none")
PART_NUMBERS = {"work": ("checkpoints", "measured_events", "events"), "metrics": ("Checkpoints",),
                "job": ("rate",)}


def _measure(value: Any) -> bool:
    """Whether ``value`` can stand for a measurement: null or a finite number >= 0 (a bool is
    not: ``true`` in a count field is a broken document, not 1)."""
    if value is None:
        return True
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def check_matrix(doc: Any, source: str = "") -> None:
    """``doc`` has the shape of ``bench spark-matrix``'s JSON as far as the model reads it, or
    :class:`AdviseError` names the first row and field that is wrong.  A document edited by hand
    or cut short would otherwise fail deep in the arithmetic (a string where a time belongs, a
    negative time under a square root) without saying which row is at fault.  A skipped row
    (it did not run) is only checked for its names: nothing else of it is read."""
    where = f"{source}: " if source else ""
    fix = "give bench spark-matrix's JSON or correct it"
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise AdviseError(f"{where}not a spark-matrix document (no list of rows); {fix}")
    parts = [("the job", doc.get("job"), PART_NUMBERS["job"])]
    for i, row in enumerate(doc["rows"], 1):
        if not isinstance(row, dict):
            raise AdviseError(f"{where}row {i} is {type(row).__name__} {_short(row)}, not an object; {fix}")
        name = f"row {i}"
        if not isinstance(row.get("protocol"), str) or not isinstance(row.get("backend"), (str, type(None))):
            raise AdviseError(f"{where}{name} has no protocol and backend names (protocol="
                              f"{_short(row.get('protocol'))}, backend={_short(row.get('backend'))}); {fix}")
        if row.get("skipped"):
            continue  # a row that did not run: the model reads nothing else of it
        name = f"row {i} ({row['protocol']}/{row.get('backend')})"
        parts.append((name, row, ROW_NUMBERS))
        parts += [(f"{name} {part}", row.get(part), PART_NUMBERS[part]) for part in ("work", "metrics")]
    for name, part, fields in parts:
        if part is None:
            continue
        if not isinstance(part, dict):
            raise AdviseError(f"{where}{name} is {_short(part)}, not an object; {fix}")
        for field in fields:
            if not _measure(part.get(field)):
                raise AdviseError(f"{where}{name}: {field}={_short(part.get(field))} is not a number "
                                  f">= 0; {fix}")


def _short(value: Any) -> str:
    """``value`` as JSON-ish text short enough for a one-line message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


#: what makes two ``bench spark`` runs the same workload (their throughputs comparable)
WORKLOAD_KEYS = ("kind", "keys", "skew", "events", "max_batch")


def matrix_of_runs(doc: dict[str, Any]) -> dict[str, Any] | None:
    """A ``bench reproduce`` document whose commands are ``bench spark`` runs (``bench
    reproduce state``: every store and layout at gigabytes of state) as a matrix the model
    reads: one row per run, named ``protocol/backend (layout)`` (``backend on nfs`` for a file
    store on a remote medium), ``none``'s row the denominator, of the first run's workload only
    (the state experiment's 1 %-dirty rounds are another); None when ``doc`` is not such a
    document.  A run is one round: its throughput is the
    steady one (the micro-batches at the normal level, its recovery apart), its checkpoint cost
    the run's mean, its restart cost its measured recovery."""
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("ckptbench.reproduce/"):
        return None
    runs = [r.get("document") for r in doc.get("runs") or [] if isinstance(r, dict)]
    jobs = [d for d in runs if isinstance(d, dict) and str(d.get("schema", "")).startswith("ckptbench.spark/")]
    if not jobs:
        return None
    # one workload: the first run's (an experiment's other workloads have their own none)
    workload = {k: (jobs[0].get("job") or {}).get(k) for k in WORKLOAD_KEYS}
    jobs = [j for j in jobs if {k: (j.get("job") or {}).get(k) for k in WORKLOAD_KEYS} == workload]
    rows = []
    for job in jobs:
        settings, m = job.get("settings") or {}, job.get("metrics") or {}
        backend = settings.get("backend") or "-"
        path = str((settings.get("backend_options") or {}).get("path", ""))
        if "://" in path:  # a file store on a remote medium: a choice of its own
            backend = f"{backend} on {path.split('://')[0]}"
        if backend != "-" and settings.get("layout"):
            backend = f"{backend} ({settings['layout']})"
        rows.append({"protocol": settings.get("protocol"), "backend": backend,
                     "throughput": m.get("SteadyThroughput(events/sec)") or m.get("Throughput(events/sec)"),
                     "checkpoint_ms": m.get("CheckpointTime(ms)"), "recovery_ms": m.get("RecoveryTime(ms)"),
                     "failures": m.get("Failures"), "metrics": {"Checkpoints": m.get("Checkpoints", 0)},
                     "work": {"checkpoints": m.get("Checkpoints", 0), "measured_events": m.get("Events", 0),
                              "events": (job.get("job") or {}).get("events", 0)},
                     "cost": cost_inputs(job.get("cost"), settings.get("backend"))})
    none = next((r for r in rows if r["protocol"] == "none" and r["throughput"]), None)
    for row in rows:
        row["ratio_none"] = row["throughput"] / none["throughput"] if none and row["throughput"] else None
    first = jobs[0].get("job") or {}
    return {"job": {k: first.get(k) for k in ("kind", "events", "keys", "rate") if k in first},
            "rounds": 1, "rows": rows, "source_experiment": doc.get("name")}


def cost_inputs(report: dict[str, Any] | None, backend: str | None) -> dict[str, Any] | None:
    """What the money ranking reads of a run's ``[COST]`` data (:func:`experiments.spark.cost.cost_report`):
    the store's backend, a checkpoint's mean requests by type, the bytes the store held."""
    if not isinstance(report, dict) or not (report.get("checkpoints") or {}).get("count"):
        return None
    return {"backend": backend, "requests": report["checkpoints"]["mean"].get("requests", {}),
            "stored_bytes": report.get("stored_bytes") or 0}


def candidates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The matrix rows that took checkpoints and have a checkpoint cost and a throughput."""
    out = []
    for r in doc.get("rows", []):
        work = r.get("work") or {}
        ckpts = work.get("checkpoints", (r.get("metrics") or {}).get("Checkpoints", 0))
        if r.get("skipped") or not r.get("throughput") or not r.get("checkpoint_ms") or not ckpts:
            continue
        out.append(r)
    return out


def rank_key(a: Any) -> tuple[bool, float, float]:
    """Feasible first (keeps up with the rate, meets the RTO), then by expected overhead, then
    by expected recovery (of an :class:`Advice`, or a row of the state model)."""
    return not a.feasible, a.overhead, a.expected_recovery_s


def rank(advice: list[Advice]) -> list[Advice]:
    """Ordered by :func:`rank_key`, numbered from 1."""
    ordered = sorted(advice, key=rank_key)
    for i, a in enumerate(ordered, 1):
        a.rank = i
    return ordered


def default_rate(doc: dict[str, Any]) -> float | None:
    """The matrix job's paced rate, or None (unpaced: each row's own throughput)."""
    rate = float((doc.get("job") or {}).get("rate") or 0)
    return rate if rate > 0 else None


def advise(doc: dict[str, Any], mtbf_s: float, rate: float | None = None, rto_s: float | None = None,
           source: str = "", optimize: str = "time", rpo_s: float | None = None,
           table: PriceTable | None = None, provider: str | None = None) -> Advise:
    """The advice document: the inputs, every candidate ranked (by expected overhead, or with
    ``optimize="cost"`` by dollars a month at ``rpo_s`` on ``table``'s prices), the
    recommendation; a malformed ``doc`` is an :class:`AdviseError` (:func:`check_matrix`)."""
    if optimize not in OPTIMIZE:
        raise AdviseError(f"--optimize {optimize!r}: give one of {', '.join(OPTIMIZE)}")
    if optimize == "cost" and rpo_s is None:
        raise AdviseError("--optimize cost ranks by dollars a month at your recovery-point objective: "
                          "give --rpo DURATION, e.g. --rpo 1m")
    check_matrix(doc, source)
    rows = candidates(doc)
    if not rows:
        where = f" in {source}" if source else ""
        raise AdviseError(f"the matrix{where} has no row that took checkpoints; run bench spark-matrix "
                          f"with a checkpointing protocol (e.g. --protocols none,coordinated)")
    lam = rate if rate else default_rate(doc)
    none = next((r for r in doc.get("rows", []) if r.get("protocol") == "none" and r.get("throughput")), None)
    entries = [advise_row(r, mtbf_s, lam, rto_s, none) for r in rows]
    prices = None
    if optimize == "cost":
        table = table or load_prices()
        if provider is not None and provider not in {p.name for p in table.providers}:
            raise AdviseError(f"--provider {provider!r} is not in {table.path}; give one of "
                              f"{', '.join(p.name for p in table.providers)}")
        if not any(r.get("cost") for r in rows):
            raise AdviseError(f"--optimize cost needs the requests each run sent ([COST] data), which "
                              f"{source or 'the matrix'} does not have; run it again with this version")
        for r, e in zip(rows, entries):
            e.dollars = cost_of(r, e, table, provider, rpo_s)
        prices = {"table": table.path, "provider": provider or "the cheapest that prices each backend",
                  "dates": {p.name: p.date for p in table.providers}}
        ranked = rank_by_cost(entries)
    else:
        ranked = rank(entries)
    best = ranked[0]
    return Advise(source=source, mtbf_s=mtbf_s, rto_s=rto_s, rate=lam,
                  optimize=optimize if optimize == "cost" else None, rpo_s=rpo_s, prices=prices,
                  rate_note="given" if rate else ("the matrix job's rate" if lam else
                                                  "flat out: each row's measured throughput"),
                  matrix=MatrixRef(doc.get("job"), doc.get("rounds"), doc.get("interval"),
                                   doc.get("fail_at")),
                  recommended=Recommended(best.name, best.feasible, best.interval_s, best.overhead,
                                          best.expected_recovery_s,
                                          best.dollars.total if best.dollars else None),
                  ranking=ranked)


def curve(entry: Advice, mtbf_s: float, points: int = 60) -> tuple[list[float], list[float]]:
    """Overhead against interval around the advised one (log-spaced), for the plot."""
    cost_s, restart_s = entry.cost_ms / 1e3, entry.restart_ms / 1e3
    centre = entry.optimal_interval_s
    lo, hi = math.log10(max(centre / 30, cost_s * 1.01)), math.log10(centre * 30)
    xs = [10 ** (lo + (hi - lo) * i / (points - 1)) for i in range(points)]
    return xs, [overhead(x, cost_s, mtbf_s, restart_s) + entry.per_event for x in xs]


# ----------------------------------------------------------------------------------- output
def format_table(doc: Advise) -> str:
    head = ("rank", "protocol/backend", "C ms", "R ms", "events/s", "per-event %", "T_opt", "interval",
            "overhead %", "recovery", "keeps up", "meets RTO")
    lines = []
    for a in doc.ranking:
        lines.append([str(a.rank), a.name, f"{a.cost_ms:.1f}",
                      f"{a.restart_ms:.0f}" if a.recovery_measured else "–",
                      f"{a.throughput:,.0f}", f"{a.per_event * 100:.2f}" if a.per_event_measured else "–",
                      format_duration(a.optimal_interval_s),
                      format_duration(a.interval_s), f"{a.overhead * 100:.3f}",
                      format_duration(a.expected_recovery_s), "yes" if a.sustains_rate else "no",
                      "–" if a.meets_rto is None else ("yes" if a.meets_rto else "no")])
    return "\n".join(text_table(list(head), lines))


def format_cost_table(doc: Advise) -> str:
    """The ranking by money: each row's provider, requests per checkpoint, bytes held, the
    interval (the RPO's), and its month's dollars for requests, storage and in all."""
    head = ("rank", "protocol/backend", "provider", "requests/ckpt", "stored MiB", "C ms", "interval",
            "$ requests/month", "$ storage/month", "$/month", "keeps up", "meets RPO")
    lines = []
    for a in doc.ranking:
        d = a.dollars
        money = (lambda v: "–" if v is None else f"{v:,.4f}")  # noqa: E731
        lines.append([str(a.rank), a.name, d.provider or "no list price", f"{d.requests_per_checkpoint:,.1f}",
                      f"{d.stored_bytes / 2**20:,.1f}", f"{a.cost_ms:.1f}", format_duration(d.interval_s),
                      money(d.requests), money(d.storage), money(d.total), "yes" if a.sustains_rate else "no",
                      "yes" if d.meets_rpo else "no"])
    return "\n".join(text_table(list(head), lines))


def advise_lines(doc: Advise) -> list[str]:
    """The ``[ADVISE]`` lines: the inputs and the recommendation."""
    rec = doc.recommended
    best = doc.ranking[0]
    interval = rec.interval_s
    out = [f"[ADVISE], MTBF(s), {doc.mtbf_s:g}",
           f"[ADVISE], Rate(events/s), {doc.rate:g}" if doc.rate else
           "[ADVISE], Rate(events/s), flat out (each row's measured throughput)"]
    if doc.rto_s is not None:
        out.append(f"[ADVISE], RTO(s), {doc.rto_s:g}")
    out += [f"[ADVISE], Recommended, {rec.name}",
            f"[ADVISE], Interval(s), {interval:.3f}" if interval is not None else
            "[ADVISE], Interval(s), none meets the RTO",
            f"[ADVISE], EventsPerInterval, {best.events_per_interval:.0f}",
            f"[ADVISE], Overhead(%), {rec.overhead * 100:.4f}",
            f"[ADVISE], ExpectedRecovery(s), {rec.expected_recovery_s:.3f}",
            f"[ADVISE], RecoveryMeasured, {str(best.recovery_measured).lower()}",
            f"[ADVISE], PerEventCostMeasured, {str(best.per_event_measured).lower()}"]
    if doc.optimize == "cost":
        d = best.dollars
        out[out.index(f"[ADVISE], Recommended, {rec.name}"):] = [
            "[ADVISE], Optimize, cost",
            f"[ADVISE], RPO(s), {doc.rpo_s:g}",
            f"[ADVISE], Recommended, {rec.name}",
            f"[ADVISE], Interval(s), {d.interval_s:.3f}",
            f"[ADVISE], Provider, {d.provider or 'none prices this backend'}",
            f"[ADVISE], Dollars/month, {d.total:.4f}" if d.total is not None else
            "[ADVISE], Dollars/month, n/a (no list price)",
            f"[ADVISE], Prices, {doc.prices['table']}"]
        if not (best.feasible and d.meets_rpo):
            out.append("[ADVISE], Warning, no combination keeps up with the rate and meets the RPO "
                       "(and RTO); the least bad one is shown")
        return out
    if not rec.feasible:
        out.append("[ADVISE], Warning, no combination keeps up with the rate and meets the RTO; "
                   "the least bad one is shown")
    return out
