"""``bench reproduce``'s result: one experiment's run as a document (``ckptbench.reproduce/1``).

A :class:`Reproduce` says which commands ran (each a :class:`StepRun`, with its own document
as that command wrote it), whether they all succeeded, when, under which conditions (machine,
CPUs, load average before and after, the environment) and the table they made.  The docs'
block and the README row are written from it alone (:mod:`experiments.reproduce.docs`), so they
can be rebuilt from ``results/NAME.json`` at any time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from experiments.core.document import Document, Environment, optional


@dataclass
class StepRun:
    """One command of the experiment: how it ran, its log, and its document (``error``: its
    last stderr line, or what it failed to write)."""

    label: str
    command: str
    returncode: int | None
    seconds: float
    log: str
    document_path: str
    plot: str | None = None
    error: str | None = None
    #: the command's own document verbatim (any schema: the experiment's table reads it with
    #: its type, as every reader of a written file does)
    document: dict[str, Any] | None = None


@dataclass
class Target:
    """A target the experiment's table holds a figure to, and whether this run met it."""

    what: str
    met: bool


@dataclass
class Chart:
    """A chart the run drew and ``bench reproduce`` publishes, and what it was drawn from: the
    digests that let a test tell that a chart in the docs is this run's and no other's
    (:func:`experiments.reproduce.docs.chart_problems`)."""

    #: where the run wrote it (``out/NAME*.png``; published as ``img/<its name>``)
    png: str
    #: SHA-256 of the PNG file
    sha256: str
    #: the document it was drawn from: a command's JSON, or ``out/NAME.json`` for a chart of all
    source: str
    #: digest of that document's content (:func:`experiments.reproduce.docs.digest_json`)
    source_sha256: str


@dataclass(kw_only=True)
class Reproduce(Document):
    """``ckptbench.reproduce/1``: one experiment, its commands in order and its table."""

    SCHEMA = "ckptbench.reproduce/1"

    name: str
    shows: str
    quick: bool
    servers: list[str] = field(default_factory=list)
    #: ``ok`` or ``failed`` (``error`` says why)
    status: str = "ok"
    error: str | None = None
    commands: list[str] = field(default_factory=list)
    started: str = ""
    finished: str = ""
    seconds: float = 0.0
    environment: Environment = field(default_factory=Environment.here)
    machine: str = ""
    cpus: int | None = None
    loadavg_before: list[float] = field(default_factory=list)
    loadavg_after: list[float] = field(default_factory=list)
    runs: list[StepRun] = field(default_factory=list)
    table: list[str] | None = optional()
    #: the chart drawn from all the commands' documents (an experiment whose commands draw none)
    chart: str | None = optional()
    #: the targets its table judged, in table order (absent: the table holds none)
    targets: list[Target] | None = optional()
    #: with ``--rerun``: the steps taken over from an earlier run of the same commands, and when
    #: that run started (absent: every step ran in this one)
    reused: list[str] | None = optional()
    reused_from: str | None = optional()
    #: digest of every command's document (:meth:`documents`): what the table was made from
    run_sha256: str | None = optional()
    #: the charts published beside the table, each with its source
    charts: list[Chart] | None = optional()

    def missed(self) -> list[str]:
        """The targets this run did not meet."""
        return [t.what for t in self.targets or [] if not t.met]

    def documents(self) -> dict[str, dict[str, Any]]:
        """The commands' own documents, by step label."""
        return {r.label: r.document for r in self.runs if r.document is not None}
