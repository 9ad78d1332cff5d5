"""Every result document as rows of one shape: what ``bench report`` tabulates and ``bench diff``
compares.

A :class:`Row` is one measured thing of a document (a run, a compare's backend, a sweep point, a
Spark matrix cell, an audit): the workload, the store, its durability mode, the setting that
tells it apart from its siblings (threads, target rate, protocol), the throughput in the
document's own unit, the p50/p99 latency in µs where the document has one, a ratio where the
document states one, and every round's throughput where it was measured in rounds.  The rows are
read from the typed documents (:mod:`experiments.core.document`) and from nothing else, so a
report or a diff never shows a figure the JSON does not hold.

Documents of the families above this one (storage, reproduce) are read by their attributes,
whatever their type's module: this module may not import them (the layering), and needs only
their fields.  A schema without a handler of its own gets one row naming it, so no input is ever
dropped from a table silently.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from experiments.core.document import Document, DocumentError, Environment, parse
from experiments.core.results import Compare, Entry, OpStats, Phase, Result, Sweep


@dataclass
class Row:
    """One measured thing of one input file (see the module docstring)."""

    source: str
    schema: str
    workload: str = ""
    backend: str = ""
    durability: str = ""
    #: what tells this row apart from the others of its document (``threads 4``, ``protocol cic``)
    setting: str = ""
    #: the operation the latencies are of (the busiest one of a run, ``ALL`` for all merged)
    op: str = ""
    throughput: float | None = None
    unit: str = ""
    p50_us: float | None = None
    p99_us: float | None = None
    #: a ratio the document states, with what it is over (``1.27x indexed_fs``)
    ratio: str = ""
    #: every round's throughput, when the document measured it in rounds
    rounds: list[float] = field(default_factory=list)
    #: skipped with its reason, an audit's verdict, a run's failed operations ...
    note: str = ""

    def key(self) -> tuple[str, str, str, str]:
        """What a row of another run must match to be compared with this one (``bench diff``):
        the workload, store and setting; not the durability, whose difference a diff reports."""
        return (self.workload, self.backend, self.setting, self.op)


def _durability(config: dict[str, Any] | None, stats: dict[str, Any] | None = None) -> str:
    """The durability a run used: what the store reported it used (``backend_stats``), else
    what was asked for (``--durability``, ``--opt durability=``), else the store's default."""
    if stats and stats.get("durability"):
        return str(stats["durability"])
    config = config or {}
    asked = config.get("durability") or (config.get("backend_options") or {}).get("durability")
    return str(asked) if asked else "default"


def _threads(config: dict[str, Any] | None) -> str:
    threads = (config or {}).get("threads")
    return f"threads {threads}" if threads else ""


def _result(doc: Result, source: str) -> Iterator[Row]:
    name = "run" if "run" in doc.phases else next(reversed(doc.phases), "")
    phase = doc.phases.get(name) or Phase()
    ran = phase.ran()
    op = max(ran, key=lambda n: ran[n].count) if ran else ""
    stats = ran.get(op) or OpStats()
    ratio = ""
    if doc.baseline is not None and doc.baseline.ratio:
        ratio = f"{doc.baseline.ratio:.3g}x Python fdatasync loop"
    errors = sum(phase.errors.values())
    yield Row(source, doc.SCHEMA, doc.workload, doc.backend,
              _durability(doc.config, doc.backend_stats),
              " ".join(x for x in (_threads(doc.config), "" if name == "run" else name) if x),
              op, phase.throughput_ops_sec, "ops/s", stats.p50_us, stats.p99_us, ratio,
              note=f"{errors} failed ops" if errors else "")


def _point(e: Entry) -> str:
    parts = []
    if e.params.target:
        parts.append(f"target {e.params.target:g}")
    if e.params.threads is not None:
        parts.append(f"threads {e.params.threads}")
    return " ".join(parts)


def _entries(doc: Compare | Sweep, source: str) -> Iterator[Row]:
    durability = _durability(doc.config)
    ran = [e for e in doc.results if not e.skipped]
    first = ran[0] if ran and isinstance(doc, Compare) else None
    for e in doc.results:
        row = Row(source, doc.SCHEMA, doc.workload, e.backend, durability, _point(e), "ALL")
        if e.skipped:
            row.note = f"skipped: {e.skipped}"
        else:
            overall = e.overall or OpStats()
            row.throughput, row.unit = e.throughput_ops_sec, "ops/s"
            row.p50_us, row.p99_us = overall.p50_us, overall.p99_us
            row.rounds = list(e.rounds_ops_sec or [])
            if first is not None and e is not first and first.throughput_ops_sec:
                row.ratio = f"{(e.throughput_ops_sec or 0) / first.throughput_ops_sec:.3g}x {first.backend}"
            if e.round is not None:
                row.note = f"round {e.round}"
        yield row


def _spark(doc: Any, source: str) -> Iterator[Row]:
    m, settings = doc.metrics, doc.settings
    eo = m.get("ExactlyOnce")
    yield Row(source, doc.SCHEMA, doc.job.kind, str(settings.get("backend") or "-"),
              _durability(settings), f"protocol {settings.get('protocol')}", "event",
              m.get("Throughput(events/sec)"), "events/s", _ms(m.get("LatencyP50(ms)")),
              _ms(m.get("LatencyP99(ms)")),
              note="" if eo is None else f"exactly once: {str(eo).lower()}")


def _matrix(doc: Any, source: str) -> Iterator[Row]:
    from experiments.spark.matrix_result import ratio_to_none, reference_metrics

    none = reference_metrics(doc.rows)
    for r in doc.rows:
        row = Row(source, doc.SCHEMA, doc.job.kind, r.backend, "default", f"protocol {r.protocol}",
                  "", r.throughput, "events/s")
        if r.skipped:
            row.note = f"skipped: {r.skipped}"
        else:
            row.rounds = list(r.throughput_spread.rounds) if r.throughput_spread else []
            if r.ratio.get("none") is not None and r.protocol != "none":
                row.ratio = ratio_to_none(r.ratio["none"], r.metrics, r.protocol, none, lambda v: f"{v:.3g}x none")
            if r.exactly_once is not None:
                row.note = f"exactly once: {str(r.exactly_once).lower()}"
        yield row


def _mst(doc: Any, source: str) -> Iterator[Row]:
    """``bench mst``: the rate found, the search's end and its probes' verdicts."""
    verdicts = ", ".join(f"{p.rate:,.0f} {'ok' if p.sustainable else p.stopped_by[:20]}" for p in doc.probes)
    yield Row(source, doc.SCHEMA, doc.job, doc.backend, "", f"protocol {doc.protocol} MST", "",
              doc.mst, "events/s", note=f"{doc.stop}; probes: {verdicts}")


def _audit(doc: Any, source: str) -> Iterator[Row]:
    yield Row(source, doc.SCHEMA, f"audit {doc.kind}", doc.backend, doc.durability,
              f"rounds {doc.rounds}",
              note=f"{doc.verdict()}: {doc.lost} lost, {doc.wrong} wrong of {doc.acknowledged} "
                   "acknowledged")


def _peer(doc: Any, source: str) -> Iterator[Row]:
    """The backend beside the server's own tool: its rounds, their median, the median ratio."""
    yield Row(source, doc.SCHEMA, "peer", doc.server, "default",
              f"clients {doc.clients} pipeline {doc.pipeline}", "",
              _median(doc.ours_throughput), "ops/s",
              ratio=f"{doc.ratio:.3g}x {doc.server}'s own tool" if doc.ratio else "",
              rounds=list(doc.ours_throughput))


def _peer_ycsb(doc: Any, source: str) -> Iterator[Row]:
    """``bench run``'s YCSB workload beside what YCSB's binding does: a row per thread count."""
    for e in doc.by_threads:
        yield Row(source, doc.SCHEMA, doc.workload, doc.server, "default",
                  f"threads {e.threads} beside YCSB's binding", "", _median(e.ours_throughput),
                  "ops/s", ratio=f"{e.ratio:.3g}x the binding" if e.ratio else "",
                  rounds=list(e.ours_throughput))


def _median(values: list[float]) -> float | None:
    """The median of a run's rounds (the higher middle one of an even count: a measured
    round, not a mean of two)."""
    return statistics.median_high(values) if values else None


def _reproduce(doc: Any, source: str) -> Iterator[Row]:
    """Each command's own document as its rows (source ``FILE:label``), then the experiment's
    own status and targets."""
    for run in doc.runs:
        if run.document is not None:
            yield from rows(run.document, f"{source}:{run.label}")
    missed = [t.what for t in getattr(doc, "targets", None) or [] if not t.met]
    yield Row(source, doc.SCHEMA, f"reproduce {doc.name}",
              note=f"{doc.status}" + (f": {doc.error}" if doc.error else "")
              + (f"; targets NOT met: {', '.join(missed)}" if missed else ""))


def _ms(value: float | None) -> float | None:
    return None if value is None else float(value) * 1000


def _reopens(crash_ms: float | None, clean_ms: float | None) -> str:
    ms = (lambda v: "-" if v is None else f"{v:,.1f} ms")  # noqa: E731
    return f"open after crash {ms(crash_ms)}, after clean close {ms(clean_ms)}"


def _thesis(doc: Any, source: str) -> Iterator[Row]:
    """The thesis' figures 4.2, 4.5 and 4.7 and Table 5.2 (Fig 4.1 is a sweep)."""
    exp = doc.experiment
    for r in doc.rows:
        row = Row(source, doc.SCHEMA, f"thesis {exp}", getattr(r, "backend", "indexed_fs"))
        if exp == "fig4.2":
            row.setting = f"pes {r.pes}"
            row.note = _reopens(r.open_after_crash_ms, r.open_after_clean_ms)
        elif exp == "fig4.5":
            if r.checkpoint is not None:
                row.throughput, row.unit = r.checkpoint.write_rate, "ckpt/s"
            if r.write is not None:
                row.op, row.p50_us, row.p99_us = "write", r.write.p50_us, r.write.p99_us
            row.note = f"skipped: {r.skipped}" if r.skipped else (
                f"{r.missing} missing, {r.corrupt} corrupt after the crash")
        elif exp == "fig4.7":
            row.setting = f"pes {r.pes}"
            row.throughput, row.unit = r.write_rate, "ckpt/s"
            row.note = f"{r.dropped} of {r.submitted} dropped"
        else:  # table5.2
            row.durability = r.durability
            row.throughput, row.unit = r.max_write_heavy_ops_sec, "ops/s"
            row.note = f"skipped: {r.skipped}" if r.skipped else f"needs {r.dependency}"
        yield row


def _storage_compare(doc: Any, source: str) -> Iterator[Row]:
    """Every section's rows: write-heavy per medium and threads, Table 5.1's small writes,
    round trips per operation, reopen times."""
    for r in doc.rows:
        row = Row(source, doc.SCHEMA, f"{r.section}", getattr(r, "backend", ""),
                  getattr(r, "durability", ""), r.medium)
        if r.section == "write-heavy":
            overall = r.overall or OpStats()
            row.setting += f" threads {r.threads}"
            row.throughput, row.unit, row.op = r.throughput_ops_sec, "ops/s", "ALL"
            row.p50_us, row.p99_us = overall.p50_us, overall.p99_us
        elif r.section == "table5.1":
            row.setting += f" {r.pattern}" + (" sync" if r.sync_per_op else "")
            row.throughput, row.unit = r.ops_per_sec, "ops/s"
        elif r.section == "rpc":
            row.workload, row.setting = f"rpc {r.operation}", f"{r.medium} {r.case}"
            row.throughput, row.unit = r.ops_per_sec, "ops/s"
            row.note = "" if r.rpcs_per_op is None else f"{r.rpcs_per_op:.2f} round trips per op"
        else:  # recovery
            row.setting += f" keys {r.keys}"
            row.note = _reopens(r.open_after_crash_ms, r.open_after_clean_ms)
        if r.skipped:
            row.note = f"skipped: {r.skipped}"
        yield row


def _paper(doc: Any, source: str) -> Iterator[Row]:
    """CheckMate's grid and LOG.io's straggler runs: one row per job run."""
    checkmate = doc.SCHEMA.startswith("ckptbench.checkmate")
    for r in doc.rows:
        if checkmate:
            workload, setting = f"nexmark-{r.query}", f"protocol {r.protocol} skew {r.skew}"
            from experiments.spark.matrix_result import ratio_to_none

            none = next((n for n in doc.rows if (n.query, n.skew, n.protocol) == (r.query, r.skew, "none")), None)
            ratio = "" if r.throughput_vs_none is None else ratio_to_none(
                r.throughput_vs_none, r.metrics, r.protocol, none and none.metrics, lambda v: f"{v:.3g}x none")
        else:
            workload = "logio-stragglers"
            setting = f"{r.setting} protocol {r.protocol}" + (f" {r.failures} failure(s)" if r.failures else "")
            ratio = ("" if r.latency_vs_none is None
                     else f"latency {r.latency_vs_none:.3g}x none")
        yield Row(source, doc.SCHEMA, workload, getattr(r, "backend", doc.backend), "default",
                  setting, "event", r.throughput, "events/s", _ms(r.latency_p50_ms),
                  _ms(r.latency_p99_ms), ratio,
                  note="" if r.exactly_once is None else f"exactly once: {str(r.exactly_once).lower()}")


def _advise(doc: Any, source: str) -> Iterator[Row]:
    for a in doc.ranking:
        interval = "RTO not met" if a.interval_s is None else f"interval {a.interval_s:.3g} s"
        yield Row(source, doc.SCHEMA, "advise", a.backend, "", f"protocol {a.protocol}",
                  throughput=a.throughput, unit="events/s",
                  note=f"rank {a.rank}: {interval}, overhead {100 * a.overhead:.1f}%")


def _advise_state(doc: Any, source: str) -> Iterator[Row]:
    for a in doc.ranking:
        interval = "RTO not met" if a.interval_s is None else f"interval {a.interval_s:.3g} s"
        rank = f"rank {a.rank}" if a.ranked else "not ranked"
        yield Row(source, doc.SCHEMA, "advise-state", a.store, "", f"layout {a.layout}",
                  throughput=a.throughput, unit="events/s",
                  note=f"{rank}: {a.factor:.3g}x the measured state, {interval}, overhead {100 * a.overhead:.1f}%")


def _verify(doc: Any, source: str) -> Iterator[Row]:
    yield Row(source, doc.SCHEMA, "verify", doc.backend, setting=f"records {doc.records}",
              note=("intact" if doc.ok else f"DAMAGED: {len(doc.damaged_keys)} damaged, "
                    f"{len(doc.lost_keys)} lost keys"))


def _diff(doc: Any, source: str) -> Iterator[Row]:
    yield Row(source, doc.SCHEMA, "diff", setting=f"{doc.base} -> {doc.new}",
              note=f"{len(doc.changes)} metrics, {doc.regressions} regression(s)"
              + "".join(f"; not comparable: {line}" for line in doc.not_comparable))


#: schema name (without version) -> the rows of a document of it
HANDLERS: dict[str, Callable[[Any, str], Iterator[Row]]] = {
    "ckptbench.result": _result, "ckptbench.compare": _entries, "ckptbench.sweep": _entries,
    "ckptbench.spark": _spark, "ckptbench.spark-matrix": _matrix, "ckptbench.audit": _audit,
    "ckptbench.peer": _peer, "ckptbench.peer-ycsb": _peer_ycsb,
    "ckptbench.reproduce": _reproduce, "ckptbench.verify": _verify,
    "ckptbench.diff": _diff, "ckptbench.thesis": _thesis,
    "ckptbench.storage-compare": _storage_compare, "ckptbench.checkmate": _paper,
    "ckptbench.logio-stragglers": _paper, "ckptbench.advise": _advise,
    "ckptbench.advise-state": _advise_state, "ckptbench.mst": _mst,
}


def _other(doc: Document, source: str) -> Iterator[Row]:
    """A schema with no handler: one row naming it, its experiment and store if it has them."""
    yield Row(source, doc.SCHEMA, str(getattr(doc, "experiment", None) or doc.SCHEMA),
              str(getattr(doc, "backend", "") or ""),
              note="no summary row for this schema: see its own table (bench reproduce)")


def rows(doc: Document | dict[str, Any], source: str) -> list[Row]:
    """The rows of ``doc`` (a document, or its JSON object), ``source`` naming where it came
    from; :class:`DocumentError` for an object that is no known document."""
    if not isinstance(doc, Document):
        doc = parse(doc)
    handler = HANDLERS.get(doc.SCHEMA.partition("/")[0], _other)
    return list(handler(doc, source))


def environment(doc: Document) -> Environment | None:
    """The conditions ``doc`` was made under (every document has them; ``None`` for one written
    before they were recorded)."""
    env = getattr(doc, "environment", None)
    return env if isinstance(env, Environment) else None


__all__ = ["DocumentError", "HANDLERS", "Row", "environment", "rows"]
