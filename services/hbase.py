"""HBase 2.6 standalone plus its Thrift gateways, from Maven Central jars, on loopback.

Three JVMs make one service:

* ``HMaster start`` with ``hbase.cluster.distributed=false`` runs the master, one region server and
  an in-process ZooKeeper (``127.0.0.1:<zk_port>``); its pid is the service pid (``ctx.pid_file``),
  so ``kill_pid(ctx)`` is a real crash of the store.
* ``ThriftServer start`` (thread pool, buffered transport, binary protocol: happybase's defaults)
  on ``127.0.0.1:<thrift_port>``; its pid lives in ``<state>/hbase/thrift/pid``.
* The Thrift2 gateway (``thrift2.ThriftServer``, same transport and protocol) on
  ``127.0.0.1:<thrift2_port>``, pid in ``<state>/hbase/thrift2/pid``: Thrift1 gives every put
  ``SYNC_WAL`` or ``SKIP_WAL`` (its ``Mutation.writeToWAL`` is a bool), Thrift2's ``TPut`` carries
  a ``TDurability``, so ``FSYNC_WAL`` (the backend's ``wal_hsync``) goes through it.

Where the data goes (``hbase_root``, ``bench services up hbase --hbase-root``):

* ``auto`` (default): on the HDFS of ``bench services up hdfs`` when it is running in the same
  state directory at start, else on the local file system (decided at every start of the
  master: starting HDFS later and restarting HBase moves it to a fresh root on HDFS);
* ``hdfs``: on that HDFS (an error naming the fix if it is not running);
* ``local``: ``file://<state>/hbase/data/root`` whatever else runs;
* an ``hdfs://HOST:PORT`` URL (Python API): that HDFS, wherever its state is.

The root is remembered (``options.json``: ``hbase_root`` is ``local`` or the HDFS URL), so
``services.restart`` after a crash uses the same one.
On HDFS the root is ``hdfs://127.0.0.1:<port>/hbase-<id>`` (``<id>`` from the state directory, so
two HBase servers can share one HDFS) and the WAL is its ``WALs/`` directory.

Coming back, whatever came before (``up``/``down``/``kill`` of HBase and of the HDFS under it):

* **Each root has its own ZooKeeper directory** (``data/zk/root-<hash>``, :func:`_zk_dir`).
  ZooKeeper remembers which server holds ``hbase:meta``; a master meeting another root's
  ZooKeeper state waits for it forever.  A root without ``hbase.id`` (new) starts with none.
* **Moving a running HBase**: ``up`` with a root named (``--hbase-root local|hdfs``) other than
  the one it runs on stops it and starts it there; with ``auto`` it keeps running and one line
  says how to move it.  A start whose ``auto`` root differs from the last one says so too:
  the tables of a root stay with it and are there again when HBase returns to it.
* **A stale master is restarted by ``up``** (:func:`_stale`): one whose master or region
  server aborted (a lost file system), or whose HDFS was started after it.  ``up`` on a root
  whose HDFS does not run is one line naming the fix.
* **Ready means serving**: ``up`` waits until a row of ``hbase:namespace`` reads through the
  gateway (:func:`_serving`), and fails at once with the fix when the master would wait
  for ``hbase:meta`` forever (:func:`_meta_stuck`).

No tarball: ``hbase_files/pom.xml`` pins the artifacts and ``mvn dependency:build-classpath``
resolves them into Maven's own cache (``~/.m2``); the classpath is kept under
``~/.cache/ckptbench/hbase/<version>/``.

HBase's own Hadoop client (2.10.2, what the hbase-thrift 2.6.1 artifacts pull in; there is no
hadoop3 build of hbase-thrift on Maven Central) talks to the HDFS 3.3 server: Hadoop keeps its
client RPC and data transfer protocols compatible from 2.10 to 3.x (the rolling-upgrade path).

Durability, honestly (:func:`wal_durability` says which applies, and ``status()`` shows it):

* local root: the WAL is on and every acknowledged put has been hsync'ed *as far as Hadoop's local
  file system goes* — and Hadoop 2.10's local streams are not ``Syncable``, so hsync is a plain
  flush into the OS page cache, never an fsync.  A killed HBase process loses nothing
  acknowledged; a kernel crash or power loss can.
* HDFS root: a ``SYNC_WAL`` put (backend ``wal``) is acknowledged after the WAL edit was hflushed:
  in the DataNode's memory, surviving an HBase crash, not a DataNode machine's power loss.  An
  ``FSYNC_WAL`` put (backend ``wal_hsync``, through Thrift2) is acknowledged after hsync: fsync'ed
  on the DataNode.  One DataNode, one replica.  A power cut can still take the last acknowledged
  edits: the DataNode fsyncs the checksum file before the block file, and at restart cuts an
  unfinished replica back to its last chunk whose checksum holds (docs/audit.md).
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from string import Template
from typing import Callable

from .common import (
    ServiceContext,
    ServiceError,
    kill_pid,
    log,
    port_open,
    require_port_free,
    spawn,
    start_and_wait,
    started_at,
    stop_pid,
    wait_until,
)
from .maven import classpath_file, java, read_classpath, resolve_classpath

NAME = "hbase"
VERSION = "2.6.1"  # newest 2.6.x with hbase-thrift on Maven Central; pinned in hbase_files/pom.xml
HADOOP_VERSION = "2.10.2"  # what hbase 2.6.1's published poms pull in
HOST = "127.0.0.1"
ZK_PORT = 2181
THRIFT_PORT = 9090
START_TIMEOUT = 180.0

FILES = Path(__file__).resolve().with_name("hbase_files")

#: what bin/hbase adds on JDK >= 11 (HBase's hbase-surefire.jdk11.flags), plus its logging bridge
JDK_FLAGS = [
    "-XX:+UseG1GC",
    "-Djava.util.logging.config.class=org.apache.hadoop.hbase.logging.JulToSlf4jInitializer",
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.util=ALL-UNNAMED",
]

THRIFT2_PORT = 9091
HBASE_ROOTS = ("auto", "local", "hdfs")

#: what "the WAL is on" buys on a file:// rootdir (checked in the Hadoop 2.10.2 jars: neither
#: RawLocalFileSystem's stream nor ChecksumFileSystem's is Syncable, so FSDataOutputStream.hsync()
#: falls back to flush(); the durability audit in tests/test_hbase.py SIGKILLs the JVM)
WAL_DURABILITY = (
    "WAL on; a put is acknowledged after the WAL sync, which on the local file system "
    f"(Hadoop {HADOOP_VERSION} LocalFileSystem, not Syncable) is a flush to the OS page cache, "
    "no fsync, for SYNC_WAL (wal) and FSYNC_WAL (wal_hsync) alike: survives an HBase process "
    "crash (SIGKILL), not a kernel crash or power loss"
)
#: the same on HDFS, per backend durability mode (HRegion.sync: SYNC_WAL -> WAL.sync(txid,
#: forceSync=false) -> hflush, FSYNC_WAL -> forceSync=true -> hsync; hbase.wal.hsync=false only
#: affects USE_DEFAULT, which neither gateway sends)
WAL_DURABILITY_HDFS = {
    "wal": "SYNC_WAL through Thrift1: acknowledged after the WAL edit was hflushed to the "
           "DataNode (in its memory, readable; not fsync'ed): survives an HBase crash, not a "
           "power loss of the DataNode's machine",
    "wal_hsync": "FSYNC_WAL through Thrift2: acknowledged after the WAL edit was hsynced "
                 "(fsync'ed on the DataNode's disk): survives an HBase crash; a power loss can "
                 "take the last acknowledged edits (the DataNode cuts an unfinished block back "
                 "to its last chunk whose checksum holds; one DataNode: one replica)",
    "skip_wal": "SKIP_WAL: in the region server's memstore only until a flush; an HBase crash "
                "loses it",
}


def wal_durability(on_hdfs: bool) -> "str | dict[str, str]":
    """What an acknowledged put means in a configuration: one sentence for the local file
    system (all WAL modes are alike there), one per backend durability mode on HDFS."""
    return dict(WAL_DURABILITY_HDFS) if on_hdfs else WAL_DURABILITY


# ----------------------------------------------------------------------------------- install
def _pom() -> Path:
    return FILES / "pom.xml"


def install(log: Callable[[str], None]) -> None:
    """Resolve the HBase jars with Maven (idempotent: skipped when the classpath is cached)."""
    resolve_classpath(NAME, VERSION, _pom(), log, "~1 min, ~130 MB")


# ------------------------------------------------------------------------------------- start
def _thrift_ctx(ctx: ServiceContext) -> ServiceContext:
    """The Thrift gateway's own pid file and log, inside the hbase state directory."""
    return ServiceContext.for_service("thrift", ctx.root)


def _thrift2_ctx(ctx: ServiceContext) -> ServiceContext:
    """The Thrift2 gateway's pid file and log, inside the hbase state directory."""
    return ServiceContext.for_service("thrift2", ctx.root)


def _options_file(ctx: ServiceContext) -> Path:
    return ctx.root / "options.json"


def _saved_options(ctx: ServiceContext) -> dict:
    opts = {"zk_port": ZK_PORT, "thrift_port": THRIFT_PORT, "wal_provider": "asyncfs",
            "wal_hsync": False,
            "thrift2_port": THRIFT2_PORT, "hbase_root": "local", "rootdir": ""}
    with contextlib.suppress(OSError, ValueError):
        opts.update(json.loads(_options_file(ctx).read_text()))
    if not opts["rootdir"]:
        opts["rootdir"] = f"file://{ctx.data_dir}/root"
    return opts


def _hdfs_root(ctx: ServiceContext, required: bool) -> str | None:
    """``hdfs://127.0.0.1:PORT``, the HDFS running in this state directory, or ``None`` (an
    error naming the fix when ``required``) if it is not running."""
    from . import hdfs

    st = hdfs.status(ServiceContext.for_service(hdfs.NAME, ctx.root.parent))
    if not st["running"]:
        if required:
            raise ServiceError(
                f"hbase: --hbase-root hdfs needs HDFS running in {ctx.root.parent}; start it "
                f"first with `bench services up hdfs hbase` (or give --hbase-root local)")
        return None
    return st["url"]


def _resolve_root(ctx: ServiceContext, hbase_root: str) -> tuple[str, str]:
    """(``local`` or the HDFS URL, rootdir URL) for the requested ``hbase_root``: ``auto``,
    ``local``, ``hdfs`` or the ``hdfs://HOST:PORT`` URL of an HDFS running elsewhere (e.g. a
    private HBase on the shared HDFS).  The first is what ``options.json`` keeps, so that a
    restart (:func:`services.restart`) finds the same root."""
    if hbase_root.startswith("hdfs://"):
        ident = hashlib.sha256(str(ctx.root).encode()).hexdigest()[:8]
        base = hbase_root.rstrip("/")
        return base, f"{base}/hbase-{ident}"
    if hbase_root not in HBASE_ROOTS:
        raise ServiceError(f"hbase: hbase_root={hbase_root!r} is not one of "
                           f"{', '.join(HBASE_ROOTS)} or an hdfs://HOST:PORT URL; give "
                           f"--hbase-root auto|local|hdfs")
    if hbase_root != "local":
        url = _hdfs_root(ctx, required=hbase_root == "hdfs")
        if url is not None:
            return _resolve_root(ctx, url)
    return "local", f"file://{ctx.data_dir}/root"


def _write_conf(ctx: ServiceContext, opts: dict) -> Path:
    conf = ctx.root / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    site = Template((FILES / "hbase-site.xml.tmpl").read_text()).substitute(
        data=ctx.data_dir, zk_dir=_zk_dir(ctx, opts["rootdir"]), zk_port=opts["zk_port"],
        thrift_port=opts["thrift_port"],
        wal_provider=opts["wal_provider"], rootdir=opts["rootdir"],
        wal_hsync="true" if opts.get("wal_hsync") else "false",
        enforce="true" if opts["rootdir"].startswith("hdfs://") else "false",
    )
    (conf / "hbase-site.xml").write_text(site)
    shutil.copyfile(FILES / "log4j2.properties", conf / "log4j2.properties")
    return conf


def _jvm(java: str, conf: Path, classpath: str, heap: str, log_dir: Path, proc: str) -> list[str]:
    return [
        java, f"-Dproc_{proc}", "-XX:OnOutOfMemoryError=kill -9 %p", f"-Xmx{heap}",
        *JDK_FLAGS,
        f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}",
        f"-Dhbase.log.dir={log_dir}", "-Dhbase.home.dir=" + str(conf.parent),
        "-Djava.net.preferIPv4Stack=true",
        "-cp", f"{conf}:{classpath}",
    ]


def _serving(port: int) -> bool:
    """HBase serves through the gateway: happybase lists tables (the gateway and the master
    answer) and reads a row of ``hbase:namespace``, which only answers once ``hbase:meta`` and
    the namespace region are online.  Listing tables alone also answers from a master that
    waits for ``hbase:meta`` forever."""
    import happybase  # the client the backend uses; imported late so install() never needs it

    conn = happybase.Connection(HOST, port, timeout=3000, autoconnect=False)
    try:
        conn.open()
        conn.tables()
        conn.table(b"hbase:namespace").row(b"default")
        return True
    except Exception:  # noqa: BLE001 - any failure just means "not yet"
        return False
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def _zk_dir(ctx: ServiceContext, rootdir: str) -> Path:
    """ZooKeeper's data directory for ``rootdir``: each root keeps its own.

    Why: ZooKeeper remembers which region server holds ``hbase:meta``, and a master that finds
    no location in its root's own store takes the one in ZooKeeper.  A master started on a new
    root with the ZooKeeper state of another one waits forever for ``hbase:meta`` on a server
    of that other root (and writes the stale location into the new root).  With one directory
    per root, a root only ever meets the ZooKeeper state its own servers wrote; moving back to
    an earlier root finds that root's state as it was left.  A state directory from before the
    split (``zk/zookeeper_0``) belonged to the root of the last start and is moved under it."""
    base = ctx.data_dir / "zk"
    zk = base / ("root-" + hashlib.sha256(rootdir.encode()).hexdigest()[:12])
    zk.mkdir(parents=True, exist_ok=True)
    (zk / "ROOT").write_text(rootdir + "\n")
    return zk


def _root_is_new(ctx: ServiceContext, rootdir: str) -> bool:
    """Whether ``rootdir`` holds no ``hbase.id`` yet (HBase writes it when it first sets a root
    up), so that no ZooKeeper state can belong to it: a local root, or one on the HDFS of this
    state directory (asked over WebHDFS).  ``False`` when it cannot tell."""
    if rootdir.startswith("file://"):
        return not (Path(rootdir[len("file://"):]) / "hbase.id").exists()
    from . import hdfs

    hctx = ServiceContext.for_service(hdfs.NAME, ctx.root.parent)
    st = hdfs.status(hctx)
    if not (hctx.root / "options.json").is_file() or not st["running"] \
            or not rootdir.startswith(st["url"] + "/"):
        return False
    path = rootdir[len(st["url"]):]
    url = f"{st['webhdfs']}{path}/hbase.id?op=GETFILESTATUS&user.name={getpass.getuser()}"
    try:
        with urllib.request.urlopen(url, timeout=5):
            return False
    except urllib.error.HTTPError as exc:
        return exc.code == 404
    except OSError:
        return False


def _forget_zk_of_new_root(ctx: ServiceContext, rootdir: str) -> None:
    """A root without ``hbase.id`` starts with no ZooKeeper state: what its directory holds
    was written for an earlier root at the same place (a local root moved aside, an HDFS
    formatted again) and would send the master after that root's ``hbase:meta``.  It is moved
    aside, not deleted, and one line says where."""
    zk = _zk_dir(ctx, rootdir)
    if (zk / "zookeeper_0").exists() and _root_is_new(ctx, rootdir):
        aside = zk.with_name(f"{zk.name}.before-{time.strftime('%Y%m%dT%H%M%S')}")
        zk.rename(aside)
        log(f"hbase: root {rootdir} is new (no hbase.id): the ZooKeeper state kept for that "
            f"place belonged to an earlier root and is moved to {aside}")


def _adopt_unsplit_zk(ctx: ServiceContext, saved_rootdir: str) -> None:
    """Move a ZooKeeper state kept for all roots at once (``zk/zookeeper_0``) under the root
    it was written for: the one in ``options.json`` at the time (see :func:`_zk_dir`)."""
    unsplit = ctx.data_dir / "zk" / "zookeeper_0"
    if unsplit.is_dir():
        target = _zk_dir(ctx, saved_rootdir) / "zookeeper_0"
        if not target.exists():
            unsplit.rename(target)


#: the master's complaint when it waits for a region (HMaster.isRegionOnline); it repeats with
#: a growing pause (1, 2, 4 ... 60 s) for as long as the region is not online
_HOLDING = re.compile(
    r"hbase:meta,,1\.1588230740 is NOT online; state=\{[^}]*server=([^,}\s]+,\d+,\d+)\}; "
    r"ServerCrashProcedures=(true|false)")
#: that many complaints in a row with no crash procedure for any server: nothing will ever
#: bring hbase:meta online (about 15 s of waiting)
STUCK_COMPLAINTS = 5


def _meta_stuck(ctx: ServiceContext) -> str | None:
    """The server the master waits on for ``hbase:meta`` when it will wait forever: the master
    log written since it started ends with :data:`STUCK_COMPLAINTS` complaints in a row
    that no crash procedure is under way (none will come to move ``hbase:meta`` off a server
    that its root names and nobody knows); else ``None``."""
    found = _HOLDING.findall(_master_log(ctx, _master_log_offset(ctx)))
    tail = found[-STUCK_COMPLAINTS:]
    if len(tail) == STUCK_COMPLAINTS and all(scp == "false" for _, scp in tail):
        return tail[-1][0]
    return None


def _wait_serving(ctx: ServiceContext, opts: dict, timeout: float,
                  companions: list[tuple[str, ServiceContext]] | None) -> dict:
    """Wait until :func:`_serving`, failing at once, with the fix, when the master waits for
    ``hbase:meta`` on a server nothing will recover (:func:`_meta_stuck`).  After a start
    (``companions``: the gateways it spawned) this is :func:`start_and_wait`, which stops what
    the start left running if it fails; a master that was running already (``None``) is waited
    for and left alone whatever happens."""

    def ready() -> bool:
        if _serving(opts["thrift_port"]) and port_open(HOST, opts["thrift2_port"]):
            return True
        server = _meta_stuck(ctx)
        if server is not None:
            raise ServiceError(
                f"hbase: the master waits forever for hbase:meta, which its root "
                f"{opts['rootdir']} places on {server}, a region server no crash procedure "
                f"will recover (ZooKeeper state of another root met this one): move that root "
                f"aside (it keeps what HBase wrote there) and `bench services up hbase` sets "
                f"up a new one, or repair it with HBCK2 `scheduleRecoveries {server}`")
        return False

    what = (f"thrift gateways 127.0.0.1:{opts['thrift_port']} and :{opts['thrift2_port']} with "
            f"hbase:meta online")
    if companions is None:
        wait_until(ctx, ready, timeout, what)
        return status(ctx)
    return start_and_wait(ctx, ready, timeout, what, stop, status, companions=companions)


def _offset_file(ctx: ServiceContext) -> Path:
    return ctx.root / "master-log-offset"


def _note_master_log_offset(ctx: ServiceContext) -> None:
    """Remember where the master log stands before a master is spawned: what it writes after
    that offset is about this master (the log is appended to by every start)."""
    size = 0
    with contextlib.suppress(OSError):
        size = (ctx.log_dir / f"{NAME}.log").stat().st_size
    _offset_file(ctx).write_text(str(size))


def _master_log_offset(ctx: ServiceContext) -> int | None:
    """Where the running master's part of the log begins; ``None`` if unknown (a master
    started without noting it), and then the log is not read: old lines are no evidence."""
    with contextlib.suppress(OSError, ValueError):
        return int(_offset_file(ctx).read_text())
    return None


def _master_log(ctx: ServiceContext, offset: int | None) -> str:
    """The master log from ``offset`` on (``""`` if the offset is unknown or nothing is there)."""
    if offset is None:
        return ""
    with contextlib.suppress(OSError):
        with open(ctx.log_dir / f"{NAME}.log", "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    return ""


#: what the master log says when the master or the region server of the standalone JVM gives
#: up (a lost file system, most often): the JVM may live on, but serves nothing again
_ABORTED = re.compile(r"\*\*\*\*\* ABORTING (region server|master) ")


def _stale(ctx: ServiceContext, rootdir: str) -> str | None:
    """Why the running master can never serve again and must be restarted, or ``None``: its
    master or region server aborted (its log since it started says so), or its root is on the
    HDFS of this state directory and that HDFS started after it (the master's WAL streams
    went with the HDFS that was there; its region server aborts at the next write).  A root on
    an HDFS of this state directory that is not running is an error naming the fix."""
    aborted = _ABORTED.search(_master_log(ctx, _master_log_offset(ctx)))
    if aborted:
        return f"its {aborted.group(1)} aborted (see {ctx.log_dir / f'{NAME}.log'})"
    if not rootdir.startswith("hdfs://"):
        return None
    from . import hdfs

    hctx = ServiceContext.for_service(hdfs.NAME, ctx.root.parent)
    if not (hctx.root / "options.json").is_file() or \
            not rootdir.startswith(hdfs.status(hctx)["url"] + "/"):
        return None  # not the HDFS of this state directory: not ours to judge
    namenode = hctx.read_pid()
    if namenode is None:
        raise ServiceError(f"hbase: its root {rootdir} is on the HDFS of this state directory, "
                           f"which is not running; `bench services up hdfs hbase` starts both")
    master, nn = started_at(ctx.read_pid() or 0), started_at(namenode)
    if master is not None and nn is not None and nn > master:
        return "the HDFS under it was restarted after it"
    return None


def hdfs_note(ctx: ServiceContext, action: str) -> str | None:
    """One line for ``bench services ACTION hdfs`` run without ``hbase`` when HBase has its
    root on that HDFS (``None`` otherwise): after ``down``/``kill`` a running HBase cannot
    write; after ``up`` it is told whether HBase needs ``up`` (a master that exited, or one
    that :func:`_stale` finds stale)."""
    rootdir = _saved_options(ctx)["rootdir"]
    if not rootdir.startswith("hdfs://") or not ctx.pid_file.exists():
        return None  # not on HDFS, or stopped by `down`
    if ctx.read_pid() is None:
        reason = "its master exited"
    else:
        try:
            reason = _stale(ctx, rootdir)
        except ServiceError:  # its HDFS is not running
            reason = "its HDFS is not running"
    if reason is None:
        return None
    if action in ("down", "kill"):
        return (f"hbase: runs on this HDFS ({rootdir}) and cannot write without it; "
                f"`bench services up hdfs hbase` brings both back")
    return f"hbase: {reason}; `bench services up hbase` brings it back on {rootdir}"


def _kill_all(ctx: ServiceContext) -> None:
    """SIGKILL the master and both gateways (a crash: HBase recovers from its WAL); the pid
    files go, so the next start begins from nothing."""
    for part in (ctx, _thrift_ctx(ctx), _thrift2_ctx(ctx)):
        kill_pid(part)
        part.forget_pid()


def _root_note(old: str, new: str) -> str:
    return (f"hbase: root {new} instead of {old}; the tables under {old} stay there and "
            f"`bench services down hbase`, then `bench services up hbase --hbase-root "
            f"{'hdfs' if old.startswith('hdfs://') else 'local'}` returns to them")


def start(ctx: ServiceContext, zk_port: int = ZK_PORT, thrift_port: int = THRIFT_PORT,
          thrift2_port: int = THRIFT2_PORT, hbase_root: str = "auto",
          heap: str = "1g", thrift_heap: str = "256m", wal_provider: str = "asyncfs",
          wal_hsync: bool = False,
          timeout: float = START_TIMEOUT) -> dict:
    """Start HBase and its Thrift gateway(s) unless running; wait until HBase serves through
    them (:func:`_serving`).

    ``hbase_root``: ``auto`` (HDFS when it runs in this state directory, else local), ``local``,
    ``hdfs`` or an ``hdfs://HOST:PORT`` URL; see the module docstring.  A running master asked
    for another root by name (``local``, ``hdfs``, a URL) is stopped and started on it; with
    ``auto`` it keeps its root and one line says how to move it.  A running master keeps its
    ports and settings; gateways that died are started again beside it."""
    thrift, thrift2 = _thrift_ctx(ctx), _thrift2_ctx(ctx)
    saved = _saved_options(ctx)
    master_pid = ctx.read_pid()
    if master_pid is not None:
        reason = _stale(ctx, saved["rootdir"])
        if reason is not None:
            log(f"hbase: restarting the running master: {reason}")
            _kill_all(ctx)
            master_pid = None
    if master_pid is not None:
        on, rootdir = _resolve_root(ctx, hbase_root)
        if rootdir == saved["rootdir"]:
            pass  # reused below as it runs
        elif hbase_root == "auto":
            log(f"hbase: keeps running on its root {saved['rootdir']} (auto would now choose "
                f"{rootdir}); `bench services up hbase --hbase-root "
                f"{'local' if on == 'local' else 'hdfs'}` moves it there")
        else:
            log(f"hbase: stopping to move from root {saved['rootdir']} to {rootdir}")
            stop(ctx)
            master_pid = None
    if master_pid is None:
        # gateways left over from a crashed master: start everything afresh
        stop_pid(thrift, timeout=10)
        stop_pid(thrift2, timeout=10)
        on, rootdir = _resolve_root(ctx, hbase_root)
        opts = {"zk_port": int(zk_port), "thrift_port": int(thrift_port),
                "thrift2_port": int(thrift2_port), "wal_provider": wal_provider,
                "wal_hsync": bool(wal_hsync), "hbase_root": on, "rootdir": rootdir}
        if hbase_root == "auto" and _options_file(ctx).exists() and rootdir != saved["rootdir"]:
            log(_root_note(saved["rootdir"], rootdir))
    else:
        opts = {k: saved[k] for k in ("zk_port", "thrift_port", "thrift2_port", "wal_provider",
                                      "wal_hsync", "hbase_root", "rootdir")}
        if thrift.read_pid() is not None and thrift2.read_pid() is not None:
            return _wait_serving(ctx, opts, timeout, None)
    _adopt_unsplit_zk(ctx, saved["rootdir"])
    if master_pid is None:
        _forget_zk_of_new_root(ctx, opts["rootdir"])
    install(log)
    classpath = read_classpath(classpath_file(NAME, VERSION, _pom()))
    java_exe = java(NAME)
    conf = _write_conf(ctx, opts)
    _options_file(ctx).write_text(json.dumps(opts))
    if master_pid is None:
        require_port_free(NAME, HOST, opts["zk_port"])
        require_port_free(NAME, HOST, opts["thrift_port"])
        require_port_free(NAME, HOST, opts["thrift2_port"])
        _note_master_log_offset(ctx)
        spawn(ctx, [*_jvm(java_exe, conf, classpath, heap, ctx.log_dir, "master"),
                    "org.apache.hadoop.hbase.master.HMaster", "start"])
    if thrift.read_pid() is None:
        require_port_free(NAME, HOST, opts["thrift_port"], wait=5)
        spawn(thrift, [*_jvm(java_exe, conf, classpath, thrift_heap, thrift.log_dir, "thrift"),
                       "org.apache.hadoop.hbase.thrift.ThriftServer",
                       "-b", HOST, "-p", str(opts["thrift_port"]), "-threadpool", "start"])
    if thrift2.read_pid() is None:
        require_port_free(NAME, HOST, opts["thrift2_port"], wait=5)
        spawn(thrift2, [*_jvm(java_exe, conf, classpath, thrift_heap, thrift2.log_dir, "thrift2"),
                        "org.apache.hadoop.hbase.thrift2.ThriftServer",
                        "-b", HOST, "-p", str(opts["thrift2_port"]), "-threadpool", "start"])
    return _wait_serving(ctx, opts, timeout,
                         [("Thrift gateway", thrift), ("Thrift2 gateway", thrift2)])


# ----------------------------------------------------------------------------- stop / status
def stop(ctx: ServiceContext) -> None:
    """Stop the gateways, then HBase (SIGTERM: the region server closes regions; KILL after 60 s)."""
    stop_pid(_thrift2_ctx(ctx), timeout=15)
    stop_pid(_thrift_ctx(ctx), timeout=15)
    stop_pid(ctx, timeout=60)


def status(ctx: ServiceContext) -> dict:
    opts = _saved_options(ctx)
    on_hdfs = opts["rootdir"].startswith("hdfs://")
    master_pid, thrift_pid = ctx.read_pid(), _thrift_ctx(ctx).read_pid()
    thrift2_pid = _thrift2_ctx(ctx).read_pid()
    # running = what happybase needs; the Thrift2 gateway (wal_hsync only) is reported beside it
    # (a server started before it existed has none until it is restarted)
    running = (master_pid is not None and thrift_pid is not None
               and port_open(HOST, opts["thrift_port"]))
    rootdir = opts["rootdir"]
    out = {
        "name": NAME,
        "running": running,
        "pid": master_pid,
        "thrift_pid": thrift_pid,
        "address": f"{HOST}:{opts['thrift_port']}",
        "zookeeper": f"{HOST}:{opts['zk_port']}",
        "version": VERSION,
        "settings": {
            "mode": "standalone (master + region server + ZooKeeper in one JVM)",
            "fs": "hdfs" if on_hdfs else "local",
            "rootdir": rootdir,
            "wal_dir": f"{rootdir}/WALs",
            "wal": ("on (backend durability=wal puts with SYNC_WAL, wal_hsync with FSYNC_WAL "
                    "through Thrift2; skip_wal puts skip it)"),
            "wal_provider": opts["wal_provider"],
            "wal_durability": wal_durability(on_hdfs),
            "hbase.wal.hsync": ("true (HBase's own tables, hbase:meta and the master's "
                                "region, hsync their WAL; " if opts.get("wal_hsync") else "false (")
                               + "per-put durability decides: SYNC_WAL hflush, "
                               "FSYNC_WAL hsync)",
            "hbase.unsafe.stream.capability.enforce": "true" if on_hdfs else "false",
            "hadoop": f"{HADOOP_VERSION} (client)",
        },
    }
    out["thrift2_pid"] = thrift2_pid
    out["thrift2_address"] = f"{HOST}:{opts['thrift2_port']}"
    out["thrift2_running"] = thrift2_pid is not None and port_open(HOST, opts["thrift2_port"])
    return out


def client_options(ctx: ServiceContext, namespace: str) -> dict:
    """Backend options for the running server, isolated in a table named after ``namespace``."""
    opts = _saved_options(ctx)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", namespace).strip("._-") or "default"
    return {"host": HOST, "port": opts["thrift_port"], "thrift2_port": opts["thrift2_port"],
            "table": f"ckptbench_{safe}"}
