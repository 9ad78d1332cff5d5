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
"""

from __future__ import annotations

from typing import Mapping
from urllib.parse import urlsplit

from backends import backend_class
from backends.base import BadOptionError
from backends.media import is_remote_url
from spark_integration.settings import Settings

import services

#: what ``--master`` says to run on the cluster
CLUSTER = "cluster"


def placement(master: str, settings: Settings, conf: Mapping[str, str] | None = None,
              state_dir: str | None = None) -> tuple[str, dict[str, str]]:
    """``(master URL, Spark conf)`` for a run on ``master``: unchanged unless it is
    :data:`CLUSTER`; then the running cluster's master and its driver settings, after the checks
    of the module doc (:class:`BadOptionError`, one line, when one fails)."""
    conf = dict(conf or {})
    if master != CLUSTER:
        return master, conf
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
    return opts["master"], {"spark.driver.host": address, "spark.driver.bindAddress": address,
                            **conf}


LOOPBACK = ("127.", "localhost", "::1", "[::1]")


def _loopback_option(options: Mapping[str, object]) -> str | None:
    """The first backend option whose value is a loopback host or a URL on one."""
    for key, value in options.items():
        text = str(value)
        host = urlsplit(text).hostname if "://" in text else text
        if host and host.startswith(LOOPBACK):
            return key
    return None
