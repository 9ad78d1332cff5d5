"""A single-node HDFS 3.3 (one NameNode, one DataNode) from Maven Central jars, on loopback.

Two JVMs make one service:

* ``NameNode`` (RPC ``127.0.0.1:<port>``, HTTP and WebHDFS ``127.0.0.1:<http_port>``); its pid is
  the service pid (``ctx.pid_file``).  The name directory is formatted on the first start.
* ``DataNode`` (data transfer, HTTP and IPC on ``dn_port``/``dn_http_port``/``dn_ipc_port``); its
  pid lives in ``<state>/hdfs/datanode/pid``.

No tarball: ``hdfs_files/pom.xml`` pins the artifacts and ``mvn dependency:build-classpath``
resolves them into Maven's own cache (``~/.m2``); the classpath is kept under
``~/.cache/ckptbench/hdfs/<version>/`` (the same recipe as :mod:`services.hbase`, whose Maven
and Java checks live here).

Durability, as configured (see :data:`SYNC_SETTINGS`): ``dfs.datanode.synconclose=true``, so a
block is fsync'ed on the DataNode when it is finalized, which happens when a file is closed —
also when a WebHDFS ``CREATE`` or ``APPEND`` request ends, since the DataNode closes the file
before it answers.  ``hflush`` (what HBase's ``SYNC_WAL`` does) gets the bytes to the
DataNode's memory, visible to readers, not on its disk; ``hsync`` (HBase's ``FSYNC_WAL``)
fsyncs them.  NameNode metadata (creates, renames, block lengths at close) is in its edit log,
which the NameNode syncs to disk before it answers.  One DataNode means one replica: a lost disk
loses data however it was synced.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from string import Template
from typing import Callable

from .common import (
    ServiceContext,
    ServiceError,
    _signal_group,
    load_options,
    log,
    pid_alive,
    port_open,
    require_port_free,
    save_options,
    spawn,
    start_and_wait,
    stop_pid,
    wait_until,
)
from .maven import classpath_file, java, read_classpath, resolve_classpath

NAME = "hdfs"
VERSION = "3.3.6"  # pinned in hdfs_files/pom.xml
HOST = "127.0.0.1"
PORT = 8020  # NameNode RPC (fs.defaultFS)
HTTP_PORT = 9870  # NameNode HTTP: WebHDFS and /jmx
DN_PORT, DN_HTTP_PORT, DN_IPC_PORT = 9866, 9864, 9867  # Hadoop 3's DataNode defaults
START_TIMEOUT = 120.0
CLUSTER_ID = "ckptbench"

FILES = Path(__file__).resolve().with_name("hdfs_files")

#: the sync settings the server runs with (hdfs-site.xml.tmpl) and what each means
SYNC_SETTINGS = {
    "dfs.datanode.synconclose": "true (a finalized block - a closed file - is fsync'ed on the "
                                "DataNode before the close is acknowledged)",
    "dfs.datanode.sync.behind.writes": "false (no early writeback; not a durability setting: "
                                       "sync_file_range without a wait)",
    "dfs.replication": "1 (one DataNode: one copy)",
    "namenode edit log": "synced to disk before a metadata call returns",
}

#: what bin/hadoop needs on JDK 17 (reflection into java.base), plus IPv4 loopback
JDK_FLAGS = [
    "-XX:+UseG1GC",
    "-Djava.net.preferIPv4Stack=true",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens", "java.base/java.net=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.util=ALL-UNNAMED",
]


# ------------------------------------------------------------------- Java and Maven (shared)
# ------------------------------------------------------------------------------------ install
def _pom() -> Path:
    return FILES / "pom.xml"


def install(log: Callable[[str], None]) -> None:
    """Resolve the Hadoop jars with Maven (idempotent: skipped when the classpath is cached)."""
    resolve_classpath(NAME, VERSION, _pom(), log, "~30 s, ~90 MB")


# -------------------------------------------------------------------------------------- start
def _datanode_ctx(ctx: ServiceContext) -> ServiceContext:
    """The DataNode's own pid file and log, inside the hdfs state directory."""
    return ServiceContext.for_service("datanode", ctx.root)


DEFAULTS = {"port": PORT, "http_port": HTTP_PORT, "dn_port": DN_PORT,
            "dn_http_port": DN_HTTP_PORT, "dn_ipc_port": DN_IPC_PORT}


def _saved_options(ctx: ServiceContext) -> dict:
    return {**DEFAULTS, **load_options(ctx)}


#: the template values a single-node server runs with; :mod:`services.cluster` gives each
#: DataNode its own address, the NameNode a replication factor of its DataNodes' number and a
#: longer wait before it declares a DataNode dead (``recheck_ms``)
TEMPLATE_DEFAULTS = {"nn_host": HOST, "dn_host": HOST, "replication": 1,
                     "blocksize": 128 << 20, "recheck_ms": 5000}


def _write_conf(ctx: ServiceContext, opts: dict) -> Path:
    return write_conf(ctx.root / "conf", {**opts, "data": ctx.data_dir})


def write_conf(conf: Path, values: dict) -> Path:
    """Write ``core-site.xml``, ``hdfs-site.xml`` and the logging files into ``conf`` from the
    templates; ``values`` has the ports and ``data`` (where this process keeps its blocks or
    name directory) and may override :data:`TEMPLATE_DEFAULTS`."""
    conf.mkdir(parents=True, exist_ok=True)
    values = {**TEMPLATE_DEFAULTS, **values, "user": getpass.getuser()}
    for name in ("core-site.xml", "hdfs-site.xml"):
        text = Template((FILES / f"{name}.tmpl").read_text()).substitute(values)
        (conf / name).write_text(text)
    for name in ("log4j.properties", "hadoop-metrics2.properties"):
        shutil.copyfile(FILES / name, conf / name)
    # the HTTP servers look their web apps up on the classpath (webapps/<name>); the jars on
    # Maven Central do not carry the web UI, so empty ones serve WebHDFS and /jmx alone
    for app in ("hdfs", "datanode", "secondary", "static"):
        (conf / "webapps" / app).mkdir(parents=True, exist_ok=True)
    return conf


def jvm(java_exe: str, conf: Path, classpath: str, heap: str, log_dir: Path,
         proc: str) -> list[str]:
    return [
        java_exe, f"-Dproc_{proc}", "-XX:OnOutOfMemoryError=kill -9 %p", f"-Xmx{heap}",
        *JDK_FLAGS,
        f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
        f"-Dhadoop.log.dir={log_dir}", f"-Dhadoop.home.dir={conf.parent}",
        "-Dhadoop.security.logger=WARN,console",
        "-cp", f"{conf}:{classpath}",
    ]


def format_namenode(ctx: ServiceContext, java_exe: str, conf: Path, classpath: str) -> None:
    """``hdfs namenode -format`` once: an empty name directory gets a fresh namespace."""
    if (ctx.data_dir / "name" / "current" / "VERSION").is_file():
        return
    log(f"hdfs: formatting the NameNode in {ctx.data_dir / 'name'}")
    out = ctx.log_dir / "format.log"
    with open(out, "wb") as f:
        proc = subprocess.run(
            [*jvm(java_exe, conf, classpath, "256m", ctx.log_dir, "format"),
             "org.apache.hadoop.hdfs.server.namenode.NameNode", "-format", "-nonInteractive",
             "-clusterid", CLUSTER_ID],
            stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=120)
    if proc.returncode != 0:
        tail = "\n".join(out.read_text(errors="replace").splitlines()[-15:])
        raise ServiceError(f"hdfs: formatting the NameNode failed (exit {proc.returncode}); "
                           f"last lines of {out}:\n{tail}")


def _jmx(http_port: int, query: str, host: str = HOST) -> dict:
    url = f"http://{host}:{http_port}/jmx?qry={query}"
    with urllib.request.urlopen(url, timeout=3) as resp:
        beans = json.load(resp).get("beans") or [{}]
    return beans[0]


def cluster_state(http_port: int, host: str = HOST) -> dict:
    """The NameNode's view: live DataNodes, safe mode, capacity (``{}`` if it does not answer)."""
    with contextlib.suppress(Exception):
        return _jmx(http_port, "Hadoop:service=NameNode,name=FSNamesystemState", host)
    return {}


def _ready(http_port: int) -> bool:
    """Writable: the NameNode answers, is out of safe mode and has a live DataNode."""
    st = cluster_state(http_port)
    return st.get("NumLiveDataNodes", 0) >= 1 and st.get("FSState") == "Operational"


def start(ctx: ServiceContext, port: int = PORT, http_port: int = HTTP_PORT,
          dn_port: int = DN_PORT, dn_http_port: int = DN_HTTP_PORT,
          dn_ipc_port: int = DN_IPC_PORT, heap: str = "384m", dn_heap: str = "256m",
          timeout: float = START_TIMEOUT) -> dict:
    """Start the NameNode and DataNode unless running (formatting on the first start); wait
    until the NameNode is out of safe mode with a live DataNode."""
    dn = _datanode_ctx(ctx)
    nn_pid, dn_pid = ctx.read_pid(), dn.read_pid()
    if nn_pid is not None and dn_pid is not None:
        opts = _saved_options(ctx)
        wait_until(ctx, lambda: _ready(opts["http_port"]), timeout,
                   f"namenode 127.0.0.1:{opts['port']}")
        return status(ctx)
    opts = {"port": int(port), "http_port": int(http_port), "dn_port": int(dn_port),
            "dn_http_port": int(dn_http_port), "dn_ipc_port": int(dn_ipc_port)}
    if nn_pid is not None:  # a NameNode whose DataNode died: keep its ports
        opts = _saved_options(ctx)
    classpath = read_classpath(classpath_file(NAME, VERSION, _pom()))
    if classpath is None:
        install(log)
        classpath = read_classpath(classpath_file(NAME, VERSION, _pom()))
    java_exe = java(NAME)
    conf = _write_conf(ctx, opts)
    save_options(ctx, opts)
    if nn_pid is None:
        require_port_free(NAME, HOST, opts["port"], wait=5)
        require_port_free(NAME, HOST, opts["http_port"], wait=5)
        format_namenode(ctx, java_exe, conf, classpath)
        spawn(ctx, [*jvm(java_exe, conf, classpath, heap, ctx.log_dir, "namenode"),
                    "org.apache.hadoop.hdfs.server.namenode.NameNode"])
    if dn_pid is None:
        for p in ("dn_port", "dn_http_port", "dn_ipc_port"):
            require_port_free(NAME, HOST, opts[p], wait=5)
        spawn(dn, [*jvm(java_exe, conf, classpath, dn_heap, dn.log_dir, "datanode"),
                   "org.apache.hadoop.hdfs.server.datanode.DataNode"])
    return start_and_wait(ctx, lambda: _ready(opts["http_port"]), timeout,
                          f"namenode 127.0.0.1:{opts['port']} with a live datanode",
                          stop, status, companions=[("DataNode", dn)])


# ------------------------------------------------------------------------ stop / kill / status
def stop(ctx: ServiceContext) -> None:
    """Stop the DataNode, then the NameNode (SIGTERM: both shut down cleanly; KILL after 30 s)."""
    stop_pid(_datanode_ctx(ctx), timeout=30)
    stop_pid(ctx, timeout=30)


def kill(ctx: ServiceContext) -> None:
    """SIGKILL both JVMs (a crash of the whole HDFS); the pid files stay for status."""
    pids = [p for p in (_datanode_ctx(ctx).read_pid(), ctx.read_pid()) if p is not None]
    for pid in pids:
        _signal_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


def status(ctx: ServiceContext) -> dict:
    opts = _saved_options(ctx)
    nn_pid, dn_pid = ctx.read_pid(), _datanode_ctx(ctx).read_pid()
    state = cluster_state(opts["http_port"]) if nn_pid is not None else {}
    running = (nn_pid is not None and dn_pid is not None and port_open(HOST, opts["port"])
               and state.get("NumLiveDataNodes", 0) >= 1)
    return {
        "name": NAME,
        "running": running,
        "pid": nn_pid,
        "datanode_pid": dn_pid,
        "address": f"{HOST}:{opts['port']}",
        "url": f"hdfs://{HOST}:{opts['port']}",
        "webhdfs": f"http://{HOST}:{opts['http_port']}/webhdfs/v1",
        "version": VERSION,
        "ports": dict(opts),
        "settings": {
            "mode": "single node (NameNode and DataNode, one JVM each)",
            "data": str(ctx.data_dir),
            "live_datanodes": state.get("NumLiveDataNodes"),
            "fs_state": state.get("FSState"),
            **SYNC_SETTINGS,
        },
    }


def client_options(ctx: ServiceContext, namespace: str) -> dict:
    """Backend options for the file backends: ``path`` an ``hdfs://`` URL of a directory named
    after ``namespace`` (created on first use)."""
    opts = _saved_options(ctx)
    return {"path": namespace_url(HOST, opts["port"], opts["http_port"], namespace)}


def namespace_url(host: str, port: int, http_port: int, namespace: str) -> str:
    """The ``hdfs://`` URL of the directory ``/ckptbench/<namespace>`` (a safe spelling of it)
    on the NameNode at ``host:port`` whose WebHDFS is on ``http_port``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", namespace).strip("._-") or "default"
    return f"hdfs://{host}:{port}/ckptbench/{safe}?webhdfs={http_port}"
