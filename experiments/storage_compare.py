"""``bench storage-compare``: the same workloads over several storage media (local disk, tmpfs, NFS).

Four sections, each a list of rows that carry their full configuration (REFERENCE.md §1):

* ``table5.1`` — the thesis' Table 5.1: 10-byte writes into one file, sequential (append) vs
  random (pwrite at a random offset within the file's size), without and with a sync per
  operation, at 10^5 and 10^6 operations (10^7, 10^8 with ``big``).  Operations that cost a
  durable write each (every synced op; over NFS also every random write, since nfs-rs writes are
  durable per call) are capped at ``sync_ops`` — the row states requested and run counts.
* ``write-heavy`` — the thesis' micro-benchmark (90 % update / 10 % read, 1 KB, 1,000 PEs) on
  ``default_fs`` and ``indexed_fs`` with 1 and 16 threads, and the ratio indexed/default.
* ``recovery`` — ``indexed_fs`` open time after a clean close (index snapshot) and after a
  SIGKILL with no snapshot (full scan), for ``recovery_keys`` keys.
* ``rpc`` — NFS only: ONC RPC calls per durable append, per ``indexed_fs`` put and per
  ``default_fs`` put, counted by :class:`services.nfs.DelayProxy` run in this process
  with no delay in front of the server.

A medium that cannot be used (NFS server down, no /dev/shm) is kept as *skipped* with the reason.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from workloads import runner
from backends.base import BadOptionError

SCHEMA = "ckptbench.storage-compare/1"
RECORD = 10  # bytes per Table 5.1 write
SIZES = [10**5, 10**6]
BIG_SIZES = [10**7, 10**8]
THREADS = [1, 16]
FS_BACKENDS = ["default_fs", "indexed_fs"]
MEDIA_KINDS = ("local", "tmpfs", "nfs")
THESIS = ("thesis Table 5.1: random 10-byte writes are 1-2 orders of magnitude slower than "
          "sequential ones; on NFS the NVRAM filer hides the fsync cost.  Figs 4.1/4.5 (NFS): "
          "indexed FS 4.85x faster writes than default FS; ~2,100 vs ~700 ops/s.")


@dataclass
class Medium:
    """One medium under test: ``location`` is a directory or an ``nfs://`` URL."""

    name: str
    kind: str
    location: str
    skipped: str | None = None
    _own: str | None = field(default=None, repr=False)  # temp dir we created (removed after)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "location": self.location,
                "skipped": self.skipped}


Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


# --------------------------------------------------------------------------------------- media
def _nfs_default() -> Medium:
    """The server of ``bench services up nfs``; skipped (with the fix) when it is not running."""
    try:
        import services

        st = services.status(["nfs"])[0]
        if not st.get("running"):
            why = st.get("error") or "not running"
            return Medium("nfs", "nfs", "", skipped=f"NFS server: {why}; start it with "
                          f"`bench services up nfs`")
        url = services.client_options("nfs", f"storage-compare-{uuid.uuid4().hex[:8]}")["path"]
        return Medium("nfs", "nfs", url, _own=url)  # removed after the run
    except Exception as exc:  # noqa: BLE001 - any failure here means "skipped, with why"
        return Medium("nfs", "nfs", "", skipped=f"{type(exc).__name__}: {exc}; start the "
                      f"server with `bench services up nfs`")


def _temp_medium(name: str, kind: str, parent: str) -> Medium:
    if not os.path.isdir(parent):
        return Medium(name, kind, "", skipped=f"{parent} does not exist; give a directory with "
                      f"--media {kind}:DIR")
    try:
        tmp = tempfile.mkdtemp(prefix="ckptbench-storage-compare-", dir=parent)
    except OSError as exc:
        return Medium(name, kind, "", skipped=f"cannot create a directory under {parent}: "
                      f"{exc.strerror or exc}; give a writable one with --media {kind}:DIR")
    return Medium(name, kind, tmp, _own=tmp)


def parse_media(text: str | None) -> list[Medium]:
    """``local:DIR,nfs:URL,tmpfs:DIR`` (a kind without ``:VALUE`` takes its default: a temp dir
    under the working directory, a temp dir under /dev/shm, the `bench services` NFS server).
    ``None`` means all three defaults."""
    items = [s.strip() for s in (text or ",".join(MEDIA_KINDS)).split(",") if s.strip()]
    if not items:
        raise BadOptionError("--media is empty; give e.g. --media local:/data,nfs:nfs://HOST/EXPORT")
    out: list[Medium] = []
    for item in items:
        kind, _, value = item.partition(":")
        kind = kind.strip().lower()
        if kind not in MEDIA_KINDS:
            raise BadOptionError(f"--media {item!r}: unknown kind {kind!r}; valid: "
                                 f"{', '.join(MEDIA_KINDS)} (e.g. local:/mnt/nfs/ckpt)")
        name = kind if all(m.name != kind for m in out) else f"{kind}{len(out) + 1}"
        if kind == "nfs":
            if not value:
                m = _nfs_default()
                m.name = name
            elif not value.startswith("nfs://"):
                raise BadOptionError(f"--media {item!r}: nfs needs a URL nfs://HOST/EXPORT[/DIR]"
                                     f"?version=3|4.1 (a kernel mount is local:/mnt/...)")
            else:
                m = Medium(name, "nfs", value)
        elif value:
            m = _temp_medium(name, kind, value)
        else:
            m = _temp_medium(name, kind, os.getcwd() if kind == "local" else "/dev/shm")
        out.append(m)
    return out


def sub_location(location: str, sub: str) -> str:
    """``location``/``sub`` for a directory or an ``nfs://`` URL (the query is kept)."""
    if location.startswith("nfs://"):
        p = urlsplit(location)
        return urlunsplit((p.scheme, p.netloc, p.path.rstrip("/") + "/" + sub, p.query, ""))
    return os.path.join(location, sub)


def _fresh(medium: Medium, what: str) -> str:
    return sub_location(medium.location, f"{what}-{uuid.uuid4().hex[:8]}")


def _split(location: str) -> tuple[str, str]:
    """(parent location, last path component) of a directory or an ``nfs://`` URL."""
    if location.startswith("nfs://"):
        p = urlsplit(location)
        head, tail = p.path.rstrip("/").rsplit("/", 1)
        return urlunsplit((p.scheme, p.netloc, head, p.query, "")), tail
    return os.path.dirname(location.rstrip("/")), os.path.basename(location.rstrip("/"))


def _remove(location: str) -> None:
    """Delete a directory tree a run created, locally or over NFS (best effort: cleanup must
    not hide the run's result)."""
    from backends.media import open_medium

    if not location.startswith("nfs://"):
        shutil.rmtree(location, ignore_errors=True)
        return
    parent, name = _split(location)
    with contextlib.suppress(Exception), open_medium(parent, "storage-compare") as m:
        client = m.client

        def rmtree(path: str) -> None:
            for child in client.listdir(path):
                full = f"{path}/{child}"
                if client.stat(full).type.value == "directory":
                    rmtree(full)
                else:
                    client.unlink(full, missing_ok=True)
            client.rmdir(path)

        rmtree(m.abs(name))


@contextlib.contextmanager
def _scratch(medium: Medium, what: str) -> Iterator[str]:
    loc = _fresh(medium, what)
    try:
        yield loc
    finally:
        _remove(loc)


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
            say: Progress = _quiet) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        for pattern in ("sequential", "random"):
            for sync in (False, True):
                for m in media:
                    # one durable round trip per op: synced ops, and NFS random writes
                    per_op_durable = sync or (m.kind == "nfs" and pattern == "random")
                    ops = min(size, sync_ops) if per_op_durable else size
                    row: dict[str, Any] = {
                        "section": "table5.1", "medium": m.name, "kind": m.kind,
                        "pattern": pattern, "sync_per_op": sync, "record_bytes": RECORD,
                        "ops_requested": size, "ops": ops, "file_bytes": size * RECORD,
                        "capped": ops < size, "skipped": m.skipped}
                    if not m.skipped:
                        try:
                            with _scratch(m, "t51") as loc:
                                row.update(small_writes(loc, pattern=pattern, sync=sync, ops=ops,
                                                        file_ops=size))
                            say(f"table5.1: {m.name} {pattern} sync={sync} {ops}/{size}: "
                                f"{row['ops_per_sec']:,.0f} ops/s")
                        except Exception as exc:  # noqa: BLE001 - reported in the row
                            row["skipped"] = f"{type(exc).__name__}: {exc}"
                    rows.append(row)
    return rows


# --------------------------------------------------------------------------- write-heavy rows
def write_heavy(media: list[Medium], *, ops: int, threads_list: list[int], seconds: float,
                say: Progress = _quiet) -> list[dict[str, Any]]:
    from experiments.results import phase_json
    from workloads import core, session

    spec = core.preset("write-heavy", operations=ops)
    rows = []
    for m in media:
        for threads in threads_list:
            for backend in FS_BACKENDS:
                row: dict[str, Any] = {
                    "section": "write-heavy", "medium": m.name, "kind": m.kind,
                    "backend": backend, "threads": threads, "durability": "sync",
                    "workload": {"name": spec.name, "records": spec.records,
                                 "operations": spec.operations, "read": spec.read,
                                 "update": spec.update, "value_size": spec.value_size},
                    "max_seconds": seconds, "skipped": m.skipped}
                if not m.skipped:
                    with _scratch(m, f"wh-{backend}") as loc:
                        out = session.run_workload(backend, {"path": loc}, spec, threads=threads,
                                                   operations=ops, duration=seconds)
                    if out.skipped:
                        row["skipped"] = out.skipped
                    else:
                        run = out.run
                        row.update({"throughput_ops_sec": run.throughput,
                                    "operations_done": run.operations,
                                    "overall": session.overall(run.measurements),
                                    "errors": dict(run.errors),
                                    "phases": {k: phase_json(p) for k, p in out.phases.items()}})
                        say(f"write-heavy: {m.name} {backend} x{threads}: "
                            f"{run.throughput:,.0f} ops/s")
                rows.append(row)
    return rows


# ------------------------------------------------------------------------------ recovery rows
def recovery_one(location: str, keys: int, value_size: int = 40) -> dict[str, Any]:
    from backends import CkptError, open_backend

    options = {"path": location, "durability": "none", "index_flush_interval": 0.0}
    try:
        load_ms = runner.load_then_crash("indexed_fs", options, keys, value_size)
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


def recovery(media: list[Medium], *, keys: int, say: Progress = _quiet) -> list[dict[str, Any]]:
    rows = []
    for m in media:
        row: dict[str, Any] = {"section": "recovery", "medium": m.name, "kind": m.kind,
                               "backend": "indexed_fs", "keys": keys, "value_bytes": 40,
                               "index_flush_interval": 0.0, "crash": "SIGKILL after flush, "
                               "no index snapshot", "skipped": m.skipped}
        if not m.skipped:
            try:
                with _scratch(m, "rec") as loc:
                    row.update(recovery_one(loc, keys))
                say(f"recovery: {m.name}: crash {row['open_after_crash_ms']:.0f} ms, clean "
                    f"{row['open_after_clean_ms']:.0f} ms")
            except Exception as exc:  # noqa: BLE001 - reported in the row
                row["skipped"] = f"{type(exc).__name__}: {exc}"
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


def rpc_cost(media: list[Medium], *, ops: int, say: Progress = _quiet) -> list[dict[str, Any]]:
    from backends import open_backend
    from backends.media import open_medium

    rows = []
    value = os.urandom(1024)
    for m in media:
        if m.kind != "nfs":
            continue
        cases = [("durable append (1 KiB, medium append+sync)", "append"),
                 ("indexed_fs put (1 KiB, durability=sync)", "indexed_fs"),
                 ("default_fs put (1 KiB, file per key)", "default_fs")]
        proxy = None
        for label, case in cases:
            row: dict[str, Any] = {"section": "rpc", "medium": m.name, "kind": m.kind,
                                   "operation": label, "case": case, "ops": ops,
                                   "value_bytes": len(value), "skipped": m.skipped}
            rows.append(row)
            if m.skipped:
                continue
            try:
                if proxy is None:
                    url, proxy = _proxied(m.location)
                with _scratch(Medium(m.name, "nfs", url), f"rpc-{case}") as loc:
                    if case == "append":
                        with open_medium(loc, "storage-compare") as med:
                            f = med.open_append("log")
                            c0, t0 = proxy.calls, time.perf_counter()
                            for _ in range(ops):
                                f.append(value)
                                f.sync()
                            dt, calls = time.perf_counter() - t0, proxy.calls - c0
                            f.close()
                    else:
                        store = open_backend(case, path=loc, durability="sync")
                        try:
                            keys = [f"pe{i % 1000}" for i in range(ops)]
                            c0, t0 = proxy.calls, time.perf_counter()
                            for k in keys:
                                store.put(k, value)
                            dt, calls = time.perf_counter() - t0, proxy.calls - c0
                        finally:
                            store.close()
                row.update({"rpc_calls": calls, "rpcs_per_op": calls / ops,
                            "ops_per_sec": ops / dt if dt > 0 else 0.0})
                say(f"rpc: {m.name} {case}: {calls / ops:.2f} RPCs/op")
            except Exception as exc:  # noqa: BLE001 - reported in the row
                row["skipped"] = f"{type(exc).__name__}: {exc}"
    return rows


# ---------------------------------------------------------------------------------- the whole
def run(media: list[Medium], *, ops: int = 10_000, sync_ops: int = 10_000, big: bool = False,
        sizes: list[int] | None = None, threads_list: list[int] | None = None,
        wh_seconds: float = 20.0, recovery_keys: int = 10**5, rpc_ops: int = 200,
        say: Progress = _quiet) -> dict[str, Any]:
    """Every section over every medium; the JSON document (``schema`` :data:`SCHEMA`)."""
    from experiments.results import environment

    sizes = sizes or (SIZES + BIG_SIZES if big else SIZES)
    threads_list = threads_list or THREADS
    config = {"ops": ops, "sync_ops": sync_ops, "big": big, "sizes": sizes,
              "threads": threads_list, "write_heavy_max_seconds": wh_seconds,
              "recovery_keys": recovery_keys, "rpc_ops": rpc_ops}
    try:
        rows = table51(media, sizes=sizes, sync_ops=sync_ops, say=say)
        rows += write_heavy(media, ops=ops, threads_list=threads_list, seconds=wh_seconds, say=say)
        rows += recovery(media, keys=recovery_keys, say=say)
        rows += rpc_cost(media, ops=rpc_ops, say=say)
    finally:
        cleanup(media)
    return {"schema": SCHEMA, "experiment": "storage-compare", "config": config,
            "environment": environment(), "media": [m.as_json() for m in media],
            "thesis": THESIS, "rows": rows, "summary": summary(rows)}


def cleanup(media: list[Medium]) -> None:
    for m in media:
        if m._own:
            _remove(m._own)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """indexed_fs / default_fs write-heavy throughput per (medium, threads)."""
    out: dict[str, Any] = {}
    tput = {(r["medium"], r["threads"], r["backend"]): r.get("throughput_ops_sec")
            for r in rows if r["section"] == "write-heavy" and not r["skipped"]}
    for (medium, threads, backend), value in tput.items():
        base = tput.get((medium, threads, "default_fs"))
        if backend == "indexed_fs" and base:
            out[f"indexed_over_default/{medium}/x{threads}"] = value / base
    return out


# ------------------------------------------------------------------------------------- output
def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 10 else f"{v:.2f}"


def table_lines(doc: dict[str, Any]) -> list[str]:
    """The printed report: one table per section, ratios included; skipped media with why."""
    rows, media = doc["rows"], doc["media"]
    ran = [m["name"] for m in media if not m["skipped"]]
    names = [m["name"] for m in media]
    base = ran[0] if ran else None
    lines = ["storage-compare: media " + ", ".join(
        f"{m['name']}={m['location'] or '-'}" for m in media)]
    for m in media:
        if m["skipped"]:
            lines.append(f"  SKIPPED {m['name']}: {m['skipped']}")

    # Table 5.1
    lines += ["", "Table 5.1: 10-byte writes into one file, ops/s (ops run/requested; "
              f"per-op-durable runs capped at {doc['config']['sync_ops']:,})"]
    head = f"{'ops':>11} {'pattern':<10} {'sync':<4} " + " ".join(f"{n:>18}" for n in names)
    if base:
        head += "  " + " ".join(f"{n + '/' + base:>12}" for n in ran if n != base)
    head += "  seq/rand"
    lines.append(head)
    t51 = [r for r in rows if r["section"] == "table5.1"]
    index = {(r["ops_requested"], r["pattern"], r["sync_per_op"], r["medium"]): r for r in t51}
    for size in doc["config"]["sizes"]:
        for pattern in ("sequential", "random"):
            for sync in (False, True):
                cells, vals = [], {}
                for n in names:
                    r = index.get((size, pattern, sync, n))
                    if r is None or r["skipped"]:
                        cells.append(f"{'skipped':>18}")
                        continue
                    vals[n] = r["ops_per_sec"]
                    mark = f"({r['ops']:.0e})" if r["capped"] else ""
                    cells.append(f"{_fmt(r['ops_per_sec']) + mark:>18}")
                line = f"{size:>11.0e} {pattern:<10} {'yes' if sync else 'no':<4} " + " ".join(cells)
                if base:
                    line += "  " + " ".join(
                        f"{(vals[n] / vals[base]) if n in vals and vals.get(base) else float('nan'):>12.3f}"
                        for n in ran if n != base)
                if pattern == "random":
                    seq = {n: index.get((size, "sequential", sync, n)) for n in names}
                    ratios = [f"{n}:{seq[n]['ops_per_sec'] / vals[n]:.3g}x" for n in vals
                              if seq[n] and not seq[n]["skipped"] and vals[n]]
                    line += "  " + " ".join(ratios)
                lines.append(line)

    # write-heavy
    wh = [r for r in rows if r["section"] == "write-heavy"]
    lines += ["", "write-heavy (90% update/10% read, 1 KB, 1,000 PEs, durability=sync): ops/s, "
              "p50/p99 µs; ratio indexed_fs/default_fs (thesis on NFS: 4.85x)"]
    lines.append(f"{'medium':<10} {'threads':>7} {'default_fs':>28} {'indexed_fs':>28} {'idx/def':>8}")
    for n in names:
        for t in doc["config"]["threads"]:
            cell, tp = {}, {}
            for b in FS_BACKENDS:
                r = next((r for r in wh if r["medium"] == n and r["threads"] == t
                          and r["backend"] == b), None)
                if r is None or r["skipped"]:
                    cell[b] = "skipped"
                    continue
                o = r["overall"]
                tp[b] = r["throughput_ops_sec"]
                cell[b] = f"{_fmt(tp[b])} ({_fmt(o.get('p50_us'))}/{_fmt(o.get('p99_us'))})"
            ratio = (f"{tp['indexed_fs'] / tp['default_fs']:.2f}x"
                     if tp.get("default_fs") and "indexed_fs" in tp else "-")
            lines.append(f"{n:<10} {t:>7} {cell['default_fs']:>28} {cell['indexed_fs']:>28} "
                         f"{ratio:>8}")

    # recovery
    rec = [r for r in rows if r["section"] == "recovery"]
    if rec:
        lines += ["", f"recovery: indexed_fs open time, {rec[0]['keys']:,} keys of 40 bytes (ms)"]
        lines.append(f"{'medium':<10} {'after clean close':>18} {'after crash':>12} {'crash/clean':>12}")
        for r in rec:
            if r["skipped"]:
                lines.append(f"{r['medium']:<10} skipped: {r['skipped']}")
                continue
            c, k = r["open_after_clean_ms"], r["open_after_crash_ms"]
            lines.append(f"{r['medium']:<10} {c:>18.1f} {k:>12.1f} {k / c if c else 0:>11.1f}x")

    # rpc
    rpc = [r for r in rows if r["section"] == "rpc"]
    lines += ["", "RPC cost over NFS (ONC RPC calls counted by a loopback proxy)"]
    if not rpc:
        lines.append("  no NFS medium")
    for r in rpc:
        if r["skipped"]:
            lines.append(f"  {r['medium']:<8} {r['operation']:<45} skipped: {r['skipped']}")
        else:
            lines.append(f"  {r['medium']:<8} {r['operation']:<45} {r['rpcs_per_op']:>6.2f} "
                         f"RPCs/op  ({r['ops_per_sec']:,.0f} ops/s, {r['ops']} ops)")
    lines += ["", doc["thesis"]]
    return lines


def plot(doc: dict[str, Any], path: str) -> None:
    """Four panels: Table 5.1 (log ops/s), write-heavy ops/s, recovery ms, RPCs per op."""
    from experiments.plots import pyplot as _pyplot
    from experiments.results import ensure_parent as _ensure_dir

    plt = _pyplot()
    rows = doc["rows"]
    names = [m["name"] for m in doc["media"]]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    width = 0.8 / max(1, len(names))

    ax = axes[0][0]
    t51 = [r for r in rows if r["section"] == "table5.1"]
    cases = []
    for r in t51:
        key = (r["ops_requested"], r["pattern"], r["sync_per_op"])
        if key not in cases:
            cases.append(key)
    for i, n in enumerate(names):
        vals = []
        for c in cases:
            r = next((r for r in t51 if (r["ops_requested"], r["pattern"], r["sync_per_op"]) == c
                      and r["medium"] == n), None)
            vals.append(r["ops_per_sec"] if r and not r["skipped"] else 0)
        ax.bar([x + i * width for x in range(len(cases))], vals, width, label=n)
    ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(cases))])
    ax.set_xticklabels([f"{s:.0e}\n{p[:3]}{' sync' if y else ''}" for s, p, y in cases], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ops/s (log)")
    ax.set_title("Table 5.1: 10-byte writes into one file")
    ax.legend(fontsize=8)

    ax = axes[0][1]
    wh = [r for r in rows if r["section"] == "write-heavy"]
    groups = [(b, t) for t in doc["config"]["threads"] for b in FS_BACKENDS]
    for i, n in enumerate(names):
        vals = []
        for b, t in groups:
            r = next((r for r in wh if r["medium"] == n and r["backend"] == b
                      and r["threads"] == t), None)
            vals.append(r["throughput_ops_sec"] if r and not r["skipped"] else 0)
        ax.bar([x + i * width for x in range(len(groups))], vals, width, label=n)
    ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(groups))])
    ax.set_xticklabels([f"{b}\nx{t}" for b, t in groups], fontsize=8)
    ax.set_ylabel("ops/s")
    ax.set_title("write-heavy (durability=sync)")
    ax.legend(fontsize=8)

    ax = axes[1][0]
    rec = [r for r in rows if r["section"] == "recovery" and not r["skipped"]]
    xs = range(len(rec))
    ax.bar([x - 0.2 for x in xs], [r["open_after_clean_ms"] for r in rec], 0.4, label="after clean close")
    ax.bar([x + 0.2 for x in xs], [r["open_after_crash_ms"] for r in rec], 0.4, label="after crash")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["medium"] for r in rec])
    ax.set_ylabel("indexed_fs open (ms)")
    ax.set_title(f"recovery ({rec[0]['keys']:,} keys)" if rec else "recovery (no medium ran)")
    ax.legend(fontsize=8)

    ax = axes[1][1]
    rpc = [r for r in rows if r["section"] == "rpc" and not r["skipped"]]
    ax.bar([f"{r['medium']}\n{r['case']}" for r in rpc], [r["rpcs_per_op"] for r in rpc])
    ax.set_ylabel("RPC calls per operation")
    ax.set_title("RPC cost over NFS" if rpc else "RPC cost over NFS (no NFS medium ran)")

    for a in fig.axes:
        a.grid(True, alpha=0.3, axis="y")
    fig.tight_layout()
    _ensure_dir(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
