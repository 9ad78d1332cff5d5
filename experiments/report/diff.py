"""``bench diff``: two result documents, metric by metric, and whether the change is real.

Both documents are read as summary rows (:mod:`experiments.report.summary`); rows match by
workload, store, setting and operation.  For every matched metric the diff gives the ratio new /
base, the metric's direction (:data:`METRICS`: throughput is better higher, latency lower),
the change in percent, and whether it exceeds the noise the runs measured themselves: a metric
measured in rounds (``compare --rounds``, a sweep's rounds, the Spark matrix's rounds) has a
spread, its range over its median, and a change within the larger of the two runs' spreads is
not told apart from noise.  A metric measured once has no such spread: it says so ("no rounds:
noise unknown") rather than guess one.

A regression is a change for the worse by more than the threshold given (``--fail-above PCT``)
and not within measured noise.  Two runs that differ in what they measured (machine,
durability, workload, schema) are still compared, and the differences are named on one line
(:attr:`Diff.not_comparable`, one entry each), so nobody reads a durability change as a code
regression.  Each run's commit and load average are printed too: they do not make two runs
incomparable, but a reader weighs a change by them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from experiments.core.document import Document, Environment, optional
from experiments.core.format import text_table
from experiments.report.summary import Row, environment

#: metric -> (the Row field, whether higher is better)
METRICS: dict[str, tuple[str, bool]] = {
    "throughput": ("throughput", True),
    "p50_us": ("p50_us", False),
    "p99_us": ("p99_us", False),
}


@dataclass
class Change:
    """One metric of one matched row: both values, the ratio new / base, the change in percent
    (positive: the value grew), the noise both runs measured (``None``: neither ran rounds),
    and the verdict."""

    what: str
    metric: str
    better: str
    base: float | None
    new: float | None
    ratio: float | None = None
    change_pct: float | None = None
    noise_pct: float | None = None
    verdict: str = ""
    regression: bool = False


@dataclass(kw_only=True)
class Diff(Document):
    """``ckptbench.diff/1``: what ``bench diff`` compared and found."""

    SCHEMA = "ckptbench.diff/1"

    base: str
    new: str
    #: one line per way the runs differ in what they measured (empty: comparable)
    not_comparable: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    #: rows of one run with no match in the other
    unmatched: list[str] = field(default_factory=list)
    fail_above_pct: float | None = optional()
    regressions: int = 0
    #: each run's commit and load average, as one line (what a reader weighs a change by)
    conditions: str = ""
    environment: Environment = field(default_factory=Environment.here)


@dataclass
class _Series:
    """A metric of one matched row: its value (the median of its rounds) and its rounds."""

    value: float | None
    rounds: list[float]

    def spread_pct(self) -> float | None:
        """The range of the rounds over their median, in percent (``None``: fewer than two)."""
        if len(self.rounds) < 2:
            return None
        mid = statistics.median(self.rounds)
        return 100.0 * (max(self.rounds) - min(self.rounds)) / mid if mid else None


def _label(key: tuple[str, ...]) -> str:
    return " ".join(k for k in key if k)


def _grouped(rows: list[Row]) -> dict[tuple[str, ...], list[Row]]:
    """The rows with figures, by :meth:`Row.key` (a sweep's rounds are one key's rows)."""
    out: dict[tuple[str, ...], list[Row]] = {}
    for r in rows:
        if r.throughput is not None or r.p50_us is not None:
            out.setdefault(r.key(), []).append(r)
    return out


def _series(rows: list[Row], attr: str) -> _Series:
    values = [float(getattr(r, attr)) for r in rows if getattr(r, attr) is not None]
    if not values:
        return _Series(None, [])
    if len(rows) == 1 and attr == "throughput" and rows[0].rounds:
        return _Series(values[0], list(rows[0].rounds))
    return _Series(statistics.median(values), values if len(values) > 1 else [])


def compare_metric(what: str, metric: str, base: _Series, new: _Series,
                   fail_above: float | None) -> Change:
    """One :class:`Change`: ratio, direction, change, noise and verdict (see the module)."""
    higher = METRICS[metric][1]
    change = Change(what, metric, "higher" if higher else "lower", base.value, new.value)
    if base.value is None or new.value is None:
        change.verdict = "missing in " + ("base" if base.value is None else "new")
        return change
    if base.value == 0:
        change.verdict = "same" if new.value == 0 else "base is 0: no ratio"
        return change
    change.ratio = new.value / base.value
    change.change_pct = 100.0 * (change.ratio - 1)
    spreads = [s for s in (base.spread_pct(), new.spread_pct()) if s is not None]
    change.noise_pct = max(spreads) if spreads else None
    worse_pct = -change.change_pct if higher else change.change_pct
    if change.change_pct == 0:
        change.verdict = "same"
    else:
        change.verdict = (f"{'worse' if worse_pct > 0 else 'better'} by "
                          f"{abs(change.change_pct):.1f}%")
    within = change.noise_pct is not None and abs(change.change_pct) <= change.noise_pct
    if change.noise_pct is None:
        change.verdict += "; no rounds: noise unknown"
    else:
        change.verdict += f"; {'within' if within else 'beyond'} noise (±{change.noise_pct:.1f}%)"
    change.regression = bool(fail_above is not None and worse_pct > fail_above and not within)
    if change.regression:
        change.verdict += f"; REGRESSION (> {fail_above:g}%)"
    return change


def _not_comparable(base: list[Row], new: list[Row], base_env: Environment | None,
                    new_env: Environment | None) -> list[str]:
    lines = []
    if base_env and new_env:
        b = (base_env.hostname, base_env.cpu_model, base_env.cpu_count)
        n = (new_env.hostname, new_env.cpu_model, new_env.cpu_count)
        if b != n:
            lines.append("different machine: " + " / ".join(
                f"{x[0]} ({x[1] or 'CPU ?'}, {x[2]} CPUs)" for x in (b, n)))
    for name, attr in (("schema", "schema"), ("workload", "workload")):
        bs, ns = sorted({getattr(r, attr) for r in base}), sorted({getattr(r, attr) for r in new})
        if bs != ns:
            lines.append(f"different {name}: {', '.join(bs) or '-'} / {', '.join(ns) or '-'}")
    durability = {}
    for r in base:
        durability.setdefault(r.key(), [r.durability, None])
    for r in new:
        if r.key() in durability:
            durability[r.key()][1] = r.durability
    moved = sorted({(b, n) for b, n in durability.values() if n is not None and b != n})
    if moved:
        lines.append("different durability: " + ", ".join(f"{b} / {n}" for b, n in moved))
    return lines


def _conditions(env: Environment | None) -> str:
    if env is None:
        return "conditions not recorded"
    load = " ".join(f"{x:.2f}" for x in env.loadavg) or "?"
    commit = env.commit or "?"
    short = commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")
    return f"commit {short}, load average {load}"


def diff(base_name: str, base_doc: Document, base_rows: list[Row], new_name: str,
         new_doc: Document, new_rows: list[Row], fail_above: float | None = None) -> Diff:
    """The :class:`Diff` of two documents' summary rows (see the module docstring).  Rows
    match by key; when no key matches but both have as many rows with figures (one run of
    another workload), they are paired in order, under a ``not comparable`` line."""
    out = Diff(base=base_name, new=new_name, fail_above_pct=fail_above,
               not_comparable=_not_comparable(base_rows, new_rows, environment(base_doc),
                                              environment(new_doc)))
    out.conditions = "; ".join(f"{name}: {_conditions(environment(doc))}" for name, doc in
                               (("base", base_doc), ("new", new_doc)))
    b, n = _grouped(base_rows), _grouped(new_rows)
    pairs = [(k, b[k], n[k]) for k in b if k in n]
    if not pairs and len(b) == len(n):
        pairs = [(k1 if k1 == k2 else (f"{_label(k1)} / {_label(k2)}",), b[k1], n[k2])
                 for k1, k2 in zip(b, n)]
    else:
        out.unmatched = ([f"only in base: {_label(k)}" for k in b if k not in n]
                         + [f"only in new: {_label(k)}" for k in n if k not in b])
    for key, rb, rn in pairs:
        for metric, (attr, _) in METRICS.items():
            sb, sn = _series(rb, attr), _series(rn, attr)
            if sb.value is None and sn.value is None:
                continue
            out.changes.append(compare_metric(_label(key), metric, sb, sn, fail_above))
    out.regressions = sum(c.regression for c in out.changes)
    return out


def lines(d: Diff) -> list[str]:
    """The human form: the not-comparable lines, one table row per metric, the unmatched rows
    and the verdict."""
    fmt = (lambda v: "-" if v is None else f"{v:,.1f}")  # noqa: E731
    out = [f"diff: base {d.base}, new {d.new}", f"conditions: {d.conditions}"]
    if d.not_comparable:
        out.append("not comparable: " + "; ".join(d.not_comparable))
    body = [[c.what, c.metric, c.better, fmt(c.base), fmt(c.new),
             "-" if c.ratio is None else f"{c.ratio:.3f}x", c.verdict] for c in d.changes]
    if body:
        out += text_table(["row", "metric", "better", "base", "new", "new/base", "verdict"], body)
    out += d.unmatched
    if d.fail_above_pct is not None:
        out.append(f"diff: {d.regressions} regression(s) beyond {d.fail_above_pct:g}%"
                   if d.regressions else f"diff: no regression beyond {d.fail_above_pct:g}%")
    return out
