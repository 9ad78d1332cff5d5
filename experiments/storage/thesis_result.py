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
from experiments.core.results import CheckpointSummary, OpStats


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
