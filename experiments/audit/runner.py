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

What a mode promises is the backend's own declaration (:class:`backends.base.Claim`); the audit's
arguments are an :class:`~experiments.audit.spec.AuditSpec`, checked once before anything starts.

HBase is audited on one of two roots (``--hbase-root``; by default the one its mode means
something on, :meth:`~backends.base.Backend.claim_medium`): ``local``
(Hadoop's LocalFileSystem, whose WAL sync is no fsync) or ``hdfs``, a private HDFS whose NameNode
and DataNode directories are on the lossy mount too.  There a cut SIGKILLs HBase's and HDFS's
JVMs together, and the check restarts HDFS, then HBase (which recovers the WAL's lease and
replays it).  ``wal_hsync`` (FSYNC_WAL: hsync, an fsync of the block file on the DataNode) claims
only a process crash on HDFS, since a cut right after the DataNode's checksum fsync
(``cut_after_sync="*/rbw/*.meta"``) costs the WAL's last acknowledged edit; ``wal`` (SYNC_WAL:
hflush, the DataNode's memory) claims nothing under a power cut either.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from backends import Backend, CkptError, failpoints
from experiments.audit.env import Medium, PrivateServer
from experiments.audit.spec import AuditSpec
from experiments.audit.writer import Model, Writer, value_of
from experiments.core.document import Document, Environment

__all__ = ["AuditError", "AuditResult", "AuditSpec", "Cut", "Model", "audit", "hazard_points",
           "headline", "table", "value_of"]

#: HBase on HDFS: one Thrift call's timeout (the backend's ``timeout``), long enough for the
#: first calls after a restart, which wait for the WAL's lease recovery and replay
HDFS_CALL_TIMEOUT_MS = 30000


class AuditError(CkptError):
    """The audit could not run (no FUSE, a server that does not start, bad options)."""


class ServerLost(AuditError):
    """The private server did not come back after a cut: what the cut left of its files is the
    evidence of why, so the audit keeps its directory (:func:`restart_after_cut`)."""


def restart_after_cut(server: Any, round_no: int, work: Path) -> None:
    """Start ``server`` again after round ``round_no``'s cut; if it does not come back, a
    :class:`ServerLost` that names the directory kept for inspection."""
    try:
        server.start()
    except CkptError as exc:
        raise ServerLost(f"round {round_no + 1}: the private server did not come back after the cut; "
                         f"its files are kept in {work} for inspection: {exc}") from None


# ------------------------------------------------------------------------------ one writer run
@dataclass
class Cut:
    """How one round ended, and what its check found."""

    at: str                 # "random" or the fail point's name
    seconds: float          # how long the writer ran
    reached: bool = True    # False: the fail point was not reached in time (a random cut then)
    file_syncs: int | None = None  # power-loss: file fsyncs the lossy FS saw while writing
    global_syncs: int | None = None  # power-loss: sync(2) calls passed on by the sync gate
    dropped: dict[str, Any] = field(default_factory=dict)  # what the power cut dropped
    round: int = 0
    acknowledged: int = 0   # writes the round acknowledged
    lost: int = 0
    wrong: int = 0


# ------------------------------------------------------------------------------------ the audit
@dataclass
class AuditResult(Document):
    """An audit's result, the ``ckptbench.audit/1`` document (``ok`` and ``verdict`` are written
    beside the fields and derived again when it is read)."""

    SCHEMA = "ckptbench.audit/1"

    kind: str = ""
    backend: str = ""
    durability: str = ""
    claim: str = ""
    rounds: int = 0
    threads: int = 0
    fs_model: str = "posix"
    torn: bool = False
    hbase_root: str = ""   # a server with a choice of media (HBase): "hdfs" or "local"
    cut_after_sync: str = ""  # power-loss: the cuts were armed on fsyncs of files matching this
    acknowledged: int = 0
    lost: int = 0
    wrong: int = 0
    claims_durability: bool = False
    cuts: list[Cut] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seed: int = 0
    seconds: float = 0.0
    environment: Environment = field(default_factory=Environment.here)

    @property
    def ok(self) -> bool:
        """The claim held: nothing acknowledged was lost or wrong (for a mode that claims it)."""
        return not self.claims_durability or (self.lost == 0 and self.wrong == 0)

    def lines(self) -> list[str]:
        hazards = sorted({c.at for c in self.cuts if c.at != "random" and c.reached})
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

    def cut_kind(self) -> str:
        """``power-loss`` or ``sigkill``, and where an armed cut went off."""
        return (f"{self.kind} right after an fsync of {self.cut_after_sync}"
                if self.cut_after_sync else self.kind)

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

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "ok": self.ok, "verdict": self.verdict()}


def hazard_points(backend: type[Backend]) -> list[str]:
    """The fail points ``backend`` declares (importing its class's modules declared them)."""
    return sorted(n for n in failpoints.DECLARED if n.startswith(backend.name + "."))


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


def audit(spec: AuditSpec, *, workdir: str | os.PathLike | None = None,
          after_cut: Callable[[int, str], None] | None = None,
          inspect: Callable[[Any, int], None] | None = None,
          progress: Callable[[str], None] | None = None) -> AuditResult:
    """Run ``spec.rounds`` writer/cut/check rounds; see the module doc.

    ``after_cut(round, path)`` runs after each cut, before the check (a test deletes snapshots
    there); ``inspect(store, round)`` sees the reopened store (a test reads stats)."""
    cls, backend, mode, kind = spec.backend, spec.name, spec.durability, spec.kind
    root = spec.medium
    rnd = random.Random(spec.seed)
    say = progress or (lambda _msg: None)
    started = time.monotonic()
    claim = spec.claim
    result = AuditResult(kind, backend, mode, claim.text, spec.rounds, spec.threads,
                         fs_model=spec.fs_model, torn=spec.torn, hbase_root=root,
                         claims_durability=spec.claims_durability, seed=spec.seed,
                         cut_after_sync=spec.cut_after_sync)
    hazards = hazard_points(cls) if spec.use_hazards else []
    own_tmp = workdir is None
    work = Path(tempfile.mkdtemp(prefix=f"ckpt-audit-{backend}-") if own_tmp else workdir)
    work.mkdir(parents=True, exist_ok=True)
    options = dict(spec.options)
    medium = server = writer = None
    model = Model()
    try:
        medium = Medium(work, lossy=kind == "power-loss", fs_model=spec.fs_model)
        if cls.kind == "server":
            server = PrivateServer(backend, medium.root / "state", mode,
                                   hbase_root=root or "local",
                                   sync_gate=medium.fs.backing if medium.fs else None)
            server.start()
            # a server's first start lays out its data directory (Redis' appendonlydir, MinIO's
            # .minio.sys, HBase's root dir) without syncing every entry; on a real machine the
            # kernel writes that back within seconds, long before an audit would begin
            medium.sync()
            namespace = f"audit{uuid.uuid4().hex[:8]}"
            base = server.options(namespace)
            if mode in cls.durability_modes:  # (a mode of the server's is set where it starts)
                base["durability"] = mode
                if root == "hdfs":  # a restart on HDFS recovers the WAL's lease first
                    base["timeout"] = HDFS_CALL_TIMEOUT_MS
            base.update(options)
            path = str(medium.root / "state" / backend / "data")
            if root == "hdfs":
                # the table exists, durably, before the first round: HBase writes hbase:meta
                # with its default durability, an hflush while hbase.wal.hsync is false, so a
                # table created just before a cut can lose its region; the audit measures puts
                cls(**base).close()
                medium.sync()
        else:
            path = str(options.pop("path", None) or medium.root / "store")
            base = {"path": path, "durability": mode, **options}
        for round_no in range(spec.rounds):
            hazard = hazards[(round_no // 2) % len(hazards)] if hazards and round_no % 2 else None
            store_opts = {**cls.hazard_options(rnd, hazard is not None), **base}
            config = {"backend": backend, "options": store_opts, "threads": spec.threads,
                      "keys_per_thread": spec.keys_per_thread, "seed": f"{spec.seed}-r{round_no}"}
            armed = f"{hazard}@{rnd.randint(1, 3)}" if hazard else None
            writer = Writer(config, armed)
            writer.wait_ready(120)
            syncs_before, global_before = medium.file_syncs(), medium.global_syncs()
            if spec.cut_after_sync and hazard is None:
                cut = _run_until_armed_cut(writer, medium, spec.cut_after_sync, rnd,
                                           spec.run_seconds)
            else:
                cut = _run_until_cut(writer, hazard, rnd, spec.run_seconds)
            if server is not None:  # the server dies first: nothing it does after the cut
                server.kill()       # (its page cache is still volatile) can outlive the cut
            if syncs_before is not None:
                cut.file_syncs = medium.file_syncs() - syncs_before
                cut.global_syncs = medium.global_syncs() - global_before
            cut.dropped = medium.power_off(rnd.randrange(1 << 30), spec.torn)
            writer.kill()
            if writer.proc.returncode not in (-signal.SIGKILL, failpoints.EXIT_CODE):
                raise AuditError(f"round {round_no}: the writer exited with "
                                 f"{writer.proc.returncode} before the cut: {writer.stderr()}")
            medium.power_on()
            acked = model.read(writer.lines)
            if after_cut is not None:
                after_cut(round_no, path)
            if server is not None:
                restart_after_cut(server, round_no, work)

            def open_store() -> Any:
                return cls(**base)

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
            cut.round, cut.acknowledged = round_no, acked
            cut.lost, cut.wrong = model.check(found, round_no)
            result.cuts.append(cut)
            say(f"round {round_no + 1}/{spec.rounds}: cut at {cut.at} after {cut.seconds:.2f} s, "
                f"{acked} acknowledged, {cut.lost} lost, {cut.wrong} wrong")
    except OSError as exc:  # the audit's own I/O (its directory, the mount): one clear line
        raise AuditError(f"the audit stopped after {len(result.cuts)} rounds: {exc}") from exc
    except ServerLost:
        own_tmp = False  # evidence: never deleted
        raise
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
    if model.compactions is not None:
        result.notes.append(f"compactions seen by the writers: {model.compactions}")
    if kind == "power-loss" and claim.note and result.cuts:
        result.notes.append(claim.note.format(
            acknowledged=result.acknowledged,
            file_syncs=sum(c.file_syncs or 0 for c in result.cuts),
            global_syncs=sum(c.global_syncs or 0 for c in result.cuts)))
    return result


def _wait_first_ack(writer: Writer) -> None:
    """Wait for the writer's first acknowledged operation (or 60 s): a slow first call (a
    table's first region opening) must not use up a round's window."""
    deadline = time.monotonic() + 60
    while (writer.proc.poll() is None and time.monotonic() < deadline
           and not any(line.startswith("A") for line in list(writer.lines))):
        time.sleep(0.02)


def _run_until_cut(writer: Writer, hazard: str | None, rnd: random.Random,
                   run_seconds: float) -> Cut:
    """Let the writer run to a random instant after its first acknowledged operation, or
    until it exits at its armed fail point."""
    if hazard is None:
        pause = rnd.uniform(0.05, run_seconds)
        _wait_first_ack(writer)
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


#: an armed cut goes off after the n-th matching fsync, n drawn from 1..ARMED_SYNCS
ARMED_SYNCS = 20


def _run_until_armed_cut(writer: Writer, medium: Medium, pattern: str, rnd: random.Random,
                         run_seconds: float) -> Cut:
    """Once the writer acknowledged its first operation, arm the lossy file system to cut the
    power right after a random one of the next fsyncs of a file matching ``pattern``; wait for
    it (``reached=False``: no such fsync in time, and the runner cuts there)."""
    _wait_first_ack(writer)
    medium.arm(pattern, rnd.randint(1, ARMED_SYNCS))
    deadline = time.monotonic() + max(30.0, run_seconds * 8)
    while not medium.down() and time.monotonic() < deadline:
        time.sleep(0.02)
    return Cut(f"fsync of {pattern}", round(time.monotonic() - writer.started, 3),
               reached=medium.down())


# --------------------------------------------------------------------- the reproduce table
def _results(runs: dict[str, dict[str, Any]]) -> list[AuditResult]:
    return [AuditResult.from_json(doc) for doc in runs.values()]


def table(runs: dict[str, dict[str, Any]]) -> list[str]:
    """``bench reproduce audit``'s table: one row per audit document (by step label)."""
    lines = ["| backend | mode | cut | file system | rounds | acknowledged | lost | wrong | "
             "verdict | claim |",
             "|---|---|---|---|--:|--:|--:|--:|---|---|"]
    for r in _results(runs):
        fs = "page cache kept" if r.kind == "sigkill" else f"lossy, {r.fs_model}"
        fs += ", HBase on HDFS" if r.hbase_root == "hdfs" else ""
        lines.append(f"| {r.backend} | {r.durability} | {r.cut_kind()} | {fs} | {r.rounds} | "
                     f"{r.acknowledged} | {r.lost} | {r.wrong} | {r.verdict()} | {r.claim} |")
    return lines


def _labeller(results: list[AuditResult]) -> Callable[[AuditResult], str]:
    """Names for the headline: backend, mode and what sets a result apart from the others (a
    SIGKILL, HDFS, a metadata model other than posix, or one beside a run on another model)."""
    models: dict[tuple[str, str], set[str]] = {}
    for r in results:
        if r.kind == "power-loss":
            models.setdefault((r.backend, r.hbase_root), set()).add(r.fs_model)

    def label(r: AuditResult) -> str:
        shown = r.fs_model != "posix" or len(models.get((r.backend, r.hbase_root), ())) > 1
        extra = " sigkill" if r.kind == "sigkill" else (f" ({r.fs_model})" if shown else "")
        on = " on HDFS" if r.hbase_root == "hdfs" else ""
        return f"{r.backend} {r.durability}{on}{extra}"

    return label


def headline(runs: dict[str, dict[str, Any]]) -> str:
    results = _results(runs)
    _label = _labeller(results)
    held = [r for r in results if r.claims_durability and r.ok]
    broken = [r for r in results if not r.ok]
    measured = [r for r in results if not r.claims_durability and r.lost]
    stores = ", ".join(dict.fromkeys(r.backend for r in held))
    parts = [f"lost 0 of {sum(r.acknowledged for r in held):,} acknowledged writes in the "
             f"{len(held)} audits of modes that claim no loss ({stores})"]
    if broken:  # a broken claim is never summarised away
        parts.append("violated: " + ", ".join(f"{_label(r)} {r.lost} lost, {r.wrong} wrong"
                                                for r in broken))
    if measured:
        worst = max(measured, key=lambda r: r.lost / r.acknowledged if r.acknowledged else 0)
        modes = f"{len(measured)} modes that allow" if len(measured) > 1 else "1 mode that allows"
        parts.append(f"loss measured in {modes} it (the most: "
                     f"{_label(worst)} {worst.lost:,} of {worst.acknowledged:,})")
    return "; ".join(parts)
