"""``--spark-master``: YCSB clients as Spark tasks, for backends that outgrow one client machine.

One barrier-mode Spark job (``rdd.barrier().mapPartitions``) with one task per client.  Each
task opens its own connection to the store and is a YCSB client with ``--threads`` threads:

1. **load** (shared stores): client ``i`` inserts only its own slice of the records, YCSB's
   ``insertstart``/``insertcount`` (:func:`plan`); the ``memory`` backend is per process, so
   each client loads all records into its own store;
2. **run**: client ``i`` uses client streams ``i * threads + t`` (no two threads anywhere share
   a random stream) over the *shared* request distribution, its share of ``operations`` and of
   ``target`` (``target / clients``; pacing and ``Intended-<OP>`` latencies are the single-
   process runner's, :func:`workloads.runner.run`).

Every phase starts behind ``BarrierTaskContext.allGather`` and then at a common wall-clock
instant (:data:`START_MARGIN_S`), so the clients' measured windows overlap (the skew of their
start times is reported) and no client runs before every slice is loaded.  allGather also carries each client's status: when one client fails to open or load,
all of them stop with that one message instead of hanging at a barrier.  Each task returns its
HdrHistograms encoded (:meth:`Measurements.encode`); the driver adds them bucket by bucket, so
merged percentiles are exact.  A phase's runtime is its slowest client's (as ``--processes``).

Run-phase inserts behave as in YCSB with several clients: every client counts insert keys up
from ``records`` on its own, so two clients may insert the same new key.

Backends: server backends (redis, hbase, minio) share one store.  Backend options are shipped
to the executors in the task closure, so the server address in ``--opt`` must be one the
*executors* can reach (not 127.0.0.1 on a cluster).  File backends lock their directory to one
process and are refused with a clear error.

Masters.  ``local[N]`` works as is (``--clients`` defaults to the master's task slots; barrier
mode needs all clients running at once, so ``--clients`` <= slots).  A cluster master is passed
the same way; the driver is this process (client deploy mode).  Executors need Python with this
package and its dependencies (``pip install ckptbench[servers]`` in the executor image, or a
packed venv shipped with ``spark.archives`` and ``PYSPARK_PYTHON``)::

    # standalone cluster, driver on this machine
    bench write-heavy --backend redis --opt host=redis.lan --spark-master spark://m:7077 --clients 16
    # YARN (HADOOP_CONF_DIR set), executors get a packed venv (venv-pack) as ./venv
    spark-submit --master yarn --deploy-mode client --archives venv.tar.gz#venv \\
        --conf spark.pyspark.python=./venv/bin/python  $(dirname $(python -c \\
        'import bench; print(bench.__file__)'))/__main__.py \\
        write-heavy --backend redis --opt host=redis.lan --spark-master yarn --clients 16
    # Kubernetes: an executor image with ckptbench installed, set in spark-defaults.conf
    # (spark.kubernetes.container.image); same bench command with --spark-master k8s://https://api:6443

Under ``spark-submit`` the session it created is reused (``SparkContext.getOrCreate``).
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from . import parallel
from .parallel import split
from .core import CoreWorkload, WorkloadSpec
from .measure import Measurements
from .runner import ClientSettings, PhaseResult, load, run

#: app name shown in the Spark UI / cluster manager
APP_NAME = "ckptbench-clients"
#: Spark releases a barrier by polling once a second, so tasks leave allGather up to ~1 s apart;
#: instead every client starts a phase at (last arrival at the barrier + this margin), by the
#: wall clock (NTP-synced clocks on a cluster), which aligns the starts to a few ms
START_MARGIN_S = 1.5


# ------------------------------------------------------------------------------------ planning
def check_backend(backend: str) -> str:
    """``"shared"`` (one store for all clients), ``"own"`` (memory) or a clear error."""
    from backends import backend_class

    return parallel.check_backend(
        backend_class(backend), "so Spark clients cannot share it; drop --spark-master, or use a "
                                "server backend ({servers})")


def plan(records: int, clients: int, settings: ClientSettings, *,
         own_store: bool) -> list[dict[str, Any]]:
    """Per client: its insert range (YCSB ``insertstart``/``insertcount``), op count, target
    rate and first client stream.  With ``own_store`` every client loads all records."""
    counts = split(records, clients)
    out, start = [], 0
    for i in range(clients):
        count = records if own_store else counts[i]
        share = settings.share(clients, i)
        out.append({
            "client": i,
            "insertstart": 0 if own_store else start,
            "insertcount": count,
            "operations": share.operations,
            "target": share.target,
            "client_offset": i * settings.threads,
        })
        start += 0 if own_store else count
    return out


def local_slots(master: str) -> int | None:
    """Task slots of a ``local``/``local[N]``/``local[N,F]``/``local[*]`` master (else None)."""
    if master == "local":
        return 1
    m = re.fullmatch(r"local\[(\*|\d+)(?:,\s*\d+)?\]", master.strip())
    if not m:
        return None
    return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))


class RangeWorkload(CoreWorkload):
    """A CoreWorkload whose load phase inserts only keys ``[insertstart, insertstart+count)``."""

    def __init__(self, spec: WorkloadSpec, seed: int, client: int, insertstart: int,
                 insertcount: int) -> None:
        super().__init__(spec, seed=seed)
        self.client_index = client
        self.insertstart = insertstart
        self.insertcount = insertcount

    def load_keys(self) -> list[str]:
        return self.key_cache[self.insertstart : self.insertstart + self.insertcount]

    def client(self, index: int, store: Any = None):
        # the load's stream is -1 in one process; client i loads with stream -1 - i
        return super().client(-1 - self.client_index if index == -1 else index, store)


# -------------------------------------------------------------------------------------- merging
def phase_payload(phase: PhaseResult, start_unix: float, cpu_s: float = 0.0) -> dict[str, Any]:
    """One client's phase as plain JSON-able data (histograms in HdrHistogram's encoding);
    ``cpu_s`` is the client process's CPU time in the phase (near runtime = client-bound)."""
    return {"name": phase.name, "runtime_ms": phase.runtime_ms, "operations": phase.operations,
            "measurements": phase.measurements.encode(), "errors": phase.errors,
            "keys": phase.keys, "start_unix": start_unix, "cpu_s": cpu_s}


def phase_from_payload(data: dict[str, Any]) -> PhaseResult:
    return PhaseResult(data["name"], data["runtime_ms"], data["operations"],
                       Measurements.decode(data["measurements"]), dict(data["errors"]),
                       data["keys"])


def merge_phases(name: str, phases: Iterable[PhaseResult]) -> PhaseResult:
    """Exact merge: histogram buckets and status counts added; runtime = slowest client's."""
    phases = list(phases)
    merged = Measurements()
    errors: dict[str, int] = {}
    for p in phases:
        merged.merge(p.measurements)
        for text, n in p.errors.items():
            errors[text] = errors.get(text, 0) + n
    return PhaseResult(name, max(p.runtime_ms for p in phases), sum(p.operations for p in phases),
                       merged, errors, sum(p.keys for p in phases))


# ---------------------------------------------------------------------------------------- tasks
def make_task(backend: str, options: dict[str, Any], spec: WorkloadSpec, plans: list[dict],
              settings: ClientSettings, *, do_load: bool) -> Callable[[Iterable[int]], Iterable[str]]:
    """The barrier task: everything it needs is in this closure (shipped to the executors)."""

    def task(_partition: Iterable[int]) -> Iterable[str]:
        from pyspark import BarrierTaskContext

        from backends import open_backend

        ctx = BarrierTaskContext.get()
        index = ctx.partitionId()
        p = plans[index]
        out: dict[str, Any] = {"client": index, "host": socket.gethostname(), "pid": os.getpid(),
                               "plan": p, "phases": {}}

        def gather(error: str | None) -> str | None:
            """Barrier + statuses: the first client's error, or None when all are fine; then
            wait for the common start time (see :data:`START_MARGIN_S`)."""
            statuses = [json.loads(s) for s in
                        ctx.allGather(json.dumps([index, error, time.time()]))]
            errs = sorted((i, e) for i, e, _t in statuses if e)
            if errs:
                return f"client {errs[0][0]}: {errs[0][1]}"
            start_at = max(t for _i, _e, t in statuses) + START_MARGIN_S
            time.sleep(max(0.0, start_at - time.time()))
            return None

        store, error = None, None
        try:
            store = open_backend(backend, **options)
            workload = RangeWorkload(spec, settings.seed, index, p["insertstart"],
                                     p["insertcount"])
        except Exception as exc:  # noqa: BLE001 - reported by every client, once
            error = f"{type(exc).__name__}: {exc}"
        try:
            error = gather(error)
            if error is None and do_load:
                try:
                    t0, c0 = time.time(), time.process_time()
                    loaded = load(store, workload, batch=settings.load_batch)
                    out["phases"]["load"] = phase_payload(loaded, t0, time.process_time() - c0)
                except Exception as exc:  # noqa: BLE001
                    error = f"{type(exc).__name__}: {exc}"
                error = gather(error)
            if error is None:
                t0, c0 = time.time(), time.process_time()
                mine = replace(settings, operations=p["operations"], target=p["target"])
                ran = run(store, workload, mine, client_offset=p["client_offset"])
                out["phases"]["run"] = phase_payload(ran, t0, time.process_time() - c0)
        except Exception as exc:  # noqa: BLE001 - one message to the driver
            error = f"client {index}: {type(exc).__name__}: {exc}"
        finally:
            if store is not None:
                store.close()
        out["error"] = error
        yield json.dumps(out)

    return task


# ---------------------------------------------------------------------------------------- driver
@dataclass
class DistributedResult:
    """Merged phases plus each client's own phases and where it ran."""

    phases: dict[str, PhaseResult]
    clients: list[dict[str, Any]] = field(default_factory=list)

    def clients_json(self, phase_json: Callable[[PhaseResult], dict]) -> list[dict[str, Any]]:
        """The per-client breakdown: host, pid, plan and each phase in the usual JSON form."""
        out = []
        for c in self.clients:
            phases = {}
            for name, data in c["phases"].items():
                phases[name] = {**phase_json(phase_from_payload(data)),
                                "start_unix": data["start_unix"], "cpu_s": data["cpu_s"]}
            out.append({"client": c["client"], "host": c["host"], "pid": c["pid"],
                        "plan": c["plan"], "phases": phases})
        return out

    def start_skew_ms(self, name: str) -> float:
        """How far apart the clients started ``name`` (wall clock): the barrier's precision."""
        starts = [c["phases"][name]["start_unix"] for c in self.clients if name in c["phases"]]
        return (max(starts) - min(starts)) * 1000.0 if starts else 0.0


def spark_context(master: str):
    """The running SparkContext (spark-submit) or a new one on ``master``; quiet, no UI."""
    if local_slots(master) is not None:
        # local: loopback only, and the workers run this interpreter (the venv with this package);
        # a cluster's executors must reach the driver's real address and use their own Python
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext

    conf = (SparkConf().setMaster(master).setAppName(APP_NAME)
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.python.worker.reuse", "true"))
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    return sc


def _spark_error(exc: BaseException) -> str:
    """The useful line of a Py4J/Spark error (the Python exception or Spark's reason)."""
    text = str(exc)
    for pattern in (r"(\w+(?:Error|Exception): [^\n]+)\n", r"(Barrier execution mode[^\n]+)"):
        m = re.search(pattern, text)
        if m:
            return m.group(1).strip()
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def run_clients(
    backend: str,
    options: dict[str, Any],
    spec: WorkloadSpec,
    settings: ClientSettings,
    *,
    master: str,
    clients: int | None = None,
    skip_load: bool = False,
    sc: Any = None,
) -> DistributedResult:
    """Load (unless ``skip_load``) and run ``spec`` with ``clients`` Spark tasks on ``master``."""
    from backends import BadOptionError, CkptError

    own = check_backend(backend) == "own"
    slots = local_slots(master)
    if clients is not None and clients < 1:
        raise BadOptionError(f"--clients must be >= 1 (got {clients})")
    if clients is not None and slots is not None and clients > slots:
        raise BadOptionError(
            f"--clients {clients} needs {clients} task slots at once (Spark barrier mode) but "
            f"{master} has {slots}; use --spark-master local[{clients}] or --clients {slots}")
    sc = sc or spark_context(master)
    clients = clients or slots or sc.defaultParallelism
    plans = plan(spec.records, clients, settings, own_store=own)
    task = make_task(backend, options, spec, plans, settings, do_load=not skip_load)
    try:
        rows = (sc.parallelize(range(clients), clients).barrier().mapPartitions(task)
                .collect())
    except Exception as exc:  # noqa: BLE001 - Py4J errors are pages long: keep the reason
        raise CkptError(f"--spark-master {master}: the Spark job failed: {_spark_error(exc)}; "
                        f"check that {clients} task slots are free and that executors have "
                        f"this package installed") from None
    results = sorted((json.loads(r) for r in rows), key=lambda c: c["client"])
    failed = [c["error"] for c in results if c["error"]]
    if failed:
        raise CkptError(f"--spark-master {master}: {failed[0]}")
    phases = {}
    for name in ("load", "run"):
        parts = [phase_from_payload(c["phases"][name]) for c in results if name in c["phases"]]
        if parts:
            phases[name] = merge_phases(name, parts)
    return DistributedResult(phases, results)
