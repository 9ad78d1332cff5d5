"""A cluster on one machine: N worker hosts, each its own network namespace, and a service host.

``bench services up cluster --workers N`` (N = 3 by default) builds, with the defaults:

* the **service host**: a bridge ``ckbbr`` holding ``10.77.0.1/24`` in the root network
  namespace.  The Spark standalone master (``spark://10.77.0.1:7077``) and the HDFS NameNode
  (``hdfs://10.77.0.1:8020``, WebHDFS on ``:9870``) bind that address.
* **worker host i** (1..N): the named network namespace ``ckptbench-h<i>``, joined to the bridge
  by a veth pair (``ckbh<i>`` on the bridge, ``eth0`` inside) with the address
  ``10.77.0.<10+i>/24``.  In it, launched with ``ip netns exec``, run a Spark standalone worker
  and an HDFS DataNode bound to that address; the executor JVMs the worker launches and their
  Python workers inherit the namespace, so a host's processes are exactly ``ip netns pids``.
* HDFS stores ``min(3, N)`` replicas of every block.

* **relays** for the shared servers: Redis, MinIO and HBase's Thrift gateways (those of ``bench
  services up`` in the state directory ``stores``, by default the cluster's own) listen on
  ``127.0.0.1``, which a worker host cannot reach (its loopback is its own).  One relay process
  (:mod:`services.relay`) in the root namespace listens on the service address at each of their
  ports and forwards to ``127.0.0.1``, so executors reach ``redis://10.77.0.1:6379`` and the rest.
  A relay and not a rebinding of the servers: the servers are shared, and a restart or a second
  listening address would disturb whoever uses them; a relay is started by ``up``, stopped by
  ``down``, and touches none of them.  It costs one user-space hop per request.

Why the service host is the root namespace and not a namespace of its own: the driver, ``bench``,
the tests and the WebHDFS client all run there and reach every address on the bridge directly, so
only the worker hosts need ``ip netns exec``; and losing a worker host never takes a service with
it, as on a real cluster whose master and NameNode run on machines of their own.  The bridge's
address is what the cluster's services bind: a server bound to ``127.0.0.1`` (the shared ones of
``bench services up``) is not reachable from a worker host, and the cluster's own master and
NameNode, on another address, take none of their ports.

Ownership: every name and address comes from the ``tag`` and ``subnet`` saved in the state
directory's ``options.json``; :func:`stop` removes exactly those namespaces
(``ckptbench-<tag>h<i>``), veths (``ckb<tag>h<i>``) and that bridge (``ckb<tag>br``), after
SIGKILLing every process still in a host namespace, and the hosts' ``/etc/netns/<namespace>``
(their ``/etc/hosts``, see :func:`_hosts_file`).  A second cluster with another state
directory, tag and subnet runs beside the first (the tests do).  Nothing is mounted but the
namespace files ``ip netns add`` binds under ``/run/netns``, which ``ip netns del`` removes.

Executor-local state: each worker (and so every executor it launches, and their Python workers)
gets ``SPARK_LOCAL_DIRS`` in its host's local directory (shuffle files, blocks: gone with the host)
and ``CKPTBENCH_HOST`` = its address, by which a job's operator instances record which host ran
their last task (:mod:`spark_integration.node_loss` deletes what the lost host held).

Host loss (:func:`kill_host`): host K's veth pair is deleted first, so the machine is off the
network before anything on it dies (its peers meet silence, not the resets and FINs of dying
processes, as when a machine dies); then every process in its namespace gets SIGKILL, the
namespace is deleted, and its local directory (the worker's work dir with the executors' files,
Spark's local dirs, the DataNode's blocks and configuration) is deleted.  Pid files and logs live outside that
directory and are kept: they are the evidence of what ran.  :func:`start` again brings missing
hosts back, empty.

Needs root (``ip netns``, veth, bridges) and iproute2; the jars are those of :mod:`services.hdfs`
and :mod:`services.spark`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import hbase, hdfs, minio, redis, spark
from .common import (
    ServiceContext,
    ServiceError,
    _signal_group,
    load_options,
    pid_alive,
    port_open,
    require_port_free,
    save_options,
    spawn,
    start_and_wait,
    stop_pids,
    wait_until,
)
from .maven import classpath_file, java, read_classpath

NAME = "cluster"
DEFAULT_WORKERS = 3
DEFAULT_SUBNET = "10.77.0.0/24"
NETNS_PREFIX = "ckptbench-"
START_TIMEOUT = 180.0
#: per worker host: what its Spark worker offers to executors (cores are logical: two hosts of two
#: cores each can run parallelism 4 on this machine's cores, slower)
DEFAULT_CORES, DEFAULT_MEMORY = 2, "1g"
#: small heaps: N + 2 daemons share one machine with the executors
NAMENODE_HEAP, DATANODE_HEAP, SPARK_DAEMON_HEAP = "256m", "192m", "256m"
#: seconds of silence after which the master drops a worker (Spark's default is 60): a lost host
#: is noticed while a benchmark still runs.  Master and workers both get it: a worker sends its
#: heartbeat every quarter of the timeout it knows
WORKER_TIMEOUT = 10
SPARK_PORT = spark.DEFAULT_PORT
HDFS_PORTS = {"port": hdfs.PORT, "http_port": hdfs.HTTP_PORT, "dn_port": hdfs.DN_PORT,
              "dn_http_port": hdfs.DN_HTTP_PORT, "dn_ipc_port": hdfs.DN_IPC_PORT}
#: the environment variable that tells an executor's Python workers which host they run on
HOST_ENV = "CKPTBENCH_HOST"
#: the shared servers relayed to the service address: service -> (its options' port keys, defaults)
RELAYED = {"redis": {"port": redis.DEFAULT_PORT}, "minio": {"port": minio.DEFAULT_PORT},
           "hbase": {"thrift_port": hbase.THRIFT_PORT, "thrift2_port": hbase.THRIFT2_PORT}}
PROJECT_ROOT = Path(__file__).resolve().parents[1]
#: the NameNode declares a DataNode dead after 2 x this + 10 heartbeats (s) of silence.  Stale
#: (3 s: avoided by reads and new writes) is what a lost host needs; dead triggers re-replication
#: and re-registration, and with N + 2 JVMs and the executors on two loaded cores a live DataNode's
#: heartbeat can stall longer than one server's 20 s: a live node declared dead fails the writes
#: in flight through it.  So the cluster waits 70 s
RECHECK_MS = 30_000
#: a small block size, so a file of a few MiB spans several blocks and a host's loss costs several
BLOCKSIZE = 1 << 20


def install(log) -> None:
    """The HDFS jars (Maven) and pyspark's Spark; ``ip`` from iproute2."""
    if not shutil.which("ip"):
        raise ServiceError("cluster: `ip` (iproute2) is missing; install it with "
                           "`sudo apt-get install -y iproute2`")
    if read_classpath(classpath_file(hdfs.NAME, hdfs.VERSION, hdfs.FILES / "pom.xml")) is None:
        hdfs.install(log)
    spark.install(log)


# ---------------------------------------------------------------------------------- naming
def _options(ctx: ServiceContext) -> dict:
    opts = {"workers": DEFAULT_WORKERS, "subnet": DEFAULT_SUBNET, "tag": "", "stores": "",
            "cores": DEFAULT_CORES, "memory": DEFAULT_MEMORY, "spark_port": SPARK_PORT,
            **HDFS_PORTS}
    opts.update(load_options(ctx))
    return opts


def _network(subnet: str) -> ipaddress.IPv4Network:
    try:
        net = ipaddress.IPv4Network(subnet)
    except ValueError:
        net = None
    if net is None or net.prefixlen != 24 or not net.is_private:
        raise ServiceError(f"cluster: --subnet {subnet!r} is not a private /24 network; give "
                           f"one such as {DEFAULT_SUBNET}")
    return net


def service_address(opts: dict) -> str:
    """The service host's address: the bridge's, ``.1`` of the subnet."""
    return str(_network(opts["subnet"])[1])


def host_address(opts: dict, i: int) -> str:
    return str(_network(opts["subnet"])[10 + i])


def netns_name(opts: dict, i: int) -> str:
    return f"{NETNS_PREFIX}{opts['tag']}h{i}"


def _bridge(opts: dict) -> str:
    return f"ckb{opts['tag']}br"


def _veth(opts: dict, i: int) -> str:
    return f"ckb{opts['tag']}h{i}"


def _ours(opts: dict) -> re.Pattern:
    """Matches the namespace names of this cluster's hosts, whatever N they were made with."""
    return re.compile(rf"{re.escape(NETNS_PREFIX + opts['tag'])}h(\d+)")


def _check_opts(workers: int, tag: str) -> None:
    if not 1 <= workers <= 200:
        raise ServiceError(f"cluster: --workers {workers} must be between 1 and 200")
    if not re.fullmatch(r"[a-z0-9]{0,4}", tag):
        raise ServiceError(f"cluster: tag {tag!r} must be up to 4 lower-case letters or digits "
                           "(it goes into interface names of at most 15 characters)")


# ---------------------------------------------------------------------------------- network
def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise ServiceError(f"cluster: `ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done


def _link_exists(name: str) -> bool:
    return _ip("link", "show", "dev", name, check=False).returncode == 0


def _netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def _our_namespaces(opts: dict) -> list[str]:
    with contextlib.suppress(OSError):
        return sorted(n for n in os.listdir("/run/netns") if _ours(opts).fullmatch(n))
    return []


def _ensure_bridge(opts: dict) -> None:
    bridge, addr = _bridge(opts), service_address(opts)
    if _link_exists(bridge):
        return
    taken = _ip("-o", "addr", "show", "to", f"{addr}/32").stdout.split()
    if taken:
        raise ServiceError(f"cluster: {addr} is already on interface {taken[1]}; give another "
                           f"subnet (--subnet) or remove that address")
    _ip("link", "add", bridge, "type", "bridge")
    _ip("addr", "add", f"{addr}/24", "dev", bridge)
    _ip("link", "set", bridge, "up")


#: where ``ip netns exec NAME`` finds the files it mounts over ``/etc`` for its command
NETNS_ETC = Path("/etc/netns")


def _hosts_file(opts: dict) -> str:
    """``/etc/hosts`` of a worker host: this machine's, plus a name for every cluster address.
    Java looks every peer's address up by name (the DataNodes their pipeline's, the NameNode's
    redirects): in a namespace with no route to this machine's DNS server each such lookup
    would wait out the resolver's timeout, while ``files`` answers at once."""
    own = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
    names = [f"{service_address(opts)}\tckptbench-{opts['tag']}service"]
    names += [f"{host_address(opts, i)}\t{netns_name(opts, i)}" for i in _hosts(opts)]
    return own.rstrip("\n") + "\n# bench services up cluster\n" + "\n".join(names) + "\n"


def _ensure_host(opts: dict, i: int) -> None:
    """Namespace ``i`` with ``eth0`` on the bridge and its ``/etc/hosts``; a half-made one is
    made again."""
    ns, veth = netns_name(opts, i), _veth(opts, i)
    if _netns_exists(ns) and _link_exists(veth):
        return
    _remove_host_network(opts, i)
    (NETNS_ETC / ns).mkdir(parents=True, exist_ok=True)
    (NETNS_ETC / ns / "hosts").write_text(_hosts_file(opts))
    _ip("netns", "add", ns)
    peer = f"ckb{opts['tag']}p{i}"
    _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
    _ip("link", "set", peer, "netns", ns)
    _ip("-n", ns, "link", "set", peer, "name", "eth0")
    _ip("-n", ns, "addr", "add", f"{host_address(opts, i)}/24", "dev", "eth0")
    _ip("-n", ns, "link", "set", "eth0", "up")
    _ip("-n", ns, "link", "set", "lo", "up")
    _ip("-n", ns, "route", "add", "default", "via", service_address(opts))
    _ip("link", "set", veth, "master", _bridge(opts))
    _ip("link", "set", veth, "up")


def _netns_pids(ns: str) -> list[int]:
    if not _netns_exists(ns):
        return []
    out = _ip("netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def _kill_namespace(ns: str, timeout: float = 15.0) -> None:
    """SIGKILL every process in ``ns`` until none is left (a dying JVM's children included)."""
    deadline = time.monotonic() + timeout
    while (pids := [p for p in _netns_pids(ns) if pid_alive(p)]):
        if time.monotonic() > deadline:
            raise ServiceError(f"cluster: processes {pids} in {ns} survive SIGKILL")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _remove_host_network(opts: dict, i: int) -> None:
    ns, veth = netns_name(opts, i), _veth(opts, i)
    if _netns_exists(ns):
        _kill_namespace(ns)
        _ip("netns", "del", ns)
    _delete_link(veth)  # deleting one end deletes the pair
    shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)


def _delete_link(name: str) -> None:
    """Delete link ``name`` unless it is gone (a deleted namespace takes its veth pair with it,
    a moment later)."""
    if _link_exists(name):
        done = _ip("link", "del", name, check=False)
        if done.returncode != 0 and _link_exists(name):
            raise ServiceError(f"cluster: `ip link del {name}` failed: {done.stderr.strip()}")


# --------------------------------------------------------------------------- processes
def _proc(ctx: ServiceContext, label: str) -> ServiceContext:
    """The pid file and log of one process (``namenode``, ``h1-worker``...), kept outside the
    hosts' local directories: a lost host's logs stay readable."""
    proc = ServiceContext(label, ctx.root / "procs" / label)
    proc.log_dir.mkdir(parents=True, exist_ok=True)
    return proc


def host_dir(ctx: ServiceContext, i: int) -> Path:
    """Host ``i``'s local disk: the worker's work dir and the DataNode's blocks and conf."""
    return ctx.root / "hosts" / f"h{i}"


def _namenode(ctx: ServiceContext) -> ServiceContext:
    nn = ServiceContext("namenode", ctx.root / "namenode")
    nn.data_dir.mkdir(parents=True, exist_ok=True)
    nn.log_dir.mkdir(parents=True, exist_ok=True)
    return nn


def _hdfs_values(opts: dict, data: Path, dn_host: str) -> dict:
    return {**{k: opts[k] for k in HDFS_PORTS}, "data": data, "nn_host": service_address(opts),
            "dn_host": dn_host, "replication": replication(opts), "blocksize": BLOCKSIZE,
            "recheck_ms": RECHECK_MS}


def replication(opts: dict) -> int:
    return min(3, int(opts["workers"]))


def _classpath() -> str:
    path = classpath_file(hdfs.NAME, hdfs.VERSION, hdfs.FILES / "pom.xml")
    if read_classpath(path) is None:
        hdfs.install(lambda msg: None)
    return read_classpath(path)


def _master_url(opts: dict) -> str:
    return f"spark://{service_address(opts)}:{int(opts['spark_port'])}"


def _hosts(opts: dict) -> range:
    return range(1, int(opts["workers"]) + 1)


def _hdfs_ready(opts: dict, hosts: int) -> bool:
    st = hdfs.cluster_state(opts["http_port"], service_address(opts))
    return st.get("NumLiveDataNodes", 0) >= hosts and st.get("FSState") == "Operational"


def start(ctx: ServiceContext, workers: int | None = None, subnet: str | None = None,
          tag: str | None = None, port: int | None = None, stores: str | None = None,
          timeout: float = START_TIMEOUT, **_ignored: Any) -> dict:
    """Make the network and start whatever of the cluster is not running (all of it on the
    first call, a lost host's processes later); wait until every DataNode is live at the
    NameNode and every worker registered with the master.

    ``workers``, ``subnet`` and ``tag`` are fixed while anything of the cluster runs: changing
    them is a clear error naming ``bench services down cluster``."""
    if os.geteuid() != 0:
        raise ServiceError("cluster: network namespaces, veth pairs and a bridge need root; "
                           "run `bench services up cluster` as root")
    previous = _options(ctx)
    running = ctx.read_pid() is not None or _namenode(ctx).read_pid() is not None \
        or bool(_our_namespaces(previous))
    wanted = {"workers": int(workers if workers is not None else
                             (previous["workers"] if running else DEFAULT_WORKERS)),
              "subnet": subnet or (previous["subnet"] if running else DEFAULT_SUBNET),
              "tag": previous["tag"] if tag is None and running else (tag or ""),
              "spark_port": int(port or (previous["spark_port"] if running else SPARK_PORT))}
    _check_opts(wanted["workers"], wanted["tag"])
    _network(wanted["subnet"])
    if running:
        changed = [k for k, v in wanted.items() if str(previous[k]) != str(v)]
        if changed:
            raise ServiceError(
                f"cluster: already running with {', '.join(f'{k}={previous[k]}' for k in changed)}; "
                f"run `bench services down cluster` first to change {', '.join(changed)}")
    opts = {**previous, **wanted,
            "stores": str(Path(stores).resolve()) if stores else previous["stores"] or ""}
    save_options(ctx, opts)
    svc = service_address(opts)
    _ensure_bridge(opts)
    for i in _hosts(opts):
        _ensure_host(opts, i)

    java_exe, classpath = java(hdfs.NAME), _classpath()
    spark_class = str(spark.spark_home() / "bin" / "spark-class")
    companions: list[tuple[str, ServiceContext]] = []
    nn = _namenode(ctx)
    if nn.read_pid() is None:
        for p in ("port", "http_port"):
            require_port_free(NAME, svc, opts[p], wait=5)
        conf = hdfs.write_conf(nn.root / "conf", _hdfs_values(opts, nn.data_dir, svc))
        hdfs.format_namenode(nn, java_exe, conf, classpath)
        spawn(nn, [*hdfs.jvm(java_exe, conf, classpath, NAMENODE_HEAP, nn.log_dir, "namenode"),
                   "org.apache.hadoop.hdfs.server.namenode.NameNode"])
    companions.append(("NameNode", nn))
    relay = _start_relay(ctx, opts)
    if relay is not None:
        companions.append(("relay", relay))
    if ctx.read_pid() is None:
        require_port_free(NAME, svc, opts["spark_port"], wait=5)
        env = {**spark.daemon_env(ctx.log_dir, svc, SPARK_DAEMON_HEAP),
               "SPARK_MASTER_OPTS": f"-Dspark.worker.timeout={WORKER_TIMEOUT}"}
        spawn(ctx, [spark_class, "org.apache.spark.deploy.master.Master", "--host", svc,
                    "--port", str(opts["spark_port"]), "--webui-port", "0"], env=env)
    workers_ready: list[ServiceContext] = []
    for i in _hosts(opts):
        ns, addr, local = netns_name(opts, i), host_address(opts, i), host_dir(ctx, i)
        dn = _proc(ctx, f"h{i}-datanode")
        if dn.read_pid() is None:
            conf = hdfs.write_conf(local / "conf", _hdfs_values(opts, local / "datanode", addr))
            spawn(dn, ["ip", "netns", "exec", ns,
                       *hdfs.jvm(java_exe, conf, classpath, DATANODE_HEAP, dn.log_dir, "datanode"),
                       "org.apache.hadoop.hdfs.server.datanode.DataNode"])
        companions.append((f"DataNode of h{i}", dn))
        worker = _proc(ctx, f"h{i}-worker")
        if worker.read_pid() is None:
            (local / "work").mkdir(parents=True, exist_ok=True)
            (worker.log_dir / f"{worker.name}.log").unlink(missing_ok=True)  # readiness reads it
            spawn(worker, ["ip", "netns", "exec", ns, spark_class,
                           "org.apache.spark.deploy.worker.Worker", _master_url(opts),
                           "--host", addr, "--cores", str(opts["cores"]),
                           "--memory", str(opts["memory"]), "--webui-port", "0",
                           "--work-dir", str(local / "work")],
                  env={**spark.daemon_env(worker.log_dir, addr, SPARK_DAEMON_HEAP),
                       # a worker heartbeats every quarter of its own timeout: the master's
                       "SPARK_WORKER_OPTS": f"-Dspark.worker.timeout={WORKER_TIMEOUT}",
                       # executor-local: Spark's shuffle files and blocks go with the host
                       "SPARK_LOCAL_DIRS": str(local / "spark-local"), HOST_ENV: addr})
        companions.append((f"Spark worker of h{i}", worker))
        workers_ready.append(worker)

    def ready() -> bool:
        return (port_open(svc, int(opts["spark_port"])) and all(map(spark.registered, workers_ready))
                and _hdfs_ready(opts, len(workers_ready)))

    return start_and_wait(ctx, ready, timeout,
                          f"{len(workers_ready)} hosts registered with {_master_url(opts)} "
                          f"and live at the NameNode", stop, status, companions=companions)


# ------------------------------------------------------------------------- stop / kill
def stop(ctx: ServiceContext) -> None:
    """Stop every process (SIGTERM, SIGKILL after a timeout), then SIGKILL whatever is left in
    the host namespaces (executors, Python workers) and delete the namespaces, veths and the
    bridge.  Local directories stay: ``up`` again finds the NameNode's metadata and the blocks."""
    opts = _options(ctx)
    hosts = set(_hosts(opts)) | {int(_ours(opts).fullmatch(n).group(1))
                                 for n in _our_namespaces(opts)}
    procs = [_proc(ctx, f"h{i}-{role}") for i in sorted(hosts) for role in ("worker", "datanode")]
    stop_pids([*procs, _proc(ctx, "relay")], timeout=20)
    errors = []
    for remove in [*(lambda i=i: _remove_host_network(opts, i) for i in sorted(hosts)),
                   lambda: stop_pids([ctx, _namenode(ctx)], timeout=20),
                   lambda: _delete_link(_bridge(opts))]:
        try:  # one part that resists does not leave the others behind
            remove()
        except ServiceError as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


def kill_host(ctx: ServiceContext, i: int) -> dict:
    """Host ``i`` dies: SIGKILL every process in its namespace, take it off the network
    (namespace and veth deleted) and delete its local directory.  Returns what was killed:
    ``{"host", "address", "killed": [{"pid", "role"}...], "deleted": path}``."""
    opts = _options(ctx)
    if i not in _hosts(opts):
        raise ServiceError(f"cluster: there is no host {i}; the cluster has hosts 1.."
                           f"{opts['workers']} (`bench services status cluster`)")
    ns = netns_name(opts, i)
    killed = [{"pid": p, "role": _role(p)} for p in _netns_pids(ns)]
    # off the network first: the FINs and resets its dying processes' sockets would send reach
    # nobody, so peers learn of the loss by silence (timeouts), as when a machine dies
    _delete_link(_veth(opts, i))
    _remove_host_network(opts, i)
    local = host_dir(ctx, i)
    shutil.rmtree(local, ignore_errors=True)
    return {"host": f"h{i}", "address": host_address(opts, i), "killed": killed,
            "deleted": str(local)}


def kill(ctx: ServiceContext) -> None:
    """SIGKILL every process of the cluster (a crash of all of it); the network stays."""
    opts = _options(ctx)
    for ns in _our_namespaces(opts):
        _kill_namespace(ns)
    for proc in (ctx, _namenode(ctx), _proc(ctx, "relay")):
        pid = proc.read_pid()
        if pid is not None:
            _signal_group(pid, signal.SIGKILL)


# ------------------------------------------------------------------------------- status
#: what a process is, by a piece of its command line (first match wins)
ROLES = (("org.apache.spark.deploy.worker.Worker", "spark-worker"),
         ("services.relay", "relay"),
         ("org.apache.spark.deploy.master.Master", "spark-master"),
         ("CoarseGrainedExecutorBackend", "executor"),
         ("hdfs.server.datanode.DataNode", "datanode"),
         ("hdfs.server.namenode.NameNode", "namenode"),
         ("spark_integration.warm_daemon", "python-worker"),
         ("pyspark.daemon", "python-worker"),
         ("pyspark.worker", "python-worker"))


def _role(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    for needle, role in ROLES:
        if needle in cmd:
            return role
    return Path(cmd.split(" ", 1)[0]).name or "?"


def hosts(ctx: ServiceContext) -> list[dict]:
    """Every host: ``{"host", "address", "netns", "up", "processes": [{"pid", "role"}...]}``;
    the service host first (``netns`` None: the root namespace)."""
    opts = _options(ctx)
    service = [{"pid": p.read_pid(), "role": role}
               for p, role in ((ctx, "spark-master"), (_namenode(ctx), "namenode"),
                               (_proc(ctx, "relay"), "relay"))]
    out = [{"host": "service", "address": service_address(opts), "netns": None,
            "up": _link_exists(_bridge(opts)),
            "processes": [p for p in service if p["pid"] is not None]}]
    for i in _hosts(opts):
        ns = netns_name(opts, i)
        out.append({"host": f"h{i}", "address": host_address(opts, i), "netns": ns,
                    "up": _netns_exists(ns),
                    "processes": [{"pid": p, "role": _role(p)} for p in _netns_pids(ns)]})
    return out


def status(ctx: ServiceContext) -> dict:
    opts = _options(ctx)
    svc = service_address(opts)
    state = hdfs.cluster_state(opts["http_port"], svc) if _namenode(ctx).read_pid() else {}
    listing = hosts(ctx)
    up = [h for h in listing[1:] if h["up"]]
    roles = [{p["role"] for p in h["processes"]} for h in up]
    running = (ctx.read_pid() is not None and _namenode(ctx).read_pid() is not None
               and len(up) == int(opts["workers"])
               and all({"spark-worker", "datanode"} <= r for r in roles)
               and state.get("NumLiveDataNodes", 0) >= len(up))
    out: dict[str, Any] = {
        "name": NAME, "running": running, "pid": ctx.read_pid(), "address": _master_url(opts),
        "version": f"spark {_pyspark_version()}, hdfs {hdfs.VERSION}",
        "settings": {"workers": int(opts["workers"]), "hosts_up": len(up),
                     "subnet": str(_network(opts["subnet"])), "bridge": _bridge(opts),
                     "hdfs": f"hdfs://{svc}:{opts['port']}",
                     "replication": replication(opts),
                     "live_datanodes": state.get("NumLiveDataNodes"),
                     "cores_per_host": opts["cores"], "memory_per_host": opts["memory"],
                     "relays": " ".join(f"{name}:{port}" for name, port in _relayed(ctx, opts))
                     or "none"},
        "hosts": listing,
    }
    if not running and out["pid"] is not None:
        out["error"] = (f"{len(up)} of {opts['workers']} hosts up, "
                        f"{state.get('NumLiveDataNodes')} live DataNodes")
    return out


def _pyspark_version() -> str | None:
    with contextlib.suppress(ImportError):
        import pyspark

        return pyspark.__version__
    return None


def client_options(ctx: ServiceContext, namespace: str) -> dict:
    """``{"master": spark://..., "path": hdfs://..., "service_address": ADDR, "relays": {...},
    "stores": DIR}``: the cluster's master, a directory named after ``namespace`` on its HDFS for
    the file backends, the service host's address, the relayed servers' ports there (``{"redis":
    {"port": 6379}, ...}``: a worker host reaches each at ``ADDR:port``) and the state directory
    of the servers relayed."""
    opts = _options(ctx)
    svc = service_address(opts)
    relays: dict[str, dict[str, int]] = {}
    for name, _port in _relayed(ctx, opts):
        relays.setdefault(name, {}).update(_server_ports(ctx, opts, name))
    return {"master": _master_url(opts),
            "path": hdfs.namespace_url(svc, opts["port"], opts["http_port"], namespace),
            "service_address": svc, "relays": relays, "stores": str(_stores_root(ctx, opts))}


# ------------------------------------------------------------------------------- relays
def _stores_root(ctx: ServiceContext, opts: dict) -> Path:
    """The state directory of the servers to relay: ``stores``, else the cluster's own."""
    return Path(opts["stores"]) if opts.get("stores") else ctx.root.parent


def _server_ports(ctx: ServiceContext, opts: dict, name: str) -> dict[str, int]:
    """The ports of server ``name`` of the stores' state directory (its saved options, else
    its defaults)."""
    saved = load_options(ServiceContext(name, _stores_root(ctx, opts) / name))
    return {key: int(saved.get(key, default)) for key, default in RELAYED[name].items()}


def _relayed(ctx: ServiceContext, opts: dict) -> list[tuple[str, int]]:
    """``(server, port)`` of every shared server the relay forwards: those of
    :data:`RELAYED` started in the stores' state directory (a pid file there)."""
    out = []
    for name in RELAYED:
        if ServiceContext(name, _stores_root(ctx, opts) / name).read_pid() is None:
            continue
        out += [(name, port) for port in _server_ports(ctx, opts, name).values()]
    return out


def _start_relay(ctx: ServiceContext, opts: dict) -> ServiceContext | None:
    """The relay process (module doc) for every port of :func:`_relayed`; None: none to relay."""
    relay, svc = _proc(ctx, "relay"), service_address(opts)
    ports = [port for _name, port in _relayed(ctx, opts)]
    if relay.read_pid() is not None or not ports:
        return relay if relay.read_pid() is not None else None
    for port in ports:
        require_port_free(NAME, svc, port, wait=5)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))}
    spawn(relay, [sys.executable, "-m", "services.relay", "--no-count", "--listen-host", svc,
                  *[a for port in ports for a in ("--map", f"{port}:{port}")]],
          env=env, cwd=PROJECT_ROOT)
    wait_until(relay, lambda: all(port_open(svc, port) for port in ports), 15,
               f"the relay on {svc} (ports {', '.join(map(str, ports))})")
    return relay
