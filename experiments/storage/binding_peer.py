"""``bench run``'s YCSB workload on Redis beside a plain client doing what YCSB's Redis binding
does, in one interleaved run (``bench peer redis --against ycsb-binding``).

YCSB's Redis binding (``site.ycsb.db.RedisClient``) keeps a record as a Redis hash: a read is
``HGETALL`` (``HMGET`` of the asked fields with ``readallfields=false``), an update ``HMSET`` of
the changed fields, over one Jedis connection per client thread, no pipelining.
:class:`BindingLike` does exactly that with redis-py, one connection per thread.  Both sides run
the same harness loop (:func:`workloads.runner.run`), with the same generators from the same
seed (so the same keys, in the same order, the same read/update mix and the same field values),
and the same per-operation latency recording; what differs is only the client behind the
store calls: ckptbench's redis backend on ``bench run``'s own path
(:func:`experiments.core.run.run`, as ``bench run`` calls it) against redis-py.

How a round is taken: the records are loaded once, through the backend (the same hashes serve
both sides).  Per thread count, ``warmup`` pairs (binding, ours) run first and are recorded but
not counted; then the binding runs, and ``rounds`` times ours and the binding again.  Each round's
ratio is ours over the mean of the binding runs just before and after it, and the result is the
median round's (:class:`~experiments.storage.peers.PeerResult`, as ``bench peer redis`` against
redis-benchmark).  Every run is a fresh process pinned by the placement
(:func:`~experiments.storage.peers.placement`), so neither side inherits the other's heap.

Differences from the binding, on purpose: the binding's insert also adds the key to a sorted set
(``ZADD _indices``) for its scans; the load here does not (it is not measured, and the
backend's scan walks the key space).  The binding gets its connection from a field of its
per-thread ``DB`` object; here one object serves every thread and finds the thread's connection in
a ``threading.local``, as the backend finds its own.  Each thread's client is redis-py's ``single_connection_client``: one
connection and no pool checkout per command, the cheaper of redis-py's two ways to hold one
connection per thread, so the stand-in is not slowed by a pool the binding does not have.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from backends import backend_class, open_backend
from workloads import properties
from workloads.core import CoreWorkload, WorkloadSpec
from workloads.runner import ClientSettings, PhaseResult, load, run

from experiments.core.document import Document, Environment
from experiments.storage.peers import PeerResult, pin_self, pinned, placement, redis_server_pid

#: what the plain client stands in for, as the output names it
AGAINST = ("a plain redis-py client doing what YCSB's Redis binding does: HGETALL per read, "
           "HMSET of the changed field per update, one connection per thread, no pipelining")
#: the key prefix of the records both sides work on (replaced at the start, removed at the end)
PREFIX = "ckptbench-peer-ycsb:"
LOAD_BATCH = 1000


class BindingLike:
    """What YCSB's Redis binding does per operation, with a plain redis-py client: the
    store-call surface :class:`workloads.core.Client` uses on a store that keeps records of
    fields (``get_fields``, ``put_fields``), nothing else."""

    record_fields = True

    def __init__(self, config: dict[str, Any]) -> None:
        import redis

        self._redis = redis
        self._config = config
        self._prefix = config["prefix"]
        self._local = threading.local()
        self._clients: list[Any] = []
        self._lock = threading.Lock()

    def _client(self) -> Any:
        """This thread's connection (a client of its own, as the binding's ``Jedis``)."""
        client = getattr(self._local, "client", None)
        if client is None:
            cfg = self._config
            client = self._redis.Redis(host=cfg["host"], port=cfg["port"], db=cfg["db"],
                                       password=cfg["password"], socket_timeout=cfg["timeout"],
                                       single_connection_client=True)
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def get_fields(self, key: str, names: list[str] | None = None) -> dict[Any, bytes] | None:
        """``HGETALL`` (``HMGET`` of ``names``), as the binding's ``read``."""
        if names is None:
            return self._client().hgetall(self._prefix + key) or None
        values = self._client().hmget(self._prefix + key, names)
        return {n: v for n, v in zip(names, values) if v is not None} or None

    def put_fields(self, key: str, fields: dict[str, bytes]) -> None:
        """``HMSET`` of ``fields``, as the binding's ``update`` and ``insert``."""
        args: list[Any] = []
        for name, value in fields.items():
            args += (name, value)
        self._client().execute_command("HMSET", self._prefix + key, *args)

    def close(self) -> None:
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()


@dataclass
class ThreadsRun:
    """One thread count's runs: every binding run (one more than the rounds), each round of
    ours, each round's ratio and the median's, and the warm-up runs (not counted)."""

    threads: int
    binding_throughput: list[float] = field(default_factory=list)
    ours_throughput: list[float] = field(default_factory=list)
    round_ratios: list[float] = field(default_factory=list)
    ratio: float = 0.0
    warmup_binding: list[float] = field(default_factory=list)
    warmup_ours: list[float] = field(default_factory=list)
    #: the client process's CPU time per operation (µs) in each counted run, in the order of
    #: the throughputs: where a side's time goes when the machine, not the server, is the limit
    binding_cpu_us: list[float] = field(default_factory=list)
    ours_cpu_us: list[float] = field(default_factory=list)


@dataclass(kw_only=True)
class BindingPeer(Document):
    """``ckptbench.peer-ycsb/1``: ``bench run``'s YCSB workload on Redis against a plain client
    doing what YCSB's Redis binding does, per thread count."""

    SCHEMA = "ckptbench.peer-ycsb/1"

    server: str = "redis"
    against: str = AGAINST
    workload: str
    records: int
    ops: int
    field_count: int
    field_length: int
    distribution: str
    read_proportion: float
    update_proportion: float
    placement: str
    warmup: int
    rounds: int
    by_threads: list[ThreadsRun] = field(default_factory=list)
    environment: Environment = field(default_factory=Environment.here)


def workload_spec(workload: str, records: int, ops: int) -> WorkloadSpec:
    """The shipped workload file ``workload`` with ``recordcount`` and ``operationcount``, as
    ``bench run WORKLOAD -p recordcount=... -p operationcount=...`` reads it."""
    props = properties.read_file(properties.workload_file(workload))
    props.update(recordcount=str(records), operationcount=str(ops))
    return properties.spec_from(props, workload)


def _one_run(job: tuple[str, dict[str, Any], dict[str, Any], int, int, set[int] | None]
             ) -> tuple[float, float]:
    """One side's run in this (fresh) process: throughput in ops/s, and the process's CPU time
    per operation in µs (opening and closing the client included); an operation that failed
    fails the comparison."""
    side, config, spec_fields, threads, seed, cpus = job
    pin_self(cpus)
    spec = WorkloadSpec(**spec_fields)
    clients = ClientSettings(threads=threads, operations=spec.operations, seed=seed)
    phase: PhaseResult
    cpu = time.process_time()
    if side == "ours":  # bench run's path: open the store, run the loaded records, close
        from experiments.core import run as run_experiment
        from experiments.core.spec import RunSpec

        options = {k: config[k] for k in ("host", "port", "db", "password", "prefix")}
        result = run_experiment.run(RunSpec(backend="redis", options=options, workload=spec,
                                            clients=clients, skip_load=True))
        phase = result.phases["run"]
    else:
        client = BindingLike(config)
        try:
            phase = run(client, CoreWorkload(spec, seed=seed), clients)
        finally:
            client.close()
    cpu = time.process_time() - cpu
    if phase.errors or phase.operations != spec.operations:
        raise RuntimeError(f"{side} ({threads} threads): {phase.operations} of {spec.operations} "
                           f"operations, errors: {phase.errors}")
    return phase.throughput, cpu / phase.operations * 1e6


def _in_process(job: tuple) -> tuple[float, float]:
    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(_one_run, (job,))


def _threads_run(config: dict[str, Any], fields: dict[str, Any], threads: int, seed: int,
                 cpus: set[int] | None, warmup: int, rounds: int) -> ThreadsRun:
    """One thread count's warm-up pairs and interleaved rounds (see the module docstring)."""
    entry = ThreadsRun(threads=threads)

    def side(name: str, throughputs: list[float], cpu: list[float] | None) -> None:
        ops_s, cpu_us = _in_process((name, config, fields, threads, seed, cpus))
        throughputs.append(ops_s)
        if cpu is not None:
            cpu.append(cpu_us)

    for _ in range(warmup):
        side("binding", entry.warmup_binding, None)
        side("ours", entry.warmup_ours, None)
    res = PeerResult(clients=threads)
    side("binding", res.peer_throughput, entry.binding_cpu_us)
    for _ in range(rounds):
        side("ours", res.ours_rounds, entry.ours_cpu_us)
        side("binding", res.peer_throughput, entry.binding_cpu_us)
    entry.binding_throughput, entry.ours_throughput = res.peer_throughput, res.ours_rounds
    entry.round_ratios, entry.ratio = res.ratios, res.ratio
    return entry


def compare(options: dict[str, Any], *, workload: str = "workloada", records: int = 10_000,
            ops: int = 100_000, threads: tuple[int, ...] = (1, 8), rounds: int = 3,
            warmup: int = 1, place: str = "cross", seed: int = 1) -> BindingPeer:
    """Load ``records`` once, then per thread count the interleaved runs of the module
    docstring; the records are removed at the end."""
    config = backend_class("redis").parse_options({"prefix": PREFIX, **options})
    spec = workload_spec(workload, records, ops)
    pid = redis_server_pid(config) if place != "any" else None
    server_cpus, client_cpus, described = placement(place, pid)
    doc = BindingPeer(workload=workload, records=records, ops=ops, field_count=spec.field_count,
                      field_length=spec.field_length, distribution=spec.distribution,
                      read_proportion=spec.read, update_proportion=spec.update,
                      placement=described, warmup=warmup, rounds=rounds)
    store = open_backend("redis", **config)
    try:
        store.delete_many(store.keys())  # this prefix's keys: an earlier run's, of either model
        loaded = load(store, CoreWorkload(spec, seed=seed), batch=LOAD_BATCH)
        if loaded.errors:
            raise RuntimeError(f"the load failed: {loaded.errors}")
        fields = spec.to_dict()
        with pinned(pid, server_cpus):
            for n in threads:
                doc.by_threads.append(_threads_run(config, fields, n, seed, client_cpus, warmup,
                                                   rounds))
    finally:
        try:
            store.delete_many(store.keys())
        finally:
            store.close()
    return doc
