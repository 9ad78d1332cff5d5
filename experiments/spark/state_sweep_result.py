"""``bench state-sweep``'s result as a document, ``ckptbench.state-sweep/1``, and its tables.

One :class:`Point` per ``bench spark`` run of the sweep (:mod:`experiments.spark.state_sweep`):
which store and layout, how many keys and how many of them hot, the live state it held, the
command that ran it and the ``[SPARK]`` lines it printed (or the one line it failed with).  The
:class:`Conditions` say how every run was spelled (the job, the per-key state, the micro-batch
and checkpoint interval as a function of the keys, where the failure was injected, the sizes,
the dirty fractions, the sizes left out for a store and why, the machine's memory), so a reader
can tell what a curve is of.  The fitted slopes (:class:`Slope`) are computed from the points
by :func:`fit_slopes` (:mod:`experiments.core.loglog`) and stored beside them, so a table or a
later ``bench advise`` reads them without fitting again.

A point that failed keeps its error and has no figures: it is left out of every fit and shown
as failed in the tables, never as a zero.  Sweeps of the same sizes run apart (``bench
reproduce state-sweep`` runs Spark's own state store as a step of its own) are read as one by
:func:`merged`, which refuses sweeps whose sizes or schedule differ: their curves would not be
comparable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from backends.base import binary_units

from experiments.core.document import Document, Environment, optional
from experiments.core.format import Runs, md_table, num, text_table
from experiments.core.loglog import BEND_TOLERANCE, Bend, bends, fit

SCHEMA = "ckptbench.state-sweep/1"
#: the two sweeps: state size at the full dirty fraction, and dirty fraction at one size
SIZE, DIRTY = "size", "dirty"
#: the metrics fitted against state size: ``[SPARK]`` line -> how the tables name it
METRICS: tuple[tuple[str, str], ...] = (
    ("CheckpointP50(ms)", "checkpoint p50"), ("CheckpointP99(ms)", "checkpoint p99"),
    ("RecoveryTime(ms)", "recovery"), ("SpaceAmplification", "space amp."),
    ("CheckpointBytes", "bytes written"), ("SteadyThroughput(events/sec)", "steady events/s"))
#: a figure of a point computed from its lines (:meth:`Point.steady_bytes`), not printed by the run
STEADY_BYTES = "SteadyCheckpointBytes"
#: the metrics fitted against the dirty fraction
DIRTY_METRICS: tuple[tuple[str, str], ...] = (
    ("CheckpointP50(ms)", "checkpoint p50"), (STEADY_BYTES, "bytes a steady checkpoint"),
    ("SteadyThroughput(events/sec)", "steady events/s"))


def binary_size(n: float) -> str:
    """``n`` bytes in the largest binary unit it fills, ``16 MiB``, ``4 GiB``, ``1.5 GiB``."""
    size, unit = binary_units(n)
    return f"{size:.3g} {unit}" if size < 1000 else f"{size:.0f} {unit}"  # 1020 MiB, not 1.02e+03


def percent(fraction: float) -> str:
    """A dirty fraction as the tables print it: ``0.1 %``, ``10 %``, ``100 %``."""
    return f"{fraction * 100:.3g} %"


@dataclass
class Point:
    """One run of the sweep: its place in it, the command and what it measured."""

    sweep: str  # SIZE or DIRTY
    store: str
    layout: str
    keys: int
    #: the keys an event goes to after the load: ``hot_keys / keys`` of the state is the most an
    #: interval can dirty
    hot_keys: int
    #: the live state the run held (its ``StateBytes``), or the nominal size when it failed
    state_bytes: int
    command: str
    seconds: float = 0.0
    error: str | None = optional()
    #: the run's ``[SPARK]`` lines, as it printed them (``ExactlyOnce`` among them)
    metrics: dict[str, Any] = field(default_factory=dict)
    #: where the run's own ``ckptbench.spark`` document and its output were written
    document: str = ""
    log: str = ""
    #: when and at which commit the point ran, if ``--resume`` took it over from an earlier sitting
    resumed: str | None = optional()
    #: the machine's 1-minute load average when the run ended (its own threads counted): how busy the machine was
    loadavg: float | None = optional()

    @property
    def line(self) -> str:
        return f"{self.store}/{self.layout}"

    @property
    def dirty(self) -> float:
        return self.hot_keys / self.keys

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.metrics)

    def value(self, metric: str) -> float | None:
        """A ``[SPARK]`` line as a number (or :data:`STEADY_BYTES`); ``None`` for a failed run
        or a line it did not print."""
        if metric == STEADY_BYTES:
            return self.steady_bytes()
        v = self.metrics.get(metric) if self.ok else None
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def steady_bytes(self) -> float | None:
        """Bytes a checkpoint after the load wrote, on average: all written but the largest (the
        load's full one), over the other checkpoints."""
        ckpts, written, largest = (self.value(k) for k in ("Checkpoints", "CheckpointBytes",
                                                            "LargestCheckpointBytes"))
        if not ckpts or ckpts < 2 or written is None or largest is None:
            return None
        return (written - largest) / (ckpts - 1)


@dataclass
class Slope:
    """A metric's fitted growth along one sweep of one store x layout (log-log least squares)."""

    store: str
    layout: str
    against: str  # SIZE (x: live state bytes) or DIRTY (x: hot keys / keys)
    metric: str
    slope: float
    r2: float
    points: int
    x_min: float
    x_max: float
    bends: list[Bend] = field(default_factory=list)


@dataclass
class Conditions:
    """How every run of the sweep was spelled, and what the machine had."""

    job: str
    protocol: str
    #: bytes of state every key holds beside its count (``--state-bytes``)
    state_bytes_per_key: int
    #: the live state sizes swept (nominal, keys x per-key bytes) and the dirty fractions
    sizes: list[int]
    dirty: list[float]
    dirty_size: int
    #: how a run's events, micro-batches, interval and failure follow from its keys K
    schedule: str
    #: sizes left out for a store, and why (a store that holds everything in memory)
    caps: list[str] = field(default_factory=list)
    bend_tolerance: float = BEND_TOLERANCE
    memory_bytes: int | None = None


@dataclass(kw_only=True)
class StateSweep(Document):
    """``ckptbench.state-sweep/1``: every run of the sweep, the fitted slopes, the conditions."""

    SCHEMA = SCHEMA

    quick: bool
    conditions: Conditions
    #: every default of the full sweep ran (neither --quick nor an option narrowing it)
    full: bool = False
    #: store/layout, in the order they ran
    lines: list[str] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    slopes: list[Slope] = field(default_factory=list)
    seconds: float = 0.0
    environment: Environment = field(default_factory=Environment.here)

    def of(self, sweep: str, line: str) -> list[Point]:
        """The points of ``sweep`` on ``line`` (``store/layout``), by x (state, or dirty); the
        dirty sweep's include the size sweep's point at its size (every key hot), which is
        its 100 % and is not run twice."""
        per_key = self.conditions.state_bytes_per_key
        pts = [p for p in self.points if p.line == line and (
            p.sweep == sweep or (sweep == DIRTY and self.conditions.dirty and p.hot_keys == p.keys
                                 and p.keys * per_key == self.conditions.dirty_size))]
        return sorted(pts, key=lambda p: p.state_bytes if sweep == SIZE else p.dirty)

    def slope(self, line: str, against: str, metric: str) -> Slope | None:
        return next((s for s in self.slopes if f"{s.store}/{s.layout}" == line
                     and s.against == against and s.metric == metric), None)


def merged(docs: list[StateSweep]) -> StateSweep:
    """``docs`` as one sweep: their lines and points in order, the slopes fitted again, the
    protocols and caps of each; full only when each was.  ``ValueError`` when they were not
    spelled alike (another size, fraction, schedule or per-key state)."""
    first, *others = docs
    if not others:
        return first

    def spelled(c: Conditions) -> Conditions:
        return replace(c, protocol="", caps=[], memory_bytes=None)

    for doc in others:
        if spelled(doc.conditions) != spelled(first.conditions) or doc.quick != first.quick:
            raise ValueError("the sweeps were not run alike (sizes, dirty fractions, schedule or "
                             "--quick differ): their curves cannot be read together")
    out = replace(first, full=all(d.full for d in docs), seconds=sum(d.seconds for d in docs),
                  lines=[line for d in docs for line in d.lines],
                  points=[p for d in docs for p in d.points],
                  conditions=replace(first.conditions,
                                     protocol="; ".join(dict.fromkeys(d.conditions.protocol for d in docs)),
                                     caps=[cap for d in docs for cap in d.conditions.caps]))
    out.slopes = fit_slopes(out)
    return out


def of_runs(runs: Runs) -> StateSweep:
    """The documents of ``bench reproduce state-sweep``'s steps as one sweep."""
    return merged([StateSweep.from_json(d) for d in runs.values()])


# ------------------------------------------------------------------------------------- fitting
def fit_slopes(doc: StateSweep) -> list[Slope]:
    """Every metric's slope along each sweep of each line (where two or more of its points
    succeeded), with the segments that bend away from it by more than the tolerance."""
    out = []
    for line in doc.lines:
        store, _, layout = line.partition("/")
        for against, metrics in ((SIZE, METRICS), (DIRTY, DIRTY_METRICS)):
            pts = [p for p in doc.of(against, line) if p.ok]
            xs = [float(p.state_bytes) if against == SIZE else p.dirty for p in pts]
            for metric, _ in metrics:
                ys = [p.value(metric) for p in pts]
                line_fit = fit(xs, ys)
                if line_fit is None:
                    continue
                out.append(Slope(store, layout, against, metric, round(line_fit.slope, 3),
                                 round(line_fit.r2, 3), line_fit.points, line_fit.x_min, line_fit.x_max,
                                 bends(xs, ys, doc.conditions.bend_tolerance, line_fit)))
    return out


# -------------------------------------------------------------------------------------- tables
def _yes(p: Point) -> str:
    return {True: "yes", False: "NO"}.get(p.metrics.get("ExactlyOnce"), "-")


def _mb(value: float | None) -> str:
    return num(value / 1e6) if value is not None else "-"


def point_rows(doc: StateSweep, sweep: str) -> tuple[list[str], list[list[str]]]:
    """The points of one sweep as table cells, line by line."""
    x_head = "state" if sweep == SIZE else "hot keys"
    head = ["store", "layout", x_head, "state (MB)", "checkpoint p50 / p99 (ms)", "recovery (ms)",
            "space amp.", "written (MB)", "MB a steady checkpoint", "steady events/s", "exactly-once",
            "load avg"]
    rows = []
    for line in doc.lines:
        for p in doc.of(sweep, line):
            x = binary_size(p.keys * doc.conditions.state_bytes_per_key) if sweep == SIZE else percent(p.dirty)
            if not p.ok:
                rows.append([p.store, p.layout, x, f"failed: {p.error}"] + [""] * (len(head) - 4))
                continue
            rows.append([p.store, p.layout, x, num(p.state_bytes / 1e6),
                         f"{num(p.value('CheckpointP50(ms)'))} / {num(p.value('CheckpointP99(ms)'))}",
                         num(p.value("RecoveryTime(ms)")), num(p.value("SpaceAmplification")),
                         _mb(p.value("CheckpointBytes")), _mb(p.steady_bytes()),
                         num(p.value("SteadyThroughput(events/sec)")), _yes(p),
                         f"{p.loadavg:.1f}" if p.loadavg is not None else "-"])
    return head, rows


def _slope_cell(s: Slope | None) -> str:
    return "-" if s is None else f"{s.slope:.2f}"


def slope_rows(doc: StateSweep, against: str = SIZE) -> tuple[list[str], list[list[str]]]:
    """One row per line: each metric's fitted slope (``-``: fewer than two points to fit)."""
    metrics = METRICS if against == SIZE else DIRTY_METRICS
    head = ["store", "layout", "points"] + [name for _, name in metrics]
    rows = []
    for line in doc.lines:
        fitted = [doc.slope(line, against, m) for m, _ in metrics]
        if not any(fitted):
            continue
        store, _, layout = line.partition("/")
        rows.append([store, layout, str(max(s.points for s in fitted if s))]
                    + [_slope_cell(s) for s in fitted])
    return head, rows


def bend_lines(doc: StateSweep, against: str = SIZE) -> list[str]:
    """Where a curve bends, one sentence per segment that leaves its line's fit; a steeper one
    also says what the store held there beside the machine's memory."""
    names = dict(METRICS if against == SIZE else DIRTY_METRICS)
    out = []
    for s in doc.slopes:
        if s.against != against:
            continue
        line = f"{s.store}/{s.layout}"
        at = {(p.state_bytes if against == SIZE else p.dirty): p for p in doc.of(against, line) if p.ok}
        show = (lambda x: binary_size(at[x].keys * doc.conditions.state_bytes_per_key) if x in at  # noqa: E731
                else binary_size(x)) if against == SIZE else percent
        for b in s.bends:
            how = ("steeper: the cost grows faster here than the fit (what a page cache or a "
                   "server's memory running out looks like)" if b.steeper else
                   "flatter: a cost that does not grow with the state dominates here")
            held = at[b.x_to].value("StoreBytes") if b.steeper and b.x_to in at else None
            if held and doc.conditions.memory_bytes:
                how += (f"; the store held {binary_size(held)} at {show(b.x_to)}, of the machine's "
                        f"{binary_size(doc.conditions.memory_bytes)} of memory")
            out.append(f"{line} {names.get(s.metric, s.metric)}: from {show(b.x_from)} to {show(b.x_to)} "
                       f"slope {b.slope:.2f} against the fit's {b.fitted:.2f}: {how}")
    return out


AT_COMMIT = " at commit "


def sitting(time: str | None, commit: str | None) -> str:
    """How a point taken over says when it ran (:attr:`Point.resumed`), as :func:`sittings` reads it."""
    return (time or "an earlier run") + (f"{AT_COMMIT}{commit[:10]}" if commit else "")


def sittings(points: list[Point]) -> str:
    """When the points taken over ran, per commit: ``2026-11-27T09:53 to 10:36 at commit
    0e35e6cea6`` (each point's own time says ``<time> at commit <commit>``)."""
    by_commit: dict[str, list[str]] = {}
    for p in points:
        if p.resumed:
            when, _, commit = p.resumed.partition(AT_COMMIT)
            by_commit.setdefault(commit, []).append(when[:16])
    out = []
    for commit, times in by_commit.items():
        first, last = min(times), max(times)
        span = first if first == last else f"{first} to {last[11:] if last[:10] == first[:10] else last}"
        out.append(span + (f"{AT_COMMIT}{commit}" if commit else ""))
    return "; ".join(out)


def _about(doc: StateSweep) -> list[str]:
    c = doc.conditions
    size = ("`--quick`: a small subset at small sizes, not the full sweep" if doc.quick else
            "the full sweep" if doc.full else "a sweep its options narrowed, not the full sweep")
    memory = f"; the machine has {binary_size(c.memory_bytes)} of memory" if c.memory_bytes else ""
    resumed = sum(1 for p in doc.points if p.resumed)
    loads = [p.loadavg for p in doc.points if p.loadavg is not None]
    cpus = doc.environment.cpu_count or "the"
    return [f"{size}: {c.job} under {c.protocol}, {c.state_bytes_per_key} bytes of state a key; "
            f"{c.schedule}{memory}.",
            *([f"The 1-minute load average when a run ended ranged from {min(loads):.1f} to "
               f"{max(loads):.1f} on {cpus} CPUs (column `load avg`); it counts the run's own "
               f"threads (a Spark job alone keeps it above the CPU count), so a point far above "
               f"its neighbours ran beside other work, and its times, and its line's slope, are "
               f"longer than a quiet machine's."]
              if loads else []),
            *([f"{resumed} of {len(doc.points)} points were taken over (`--resume`) from an earlier "
               f"sitting of the same commands ({sittings(doc.points)}); the others ran in this one."]
              if resumed else []),
            *(f"Left out: {cap}." for cap in c.caps),
            f"Slopes are least squares on log10 of both axes (1: cost grows as the state does, "
            f"0: it does not grow); a segment whose own slope differs from its line's by more "
            f"than {c.bend_tolerance} is called a bend."]


def text_report(doc: StateSweep) -> list[str]:
    """What ``bench state-sweep`` prints: the points, the slopes, the bends, the conditions."""
    out = []
    for sweep, title in ((SIZE, "State size (every key hot after the load)"),
                         (DIRTY, f"Dirty fraction at {binary_size(doc.conditions.dirty_size)}")):
        head, rows = point_rows(doc, sweep)
        if rows:
            out += [f"# {title}", *text_table(head, rows), ""]
    for against, title in ((SIZE, "Slopes against state size (log-log)"),
                           (DIRTY, "Slopes against the dirty fraction (log-log)")):
        head, rows = slope_rows(doc, against)
        if rows:
            out += [f"# {title}", *text_table(head, rows)]
            found = bend_lines(doc, against)
            out += [f"bend: {b}" for b in found] or ["bends: none beyond the tolerance"]
            out.append("")
    return out + _about(doc)


def markdown(doc: StateSweep) -> list[str]:
    """The docs' block: the slope tables and bends first (what carries over to another state),
    then every point."""
    out = []
    for against, title in ((SIZE, "Slopes against state size (log-log least squares)"),
                           (DIRTY, "Slopes against the dirty fraction")):
        head, rows = slope_rows(doc, against)
        if rows:
            out += [f"{title}:", "", *md_table(head, rows), ""]
            out += [f"- {b}" for b in bend_lines(doc, against)] or ["No curve bends beyond the tolerance."]
            out.append("")
    for sweep in (SIZE, DIRTY):
        head, rows = point_rows(doc, sweep)
        if rows:
            out += [*md_table(head, rows), ""]
    return out + _about(doc)


def table(runs: Runs) -> list[str]:
    """``bench reproduce state-sweep``'s block, from its steps' documents."""
    return markdown(of_runs(runs))


def headline(runs: Runs) -> str:
    """The slopes of the checkpoint p50 and of the recovery against state size, as a range over
    the lines."""
    doc = of_runs(runs)
    parts = []
    for metric, name in (("CheckpointP50(ms)", "checkpoint p50"), ("RecoveryTime(ms)", "recovery")):
        got = [s.slope for s in doc.slopes if s.against == SIZE and s.metric == metric]
        if got:
            span = f"{min(got):.2f}" if f"{min(got):.2f}" == f"{max(got):.2f}" else f"{min(got):.2f}–{max(got):.2f}"
            parts.append(f"{name} {span}")
    sizes = [p.keys * doc.conditions.state_bytes_per_key for p in doc.points if p.sweep == SIZE and p.ok]
    if not parts or not sizes:
        return "no point succeeded"
    bent = sum(len(s.bends) for s in doc.slopes if s.against == SIZE)
    return (f"log-log slope against state ({binary_size(min(sizes))} to {binary_size(max(sizes))}, "
            f"{len(doc.lines)} store x layout lines): " + ", ".join(parts)
            + f"; {bent} bend{'s' if bent != 1 else ''}")
