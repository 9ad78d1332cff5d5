"""``bench thesis fig4.1|fig4.2|fig4.5|fig4.7|table5.2``: the S4 thesis' experiments, one command
each.  This module only orchestrates: workloads come from :mod:`workloads`, tables from
:mod:`experiments.report.tables` or printed here, charts from :mod:`experiments.report.plots` (drawn from the
same document that is written, so a saved result re-plots identically).  Each experiment writes
``<out>/<name>.json`` and ``<out>/<name>.png`` and prints the thesis' figure beside ours.
Backends that cannot open (server down, client package missing) are listed as skipped with the
reason, never silently left out.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from typing import Any, Callable, TypeVar

from backends import backend_class
from experiments.storage import crash
from experiments.report import page, plots
from experiments.storage import recovery
from experiments.core import results
from experiments.report import tables
from experiments.core.document import Document, load
from experiments.core.format import Note, text_table
from experiments.storage.thesis_result import Fig42Row, Fig45Row, Fig47Row, Table52Row, Thesis

D = TypeVar("D", bound=Document)

#: the stores the thesis compares (its file stores first); what kind each is, its class says
THESIS_STORES = ["default_fs", "indexed_fs", "redis", "hbase", "minio"]


def _file_stores() -> list[str]:
    """The thesis' stores that are files in a directory (the ones its file experiments run)."""
    return [b for b in THESIS_STORES if backend_class(b).kind == "file"]

THESIS = {
    "fig4.1": "thesis Fig 4.1 (NFS): default FS hardly passes 700 ops/s; indexed FS saturates "
              "near 2,100 ops/s at 20 ms.  Fig 5.1 (local ext3): default FS < 500 ops/s; "
              "indexed FS 700 ops/s < 10 ms.",
    "fig4.2": "thesis Fig 4.2: 1,000,000 PEs' index rebuilt in < 250 ms (~70-byte entries).",
    "fig4.5": "thesis Figs 4.5/4.6 (400 ev/s, 10,000 events, 1,000 PEs, NFS): indexed FS 4.85x "
              "faster writes and 3x faster reads than default FS; HBase writes ~ Redis writes; "
              "HBase reads slower than its writes.",
    "fig4.7": "thesis Fig 4.7: default FS <= 400 checkpoints/s (150/s with 1,000,000 PEs); "
              "indexed FS ~1,300/s regardless of the number of PEs.",
    "table5.2": "thesis Table 5.2: default FS - no dependency, few PEs, rare checkpoints; indexed "
                "FS - favours writes, costly recovery, many PEs, frequent checkpoints; Redis - "
                "fastest, durability not full; HBase - favours writes, many PEs, durable via WAL.",
}


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _print_table(head: list[str], body: list[list[str] | Note], align: str | None = None) -> None:
    """An experiment's table on stdout (its progress lines go to stderr)."""
    print("\n".join(text_table(head, body, align=align)), flush=True)


def backend_options(backend: str) -> dict[str, Any]:
    """Options for a fresh, isolated store: servers get their own namespace (no server is
    started here: one that is down makes the backend *skipped*)."""
    if backend_class(backend).kind == "server":
        import services

        return services.client_options(backend, f"thesis{uuid.uuid4().hex[:8]}")
    return {}


def _skip_reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _write(out_dir: str, name: str, doc: Document) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")
    results.write_json(path, doc)
    page.write_beside(path, doc)
    return path


# ------------------------------------------------------------------------------------- fig 4.1
def fig41(out_dir: str, quick: bool) -> results.Sweep:
    """Sweep write-heavy (90 % update, 1 KB, 1,000 PEs) over default_fs, indexed_fs, raising
    client threads 1..32 until throughput stops growing."""
    from experiments.core.compare import sweep_points
    from workloads import core

    spec = core.preset("write-heavy")
    entries = []
    for backend in _file_stores():
        # the thesis raised YCSB client threads until saturation: service latency vs throughput
        points = sweep_points(backend, {}, spec, threads_list=[1, 2, 4, 8, 16, 32],
                              point_seconds=1.0 if quick else 3.0,
                              on_point=lambda o: _say(f"fig4.1: {o.backend} {o.params}: " + (
                                  o.skipped or f"{o.run.throughput:.0f} ops/s")))
        entries += [results.entry(o) for o in points]
    doc = results.Sweep(experiment="fig4.1", workload="write-heavy", quick=quick, results=entries)
    plots.plot_sweep(doc, os.path.join(out_dir, "fig4.1.png"))
    print("\n".join(tables.sweep_table(doc)))
    best: dict[str, float] = {}
    for e in entries:
        if not e.skipped:
            best[e.backend] = max(best.get(e.backend, 0.0), e.throughput_ops_sec)
    doc.summary = {"max_throughput_ops_sec": best}
    print("ours: max throughput " + ", ".join(f"{b} {t:.0f} ops/s" for b, t in best.items()))
    return doc


# ------------------------------------------------------------------------------------- fig 4.2
def fig42(out_dir: str, quick: bool) -> Thesis:
    """indexed_fs open (index rebuild) time after a crash, for 10^3 .. 10^6 PEs of ~40 bytes."""
    from backends import CkptError, open_backend

    counts = [10**3, 10**4, 10**5] if quick else [10**3, 10**4, 10**5, 10**6]
    rows = []
    for n in counts:
        tmp = tempfile.mkdtemp(prefix="ckptbench-fig42-")
        options = {"path": os.path.join(tmp, "store"), "durability": "none"}
        try:
            try:
                load_ms = crash.load_then_kill("indexed_fs", options, n, 40).load_ms
            except CkptError as exc:
                raise CkptError(f"fig4.2 load of {n} PEs failed: {exc}") from exc
            row = Fig42Row(n, load_ms)
            for label in ("crash", "clean"):
                t0 = time.perf_counter()
                store = open_backend("indexed_fs", **options)
                setattr(row, f"open_after_{label}_ms", (time.perf_counter() - t0) * 1000.0)
                store.close()  # the second open is after this clean close
            rows.append(row)
            _say(f"fig4.2: {n} PEs: open after crash {row.open_after_crash_ms:.1f} ms, "
                 f"after clean close {row.open_after_clean_ms:.1f} ms")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    doc = Thesis(experiment="fig4.2", quick=quick, rows=rows)
    plots.plot_fig42(doc, os.path.join(out_dir, "fig4.2.png"))
    _print_table(["PEs", "open after crash ms", "open after clean ms"],
                 [[str(r.pes), f"{r.open_after_crash_ms:.1f}", f"{r.open_after_clean_ms:.1f}"]
                  for r in rows])
    return doc


# ---------------------------------------------------------------------------------- fig 4.5/4.6
def fig45(out_dir: str, quick: bool) -> Thesis:
    """Checkpoint workload per backend (400 ev/s, 10,000 events, 1,000 PEs), crash, lazy read."""
    from backends import CkptError
    from workloads import checkpoint as ck

    spec = ck.CheckpointSpec(rate=400, events=2000 if quick else 10_000, pes=1000)
    rows = []
    for backend in THESIS_STORES:
        try:
            options = backend_options(backend)
            tmp = None
            if backend_class(backend).kind == "file":
                tmp = tempfile.mkdtemp(prefix=f"ckptbench-fig45-{backend}-")
                options["path"] = os.path.join(tmp, "store")
            try:
                result = recovery.checkpoint_then_crash(backend, options, spec)
                reopened = recovery.reopen_and_verify(backend, options, result)
            finally:
                if tmp:
                    shutil.rmtree(tmp, ignore_errors=True)
        except (CkptError, ImportError, OSError, RuntimeError) as exc:
            # cannot reach or open the store (server down, client package missing, services
            # cannot tell where it is): skipped, with the reason; a bug still raises
            rows.append(Fig45Row(backend, _skip_reason(exc)))
            _say(f"fig4.5: {backend}: skipped: {_skip_reason(exc)}")
            continue
        w = results.stats(result.phase.measurements, "CHECKPOINT-WRITE")
        verified = reopened.verified
        r = results.stats(verified.phase.measurements, "RECOVERY-READ")
        rows.append(Fig45Row(backend, None, results.CheckpointSummary.of(result), w, r,
                             reopened.open_ms, verified.missing, verified.corrupt))
        _say(f"fig4.5: {backend}: write mean {w.mean_us:.0f} us, read mean "
             f"{r.mean_us:.0f} us, dropped {result.dropped}")
    ran = [r for r in rows if not r.skipped]
    doc = Thesis(experiment="fig4.5", quick=quick, spec=spec, rows=rows)
    plots.plot_fig45(doc, os.path.join(out_dir, "fig4.5.png"))
    _print_table(["backend", "write mean us", "write p99 us", "read mean us", "read p99 us",
                  "dropped", "open ms"],
                 [Note((r.backend,), f"skipped: {r.skipped}") if r.skipped else
                  [r.backend, f"{r.write.mean_us:.0f}", str(r.write.p99_us), f"{r.read.mean_us:.1f}",
                   str(r.read.p99_us), str(r.checkpoint.dropped), f"{r.open_ms:.1f}"] for r in rows])
    by = {r.backend: r for r in ran}
    if "default_fs" in by and "indexed_fs" in by:
        wr = by["default_fs"].write.mean_us / by["indexed_fs"].write.mean_us
        rr = by["default_fs"].read.mean_us / max(by["indexed_fs"].read.mean_us, 1e-9)
        print(f"ours: indexed_fs writes {wr:.2f}x faster, reads {rr:.2f}x faster than default_fs")
    return doc


# ------------------------------------------------------------------------------------- fig 4.7
def fig47(out_dir: str, quick: bool) -> Thesis:
    """Storage-queue throughput vs number of PEs: events offered faster than a file backend is
    meant to keep up with (so the queue fills and its drain rate is what is measured), storage
    queue 1000 as in S4; checkpoints written/s and drops counted."""
    from backends import open_backend
    from workloads import checkpoint as ck

    counts = [10**2, 10**3, 10**4] if quick else [10**3, 10**4, 10**5, 10**6]
    rate, queue = 5000.0, 1000
    events = 5000 if quick else 50_000
    rows = []
    for backend in _file_stores():
        for n in counts:
            tmp = tempfile.mkdtemp(prefix=f"ckptbench-fig47-{backend}-")
            try:
                store = open_backend(backend, path=os.path.join(tmp, "store"))
                try:
                    result = ck.run_checkpoint(store, ck.CheckpointSpec(
                        rate=rate, events=events, pes=n, queue=queue))
                finally:
                    store.close()
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            rows.append(load(Fig47Row, {"backend": backend, "pes": n, **result.summary()}))
            _say(f"fig4.7: {backend} {n} PEs: {result.write_rate:.0f} ckpt/s, "
                 f"dropped {result.dropped} of {events}")
    doc = Thesis(experiment="fig4.7", quick=quick, events=events, rate=rate, queue=queue,
                 rows=rows)
    plots.plot_fig47(doc, os.path.join(out_dir, "fig4.7.png"))
    _print_table(["backend", "PEs", "ckpt/s", "written", "dropped"],
                 [[r.backend, str(r.pes), f"{r.write_rate:.0f}", str(r.written), str(r.dropped)]
                  for r in rows])
    return doc


# ----------------------------------------------------------------------------------- table 5.2
TRADEOFFS = {
    "default_fs": ("none", "one file per PE; fsync+rename"),
    "indexed_fs": ("none", "append log + in-memory index; rebuild on open"),
    "redis": ("redis-server", "per AOF policy (not full by default)"),
    "hbase": ("HBase + ZooKeeper", "WAL"),
    "minio": ("MinIO server", "object store"),
    "memory": ("none", "none (lost on exit)"),
}


def table52(out_dir: str, quick: bool) -> Thesis:
    """Trade-off table from the measured results/fig4.1, fig4.5, fig4.7 JSON (run those first)."""
    def read(name: str, tp: type[D]) -> D | None:
        path = os.path.join(out_dir, f"{name}.json")
        if not os.path.exists(path):
            _say(f"table5.2: {path} missing; run `bench thesis {name}` first (column left empty)")
            return None
        with open(path, encoding="utf-8") as fh:
            return tp.from_json(json.load(fh))

    f41, f45, f47 = read("fig4.1", results.Sweep), read("fig4.5", Thesis), read("fig4.7", Thesis)
    rows = {b: Table52Row(b, *TRADEOFFS[b]) for b in THESIS_STORES}
    if f41:
        for b, t in (f41.summary or {}).get("max_throughput_ops_sec", {}).items():
            rows[b].max_write_heavy_ops_sec = t
    if f45:
        for r in f45.rows:
            if r.skipped:
                rows[r.backend].skipped = r.skipped
            else:
                rows[r.backend].write_mean_us = r.write.mean_us
                rows[r.backend].read_mean_us = r.read.mean_us
                rows[r.backend].open_ms = r.open_ms
    if f47:
        for r in f47.rows:
            q = rows[r.backend].queue_ckpt_sec_by_pes = rows[r.backend].queue_ckpt_sec_by_pes or {}
            q[str(r.pes)] = r.write_rate
    body: list[list[str] | Note] = []
    for b, r in rows.items():
        dep, dur = r.dependency, r.durability
        qtext = " ".join(f"{v:.0f}({k})" for k, v in (r.queue_ckpt_sec_by_pes or {}).items())
        if r.skipped and r.write_mean_us is None:
            body.append(Note((b, dep, dur), f"skipped: {r.skipped[:60]}"))
            continue
        mx, wr, rd = r.max_write_heavy_ops_sec, r.write_mean_us, r.read_mean_us
        body.append([b, dep, dur, f"{mx:.0f}" if mx else "-", f"{wr:.0f}" if wr else "-",
                     f"{rd:.1f}" if rd else "-", qtext])
    _print_table(["backend", "dependency", "durability", "max ops/s", "write us", "read us",
                  "queue ckpt/s (PEs)"], body, align="lllrrrl")
    return Thesis(experiment="table5.2", rows=list(rows.values()))


EXPERIMENTS: dict[str, Callable[[str, bool], Document]] = {
    "fig4.1": fig41,
    "fig4.2": fig42,
    "fig4.5": fig45,
    "fig4.6": fig45,  # one run measures both: writes (4.5) and lazy recovery reads (4.6)
    "fig4.7": fig47,
    "table5.2": table52,
}


def run(name: str, out_dir: str = "results", quick: bool = False) -> Document:
    """Run experiment ``name``, write ``<out_dir>/<name>.json`` (+ PNG), print ours and theirs."""
    os.makedirs(out_dir, exist_ok=True)
    name = "fig4.5" if name == "fig4.6" else name
    doc = EXPERIMENTS[name](out_dir, quick)
    path = _write(out_dir, name, doc)
    print(THESIS[name])
    _say(f"wrote {path}" + ("" if name == "table5.2" else f" and {out_dir}/{name}.png"))
    return doc
