"""Markdown of the ``bench reproduce`` experiments that reproduce the source papers' figures.

The S4 thesis' experiments (``fig4.1``, ``fig4.2``, ``fig4.5``, ``fig4.7``, ``table5.2``), its
storage comparison (``storage-compare``: Table 5.1 and the media) and the checkpoint protocols on
PySpark (``spark-matrix``: CheckMate's and LOG.io's questions): one table and one headline each.
Like :mod:`experiments.reproduce.tables`, every function reads only the JSON documents the
experiment's commands wrote, and a document missing a field raises, so the caller reports the
experiment as failed rather than publishing a half-empty table.
"""

from __future__ import annotations

from typing import Any

from experiments.core.results import Sweep
from experiments.spark.matrix_result import Matrix
from experiments.storage.compare_result import StorageCompare
from experiments.storage.thesis_result import Thesis
from experiments.report.format import md_table, num, times

Runs = dict[str, dict[str, Any]]


# ------------------------------------------------------------------------------------- thesis
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
    return (f"checkpoints/s over {num(min(pes))}-{num(max(pes))} PEs: "
            + ", ".join(f"{b} {num(min(v))}-{num(max(v))}" for b, v in by.items()))


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


# ---------------------------------------------------------------------------- storage-compare
def storage_compare(runs: Runs) -> list[str]:
    (doc,) = (StorageCompare.from_json(d) for d in runs.values())
    media = [m.name for m in doc.media]
    rows_by: dict[str, dict[str, str]] = {}

    def put(measure: str, medium: str, value: str) -> None:
        rows_by.setdefault(measure, {})[medium] = value

    size = max(doc.config.sizes)
    for r in doc.rows:
        m, sec = r.medium, r.section
        if sec == "table5.1" and r.ops_requested == size:
            what = (f"Table 5.1 {r.pattern}{', sync each' if r.sync_per_op else ''} "
                    f"({num(size)} x 10 B), ops/s")
            put(what, m, "skipped" if r.skipped else
                num(r.ops_per_sec) + (f" ({num(r.ops)} run)" if r.capped else ""))
        elif sec == "write-heavy":
            put(f"write-heavy {r.backend} x{r.threads}, ops/s", m,
                "skipped" if r.skipped else num(r.throughput_ops_sec))
        elif sec == "recovery":
            for label in ("clean", "crash"):
                put(f"indexed_fs open after {'clean close' if label == 'clean' else 'crash'} "
                    f"({num(r.keys)} keys), ms", m,
                    "skipped" if r.skipped else num(getattr(r, f"open_after_{label}_ms")))
        elif sec == "rpc":
            put(f"RPCs per {r.operation}", m,
                "skipped" if r.skipped else f"{r.rpcs_per_op:.2f}")
    for key, value in doc.summary.items():
        _, medium, threads = key.split("/")
        put(f"write-heavy indexed_fs/default_fs {threads}", medium, times(value))
    return md_table(["measure"] + media,
                    [[what] + [cells.get(m, "-") for m in media] for what, cells in rows_by.items()])


def storage_compare_headline(runs: Runs) -> str:
    (doc,) = (StorageCompare.from_json(d) for d in runs.values())
    most = f"x{max(doc.config.threads)}"
    parts = [f"{k.split('/')[1]} {times(v)}" for k, v in doc.summary.items()
             if k.split("/")[2] == most]
    return f"write-heavy indexed_fs/default_fs with {most[1:]} threads: " + ", ".join(parts)


# ------------------------------------------------------------------------------- spark-matrix
def spark_matrix(runs: Runs) -> list[str]:
    """Medians of the rounds with their range; a skipped row shows its reason and no figures."""
    (doc,) = (Matrix.from_json(d) for d in runs.values())
    rows = []
    for r in doc.rows:
        eo = "-" if r.exactly_once is None else str(r.exactly_once).lower()
        spread = r.throughput_spread
        rng = f"{num(spread.min)}–{num(spread.max)}" if spread and len(spread.rounds) > 1 else "-"
        work = r.work or {}
        mb = (lambda k: num(round(work[k] / 1e6, 2)) if k in work else "-")  # noqa: E731
        rows.append([r.protocol, r.backend, num(r.throughput), rng, times(r.ratio.get("none")),
                     times(r.ratio.get("spark_state")), num(r.checkpoint_ms), num(r.recovery_ms),
                     num(work.get("checkpoints")), mb("checkpoint_bytes"), mb("logged_bytes"),
                     eo if not r.skipped else f"skipped: {r.skipped}"])
    return md_table(["protocol", "backend", "events/s (median)", "range over rounds", "x none",
                     "x spark-state", "checkpoint ms", "recovery ms", "checkpoints", "checkpointed MB",
                     "logged MB", "exactly once"], rows)


def spark_matrix_headline(runs: Runs) -> str:
    (doc,) = (Matrix.from_json(d) for d in runs.values())
    return "events/s relative to no checkpointing: " + ", ".join(
        f"{r.protocol}{'' if r.backend == '-' else ' on ' + r.backend} "
        f"{times(r.ratio.get('none'))}" for r in doc.rows if r.protocol != "none")
