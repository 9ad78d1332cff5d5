"""``bench spark-matrix --cluster``: the matrix on the hosts of ``bench services up cluster``, at
several parallelisms (2, 4 and 6 instances by default), as a :class:`Scaling` document.

How it runs, and why:

* **One session for everything.**  Starting a driver whose executors live on the worker hosts
  costs minutes on a loaded machine; one session (:func:`experiments.spark.session.spark_session`
  with the cluster's driver conf from :func:`experiments.spark.on_cluster.placement`) runs every
  parallelism's matrix, :func:`experiments.spark.matrix.run_matrix` with the job's parallelism
  set: the session's executors hold every host's cores, the parallelism is the number of
  operator instances spread over them.
* **Stores every host reaches.**  Each run's backend options come from
  :func:`~experiments.spark.on_cluster.store_options` (a file backend on the cluster's HDFS, a
  server at its relay) and pass :func:`~experiments.spark.on_cluster.placement`; every backend is
  put through that check before the session starts, so a store local to each host is refused in
  one line, the one ``bench spark --master cluster`` prints, before minutes are spent.
* **Node loss.**  With ``--fail-node K`` each run of a protocol that takes failures loses host K
  at the offset (:func:`~experiments.spark.on_cluster.node_losses`); after the run the host is
  brought back (``bench services up cluster`` starts what is missing), so the next run starts
  on every host again.  The rows then carry Spark's executor-loss detection time.
* **No baselines.**  Spark's own state store keeps its checkpoints in a directory the driver
  names; on several hosts that would need a shared file system Spark writes itself, which is not
  what is measured here.  ``none`` runs when named, as the reference of each parallelism's
  ratios.
"""

from __future__ import annotations

from dataclasses import replace
import time
from typing import Any, Callable

from backends.base import BadOptionError
from spark_integration.conf import build
from spark_integration.job import JobSpec
from spark_integration.node_loss import executor_hosts
from spark_integration.protocols.registry import registration
from spark_integration.settings import Settings

from experiments.spark import on_cluster
from experiments.spark.matrix import WARMUP_ROUNDS, StateSetup, Where, run_matrix
from experiments.spark.scaling_result import PARALLELISM, Scaling
from experiments.spark.session import spark_session

import services

DEFAULT_JSON = "results/spark-scaling.json"
#: how long a lost host, started again, may take to get the session's executor back (s)
HOST_BACK_S = 120.0


def cluster_where(spark: Any, fail_node: int | None, offset: int, state_dir: str | None = None) -> Where:
    """How a matrix run on ``spark`` reaches its store on the cluster, which host it loses, and
    how that host comes back (:func:`host_back`)."""
    def place(settings: Settings) -> Settings:
        return on_cluster.placement(on_cluster.CLUSTER, settings, state_dir=state_dir)[2]

    def losses() -> tuple:
        return on_cluster.node_losses(fail_node, offset, state_dir)

    return Where(options=lambda backend, ns, tmp: on_cluster.store_options(backend, ns, state_dir),
                 place=place, node_losses=losses,
                 after_loss=lambda: host_back(spark, fail_node, state_dir))


def host_back(spark: Any, host: int | None, state_dir: str | None = None,
              timeout: float = HOST_BACK_S) -> None:
    """Start lost host ``host`` again, empty (``bench services up cluster``), and wait until the
    session has an executor on it again, so the next run starts on every host (a host that
    does not get one within ``timeout`` leaves the next run one host short; its node loss then
    strikes the host without an executor, which its record says)."""
    if host is None:
        return
    services.up([on_cluster.CLUSTER], state_dir=state_dir)
    address = next(h["address"] for h in services.status([on_cluster.CLUSTER], state_dir=state_dir)[0]["hosts"]
                   if h["host"] == f"h{host}")
    deadline = time.monotonic() + timeout
    while address not in executor_hosts(spark) and time.monotonic() < deadline:
        time.sleep(0.5)


def check_backends(protocols: list[str], backends: list[str], state_dir: str | None = None) -> None:
    """Refuse, before a session starts, every backend the cluster's hosts cannot share
    (:func:`~experiments.spark.on_cluster.placement`'s one line)."""
    users = [p for p in protocols if registration(p).uses_backend and not registration(p).baseline]
    if not users:
        return
    for backend in backends:
        settings = build(users[0], backend, on_cluster.store_options(backend, "check", state_dir))
        on_cluster.placement(on_cluster.CLUSTER, settings, state_dir=state_dir)


def check_parallelisms(values: list[int]) -> list[int]:
    """The parallelisms in the order given, once each; a value below 1 is refused."""
    bad = [p for p in values if p < 1]
    if bad or not values:
        raise BadOptionError(f"--parallelism {','.join(map(str, values))}: give instance counts of 1 or "
                         f"more, e.g. {','.join(map(str, PARALLELISM))}")
    return list(dict.fromkeys(values))


def run(protocols: list[str], backends: list[str], spec: JobSpec, parallelisms: list[int] = list(PARALLELISM),
        fail_at: list[int] = [], fail_node: int | None = None, interval: int = 1,
        rounds: int = 1, warmup: int = WARMUP_ROUNDS, echo: Callable[..., None] = print,
        state: StateSetup = StateSetup(), state_dir: str | None = None) -> Scaling:
    """Every parallelism's matrix on one session on the cluster (the module doc).  ``fail_at``:
    the instance failures of every run that takes failures, as ``bench spark-matrix``'s; with
    ``fail_node`` its one offset (default: half the events) is where host ``fail_node`` dies
    instead."""
    parallelisms = check_parallelisms(parallelisms)
    offset = fail_at[0] if fail_at else spec.events // 2
    master, conf, _ = on_cluster.placement(on_cluster.CLUSTER, build(), state_dir=state_dir)
    check_backends(protocols, backends, state_dir)
    on_cluster.node_losses(fail_node, offset, state_dir)  # a host the cluster lacks: refused now
    st = services.status([on_cluster.CLUSTER], state_dir=state_dir)[0]["settings"]
    doc = Scaling(hosts=int(st["workers"]), cores_per_host=int(st["cores_per_host"]),
                  fail_node=fail_node, fail_offset=offset if fail_node is not None else None)
    instance_failures = [] if fail_node is not None else list(fail_at)
    with spark_session(master, protocols, conf) as spark:
        where = cluster_where(spark, fail_node, offset, state_dir)
        for p in parallelisms:
            echo(f"# parallelism {p} over {doc.hosts} hosts", flush=True)
            doc.matrices.append(run_matrix(spark, protocols, backends, replace(spec, parallelism=p),
                                           instance_failures, interval, baselines=False, rounds=rounds,
                                           warmup=warmup, echo=echo, state=state, where=where))
    return doc
