"""``bench spark-matrix``: every protocol x backend on one local SparkSession, as rows for a table, JSON and PNG.

A protocol that uses no backend (``none``) runs once; ``none`` is the denominator of the overhead
ratios.  Every registered baseline (Spark's own RocksDB state store, ``spark-state``) that covers
the job runs once too unless disabled, and is a denominator as well.  Path backends get a fresh
temporary directory per run; server backends (redis, hbase, minio) are started/located through
:mod:`services` and get their own namespace per run (plus the job's own ``<jobId>/<owner>/`` key
prefix).  With ``--fail-at`` every run that takes injected failures gets them, so its throughput
includes the recovery.  The chart is :func:`experiments.plots.plot_spark_matrix`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from dataclasses import asdict, replace
from typing import Any, Callable

from spark_integration.conf import from_conf, to_conf
from spark_integration.job import JobSpec
from spark_integration.protocols.registry import protocol_names, registration
from spark_integration.queries import query
from spark_integration.runner import build_session, run_job

from .spark_job import session_conf

#: the protocol every run is compared with: no checkpoints at all
NO_CHECKPOINTS = "none"


def references() -> list[str]:
    """The protocols that run once, without a backend, and whose throughput the ratios divide by."""
    return [n for n in protocol_names() if not registration(n).uses_backend]


def ratio_key(reference: str) -> str:
    return "ratio_" + reference.replace("-", "_")


def baselines_for(spec: JobSpec) -> list[str]:
    """The registered baselines that cover ``spec``'s job."""
    operator = query(spec.kind).operator
    return [n for n in protocol_names(baseline=True) if registration(n).supports(operator)]


def backend_options(backend: str, namespace: str, tmp: str) -> dict[str, Any]:
    """Options reaching ``backend`` from this machine: a temp dir, or the running server's."""
    from backends import backend_class

    if "path" in backend_class(backend).all_options():
        return {"path": f"{tmp}/{namespace}"}
    import services

    services.up([backend])
    return dict(services.client_options(backend, namespace))


def run_one(spark: Any, protocol: str, backend: str | None, spec: JobSpec, fail_at: list[int],
            interval: int, tmp: str) -> dict[str, Any]:
    """One combination -> a row of the table (metrics summary + identifiers)."""
    reg = registration(protocol)
    ns = f"m{uuid.uuid4().hex[:8]}"
    plain: dict[str, Any] = {"protocol": protocol, "interval": interval, "jobId": ns, "stateDir": f"{tmp}/work"}
    opts: dict[str, Any] = {}
    if reg.uses_backend:
        plain["backend"] = backend
        opts = backend_options(backend, ns, tmp)
    if fail_at and reg.failure_injection:
        plain["failAt"] = ",".join(map(str, fail_at))
    metrics = run_job(spark, from_conf(to_conf(plain, opts)), spec)
    s = metrics.summary()
    return {"protocol": protocol, "backend": backend or "-", "throughput": s["Throughput(events/sec)"],
            "checkpoint_ms": s["CheckpointTime(ms)"], "recovery_ms": s["RecoveryTime(ms)"],
            "restart_ms": s["RestartTime(ms)"], "failures": s["Failures"],
            "exactly_once": metrics.exactly_once, "metrics": s}


def run_matrix(spark: Any, protocols: list[str], backends: list[str], spec: JobSpec, fail_at: list[int],
               interval: int = 1, baselines: bool = True,
               echo: Callable[..., None] = print) -> list[dict[str, Any]]:
    """Every protocol on every backend (once if it uses none), then the baselines; with ratios."""
    tmp = tempfile.mkdtemp(prefix="ckptbench-matrix-")
    rows: list[dict[str, Any]] = []
    try:
        plan: list[tuple[str, str | None]] = [(p, None) for p in protocols if not registration(p).uses_backend]
        plan += [(p, b) for p in protocols if registration(p).uses_backend for b in backends]
        if baselines:
            plan += [(p, None) for p in baselines_for(spec) if p not in protocols]
        # warm the JVM and the Python workers first: otherwise whichever run comes first is slower
        run_one(spark, NO_CHECKPOINTS, None, replace(spec, events=min(spec.events, 2 * spec.max_batch), verify=False),
                [], interval, tmp)
        for protocol, backend in plan:
            echo(f"# running {protocol} on {backend or '-'} ...", flush=True)
            rows.append(run_one(spark, protocol, backend, spec, fail_at, interval, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = {r["protocol"]: r["throughput"] for r in rows if r["backend"] == "-"}
    for r in rows:
        for ref in references():
            r[ratio_key(ref)] = round(r["throughput"] / base[ref], 3) if base.get(ref) else None
    return rows


def run(protocols: list[str], backends: list[str], spec: JobSpec, fail_at: list[int], interval: int = 1,
        baselines: bool = True, master: str = "local[2]") -> list[dict[str, Any]]:
    """:func:`run_matrix` on a session of its own (started and stopped here)."""
    wanted = protocols + (baselines_for(spec) if baselines else [])
    spark = build_session(master, conf=session_conf(wanted))
    spark.sparkContext.setLogLevel("ERROR")
    try:
        return run_matrix(spark, protocols, backends, spec, fail_at, interval, baselines)
    finally:
        spark.stop()


def format_table(rows: list[dict[str, Any]]) -> str:
    refs = references()
    head = ("protocol", "backend", "events/s", *(f"x {ref}" for ref in refs), "ckpt ms", "recovery ms",
            "ExactlyOnce")
    lines = [head]
    for r in rows:
        eo = "-" if r["exactly_once"] is None else str(r["exactly_once"]).lower()
        lines.append((r["protocol"], r["backend"], f"{r['throughput']:,.0f}",
                      *(f"{r.get(ratio_key(ref)) or 0:.2f}" for ref in refs), f"{r['checkpoint_ms']:.1f}",
                      f"{r['recovery_ms']:.0f}", eo))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line, widths)) for line in lines)


def write_json(rows: list[dict[str, Any]], spec: JobSpec, fail_at: list[int], path: str) -> None:
    with open(path, "w") as f:
        json.dump({"job": asdict(spec), "fail_at": fail_at, "rows": rows}, f, indent=2)
