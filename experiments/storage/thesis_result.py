"""The S4 thesis experiments' results as one document type, ``ckptbench.thesis/1``.

Each experiment (:mod:`experiments.storage.thesis`) has rows of its own shape: Fig 4.2's open
times per PE count (:class:`Fig42Row`), Figs 4.5/4.6's checkpoint writes and lazy reads per
backend (:class:`Fig45Row`), Fig 4.7's storage-queue rates (:class:`Fig47Row`) and Table 5.2's
trade-offs (:class:`Table52Row`).  :class:`Thesis` names the experiment, and reading a document
gives its rows the type that experiment writes (:data:`ROWS`).  Fig 4.1 is a thread sweep and is
written as one (:class:`experiments.core.results.Sweep`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workloads.checkpoint import CheckpointSpec

from experiments.core.document import Document, Environment, load, optional
from experiments.core.format import Runs, md_table, num, times
from experiments.core.results import CheckpointSummary, OpStats, Sweep


@dataclass
class Fig42Row:
    """indexed_fs opened over ``pes`` keys: the load, and the opens after a crash and a clean close."""

    pes: int
    load_ms: float
    open_after_crash_ms: float = 0.0
    open_after_clean_ms: float = 0.0


@dataclass
class Fig45Row:
    """One backend's checkpoint run, crash and lazy recovery reads (or why it was skipped)."""

    backend: str
    skipped: str | None = None
    checkpoint: CheckpointSummary | None = optional()
    write: OpStats | None = optional()
    read: OpStats | None = optional()
    open_ms: float | None = optional()
    missing: int | None = optional()
    corrupt: int | None = optional()


@dataclass(kw_only=True)
class Fig47Row(CheckpointSummary):
    """One backend at ``pes`` PEs: its checkpoint run's summary (the queue's drain rate)."""

    backend: str
    pes: int


@dataclass
class Table52Row:
    """One store in the trade-off table: what it needs, what it promises, and the figures the
    other experiments measured (absent where that experiment did not run)."""

    backend: str
    dependency: str = "-"
    durability: str = "-"
    max_write_heavy_ops_sec: float | None = optional()
    skipped: str | None = optional()
    write_mean_us: float | None = optional()
    read_mean_us: float | None = optional()
    open_ms: float | None = optional()
    #: checkpoints/s by PE count (the count as text: a JSON key)
    queue_ckpt_sec_by_pes: dict[str, float] | None = optional()


#: the row type of each experiment's document
ROWS: dict[str, type] = {"fig4.2": Fig42Row, "fig4.5": Fig45Row, "fig4.7": Fig47Row,
                         "table5.2": Table52Row}


@dataclass(kw_only=True)
class Thesis(Document):
    """``ckptbench.thesis/1``: one thesis experiment, its settings and its rows."""

    SCHEMA = "ckptbench.thesis/1"

    experiment: str
    quick: bool | None = optional()
    #: Fig 4.5's checkpoint workload
    spec: CheckpointSpec | None = optional()
    #: Fig 4.7's events offered, their rate and the storage queue's length
    events: int | None = optional()
    rate: float | None = optional()
    queue: int | None = optional()
    environment: Environment = field(default_factory=Environment.here)
    #: rows of the experiment's own type (:data:`ROWS`)
    rows: list[Any] = field(default_factory=list)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Thesis:
        thesis = super().from_json(doc)
        thesis.rows = [load(ROWS[thesis.experiment], r) for r in thesis.rows]
        return thesis


# -------------------------------------------------------------------------- tables and headlines
def fig41(runs: Runs) -> list[str]:
    (doc,) = (Sweep.from_json(d) for d in runs.values())
    rows = []
    for e in doc.results:
        threads = e.params.threads
        if e.skipped:
            rows.append([e.backend, str("-" if threads is None else threads),
                         f"skipped: {e.skipped}", "-"])
            continue
        mean = e.overall.mean_us if e.overall else None
        rows.append([e.backend, str(threads), num(e.throughput_ops_sec),
                     num(mean / 1000.0 if mean is not None else None)])
    return md_table(["backend", "threads", "ops/s", "mean latency ms"], rows)


def fig41_headline(runs: Runs) -> str:
    (doc,) = (Sweep.from_json(d) for d in runs.values())
    best = (doc.summary or {})["max_throughput_ops_sec"]
    return "most write-heavy ops/s: " + ", ".join(f"{b} {num(t)}" for b, t in best.items())


def _thesis(runs: Runs) -> Thesis:
    (doc,) = (Thesis.from_json(d) for d in runs.values())
    return doc


def fig42(runs: Runs) -> list[str]:
    return md_table(["PEs", "load ms", "open after crash ms", "open after clean close ms"],
                    [[num(r.pes), num(r.load_ms), num(r.open_after_crash_ms),
                      num(r.open_after_clean_ms)] for r in _thesis(runs).rows])


def fig42_headline(runs: Runs) -> str:
    r = _thesis(runs).rows[-1]
    return (f"{num(r.pes)} PEs: index rebuilt in {num(r.open_after_crash_ms)} ms after a "
            f"crash, {num(r.open_after_clean_ms)} ms after a clean close")


def fig45(runs: Runs) -> list[str]:
    rows = []
    for r in _thesis(runs).rows:
        if r.skipped:
            rows.append([r.backend, f"skipped: {r.skipped}"] + ["-"] * 5)
            continue
        rows.append([r.backend, num(r.write.mean_us), num(r.write.p99_us), num(r.read.mean_us),
                     num(r.read.p99_us), num(r.checkpoint.dropped), num(r.open_ms)])
    return md_table(["backend", "write mean µs", "write p99 µs", "lazy read mean µs",
                     "lazy read p99 µs", "dropped", "reopen ms"], rows)


def fig45_headline(runs: Runs) -> str:
    doc = _thesis(runs)
    by = {r.backend: r for r in doc.rows if not r.skipped}
    d, i = by["default_fs"], by["indexed_fs"]
    parts = [f"indexed_fs writes {times(d.write.mean_us / i.write.mean_us)}, lazy "
             f"recovery reads {times(d.read.mean_us / max(i.read.mean_us, 1e-9))} "
             f"faster than default_fs"]
    parts += [f"{r.backend} skipped" for r in doc.rows if r.skipped]
    return "; ".join(parts)


def fig47(runs: Runs) -> list[str]:
    return md_table(["backend", "PEs", "checkpoints/s", "written", "dropped"],
                    [[r.backend, num(r.pes), num(r.write_rate), num(r.written), num(r.dropped)]
                     for r in _thesis(runs).rows])


def fig47_headline(runs: Runs) -> str:
    doc = _thesis(runs)
    by: dict[str, list[float]] = {}
    for r in doc.rows:
        by.setdefault(r.backend, []).append(r.write_rate)
    pes = [r.pes for r in doc.rows]

    def rates(b: str, v: list[float]) -> str:
        """A backend that kept up writes at the rate offered: say so, not the offered rate
        as if the store had reached it by itself."""
        if doc.rate and min(v) >= 0.98 * doc.rate:
            return f"{b} kept up with the {num(doc.rate)}/s offered"
        return f"{b} {num(min(v))}-{num(max(v))}"

    return (f"checkpoints/s over {num(min(pes))}-{num(max(pes))} PEs: "
            + ", ".join(rates(b, v) for b, v in by.items()))


def table52(runs: Runs) -> list[str]:
    rows = []
    for r in _thesis(runs).rows:
        q = r.queue_ckpt_sec_by_pes or {}
        rows.append([r.backend, r.dependency, r.durability, num(r.max_write_heavy_ops_sec),
                     num(r.write_mean_us), num(r.read_mean_us),
                     " ".join(f"{num(v)} ({num(int(k))})" for k, v in q.items()) or "-",
                     f"skipped: {r.skipped}" if r.skipped and r.write_mean_us is None else ""])
    return md_table(["backend", "dependency", "durability", "most write-heavy ops/s",
                     "checkpoint write µs", "lazy read µs", "queue checkpoints/s (PEs)", "note"],
                    rows)


def table52_headline(runs: Runs) -> str:
    return ("the stores side by side: " + ", ".join(r.backend for r in _thesis(runs).rows)
            + " (dependency, durability, figures from fig4.1, fig4.5, fig4.7)")
