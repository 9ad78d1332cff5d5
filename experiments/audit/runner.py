"""Durability audits: cut the power (or SIGKILL) under a writing store, then check every write
it acknowledged.  ``bench audit power-loss|sigkill`` and the crash tests all run this one loop.

One round:

1. A **writer** child process (:mod:`experiments.audit.writer`) opens the store and
   runs ``threads`` writer threads, each on its own keys (so a key has at most one write in
   flight), overwriting them with values of varying length and now and then deleting one.  Each
   operation is announced on stdout before it starts (``S ...``) and once it returned (``A ...``);
   the lines go through a pipe to the parent, never through the store's file system.
2. The **cut**: at a random instant, or when the writer reaches an armed fail point (it exits
   with :data:`backends.failpoints.EXIT_CODE` at a named hazard step: segment rotation, index
   snapshot, compaction, the rename of a put).  For ``power-loss`` the store's data lives on the
   lossy FUSE file system (:mod:`services.lossyfs`): a server backend's server is SIGKILLed,
   the file system's power is cut (everything not fsynced is gone and I/O fails; with ``torn``
   a random prefix of the newest unsynced write stays), the writer is SIGKILLed, and the file
   system comes back.  Nothing runs between the first kill and the cut that could make data
   durable, so this is one instant.  For ``sigkill`` only the processes die.
3. The **check**: a server is restarted on the same data; the store is opened again and every key
   ever written is read.  A key must hold its last acknowledged value, or the value of the write
   that was in flight at the cut.  Anything else is counted: **lost** when the key holds an older
   acknowledged state (absent, an older value, or a deleted key back), **wrong** when it holds a
   value never written to it.  The check then adopts what it found, so one loss is counted once.

Values are rebuilt from a seed (:func:`value_of`), so the pipe carries only names.  A server
audit starts a *private* server (own ports, its own state directory on the lossy mount) and never
touches the shared ones.

HBase is audited on one of two roots (``hbase_root``, :data:`DEFAULT_HBASE_ROOT`): ``local``
(Hadoop's LocalFileSystem, whose WAL sync is no fsync) or ``hdfs``, a private HDFS whose NameNode
and DataNode directories are on the lossy mount too.  There a cut SIGKILLs HBase's and HDFS's
JVMs together, and the check restarts HDFS, then HBase (which recovers the WAL's lease and
replays it).  ``wal_hsync`` (FSYNC_WAL: hsync, an fsync of the block file on the DataNode) claims
no loss on HDFS; ``wal`` (SYNC_WAL: hflush, the DataNode's memory) claims none under a power cut.
HDFS fsyncs no directory where it matters (the NameNode's new edit-log segment, the DataNode's new
block files), so HBase on HDFS is audited on the ``journal`` metadata model (ext4, XFS) unless told.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from backends import BadOptionError, CkptError, backend_class, failpoints, open_backend
from experiments.audit.env import Medium, PrivateServer
from experiments.audit.writer import Model, Writer, value_of

__all__ = ["AuditError", "AuditResult", "Model", "audit", "claim_of", "hazard_points", "headline",
           "table", "validate", "value_of"]

KINDS = ("power-loss", "sigkill")
#: the mode a backend is audited in when none is given: the one that claims durability
DEFAULT_DURABILITY = {"indexed_fs": "sync", "default_fs": "sync", "redis": "always",
                      "minio": "sync", "hbase": "wal", "rocksdb": "sync", "lmdb": "sync",
                      "sqlite": "sync"}
REDIS_POLICIES = ("always", "everysec", "no")
HBASE_ROOTS = ("hdfs", "local")
#: where HBase keeps its root and WAL in an audit unless told: HDFS for the mode whose claim
#: needs it (hsync is an fsync only on HDFS), the local file system otherwise (faster to start)
DEFAULT_HBASE_ROOT = {"wal_hsync": "hdfs"}
#: the lossy file system's metadata models (services.lossyfs.model.METADATA_MODELS)
FS_MODELS = ("posix", "journal")

#: what each mode promises about an acknowledged write, as the audit's Claim line says it
CLAIMS = {
    ("indexed_fs", "sync"): "sync: a put/delete returns after its record is fdatasync'ed "
                            "(group commit); no acknowledged write may be lost",
    ("indexed_fs", "interval"): "interval: records are fdatasync'ed every sync_interval_ms; "
                                "a power cut may lose the writes of the last interval",
    ("indexed_fs", "none"): "none: no fsync per write; a power cut may lose anything written "
                            "since the last rotation, flush or close",
    ("default_fs", "sync"): "sync: temp file fdatasync'ed, renamed, directory fsync'ed before "
                            "the put returns; no acknowledged write may be lost",
    ("default_fs", "none"): "none: no fsync; a power cut may lose any write",
    ("redis", "always"): "appendfsync always: the AOF is fsync'ed before each reply; no "
                         "acknowledged write may be lost",
    ("redis", "everysec"): "appendfsync everysec: the AOF is fsync'ed once a second; a power cut "
                           "may lose about the last second of acknowledged writes",
    ("redis", "no"): "appendfsync no: the OS decides when the AOF reaches the disk; a power cut "
                     "may lose any acknowledged write",
    ("minio", "sync"): "sync: MINIO_FS_OSYNC=on, a PUT is answered after its data and xl.meta "
                       "are fdatasync'ed, renamed into place and sync(2) is called; each delete "
                       "is followed by a barrier PUT; no acknowledged write may be lost",
    ("minio", "server"): "a PUT is answered after its data and xl.meta are fdatasync'ed and "
                         "renamed into place; MinIO fsyncs no directory, so the renames are "
                         "durable with the file system's next journal commit (ext4, XFS), not "
                         "by POSIX alone",
    ("hbase", "wal"): "WAL on, but on the local file system the WAL sync is a flush to the page "
                      "cache (no fsync): survives a process crash, not a power cut",
    ("hbase", "wal_hsync"): "wal_hsync: FSYNC_WAL puts, but on the local file system hsync is a "
                            "flush to the page cache too: no power-cut durability promised",
    ("hbase", "skip_wal"): "skip_wal: puts are in the memstore only until a flush; any crash "
                           "may lose them",
    ("hbase@hdfs", "wal"): "wal: SYNC_WAL puts on HDFS, acknowledged after the WAL edit was "
                           "hflushed to the DataNode (its memory, not its disk): survives a "
                           "process crash, not a power cut",
    ("hbase@hdfs", "wal_hsync"): "wal_hsync: FSYNC_WAL puts on HDFS, acknowledged after the WAL "
                                 "edit was hsynced (fsync'ed on the DataNode, "
                                 "dfs.datanode.synconclose=true); no acknowledged write may be "
                                 "lost",
    ("hbase@hdfs", "skip_wal"): "skip_wal: puts are in the memstore only until a flush; any "
                                "crash may lose them",
    ("rocksdb", "sync"): "sync: WriteOptions.sync, the WAL is fsync'ed before each put or "
                         "delete returns; no acknowledged write may be lost",
    ("rocksdb", "none"): "none: the WAL is written to the OS unsynced; a power cut may lose "
                         "the latest writes",
    ("lmdb", "sync"): "sync: each commit's data pages, then its meta page, are fsync'ed before "
                      "it returns, and the directory once the environment's files exist; no "
                      "acknowledged write may be lost",
    ("lmdb", "none"): "none: commits are written to the OS unsynced; a power cut may lose the "
                      "latest writes",
    ("sqlite", "sync"): "sync: WAL mode, synchronous=FULL, the WAL is fsync'ed at each commit; "
                        "no acknowledged write may be lost",
    ("sqlite", "normal"): "normal: WAL mode, synchronous=NORMAL, the WAL is fsync'ed at "
                          "checkpoints only; a power cut may roll back the latest commits",
    ("sqlite", "none"): "none: synchronous=OFF, nothing is fsync'ed; a power cut may lose any "
                        "write",
}
#: modes whose claim is that nothing acknowledged is lost (the audit fails them on a loss);
#: tests/test_audit.py audits every one of them, so a claim listed here is a claim checked in CI
DURABLE = {("indexed_fs", "sync"), ("default_fs", "sync"), ("redis", "always"),
           ("minio", "sync"), ("rocksdb", "sync"), ("lmdb", "sync"), ("sqlite", "sync"),
           ("hbase@hdfs", "wal_hsync")}
#: the lossy file system's metadata model a power-loss audit uses unless told
DEFAULT_FS_MODEL = {"hbase@hdfs": "journal"}
#: a random cut comes within this many seconds of the writer's start (servers answer slower)
DEFAULT_RUN_SECONDS = {"redis": 1.0, "minio": 3.0, "hbase": 3.0}
#: HBase on HDFS: one Thrift call's timeout (the backend's ``timeout``), long enough for the
#: first calls after a restart, which wait for the WAL's lease recovery and replay
HDFS_CALL_TIMEOUT_MS = 30000
#: durable under a process crash only (the page cache survives a SIGKILL)
DURABLE_SIGKILL = DURABLE | {("indexed_fs", "interval"), ("indexed_fs", "none"),
                             ("default_fs", "none"), ("redis", "everysec"), ("redis", "no"),
                             ("hbase", "wal"), ("hbase", "wal_hsync"), ("hbase@hdfs", "wal"),
                             ("hbase@hdfs", "wal_hsync")}


class AuditError(CkptError):
    """The audit could not run (no FUSE, a server that does not start, bad options)."""


# ------------------------------------------------------------------------------ one writer run
@dataclass
class Cut:
    """How one round ended."""

    at: str                 # "random" or the fail point's name
    seconds: float          # how long the writer ran
    reached: bool = True    # False: the fail point was not reached in time (a random cut then)
    file_syncs: int | None = None  # power-loss: file fsyncs the lossy FS saw while writing
    global_syncs: int | None = None  # power-loss: sync(2) calls passed on by the sync gate
    dropped: dict[str, Any] = field(default_factory=dict)  # what the power cut dropped


# ------------------------------------------------------------------------------------ the audit
@dataclass
class AuditResult:
    kind: str
    backend: str
    durability: str
    claim: str
    rounds: int
    threads: int
    fs_model: str = "posix"
    torn: bool = False
    hbase_root: str = ""   # hbase only: "hdfs" or "local"
    acknowledged: int = 0
    lost: int = 0
    wrong: int = 0
    claims_durability: bool = False
    cuts: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seed: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """The claim held: nothing acknowledged was lost or wrong (for a mode that claims it)."""
        return not self.claims_durability or (self.lost == 0 and self.wrong == 0)

    def lines(self) -> list[str]:
        hazards = sorted({c["at"] for c in self.cuts if c["at"] != "random" and c["reached"]})
        return [f"[AUDIT], Kind, {self.kind}",
                f"[AUDIT], Backend, {self.backend}",
                f"[AUDIT], Durability, {self.durability}",
                f"[AUDIT], FileSystem, {self.file_system()}",
                f"[AUDIT], Rounds, {self.rounds}",
                f"[AUDIT], Acknowledged, {self.acknowledged}",
                f"[AUDIT], Lost, {self.lost}",
                f"[AUDIT], Wrong, {self.wrong}",
                f"[AUDIT], HazardPoints, {', '.join(hazards) or 'none'}",
                f"[AUDIT], Claim, {self.claim}",
                f"[AUDIT], Verdict, {self.verdict()}"]

    def file_system(self) -> str:
        on = (f"; HBase's root and WAL on a private HDFS (NameNode and DataNode directories "
              f"{'on the same mount' if self.kind == 'power-loss' else 'local'})"
              if self.hbase_root == "hdfs" else "")
        if self.kind == "sigkill":
            return "local (the page cache survives a SIGKILL)" + on
        return (f"lossy FUSE, {self.fs_model} metadata (a directory's entries durable once "
                f"{'it is' if self.fs_model == 'posix' else 'anything is'} fsynced)"
                + (", torn writes" if self.torn else "") + on)

    def verdict(self) -> str:
        if self.lost == 0 and self.wrong == 0:
            return "held" if self.claims_durability else "no loss measured (none claimed)"
        return "VIOLATED" if self.claims_durability else "loss measured (none claimed)"

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "ckptbench.audit/1", **asdict(self), "ok": self.ok,
                "verdict": self.verdict()}


def _key(backend: str, hbase_root: str | None) -> str:
    """The claim tables' name for a backend: ``hbase@hdfs`` for HBase on HDFS."""
    return "hbase@hdfs" if backend == "hbase" and hbase_root == "hdfs" else backend


def claim_of(backend: str, durability: str, hbase_root: str | None = None) -> str:
    return CLAIMS.get((_key(backend, hbase_root), durability),
                      f"{durability}: (no stated claim)")


def hbase_root_of(backend: str, durability: str, hbase_root: str | None) -> str:
    """The root an HBase audit uses (``""`` for other backends); a clear error for bad input."""
    if backend != "hbase":
        if hbase_root:
            raise BadOptionError("--hbase-root is for --backend hbase only; leave it out")
        return ""
    root = hbase_root or DEFAULT_HBASE_ROOT.get(durability, "local")
    if root not in HBASE_ROOTS:
        raise BadOptionError(f"--hbase-root {root!r} is not one of {', '.join(HBASE_ROOTS)}")
    return root


def hazard_points(backend: str) -> list[str]:
    """The fail points ``backend`` declares (importing its store module declares them)."""
    if backend == "indexed_fs":
        import backends.indexed_fs.store  # noqa: F401 - declares its fail points
    else:
        backend_class(backend)
    return sorted(n for n in failpoints.DECLARED if n.startswith(backend + "."))


def _round_options(backend: str, rnd: random.Random, hazard: bool) -> dict[str, Any]:
    """indexed_fs: vary rotation, compaction and index flushes so the hazards come up often."""
    if backend != "indexed_fs":
        return {}
    if hazard:
        return {"segment_size": 16384, "compaction_interval": 0.02,
                "index_flush_interval": 0.05, "compaction_live_ratio": 0.6,
                "delta_records": 2}
    return {"segment_size": rnd.choice((4096, 16384, 64 * 1024 * 1024)),
            "compaction_interval": rnd.choice((0, 0.02, 0.1)),
            "index_flush_interval": rnd.choice((0, 0.05, 0.3)),
            "compaction_live_ratio": 0.6, "delta_records": rnd.choice((8, 64, 16384))}


def _read_back(open_store: Callable[[], Any], keys: list[str]) -> dict[str, bytes | None]:
    store = open_store()
    try:
        found: dict[str, bytes | None] = {}
        for start in range(0, len(keys), 200):
            chunk = keys[start:start + 200]
            found.update(store.get_many(chunk))
        return {k: found.get(k) for k in keys}
    finally:
        store.close()


def validate(kind: str, backend: str, durability: str | None, rounds: int, threads: int,
             options: dict[str, Any], hbase_root: str | None = None) -> str:
    """Check the audit's arguments before anything starts; returns the durability mode."""
    if kind not in KINDS:
        raise BadOptionError(f"audit kind {kind!r} is not one of {', '.join(KINDS)}")
    cls = backend_class(backend)  # UnknownBackendError names the known ones
    if rounds < 1 or threads < 1:
        raise BadOptionError("--rounds and --threads must be at least 1")
    if cls.kind == "memory":
        raise BadOptionError(f"backend {backend!r} keeps no data on a file system; audit a file, "
                             f"embedded or server backend")
    mode = durability or DEFAULT_DURABILITY.get(backend, cls.durability_modes[0])
    allowed = REDIS_POLICIES if backend == "redis" else cls.durability_modes
    if mode not in allowed:
        raise BadOptionError(f"--durability {mode!r} is not a mode of {backend}; choose one of "
                             f"{', '.join(allowed)}")
    for bad in ("path", "durability") if cls.kind != "server" else ():
        if bad in options and not (bad == "path" and kind == "sigkill"):
            raise BadOptionError(f"--opt {bad}= is set by the audit (use --durability for the "
                                 f"mode); leave it out")
    if "hbase_root" in options:
        raise BadOptionError("--opt hbase_root= is not a backend option; give --hbase-root "
                             "hdfs|local")
    cls.parse_options(options)  # an unknown option or a bad value: one line, before any start
    hbase_root_of(backend, mode, hbase_root)
    return mode


def audit(kind: str, backend: str, *, rounds: int = 20, threads: int = 3,
          durability: str | None = None, options: dict[str, Any] | None = None,
          seed: int | None = None, run_seconds: float | None = None,
          keys_per_thread: int = 15, fs_model: str | None = None, torn: bool = False,
          hbase_root: str | None = None, workdir: str | os.PathLike | None = None, use_hazards: bool = True,
          after_cut: Callable[[int, str], None] | None = None,
          inspect: Callable[[Any, int], None] | None = None,
          progress: Callable[[str], None] | None = None) -> AuditResult:
    """Run ``rounds`` writer/cut/check rounds of ``kind`` on ``backend``; see the module doc.

    ``options`` are backend options (``path`` may be given for ``sigkill``, e.g. an ``nfs://``
    URL); ``hbase_root`` (hbase) is ``hdfs`` or ``local``, by default
    :data:`DEFAULT_HBASE_ROOT`; ``after_cut(round, path)`` runs after each cut, before the check (a test deletes
    snapshots there); ``inspect(store, round)`` sees the reopened store (a test reads stats)."""
    options = dict(options or {})
    mode = validate(kind, backend, durability, rounds, threads, options, hbase_root)
    hbase_root = hbase_root_of(backend, mode, hbase_root)
    key = _key(backend, hbase_root)
    seed = random.randrange(1 << 30) if seed is None else seed
    rnd = random.Random(seed)
    say = progress or (lambda _msg: None)
    started = time.monotonic()
    claims = (key, mode) in (DURABLE if kind == "power-loss" else DURABLE_SIGKILL)
    fs_model = fs_model or DEFAULT_FS_MODEL.get(key, "posix")
    run_seconds = DEFAULT_RUN_SECONDS.get(backend, 0.6) if run_seconds is None else run_seconds
    if not 0 < run_seconds < 3600:
        raise BadOptionError(f"--run-seconds {run_seconds} is not a number of seconds in "
                             f"(0, 3600)")
    if fs_model not in FS_MODELS:
        raise BadOptionError(f"--fs-model {fs_model!r} is not one of {', '.join(FS_MODELS)}")
    result = AuditResult(kind, backend, mode, claim_of(backend, mode, hbase_root), rounds,
                         threads, fs_model=fs_model, torn=torn, hbase_root=hbase_root,
                         claims_durability=claims, seed=seed)
    hazards = hazard_points(backend) if use_hazards else []
    own_tmp = workdir is None
    work = Path(tempfile.mkdtemp(prefix=f"ckpt-audit-{backend}-") if own_tmp else workdir)
    work.mkdir(parents=True, exist_ok=True)
    medium = server = writer = None
    model = Model()
    try:
        medium = Medium(work, lossy=kind == "power-loss", fs_model=fs_model)
        if backend_class(backend).kind == "server":
            server = PrivateServer(backend, medium.root / "state", mode,
                                   hbase_root=hbase_root or "local",
                                   sync_gate=medium.fs.backing if medium.fs else None)
            server.start()
            # a server's first start lays out its data directory (Redis' appendonlydir, MinIO's
            # .minio.sys, HBase's root dir) without syncing every entry; on a real machine the
            # kernel writes that back within seconds, long before an audit would begin
            medium.sync()
            namespace = f"audit{uuid.uuid4().hex[:8]}"
            base = server.options(namespace)
            if backend in ("hbase", "minio"):  # (Redis' mode is the server's policy)
                base["durability"] = mode
                if hbase_root == "hdfs":  # a restart on HDFS recovers the WAL's lease first
                    base["timeout"] = HDFS_CALL_TIMEOUT_MS
            base.update(options)
            path = str(medium.root / "state" / backend / "data")
            if hbase_root == "hdfs":
                # the table exists, durably, before the first round: HBase writes hbase:meta
                # with its default durability, an hflush while hbase.wal.hsync is false, so a
                # table created just before a cut can lose its region; the audit measures puts
                open_backend(backend, **base).close()
                medium.sync()
        else:
            path = str(options.pop("path", None) or medium.root / "store")
            base = {"path": path, "durability": mode, **options}
        for round_no in range(rounds):
            hazard = hazards[(round_no // 2) % len(hazards)] if hazards and round_no % 2 else None
            store_opts = {**_round_options(backend, rnd, hazard is not None), **base}
            config = {"backend": backend, "options": store_opts, "threads": threads,
                      "keys_per_thread": keys_per_thread, "seed": f"{seed}-r{round_no}"}
            spec = f"{hazard}@{rnd.randint(1, 3)}" if hazard else None
            writer = Writer(config, spec)
            writer.wait_ready(120)
            syncs_before, global_before = medium.file_syncs(), medium.global_syncs()
            cut = _run_until_cut(writer, hazard, rnd, run_seconds)
            if server is not None:  # the server dies first: nothing it does after the cut
                server.kill()       # (its page cache is still volatile) can outlive the cut
            if syncs_before is not None:
                cut.file_syncs = medium.file_syncs() - syncs_before
                cut.global_syncs = medium.global_syncs() - global_before
            cut.dropped = medium.power_off(rnd.randrange(1 << 30), torn)
            writer.kill()
            if writer.proc.returncode not in (-signal.SIGKILL, failpoints.EXIT_CODE):
                raise AuditError(f"round {round_no}: the writer exited with "
                                 f"{writer.proc.returncode} before the cut: {writer.stderr()}")
            medium.power_on()
            acked = model.read(writer.lines)
            if after_cut is not None:
                after_cut(round_no, path)
            if server is not None:
                server.start()

            def open_store() -> Any:
                return open_backend(backend, **base)

            try:
                if inspect is not None:
                    store = open_store()
                    try:
                        inspect(store, round_no)
                    finally:
                        store.close()
                found = _read_back(open_store, model.keys())
            except CkptError as exc:
                result.notes.append(f"round {round_no}: the store did not open after the cut: "
                                    f"{exc}")
                found = {}
            lost, wrong = model.check(found, round_no)
            result.cuts.append({**asdict(cut), "round": round_no, "acknowledged": acked,
                                "lost": lost, "wrong": wrong})
            say(f"round {round_no + 1}/{rounds}: cut at {cut.at} after {cut.seconds:.2f} s, "
                f"{acked} acknowledged, {lost} lost, {wrong} wrong")
    except OSError as exc:  # the audit's own I/O (its directory, the mount): one clear line
        raise AuditError(f"the audit stopped after {len(result.cuts)} rounds: {exc}") from exc
    finally:
        if writer is not None:
            writer.kill()
        if server is not None:
            server.stop()
        if medium is not None:
            medium.close()
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)
    result.acknowledged = model.total_acked
    result.lost, result.wrong = model.lost, model.wrong
    result.failures = model.failures
    result.seconds = round(time.monotonic() - started, 2)
    if backend == "indexed_fs":
        result.notes.append(f"compactions seen by the writers: {model.compactions}")
    if kind == "power-loss" and backend == "hbase" and hbase_root == "local":
        result.notes.append("HBase runs on Hadoop's LocalFileSystem here; its WAL sync is no "
                            "fsync, so this measures what a power cut costs it")
    syncs = [c["file_syncs"] for c in result.cuts if c.get("file_syncs") is not None]
    if backend == "hbase" and hbase_root == "hdfs" and syncs:
        result.notes.append(f"HBase on a private HDFS on the lossy mount: the lossy file system "
                            f"saw {sum(syncs)} file fsyncs while the writers ran "
                            f"({result.acknowledged} writes acknowledged); hsync reaches it as "
                            f"the DataNode's fsync of the block file, hflush does not")
    gated = [c["global_syncs"] for c in result.cuts if c.get("global_syncs") is not None]
    if backend == "minio" and kind == "power-loss" and gated:
        result.notes.append(f"MinIO's sync(2) calls reached the lossy file system through the "
                            f"sync gate: {sum(gated)} while the writers ran "
                            f"({result.acknowledged} writes acknowledged)")
    return result


def _run_until_cut(writer: Writer, hazard: str | None, rnd: random.Random,
                   run_seconds: float) -> Cut:
    """Let the writer run to a random instant, or until it exits at its armed fail point.  The
    random instant is counted from the writer's first acknowledged operation (or 60 s), so a
    slow first call (a table's first region opening) does not use up the window."""
    if hazard is None:
        pause = rnd.uniform(0.05, run_seconds)
        deadline = time.monotonic() + 60
        while (writer.proc.poll() is None and time.monotonic() < deadline
               and not any(line.startswith("A") for line in list(writer.lines))):
            time.sleep(0.02)
        if writer.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                writer.proc.wait(pause)
        return Cut("random", round(time.monotonic() - writer.started, 3))
    try:
        code = writer.proc.wait(max(5.0, run_seconds * 8))
    except subprocess.TimeoutExpired:
        return Cut(hazard, round(time.monotonic() - writer.started, 3), reached=False)
    return Cut(hazard, round(time.monotonic() - writer.started, 3),
               reached=code == failpoints.EXIT_CODE)


# --------------------------------------------------------------------- the reproduce table
def table(runs: dict[str, dict[str, Any]]) -> list[str]:
    """``bench reproduce audit``'s table: one row per audit document (by step label)."""
    lines = ["| backend | mode | cut | file system | rounds | acknowledged | lost | wrong | "
             "verdict | claim |",
             "|---|---|---|---|--:|--:|--:|--:|---|---|"]
    for doc in runs.values():
        fs = "page cache kept" if doc["kind"] == "sigkill" else f"lossy, {doc['fs_model']}"
        fs += ", HBase on HDFS" if doc.get("hbase_root") == "hdfs" else ""
        lines.append(f"| {doc['backend']} | {doc['durability']} | {doc['kind']} | {fs} | "
                     f"{doc['rounds']} | {doc['acknowledged']} | {doc['lost']} | "
                     f"{doc['wrong']} | {doc['verdict']} | {doc['claim']} |")
    return lines


def _label(doc: dict[str, Any]) -> str:
    extra = " sigkill" if doc["kind"] == "sigkill" else (
        f" ({doc['fs_model']})" if doc["fs_model"] != "posix" or doc["backend"] == "minio" else "")
    on = " on HDFS" if doc.get("hbase_root") == "hdfs" else ""
    return f"{doc['backend']} {doc['durability']}{on}{extra}"


def headline(runs: dict[str, dict[str, Any]]) -> str:
    held = [d for d in runs.values() if d["claims_durability"] and d["ok"]]
    broken = [d for d in runs.values() if not d["ok"]]
    measured = [d for d in runs.values() if not d["claims_durability"] and d["lost"]]
    parts = [f"lost 0 of {sum(d['acknowledged'] for d in held)} acknowledged writes: "
             + ", ".join(_label(d) for d in held)]
    if broken:
        parts.append("violated: " + ", ".join(f"{_label(d)} {d['lost']} lost, {d['wrong']} "
                                                f"wrong" for d in broken))
    if measured:
        parts.append("measured loss: " + ", ".join(
            f"{_label(d)} {d['lost']}/{d['acknowledged']}" for d in measured))
    return "; ".join(parts)
