"""``bench storage-compare``'s result as a document, ``ckptbench.storage-compare/1``.

The comparison (:mod:`experiments.storage.compare`) has four sections, each with rows of its own
shape: Table 5.1's small writes into one file (:class:`Table51Row`), the write-heavy workload
per backend and thread count (:class:`WriteHeavyRow`), indexed_fs's reopen (:class:`RecoveryRow`)
and the round trips per operation over a remote medium (:class:`RpcRow`).  Every row names its
``section`` and ``medium`` and says why it was ``skipped``, if it was; its figures are absent
then.  Reading a document gives each row the type its section names (:data:`ROWS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from experiments.core.document import Document, Environment, load, optional
from experiments.core.results import OpStats, Phase


@dataclass
class MediumInfo:
    """One medium compared: its name, kind (local, nfs, hdfs), where, and why it was skipped."""

    name: str
    kind: str
    location: str
    skipped: str | None = None


@dataclass
class Config:
    """The sizes the comparison ran with."""

    ops: int
    sync_ops: int
    big: bool
    sizes: list[int]
    threads: list[int]
    write_heavy_max_seconds: float
    recovery_keys: int
    rpc_ops: int


@dataclass(kw_only=True)
class SectionRow:
    """What every row says: its section, the medium (and its kind) it ran on, and why it was
    skipped, if it was."""

    section: str
    medium: str
    kind: str
    skipped: str | None = None


@dataclass(kw_only=True)
class Table51Row(SectionRow):
    """``ops`` 10-byte writes into one file (``ops_requested``, capped where each is durable)."""

    section: str = "table5.1"
    pattern: str
    sync_per_op: bool
    record_bytes: int
    ops_requested: int
    ops: int
    file_bytes: int
    capped: bool
    elapsed_s: float | None = optional()
    ops_per_sec: float | None = optional()
    us_per_op: float | None = optional()


@dataclass
class Workload:
    """The write-heavy workload's shape."""

    name: str
    records: int
    operations: int
    read: float
    update: float
    value_size: int


@dataclass(kw_only=True)
class WriteHeavyRow(SectionRow):
    """One file backend at ``threads`` client threads on the medium (durability sync)."""

    section: str = "write-heavy"
    backend: str
    threads: int
    durability: str
    workload: Workload
    max_seconds: float
    throughput_ops_sec: float | None = optional()
    operations_done: int | None = optional()
    overall: OpStats | None = optional()
    errors: dict[str, int] | None = optional()
    phases: dict[str, Phase] | None = optional()


@dataclass(kw_only=True)
class RecoveryRow(SectionRow):
    """indexed_fs reopened on the medium after a crash and after a clean close."""

    section: str = "recovery"
    backend: str
    keys: int
    value_bytes: int
    index_flush_interval: float
    crash: str
    load_ms: float | None = optional()
    open_after_crash_ms: float | None = optional()
    #: what the store's statistics said of each open (snapshot used, records scanned, ...)
    after_crash: dict[str, Any] | None = optional()
    open_after_clean_ms: float | None = optional()
    after_clean: dict[str, Any] | None = optional()


@dataclass(kw_only=True)
class RpcRow(SectionRow):
    """Round trips to the medium's server per operation of one case."""

    section: str = "rpc"
    operation: str
    case: str
    ops: int
    unit: str
    value_bytes: int
    rpc_calls: int | None = optional()
    rpcs_per_op: float | None = optional()
    ops_per_sec: float | None = optional()


#: the row type of each section
ROWS: dict[str, type] = {"table5.1": Table51Row, "write-heavy": WriteHeavyRow,
                         "recovery": RecoveryRow, "rpc": RpcRow}


@dataclass(kw_only=True)
class StorageCompare(Document):
    """``ckptbench.storage-compare/1``: every section over every medium."""

    SCHEMA = "ckptbench.storage-compare/1"

    experiment: str = "storage-compare"
    config: Config
    environment: Environment = field(default_factory=Environment.here)
    media: list[MediumInfo] = field(default_factory=list)
    #: the thesis' findings the tables stand beside
    thesis: str = ""
    #: rows of the sections' own types (:data:`ROWS`)
    rows: list[Any] = field(default_factory=list)
    #: ``indexed_over_default/<medium>/x<threads>``: indexed_fs over default_fs, write-heavy
    summary: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> StorageCompare:
        result = super().from_json(doc)
        result.rows = [load(ROWS[r["section"]], r) for r in result.rows]
        return result
