"""``bench verify``'s result: what an offline check of a store's files found, as a document.

:class:`Verify` (``ckptbench.verify/1``) records the counts the check read, every damaged range
with the keys whose newest version lay in it, the damaged index files, and which damaged keys
are lost (no intact version left) or rolled back (an older version survives).  The check itself
is the store's (``backends.indexed_fs.verify``); this module only gives its report a schema, so
the CLI prints and writes and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from experiments.core.document import Document, Environment


@dataclass
class Damaged:
    """Bytes ``[start, end)`` of one segment that hold no intact records (``end`` ``None``: the
    whole file is gone), why, and the keys whose newest version lay there."""

    segment: int
    start: int
    end: int | None
    what: str
    keys: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Verify(Document):
    """``ckptbench.verify/1``: one store's offline check."""

    SCHEMA = "ckptbench.verify/1"

    backend: str
    path: str
    ok: bool
    segments: int = 0
    records: int = 0
    snapshots: int = 0
    damaged_keys: list[str] = field(default_factory=list)
    lost_keys: list[str] = field(default_factory=list)
    rolled_back_keys: list[str] = field(default_factory=list)
    damaged: list[Damaged] = field(default_factory=list)
    bad_snapshots: list[str] = field(default_factory=list)
    hints: int = 0
    bad_hints: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    environment: Environment = field(default_factory=Environment.here)

    @classmethod
    def of(cls, backend: str, path: str, rep: Any) -> Verify:
        """The document of ``rep``, a ``backends.indexed_fs.verify.Report`` of ``path``."""
        return cls(backend=backend, path=path, ok=rep.ok, segments=rep.segments,
                   records=rep.records, snapshots=rep.snapshots,
                   damaged_keys=rep.damaged_keys, lost_keys=rep.lost,
                   rolled_back_keys=rep.rolled_back,
                   damaged=[Damaged(r.segment, r.start, r.end, r.what, list(r.keys))
                            for r in rep.damaged],
                   bad_snapshots=rep.bad_snapshots, hints=rep.hints, bad_hints=rep.bad_hints,
                   notes=rep.notes)
