"""``bench spark-matrix --cluster``'s result, ``ckptbench.spark-scaling/1``, and its tables.

One :class:`~experiments.spark.matrix_result.Matrix` per parallelism (the same protocols, stores
and rounds at each; its ``job.parallelism`` says which), run on the hosts of ``bench services up
cluster``: how throughput, checkpoint time and recovery time change with the instances, as
CheckMate's workers axis does.  With ``--fail-node K`` every run that takes failures loses host K
at the offset, and each row carries Spark's time to notice the lost executor
(``Recovery.ExecutorLoss(ms)``).

This module reads documents only (no Spark): the tables are what ``bench reproduce
cluster-scaling`` publishes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from experiments.core.document import Document, Environment
from experiments.core.format import Runs, md_table, num, text_table, times
from experiments.spark.matrix_result import Matrix, Row

#: the parallelisms ``--cluster`` runs by default: 2, 4 and 6 instances over the hosts
PARALLELISM = (2, 4, 6)
#: the ``[SPARK]`` line with Spark's time to notice a lost host's executor
EXECUTOR_LOSS = "Recovery.ExecutorLoss(ms)"


@dataclass(kw_only=True)
class Scaling(Document):
    """``ckptbench.spark-scaling/1``: the cluster it ran on and one matrix per parallelism."""

    SCHEMA = "ckptbench.spark-scaling/1"

    #: the worker hosts and the cores each offers (``bench services status cluster``)
    hosts: int
    cores_per_host: int
    #: the host every run that takes failures loses (None: no node loss)
    fail_node: int | None = None
    fail_offset: int | None = None
    matrices: list[Matrix] = field(default_factory=list)
    environment: Environment = field(default_factory=Environment.here)

    def parallelisms(self) -> list[int]:
        return [m.job.parallelism for m in self.matrices]

    @property
    def table(self) -> list[str]:
        """The tables the command printed (what the report page shows of it)."""
        return to_text(self).splitlines()


def executor_loss_ms(row: Row) -> float | None:
    """The row's median time for Spark to notice the lost executor (None: no host was lost, or
    Spark did not notice within the run)."""
    value = (row.metrics or {}).get(EXECUTOR_LOSS)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def combinations(doc: Scaling) -> list[tuple[str, str]]:
    """Every ``(protocol, backend)`` of any parallelism, in the order first met."""
    return list(dict.fromkeys((r.protocol, r.backend) for m in doc.matrices for r in m.rows))


def row_at(matrix: Matrix, protocol: str, backend: str) -> Row | None:
    return next((r for r in matrix.rows if (r.protocol, r.backend) == (protocol, backend)), None)


def scaling_of(doc: Scaling, figure: str, protocol: str, backend: str) -> list[float | None]:
    """``figure`` (``throughput``, ``checkpoint_ms``, ``recovery_ms``) of one combination at each
    parallelism, in :meth:`Scaling.parallelisms`' order (None where it did not run)."""
    out = []
    for m in doc.matrices:
        row = row_at(m, protocol, backend)
        out.append(None if row is None or row.skipped else getattr(row, figure))
    return out


def speedup(values: list[float | None]) -> float | None:
    """The last parallelism's figure over the first's (None without both)."""
    if not values or values[0] in (None, 0) or values[-1] is None:
        return None
    return values[-1] / values[0]


def _cells(values: list[float | None]) -> list[str]:
    return [num(v) for v in values]


def parallelism_rows(matrix: Matrix, with_loss: bool) -> tuple[list[str], list[list[str]]]:
    """One parallelism's table: each row's medians, and Spark's executor-loss detection with a
    node loss."""
    head = ["protocol", "backend", "events/s", "checkpoint ms", "recovery ms",
            *(["executor loss ms"] if with_loss else []), "exactly once"]
    rows = []
    for r in matrix.rows:
        eo = "-" if r.exactly_once is None else str(r.exactly_once).lower()
        rows.append([r.protocol, r.backend, num(r.throughput), num(r.checkpoint_ms), num(r.recovery_ms),
                     *([num(executor_loss_ms(r))] if with_loss else []),
                     f"skipped: {r.skipped}" if r.skipped else eo])
    return head, rows


def scaling_rows(doc: Scaling) -> tuple[list[str], list[list[str]]]:
    """The curve: each combination's throughput, checkpoint and recovery time at every
    parallelism, and its throughput at the largest over the smallest."""
    ps = doc.parallelisms()
    head = ["protocol", "backend", *(f"events/s p={p}" for p in ps),
            f"x (p={ps[-1]} / p={ps[0]})" if ps else "x",
            *(f"ckpt ms p={p}" for p in ps), *(f"recovery ms p={p}" for p in ps)]
    rows = []
    for protocol, backend in combinations(doc):
        tput = scaling_of(doc, "throughput", protocol, backend)
        rows.append([protocol, backend, *_cells(tput), times(speedup(tput)),
                     *_cells(scaling_of(doc, "checkpoint_ms", protocol, backend)),
                     *_cells(scaling_of(doc, "recovery_ms", protocol, backend))])
    return head, rows


def markdown(runs: Runs) -> list[str]:
    """Each run's scaling table, then one table per parallelism (``bench reproduce
    cluster-scaling``: one run per set of protocols x stores)."""
    out: list[str] = []
    for doc in map(Scaling.from_json, runs.values()):
        with_loss = doc.fail_node is not None
        out += ([""] if out else []) + md_table(*scaling_rows(doc))
        for m in doc.matrices:
            out += ["", f"Parallelism {m.job.parallelism} over {doc.hosts} hosts:", ""]
            out += md_table(*parallelism_rows(m, with_loss))
    return out


def headline(runs: Runs) -> str:
    """Each protocol's throughput at the largest parallelism over the smallest (its range over
    the stores of every run)."""
    docs = [Scaling.from_json(d) for d in runs.values()]
    by: dict[str, list[float]] = {}
    for doc in docs:
        for protocol, backend in combinations(doc):
            x = speedup(scaling_of(doc, "throughput", protocol, backend))
            if x is not None and len(doc.parallelisms()) > 1:
                by.setdefault(protocol, []).append(x)
    if not by:
        return "events/s by parallelism: no combination ran at two parallelisms"
    ps = docs[0].parallelisms()
    span = (lambda v: times(v[0]) if times(min(v)) == times(max(v))  # noqa: E731
            else f"{min(v):.2f}–{max(v):.2f}x")
    return (f"events/s at p={ps[-1]} over p={ps[0]} on {docs[0].hosts} hosts: "
            + ", ".join(f"{p} {span(v)}" for p, v in by.items()))


def to_text(doc: Scaling) -> str:
    """The tables as the CLI prints them: one per parallelism, then the curve."""
    with_loss = doc.fail_node is not None
    parts = []
    for m in doc.matrices:
        parts.append(f"[SCALING] parallelism {m.job.parallelism} over {doc.hosts} hosts"
                     + (f", host {doc.fail_node} lost at event {doc.fail_offset}" if with_loss else ""))
        parts += text_table(*parallelism_rows(m, with_loss))
        parts.append("")
    parts.append("[SCALING] by parallelism")
    parts += text_table(*scaling_rows(doc))
    return "\n".join(parts)
