"""``bench storage-compare``: the same workloads over several storage media (local disk, tmpfs, NFS,
HDFS).

Four sections, each a list of rows that carry their full configuration, so a row read alone says
what was measured:

* ``table5.1`` — the thesis' Table 5.1: 10-byte writes into one file, sequential (append) vs
  random (pwrite at a random offset within the file's size), without and with a sync per
  operation, at 10^5 and 10^6 operations (10^7, 10^8 with ``big``).  Operations that cost a
  durable write each (every synced op; over NFS also every random write, since nfs-rs writes are
  durable per call) are capped at ``sync_ops`` — the row states requested and run counts.  HDFS
  has no random writes (its files are append-only): those rows are skipped there, with why.
* ``write-heavy`` — the thesis' micro-benchmark (90 % update / 10 % read, 1 KB, 1,000 PEs) on
  ``default_fs`` and ``indexed_fs`` with 1 and 16 threads (``--threads``), and the ratio
  indexed/default.  With more thread counts these rows are the thesis' Fig 4.1 (latency against
  throughput, threads raised), drawn per medium by :func:`plot_fig41`.
* ``recovery`` — ``indexed_fs`` open time after a clean close (index snapshot) and after a
  SIGKILL with no snapshot (full scan), for ``recovery_keys`` keys.
* ``rpc`` — round trips per durable append, per ``indexed_fs`` put and per ``default_fs`` put:
  over NFS the ONC RPC calls, counted by :class:`services.nfs.DelayProxy` run in this process
  with no delay in front of the server; on HDFS the HTTP requests (WebHDFS, NameNode and
  DataNode), counted by the client (:attr:`backends.media.hdfs.HdfsMedium.requests`).

The media and their cleanup live in :mod:`experiments.core.media`, the printed tables in
:mod:`experiments.storage.compare_table`, the chart in :mod:`experiments.report.plots`.  A medium that
cannot be used (NFS server down, no /dev/shm) is kept as *skipped* with the reason.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import time
from typing import Any, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from backends import backend_names
from backends.base import BadOptionError
from experiments.storage.compare_result import (Config, MediumInfo, RecoveryRow, RpcRow,
                                                 StorageCompare, Table51Row, Workload,
                                                 WriteHeavyRow)
from experiments.storage import crash
from experiments.core.media import Medium, cleanup, scratch

SCHEMA = StorageCompare.SCHEMA
RECORD = 10  # bytes per Table 5.1 write
SIZES = [10**5, 10**6]
BIG_SIZES = [10**7, 10**8]
THREADS = [1, 16]
THESIS = ("thesis Table 5.1: random 10-byte writes are 1-2 orders of magnitude slower than "
          "sequential ones; on NFS the NVRAM filer hides the fsync cost.  Figs 4.1/4.5 (NFS): "
          "indexed FS 4.85x faster writes than default FS; ~2,100 vs ~700 ops/s.")


Progress = Callable[[str], None]

NO_RANDOM_WRITES = ("HDFS files are append-only: no random writes (pwrite) and no "
                    "preallocation to write into")
#: what the ``rpc`` rows count on each medium that has them
RPC_UNITS = {"nfs": "ONC RPC calls (loopback proxy)",
             "hdfs": "HTTP requests to NameNode and DataNode (WebHDFS, counted by the client)"}


def _quiet(_: str) -> None:
    pass


# ----------------------------------------------------------------------------- Table 5.1 rows
class _RandomWriter:
    """pwrite of a small record at an offset: ``os.pwrite`` locally, one nfs-rs WRITE over NFS
    (durable on return, so ``sync`` has nothing left to do there).  The media layer has no
    positional write, so this reaches into the medium's fd / nfs-rs client."""

    def __init__(self, medium: Any, rel: str) -> None:
        self.medium, self.rel = medium, rel
        if medium.kind == "local":
            self.fd = os.open(os.path.join(medium.root, rel), os.O_WRONLY)
        else:
            self.fd = -1
            with medium.guard("open", rel):
                self.file = medium.client.open(medium.abs(rel), "r+b")

    def pwrite(self, data: bytes, offset: int) -> None:
        if self.fd >= 0:
            os.pwrite(self.fd, data, offset)
        else:
            with self.medium.guard("write", self.rel):
                self.medium.client_write(self.file, data, offset)

    def sync(self) -> None:
        if self.fd >= 0:
            os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        else:
            with contextlib.suppress(Exception):
                self.file.close()


def small_writes(location: str, *, pattern: str, sync: bool, ops: int, file_ops: int,
                 seed: int = 1) -> dict[str, Any]:
    """``ops`` 10-byte writes into one file on the medium at ``location``.

    ``sequential``: appends (no sync: one sync at the end, counted in the time).  ``random``:
    pwrite at uniform offsets in a file pre-sized to ``file_ops`` records.  Returns ops/s and
    µs per op."""
    from backends.media import open_medium

    data = b"0123456789"[:RECORD]
    rng = random.Random(seed)
    with open_medium(location, "storage-compare") as m:
        rel = "table51.dat"
        if pattern == "sequential":
            f = m.open_append(rel)
            try:
                t0 = time.perf_counter()
                if sync:
                    for _ in range(ops):
                        f.append(data)
                        f.sync()
                else:
                    for _ in range(ops):
                        f.append(data)
                    f.sync()
                elapsed = time.perf_counter() - t0
            finally:
                f.close()
        else:
            m.open_append(rel).close()
            m.truncate(rel, file_ops * RECORD)
            limit = file_ops * RECORD - RECORD
            offsets = [rng.randint(0, limit) for _ in range(ops)]
            w = _RandomWriter(m, rel)
            try:
                t0 = time.perf_counter()
                if sync:
                    for off in offsets:
                        w.pwrite(data, off)
                        w.sync()
                else:
                    for off in offsets:
                        w.pwrite(data, off)
                    w.sync()
                elapsed = time.perf_counter() - t0
            finally:
                w.close()
        m.delete(rel)
    return {"elapsed_s": elapsed, "ops_per_sec": ops / elapsed if elapsed > 0 else 0.0,
            "us_per_op": elapsed * 1e6 / ops if ops else 0.0}


def table51(media: list[Medium], *, sizes: list[int], sync_ops: int,
            say: Progress = _quiet) -> list[Table51Row]:
    rows = []
    for size in sizes:
        for pattern in ("sequential", "random"):
            for sync in (False, True):
                for m in media:
                    # one durable round trip per op: synced ops, and NFS random writes
                    per_op_durable = sync or (m.kind == "nfs" and pattern == "random")
                    skipped = m.skipped
                    if not skipped and m.kind == "hdfs" and pattern == "random":
                        skipped = NO_RANDOM_WRITES
                    ops = min(size, sync_ops) if per_op_durable else size
                    row = Table51Row(
                        medium=m.name, kind=m.kind, pattern=pattern, sync_per_op=sync,
                        record_bytes=RECORD, ops_requested=size, ops=ops,
                        file_bytes=size * RECORD, capped=ops < size, skipped=skipped)
                    if not skipped:
                        try:
                            with scratch(m, "t51") as loc:
                                took = small_writes(loc, pattern=pattern, sync=sync, ops=ops,
                                                    file_ops=size)
                            row.elapsed_s, row.ops_per_sec, row.us_per_op = (
                                took["elapsed_s"], took["ops_per_sec"], took["us_per_op"])
                            say(f"table5.1: {m.name} {pattern} sync={sync} {ops}/{size}: "
                                f"{row.ops_per_sec:,.0f} ops/s")
                        except Exception as exc:  # noqa: BLE001 - reported in the row
                            row.skipped = f"{type(exc).__name__}: {exc}"
                    rows.append(row)
    return rows


# --------------------------------------------------------------------------- write-heavy rows
def write_heavy(media: list[Medium], *, ops: int, threads_list: list[int], seconds: float,
                say: Progress = _quiet) -> list[WriteHeavyRow]:
    from experiments.core.compare import run_workload
    from experiments.core.results import Phase, overall
    from workloads import core
    from workloads.runner import ClientSettings

    spec = core.preset("write-heavy", operations=ops)
    rows = []
    for m in media:
        for threads in threads_list:
            for backend in backend_names(kind="file"):
                row = WriteHeavyRow(
                    medium=m.name, kind=m.kind, backend=backend, threads=threads,
                    durability="sync", workload=Workload(spec.name, spec.records, spec.operations,
                                                         spec.read, spec.update, spec.value_size),
                    max_seconds=seconds, skipped=m.skipped)
                if not m.skipped:
                    with scratch(m, f"wh-{backend}") as loc:
                        out = run_workload(backend, {"path": loc}, spec, ClientSettings(
                            threads=threads, operations=ops, duration=seconds))
                    if out.skipped:
                        row.skipped = out.skipped
                    else:
                        run = out.run
                        row.throughput_ops_sec, row.operations_done = run.throughput, run.operations
                        row.overall, row.errors = overall(run.measurements), dict(run.errors)
                        row.phases = {k: Phase.of(p) for k, p in out.phases.items()}
                        say(f"write-heavy: {m.name} {backend} x{threads}: "
                            f"{run.throughput:,.0f} ops/s")
                rows.append(row)
    return rows


# ------------------------------------------------------------------------------ recovery rows
def recovery_one(location: str, keys: int, value_size: int = 40) -> dict[str, Any]:
    from backends import CkptError, open_backend

    options = {"path": location, "durability": "none", "index_flush_interval": 0.0}
    try:
        load_ms = crash.load_then_kill("indexed_fs", options, keys, value_size).load_ms
    except CkptError as exc:
        raise CkptError(f"storage-compare: recovery load into {location} failed: {exc}") from exc
    row: dict[str, Any] = {"load_ms": load_ms}
    for label in ("crash", "clean"):
        t0 = time.perf_counter()
        store = open_backend("indexed_fs", **options)
        row[f"open_after_{label}_ms"] = (time.perf_counter() - t0) * 1000.0
        stats = store.stats()
        row[f"after_{label}"] = {k: stats.get(k) for k in
                                 ("snapshot_used", "records_scanned", "keys", "open_time_ms")
                                 if k in stats}
        store.close()  # writes the snapshot the clean open uses
    return row


def recovery(media: list[Medium], *, keys: int, say: Progress = _quiet) -> list[RecoveryRow]:
    rows = []
    for m in media:
        row = RecoveryRow(medium=m.name, kind=m.kind, backend="indexed_fs", keys=keys,
                          value_bytes=40, index_flush_interval=0.0,
                          crash="SIGKILL after flush, no index snapshot", skipped=m.skipped)
        if not m.skipped:
            try:
                with scratch(m, "rec") as loc:
                    for key, value in recovery_one(loc, keys).items():
                        setattr(row, key, value)
                say(f"recovery: {m.name}: crash {row.open_after_crash_ms:.0f} ms, clean "
                    f"{row.open_after_clean_ms:.0f} ms")
            except Exception as exc:  # noqa: BLE001 - reported in the row
                row.skipped = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------------- RPC rows
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proxied(url: str) -> tuple[str, Any]:
    """A counting :class:`DelayProxy` (no delay) in front of ``url``'s server, and the URL
    that goes through it.  Loopback servers only."""
    from services.nfs import MOUNT_PORT, DelayProxy, DEFAULT_PORT

    p = urlsplit(url)
    if p.hostname not in ("127.0.0.1", "localhost"):
        raise BadOptionError(f"RPC counting runs a proxy on loopback only; {p.hostname} is remote")
    query = dict(parse_qsl(p.query))
    nfs, mnt = int(query.get("nfsport", p.port or DEFAULT_PORT)), int(query.get("mountport", MOUNT_PORT))
    pn, pm = _free_port(), _free_port()
    proxy = DelayProxy([(pn, nfs), (pm, mnt)], 0.0).start_in_thread()
    query.update(nfsport=str(pn), mountport=str(pm))
    return urlunsplit((p.scheme, "127.0.0.1", p.path, urlencode(query), "")), proxy


def _count(medium: Any, proxy: Any) -> int:
    """Round trips so far: the NFS proxy's calls, or the HDFS medium's HTTP requests."""
    return proxy.calls if proxy is not None else medium.requests


def rpc_cost(media: list[Medium], *, ops: int, say: Progress = _quiet) -> list[RpcRow]:
    from backends import open_backend
    from backends.media import open_medium

    rows = []
    value = os.urandom(1024)
    for m in media:
        if m.kind not in RPC_UNITS:
            continue
        cases = [("durable append (1 KiB, medium append+sync)", "append"),
                 ("indexed_fs put (1 KiB, durability=sync)", "indexed_fs"),
                 ("default_fs put (1 KiB, file per key)", "default_fs")]
        proxy, url = None, m.location
        for label, case in cases:
            row = RpcRow(medium=m.name, kind=m.kind, operation=label, case=case, ops=ops,
                         unit=RPC_UNITS[m.kind], value_bytes=len(value), skipped=m.skipped)
            rows.append(row)
            if m.skipped:
                continue
            try:
                if m.kind == "nfs" and proxy is None:
                    url, proxy = _proxied(m.location)
                with scratch(Medium(m.name, m.kind, url), f"rpc-{case}") as loc:
                    if case == "append":
                        with open_medium(loc, "storage-compare") as med:
                            f = med.open_append("log")
                            c0, t0 = _count(med, proxy), time.perf_counter()
                            for _ in range(ops):
                                f.append(value)
                                f.sync()
                            dt, calls = time.perf_counter() - t0, _count(med, proxy) - c0
                            f.close()
                    else:
                        store = open_backend(case, path=loc, durability="sync")
                        try:
                            med = getattr(store, "medium", None)
                            keys = [f"pe{i % 1000}" for i in range(ops)]
                            c0, t0 = _count(med, proxy), time.perf_counter()
                            for k in keys:
                                store.put(k, value)
                            dt, calls = time.perf_counter() - t0, _count(med, proxy) - c0
                        finally:
                            store.close()
                row.rpc_calls, row.rpcs_per_op = calls, calls / ops
                row.ops_per_sec = ops / dt if dt > 0 else 0.0
                say(f"rpc: {m.name} {case}: {calls / ops:.2f} round trips/op")
            except Exception as exc:  # noqa: BLE001 - reported in the row
                row.skipped = f"{type(exc).__name__}: {exc}"
    return rows


# ------------------------------------------------------------------------------- Fig 4.1 charts
def fig41_sweeps(doc: StorageCompare) -> dict[str, Any]:
    """The write-heavy rows of each medium as a thread sweep document (the thesis' Fig 4.1:
    latency against throughput, default_fs vs indexed_fs), for :func:`plots.plot_sweep`."""
    from experiments.core import results

    out: dict[str, results.Sweep] = {}
    for r in doc.rows:
        if r.section != "write-heavy":
            continue
        sweep = out.setdefault(r.medium, results.Sweep(
            experiment=f"storage-compare fig4.1 {r.medium}",
            workload=f"write-heavy on {r.medium} ({r.kind})"))
        sweep.results.append(results.Entry(
            r.backend, results.Point(threads=r.threads), r.skipped,
            throughput_ops_sec=r.throughput_ops_sec, overall=r.overall or results.OpStats()))
    return out


def plot_fig41(doc: StorageCompare, plot_path: str) -> list[str]:
    """One Fig 4.1 chart per medium that ran, beside ``plot_path`` (``<stem>-fig4.1-<medium>
    .png``); the paths written."""
    from experiments.report import plots

    stem, ext = os.path.splitext(plot_path)
    written = []
    for medium, sweep in fig41_sweeps(doc).items():
        if all(e.skipped for e in sweep.results):
            continue
        path = f"{stem}-fig4.1-{medium}{ext or '.png'}"
        plots.plot_sweep(sweep, path)
        written.append(path)
    return written


# ---------------------------------------------------------------------------------- the whole
def run(media: list[Medium], *, ops: int = 10_000, sync_ops: int = 10_000, big: bool = False,
        sizes: list[int] | None = None, threads_list: list[int] | None = None,
        wh_seconds: float = 20.0, recovery_keys: int = 10**5, rpc_ops: int = 200,
        say: Progress = _quiet) -> StorageCompare:
    """Every section over every medium; the ``ckptbench.storage-compare/1`` document."""
    sizes = sizes or (SIZES + BIG_SIZES if big else SIZES)
    threads_list = threads_list or THREADS
    config = Config(ops, sync_ops, big, sizes, threads_list, wh_seconds, recovery_keys, rpc_ops)
    try:
        rows = table51(media, sizes=sizes, sync_ops=sync_ops, say=say)
        rows += write_heavy(media, ops=ops, threads_list=threads_list, seconds=wh_seconds, say=say)
        rows += recovery(media, keys=recovery_keys, say=say)
        rows += rpc_cost(media, ops=rpc_ops, say=say)
    finally:
        cleanup(media)
    return StorageCompare(config=config,
                          media=[MediumInfo(m.name, m.kind, m.location, m.skipped) for m in media],
                          thesis=THESIS, rows=rows, summary=summary(rows))


def summary(rows: list[Any]) -> dict[str, float]:
    """indexed_fs / default_fs write-heavy throughput per (medium, threads)."""
    out: dict[str, float] = {}
    tput = {(r.medium, r.threads, r.backend): r.throughput_ops_sec
            for r in rows if r.section == "write-heavy" and not r.skipped}
    for (medium, threads, backend), value in tput.items():
        base = tput.get((medium, threads, "default_fs"))
        if backend == "indexed_fs" and base:
            out[f"indexed_over_default/{medium}/x{threads}"] = value / base
    return out
