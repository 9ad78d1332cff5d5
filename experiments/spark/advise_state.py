"""``bench advise --from STATE-SWEEP.json --state SIZE --dirty FRACTION``: the advice at the user's
state size, each store x layout carried there along its measured growth.

A state sweep (:mod:`.state_sweep_result`) measured, per store x layout (a *line*), the steady
checkpoint cost, the recovery's phases, the space and the steady throughput at several live
state sizes (every key hot after the load), and the checkpoint cost and space against the share
of the state an interval dirties at one size.  A user's job has another size and another dirty
share; what carries over is how each figure grows.  For each line this module carries it to the
user's state ``S`` (:func:`carry`):

* **inside the measured sizes**: between the two measured neighbours, on the straight line
  joining them on log-log axes (the curve as measured);
* **outside**: along the power law fitted over every measured size
  (:func:`experiments.core.loglog.fit`), or, when the curve bends (a segment leaves the fit by
  more than the sweep's tolerance, :func:`experiments.core.loglog.bends`), along the end segment
  nearest ``S`` (the two largest sizes above, the two smallest below): where the curve is going
  there, not its average over sizes it has left.  Above the range a bend is followed only
  where it makes the row worse (a time steepening, a throughput falling): a time flattening
  or a throughput rising at the top rests on the largest point alone, and the fit is kept.  A time carried above the largest size is
  never below its value there (a falling last segment is noise or a fixed cost, and a state
  that grows does not checkpoint or restore in less), and a throughput never above it: the
  sweep's micro-batches grow with its state (``K/2`` events), so a rate that rises with the
  state rises with the batching, which a job of the user's state does not get for free and
  which stops paying once the per-event cost dominates.

The figures carried, at ``S`` (each a least-squares power law, never a sum of two fits of the
same figure):

* ``C``: the steady checkpoint cost, ``CheckpointP50(ms)`` (the median of a run's checkpoints
  is a steady one: the load's full checkpoint is one of four), scaled to the user's dirty share
  ``d`` by the line's dirty sweep: ``C(S, d) = C(S) * g(d) / g(d_sweep)``, ``g`` the checkpoint
  cost against the dirtied share at the dirty sweep's size and ``d_sweep`` the share the size
  sweep's intervals dirty (:data:`SIZE_SWEEP_DIRTY`).  ``g`` is carried like a size (inside:
  between neighbours; above: fit or last segment) except below the smallest share measured,
  where it is held at that share's value: a checkpoint's fixed part (its commit, its round
  trips) does not shrink with fewer dirty keys.  The space amplification is scaled the same way.
  Without a dirty sweep on the line ``C`` is the size sweep's, and the row says so.
* ``R``, the restart cost: ``Recovery.Detect`` (failure to re-run, a cost of Spark's, not of
  the state) plus the restore, ``S`` over the restore rate at ``S`` (``Recovery.Load`` +
  ``Recovery.Restore``: reading and rebuilding the state, carried as a time; its MB/s is ``S``
  over it).  The sweep's own replay and catch-up are not in ``R``: they replayed the sweep's
  half interval, and the model replays the user's (:func:`.advise.recovery_time`).
* ``X``: the steady throughput (events/s), for the replay and for keeping up with the rate.
* the space: the space amplification at ``S`` (scaled to ``d`` as ``C`` is) times ``S``; a
  store that reports none has none.

Young/Daly then run as for a matrix (:mod:`.advise`): ``T = sqrt(2 C MTBF)``, overhead ``C/T +
T/(2 MTBF) + R/MTBF``, expected recovery ``R + (T/2) rate/X``, the RTO's cap.  There is no
per-event cost: every line ran the same protocol.

How far a row extrapolates is its **factor**: ``S`` over the largest state its line measured
(the smallest over ``S`` below the range; 1 inside).  A row whose factor exceeds
:data:`MAX_EXTRAPOLATION` is shown but not ranked unless the user asks (``--extrapolate``): a
recommendation must not rest on a curve carried far past what was measured.  A line with fewer
than two measured sizes has no slope and is listed as not fitted.  Everything here is pure (a
sweep document and numbers in, a document out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from experiments.core.document import Document, Environment, optional
from experiments.core.format import Note, text_table
from experiments.core.loglog import BEND_TOLERANCE, bends, fit, usable
from experiments.spark.advise import (AdviseError, Recommended, advised_interval, format_duration, overhead,
                                      rank_key, recovery_time)
from experiments.spark.state_sweep_result import SCHEMA as SWEEP_SCHEMA
from experiments.spark.state_sweep_result import DIRTY, SIZE, Point, StateSweep, binary_size, percent

SCHEMA = "ckptbench.advise-state/1"
#: the furthest a ranked row may be carried beyond (or below) its line's measured states.  The
#: full sweep's sizes are x4 apart over 256x (16 MiB to 4 GiB); 16x is two more of its steps,
#: half its span on the log axis: a prediction no farther from the data than half of what the
#: data covers.  Beyond it the prediction rests more on the slope than on the data, and a bend the
#: sweep never reached (the page cache, the machine's memory, a server's) would go unseen, so such
#: a row is shown, not recommended.
MAX_EXTRAPOLATION = 16.0
#: the fewest measured sizes a slope needs
MIN_SIZES = 2
#: how a figure was carried (:class:`Carried`)
WITHIN, FIT, LAST, FIRST, HELD = "within", "fit", "last segment", "first segment", "held"


def dirtied_share(hot: float) -> float:
    """The share of the state one interval of the sweep dirties when ``hot`` of its keys are
    hot: the sweep's interval is ``K`` events (micro-batches of ``K/B``, a checkpoint every
    ``B``: its conditions' schedule) spread uniformly over ``hot * K`` keys, of which
    ``1 - e^(-1/hot)`` are touched, so ``hot * (1 - e^(-1/hot))`` of the state: ``hot`` itself
    for a few hot keys, 63 % when every key is hot."""
    return hot * (1.0 - math.exp(-1.0 / hot))


#: the share the size sweep's intervals dirty (every key hot)
SIZE_SWEEP_DIRTY = dirtied_share(1.0)


# ------------------------------------------------------------------------------- carrying
@dataclass
class Carried:
    """One figure of a line at the user's state (or dirty share), and how it got there."""

    value: float
    along: str  # WITHIN, FIT, LAST, FIRST or HELD
    slope: float  # the log-log slope it was carried along (0 when held)
    #: the measured x the slope joins (state bytes, or dirtied shares)
    x_from: float
    x_to: float


def _through(a: tuple[float, float], b: tuple[float, float], x: float, along: str) -> Carried:
    line = fit([a[0], b[0]], [a[1], b[1]])
    if line is None:  # two points at one x: their mean
        return Carried((a[1] + b[1]) / 2, along, 0.0, a[0], b[0])
    return Carried(line.predict(x), along, line.slope, a[0], b[0])


def carry(xs: Sequence[float | None], ys: Sequence[float | None], x: float,
          tolerance: float = BEND_TOLERANCE, *, grows: bool | None = None, hold_below: bool = False) -> Carried | None:
    """``y`` at ``x`` from the measured ``(xs, ys)`` (module doc: between neighbours inside, the
    fit or the nearest end segment outside); above the range, ``grows=True`` (a time): never
    below the last measured ``y``, ``grows=False`` (a rate): never above it; ``hold_below``:
    the first measured ``y`` below the range.  None without two distinct measured ``x``."""
    pts = usable(xs, ys)
    overall = fit([p[0] for p in pts], [p[1] for p in pts])
    if overall is None:
        return None
    lo, hi = pts[0], pts[-1]
    if lo[0] <= x <= hi[0]:
        i = max(i for i in range(len(pts) - 1) if pts[i][0] <= x)
        return _through(pts[i], pts[i + 1], x, WITHIN)
    if x < lo[0] and hold_below:
        return Carried(lo[1], HELD, 0.0, lo[0], lo[0])
    got = Carried(overall.predict(x), FIT, overall.slope, overall.x_min, overall.x_max)
    if bends([p[0] for p in pts], [p[1] for p in pts], tolerance, overall):
        end = _through(pts[-2], pts[-1], x, LAST) if x > hi[0] else _through(pts[0], pts[1], x, FIRST)
        # above the range, a time's flattening or a rate's rise is not followed (the fit is): one
        # noisy point at the top would otherwise promise a cheaper or faster job at every size
        favourable = x > hi[0] and grows is not None and (end.slope < overall.slope if grows
                                                         else end.slope > overall.slope)
        got = got if favourable else end
    if grows is not None and x > hi[0] and (got.value < hi[1] if grows else got.value > hi[1]):
        return Carried(hi[1], HELD, 0.0, hi[0], hi[0])
    return got


def factor(state: float, x_min: float, x_max: float) -> float:
    """How far ``state`` lies outside ``[x_min, x_max]``, as a ratio (1.0 inside)."""
    return max(state / x_max, x_min / state, 1.0)


def format_factor(f: float, state: float, x_max: float) -> str:
    if f <= 1.0:
        return "within"
    return f"{f:.1f}x" + (" below" if state < x_max else "")


# -------------------------------------------------------------------------------- the rows
@dataclass
class StateAdvice:
    """One store x layout carried to the user's state and dirty share, under Young/Daly."""

    store: str
    layout: str
    #: the measured state sizes of the line (bytes of ``StateBytes``): how many, the range
    sizes: int
    measured_min: float
    measured_max: float
    factor: float
    #: ``C(S)`` at the size sweep's dirty share, and the dirty sweep's ratio ``g(d)/g(d_sweep)``
    #: (None: no dirty sweep on the line, C is the size sweep's)
    cost_at_sweep_dirty_ms: float
    dirty_ratio: float | None
    cost_ms: float  # C at the state and the dirty share
    detect_ms: float
    restore_ms: float
    restore_mbps: float
    restart_ms: float  # R = detect + restore
    throughput: float  # X
    rate: float
    optimal_interval_s: float
    interval_s: float | None  # None: the RTO cannot be met
    overhead: float
    expected_recovery_s: float
    #: None: the store reports no space
    space_amplification: float | None
    space_bytes: float | None
    sustains_rate: bool
    meets_rto: bool | None
    events_per_interval: float
    #: how each figure was carried: figure -> :class:`Carried` (its slope and the sizes it joins)
    carried: dict[str, Carried] = field(default_factory=dict)
    #: 0: not ranked (beyond :data:`MAX_EXTRAPOLATION` without ``--extrapolate``)
    rank: int = 0
    ranked: bool = True
    #: a sweep has no `none` run to measure a per-event cost against: 0 (kept for the overhead curve)
    per_event: float = 0.0
    name: str = field(init=False)
    feasible: bool = field(init=False)

    def __post_init__(self) -> None:
        self.name = f"{self.store}/{self.layout}"
        self.feasible = self.sustains_rate and self.meets_rto is not False


@dataclass
class SweepRef:
    """The sweep the advice was carried from: what it measured and where."""

    full: bool
    quick: bool
    protocol: str
    state_bytes_per_key: int
    sizes: list[int]
    dirty: list[float]
    dirty_size: int
    memory_bytes: int | None = None


@dataclass(kw_only=True)
class AdviseState(Document):
    """``ckptbench.advise-state/1``: the user's numbers, every line carried to them, ranked."""

    SCHEMA = SCHEMA

    source: str
    state_bytes: int
    dirty: float
    mtbf_s: float
    rto_s: float | None
    rate: float | None
    rate_note: str
    max_extrapolation: float
    extrapolate: bool
    sweep: SweepRef
    #: the first ranked row; None when every row lies beyond the limit
    recommended: Recommended | None = optional()
    #: the ranked rows in order, then the rows beyond the limit
    ranking: list[StateAdvice] = field(default_factory=list)
    #: lines with too few measured sizes, each with why
    not_fitted: list[str] = field(default_factory=list)
    environment: Environment = field(default_factory=Environment.here)


#: the figures carried along the state, the metric (or pair summed) each comes from, and
#: whether it grows (a time: it may not fall above the largest size) or not (a rate: it may not
#: rise), :func:`carry`; a line without one of them has no advice.  The space amplification may
#: go either way (a fixed overhead spread over more state), and a store that does not report it
#: still has the rest.
CHECKPOINT, SPACE = "CheckpointP50(ms)", "SpaceAmplification"
FIGURES: dict[str, tuple[tuple[str, ...], bool]] = {
    "checkpoint": ((CHECKPOINT,), True),
    "detect": (("Recovery.Detect(ms)",), True),
    "restore": (("Recovery.Load(ms)", "Recovery.Restore(ms)"), True),
    "throughput": (("SteadyThroughput(events/sec)",), False),
}


def _figure(p: Point, metrics: tuple[str, ...]) -> float | None:
    values = [p.value(m) for m in metrics]
    return None if any(v is None for v in values) else sum(values)  # type: ignore[misc]


def dirty_ratio(points: list[Point], metric: str, dirty: float, tolerance: float) -> float | None:
    """``g(d) / g(d_sweep)``: how ``metric`` at the dirty share ``dirty`` compares with it at
    the size sweep's share, on the line's dirty sweep; None without two measured shares."""
    xs = [dirtied_share(p.dirty) for p in points]
    ys = [p.value(metric) for p in points]
    at = carry(xs, ys, dirty, tolerance, hold_below=True)
    base = carry(xs, ys, SIZE_SWEEP_DIRTY, tolerance, hold_below=True)
    return at.value / base.value if at and base else None


def carry_line(sweep: StateSweep, line: str, state: float) -> dict[str, Carried] | str:
    """Every figure of ``line`` at ``state``, or the reason the line cannot be carried."""
    tolerance = sweep.conditions.bend_tolerance
    pts = [p for p in sweep.of(SIZE, line) if p.ok]
    sizes = {p.state_bytes for p in pts}
    if len(sizes) < MIN_SIZES:
        failed = sum(not p.ok for p in sweep.of(SIZE, line))
        return (f"{len(sizes)} measured state size{'s' if len(sizes) != 1 else ''} (a slope needs "
                f"{MIN_SIZES})" + (f"; {failed} of its runs failed" if failed else ""))
    out = {}
    for name, (metrics, grows) in FIGURES.items():
        got = carry([float(p.state_bytes) for p in pts], [_figure(p, metrics) for p in pts], state,
                    tolerance, grows=grows)
        if got is None:
            return f"no {' + '.join(metrics)} at two state sizes"
        out[name] = got
    space = carry([float(p.state_bytes) for p in pts], [p.value(SPACE) for p in pts], state, tolerance)
    if space is not None:
        out["space"] = space
    return out


def advise_line(sweep: StateSweep, line: str, state: float, dirty: float, mtbf_s: float,
                rate: float | None, rto_s: float | None) -> StateAdvice | str:
    """One line's advice at ``state`` and ``dirty``, or why it has none."""
    carried = carry_line(sweep, line, state)
    if isinstance(carried, str):
        return carried
    tolerance = sweep.conditions.bend_tolerance
    dirty_pts = [p for p in sweep.of(DIRTY, line) if p.ok]
    ratio = dirty_ratio(dirty_pts, CHECKPOINT, dirty, tolerance)
    space_ratio = dirty_ratio(dirty_pts, SPACE, dirty, tolerance)
    c_sweep_ms = carried["checkpoint"].value
    cost_s = c_sweep_ms * (ratio if ratio is not None else 1.0) / 1e3
    restore_s = carried["restore"].value / 1e3
    restart_s = carried["detect"].value / 1e3 + restore_s
    x = carried["throughput"].value
    lam = rate if rate else x
    t_opt, t, meets, at = advised_interval(cost_s, mtbf_s, restart_s, lam, x, rto_s)
    sizes = sorted({float(p.state_bytes) for p in sweep.of(SIZE, line) if p.ok})
    amp = (carried["space"].value * (space_ratio if space_ratio is not None else 1.0)
           if "space" in carried else None)
    store, _, layout = line.partition("/")
    return StateAdvice(store, layout, len(sizes), sizes[0], sizes[-1], factor(state, sizes[0], sizes[-1]),
                       c_sweep_ms, ratio, cost_s * 1e3, carried["detect"].value, restore_s * 1e3,
                       state / restore_s / 1e6, restart_s * 1e3, x, lam, t_opt, t,
                       overhead(at, cost_s, mtbf_s, restart_s), recovery_time(at, restart_s, lam, x),
                       amp, amp * state if amp is not None else None, x >= lam, meets, at * lam, carried)


def rank(rows: list[StateAdvice], limit: float, extrapolate: bool) -> list[StateAdvice]:
    """Rows within ``limit`` (every row with ``extrapolate``) ranked as a matrix's are (feasible
    first, then by overhead, then by recovery), then the rest, unranked, by factor."""
    inside = sorted((a for a in rows if extrapolate or a.factor <= limit), key=rank_key)
    beyond = sorted((a for a in rows if not (extrapolate or a.factor <= limit)),
                    key=lambda a: (a.factor, rank_key(a)))
    for i, a in enumerate(inside, 1):
        a.rank, a.ranked = i, True
    for a in beyond:
        a.rank, a.ranked = 0, False
    return inside + beyond


def sweep_documents(doc: Any) -> list[dict[str, Any]] | None:
    """The state sweeps a JSON document holds: itself (``bench state-sweep``'s), or the steps of
    a ``bench reproduce state-sweep`` document (the stores' sweep and Spark's own state store's,
    run apart); None for any other document."""
    if not isinstance(doc, dict):
        return None
    name = str(doc.get("schema", "")).partition("/")[0]
    if name == SWEEP_SCHEMA.partition("/")[0]:
        return [doc]
    if name != "ckptbench.reproduce":
        return None
    found = [r.get("document") for r in doc.get("runs") or [] if isinstance(r, dict)]
    found = [d for d in found if isinstance(d, dict)
             and str(d.get("schema", "")).partition("/")[0] == SWEEP_SCHEMA.partition("/")[0]]
    return found or None


def advise_state(sweeps: StateSweep | Sequence[StateSweep], state: float, dirty: float, mtbf_s: float,
                 rate: float | None = None, rto_s: float | None = None, extrapolate: bool = False,
                 source: str = "", limit: float = MAX_EXTRAPOLATION) -> AdviseState:
    """The advice document at the user's ``state`` (bytes) and ``dirty`` share, from one sweep
    or several run apart (each line is carried within its own sweep, under its conditions); no
    line to carry is an :class:`.advise.AdviseError` naming the fix."""
    if not state > 0 or not 0 < dirty <= 1:
        raise AdviseError(f"a state of {state} bytes dirtying {dirty} of it: give a state above 0 and "
                          f"a dirty share above 0 and at most 100 %")
    sweeps = [sweeps] if isinstance(sweeps, StateSweep) else list(sweeps)
    rows, not_fitted = [], []
    for sweep in sweeps:
        for line in sweep.lines:
            got = advise_line(sweep, line, state, dirty, mtbf_s, rate, rto_s)
            if isinstance(got, str):
                not_fitted.append(f"{line}: {got}")
            else:
                rows.append(got)
    if not rows:
        where = f"{source} " if source else "the sweep "
        points = [p for sweep in sweeps for p in sweep.points]
        raise AdviseError(f"{where}has no store x layout measured at {MIN_SIZES} state sizes "
                          f"({sum(p.ok for p in points)} of {len(points)} runs succeeded); run bench "
                          f"state-sweep (--quick: a few minutes) or wait for the running sweep's next sizes")
    ranked = rank(rows, limit, extrapolate)
    best = ranked[0] if ranked[0].ranked else None
    c = sweeps[0].conditions
    return AdviseState(
        source=source, state_bytes=int(state), dirty=dirty, mtbf_s=mtbf_s, rto_s=rto_s,
        rate=rate, rate_note="given" if rate else "flat out: each row's steady throughput at the state",
        max_extrapolation=limit, extrapolate=extrapolate,
        sweep=SweepRef(all(s.full for s in sweeps), any(s.quick for s in sweeps),
                       "; ".join(dict.fromkeys(s.conditions.protocol for s in sweeps)), c.state_bytes_per_key,
                       c.sizes, c.dirty, c.dirty_size, c.memory_bytes),
        recommended=best and Recommended(best.name, best.feasible, best.interval_s, best.overhead,
                                         best.expected_recovery_s),
        ranking=ranked, not_fitted=not_fitted)


# ----------------------------------------------------------------------------------- output
def _gib(n: float) -> str:
    return binary_size(n).replace(" ", "")


def _cost(ms: float) -> str:
    return format_duration(ms / 1e3)


def format_table(doc: AdviseState) -> str:
    """The ranked rows, the unranked beyond the limit, and a note per line not fitted."""
    head = ["rank", "store/layout", "measured", "extrapolation", "C", "R", "restore MB/s", "events/s",
            "interval", "overhead %", "recovery", "space", "keeps up", "meets RTO"]
    body: list[list[str] | Note] = []
    for a in doc.ranking:
        body.append([str(a.rank) if a.ranked else "–", a.name,
                     f"{_gib(a.measured_min)}–{_gib(a.measured_max)}",
                     format_factor(a.factor, doc.state_bytes, a.measured_max) + ("" if a.ranked else " (not ranked)"),
                     _cost(a.cost_ms), _cost(a.restart_ms), f"{a.restore_mbps:,.0f}", f"{a.throughput:,.0f}",
                     format_duration(a.interval_s), f"{a.overhead * 100:.3f}",
                     format_duration(a.expected_recovery_s),
                     "–" if a.space_bytes is None else _gib(a.space_bytes),
                     "yes" if a.sustains_rate else "no",
                     "–" if a.meets_rto is None else ("yes" if a.meets_rto else "no")])
    for line in doc.not_fitted:
        name, _, why = line.partition(": ")
        body.append(Note(("–", name), f"not fitted: {why}"))
    return "\n".join(text_table(head, body))


def _along(name: str, c: Carried) -> str:
    what = {"checkpoint": "C", "detect": "detect", "restore": "restore", "throughput": "events/s",
            "space": "space"}[name]
    if c.along == HELD:
        return f"{what} held at its {_gib(c.x_from)} value (its slope there {'rises' if name == 'throughput' else 'falls'})"
    return f"{what} along the {c.along} {_gib(c.x_from)}–{_gib(c.x_to)} (slope {c.slope:.2f})"


def advise_lines(doc: AdviseState) -> list[str]:
    """The ``[ADVISE]`` lines: the inputs, the recommendation, how each row was carried, and
    what was not ranked or not fitted."""
    out = [f"[ADVISE], State(bytes), {doc.state_bytes}",
           f"[ADVISE], Dirty(%), {doc.dirty * 100:g}",
           f"[ADVISE], MTBF(s), {doc.mtbf_s:g}",
           f"[ADVISE], Rate(events/s), {doc.rate:g}" if doc.rate else
           "[ADVISE], Rate(events/s), flat out (each row's steady throughput at the state)"]
    if doc.rto_s is not None:
        out.append(f"[ADVISE], RTO(s), {doc.rto_s:g}")
    out.append(f"[ADVISE], MaxExtrapolation, {doc.max_extrapolation:g}x"
               + (" (--extrapolate: every row ranked)" if doc.extrapolate else ""))
    rec = doc.recommended
    if rec is None:
        out.append(f"[ADVISE], Recommended, none: every row lies beyond {doc.max_extrapolation:g}x the "
                   f"states its line measured; --extrapolate ranks them anyway")
    else:
        best = doc.ranking[0]
        out += [f"[ADVISE], Recommended, {rec.name}",
                f"[ADVISE], Extrapolation, {format_factor(best.factor, doc.state_bytes, best.measured_max)}",
                f"[ADVISE], CheckpointCost(ms), {best.cost_ms:.1f}",
                f"[ADVISE], Interval(s), {rec.interval_s:.3f}" if rec.interval_s is not None else
                "[ADVISE], Interval(s), none meets the RTO",
                f"[ADVISE], EventsPerInterval, {best.events_per_interval:.0f}",
                f"[ADVISE], Overhead(%), {rec.overhead * 100:.4f}",
                f"[ADVISE], ExpectedRecovery(s), {rec.expected_recovery_s:.3f}",
                f"[ADVISE], Space(bytes), "
                + ("not reported by the store" if best.space_bytes is None else f"{best.space_bytes:.0f}")]
        if not rec.feasible:
            out.append("[ADVISE], Warning, no row keeps up with the rate and meets the RTO; the least "
                       "bad one is shown")
    beyond = [a for a in doc.ranking if not a.ranked]
    if beyond:
        out.append(f"[ADVISE], NotRanked, {', '.join(f'{a.name} ({a.factor:.1f}x)' for a in beyond)}: beyond "
                   f"{doc.max_extrapolation:g}x the states their lines measured; shown, not ranked "
                   f"(--extrapolate ranks them anyway)")
    for line in doc.not_fitted:
        out.append(f"[ADVISE], NotFitted, {line}")
    for a in doc.ranking:
        out.append(f"[ADVISE], Carried, {a.name}: " + "; ".join(_along(n, c) for n, c in a.carried.items())
                   + ("; C at the dirty share: x" + f"{a.dirty_ratio:.3g} of the sweep's "
                      f"{percent(SIZE_SWEEP_DIRTY)}" if a.dirty_ratio is not None else
                      "; no dirty sweep on this line: C at the size sweep's "
                      f"{percent(SIZE_SWEEP_DIRTY)} dirty"))
    memory = doc.sweep.memory_bytes
    if memory and doc.state_bytes > memory:
        out.append(f"[ADVISE], Warning, the state ({_gib(doc.state_bytes)}) is larger than the memory of "
                   f"the machine that ran the sweep ({_gib(memory)}): no measured curve reached the point "
                   f"where it runs out")
    if doc.sweep.quick or not doc.sweep.full:
        out.append("[ADVISE], Warning, the sweep is " + ("--quick's small subset" if doc.sweep.quick else
                                                         "one its options narrowed")
                   + ", not the full sweep")
    return out
