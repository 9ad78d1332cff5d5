"""``bench spark --master cluster``: a job on the hosts of ``bench services up cluster``.

:func:`placement` turns the word ``cluster`` into the cluster's ``spark://`` URL and the Spark conf
its driver needs, and refuses what cannot work there, before a session starts:

* The driver runs in this process, in the root network namespace: the executors on the worker
  hosts reach it at the service host's address, so the driver binds and advertises that address
  (``spark.driver.host``, ``spark.driver.bindAddress``), not the loopback a local run uses.
* A backend option naming this machine's loopback (``host=127.0.0.1``, ``path=hdfs://127.0.0.1:
  ...``, the servers of ``bench services up``) is refused: a worker host's loopback is its own.
* On a cluster of several hosts an instance may run on any host, and a lost host takes its local
  disk with it; a store in a local directory (a file backend without a ``path`` on ``hdfs://`` or
  ``nfs://``) would be read back by an instance on another host from a directory that host never
  wrote.  It is refused with one line naming the shared alternatives.  A one-host cluster keeps
  one disk and is not refused.
* A server backend (redis, hbase, minio) without a host of its own is handed the service host's
  address, where the cluster relays the shared server (:mod:`services.cluster`): an executor on a
  worker host reaches it there, the driver too.  A server the cluster does not relay is refused
  with one line saying how to have it relayed.

:func:`node_losses` turns ``--fail-node K`` into the host loss the driver injects
(:mod:`spark_integration.node_loss`): :func:`services.cluster.kill_host` of host K.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping
from urllib.parse import urlsplit

from backends import backend_class
from backends.base import BadOptionError
from backends.media import is_remote_url
from spark_integration.node_loss import NodeLoss
from spark_integration.settings import Settings

import services

#: what ``--master`` says to run on the cluster
CLUSTER = "cluster"
#: server backend -> (its option naming the server, that option's value at the service address)
SERVER_OPTIONS = {"redis": ("host", "{address}"), "hbase": ("host", "{address}"),
                  "minio": ("endpoint", "http://{address}:{port}")}


def placement(master: str, settings: Settings, conf: Mapping[str, str] | None = None,
              state_dir: str | None = None) -> tuple[str, dict[str, str], Settings]:
    """``(master URL, Spark conf, settings)`` for a run on ``master``: unchanged unless it is
    :data:`CLUSTER`; then the running cluster's master, its driver settings and the settings with
    a server backend at the service address, after the checks of the module doc
    (:class:`BadOptionError`, one line, when one fails)."""
    conf = dict(conf or {})
    if master != CLUSTER:
        return master, conf, settings
    try:
        st = services.status([CLUSTER], state_dir=state_dir)[0]
    except services.ServiceError as exc:
        raise BadOptionError(f"--master cluster: {exc}") from None
    if not st["running"]:
        why = f" ({st['error']})" if st.get("error") else ""
        raise BadOptionError(f"--master cluster: the cluster is not running{why}; start it with "
                             f"`bench services up cluster` (as root)")
    hosts = int(st["settings"]["workers"])
    opts = services.client_options(CLUSTER, settings.job_id or "spark", state_dir=state_dir)
    path = str(settings.backend_options.get("path", ""))
    if (hosts > 1 and settings.writes_checkpoints and settings.backend
            and backend_class(settings.backend).keeps_a_directory() and not is_remote_url(path)):
        shared = opts["path"].split("/ckptbench/")[0] + "/ckptbench/DIR"
        raise BadOptionError(
            f"--backend {settings.backend} keeps its store in a directory local to each host, and "
            f"the cluster has {hosts}: give it a shared one (--opt path={shared}, or an nfs:// "
            f"URL) or use a server backend (redis, hbase, minio)")
    loopback = _loopback_option(settings.backend_options)
    if loopback:
        raise BadOptionError(
            f"--opt {loopback}={settings.backend_options[loopback]} is this machine's loopback, "
            f"which the cluster's hosts do not reach; give the store an address on the cluster's "
            f"network (its HDFS: --opt path={opts['path'].split('/ckptbench/')[0]}/ckptbench/DIR)")
    address = st["hosts"][0]["address"]  # the service host: where this driver runs
    settings = _at_service_address(settings, opts)
    return opts["master"], {"spark.driver.host": address, "spark.driver.bindAddress": address,
                            **conf}, settings


def store_options(backend: str, namespace: str, state_dir: str | None = None) -> dict[str, object]:
    """The options by which every host of the running cluster reaches ``backend``'s store for a
    job named ``namespace`` (``bench spark-matrix --cluster``), before :func:`placement`:

    * a file backend that keeps its store on HDFS: a directory named after ``namespace`` on the
      cluster's NameNode (replicated over the hosts' DataNodes);
    * a server backend: the namespace options of the server the cluster relays (its prefix or
      table, its credentials), without its host, which :func:`placement` sets to the relay;
    * anything else: none, so that :func:`placement` refuses a store local to each host."""
    cls = backend_class(backend)
    opts = services.client_options(CLUSTER, namespace, state_dir=state_dir)
    if cls.keeps_a_directory():
        return {"path": opts["path"]} if "hdfs" in cls.media else {}
    if backend not in SERVER_OPTIONS:
        return {}
    own = dict(services.client_options(backend, namespace, state_dir=opts["stores"]))
    own.pop(SERVER_OPTIONS[backend][0], None)
    return own


def _at_service_address(settings: Settings, opts: Mapping) -> Settings:
    """A server backend not told where its server is: at the service host's relay."""
    if settings.backend not in SERVER_OPTIONS or not settings.writes_checkpoints:
        return settings
    key, template = SERVER_OPTIONS[settings.backend]
    if key in settings.backend_options:
        return settings  # the user's own server, checked above not to be a loopback
    relayed = opts["relays"].get(settings.backend)
    if not relayed:
        raise BadOptionError(
            f"--backend {settings.backend}: the cluster relays no {settings.backend} server to its "
            f"hosts; start it (`bench services up {settings.backend}`), then `bench services down "
            f"cluster` and up again (or give its state directory with --stores-state)")
    value = template.format(address=opts["service_address"], port=next(iter(relayed.values())))
    return replace(settings, backend_options={**settings.backend_options, key: value})


def node_losses(host: int | None, offset: int, state_dir: str | None = None) -> tuple[NodeLoss, ...]:
    """``--fail-node K`` at ``offset``: host K of the running cluster dies then; () without K."""
    if host is None:
        return ()
    st = services.status([CLUSTER], state_dir=state_dir)[0]
    listing = {h["host"]: h for h in st["hosts"][1:]}
    if f"h{host}" not in listing:
        raise BadOptionError(f"--fail-node {host}: the cluster has hosts 1..{len(listing)} "
                             f"(`bench services status cluster`)")
    return (NodeLoss(offset, listing[f"h{host}"]["address"],
                     lambda: services.kill_host(host, state_dir=state_dir)),)


LOOPBACK = ("127.", "localhost", "::1", "[::1]")


def _loopback_option(options: Mapping[str, object]) -> str | None:
    """The first backend option whose value is a loopback host or a URL on one."""
    for key, value in options.items():
        text = str(value)
        host = urlsplit(text).hostname if "://" in text else text
        if host and host.startswith(LOOPBACK):
            return key
    return None
