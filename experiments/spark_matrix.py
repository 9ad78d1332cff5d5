"""``bench spark-matrix``: every protocol x backend on one local SparkSession, as a table, JSON and PNG.

``none`` does not touch a backend, so it runs once and is the denominator of every ratio; the
``spark-state`` baseline (Spark's own RocksDB state store) runs once too unless disabled.  Path
backends get a fresh temporary directory per run; server backends (redis, hbase, minio) are
started/located through :mod:`services` and get their own namespace per run (plus the
job's own ``<jobId>/<owner>/`` key prefix).  With ``--fail-at`` every checkpointing run injects
those failures, so its throughput includes the recovery.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from typing import Any

from spark_integration.conf import PREFIX, from_conf, to_conf
from spark_integration.runner import JobSpec, run_job

SPARK_STATE = "spark-state"


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
    if protocol == SPARK_STATE:
        from spark_integration.spark_state import run_spark_state

        metrics = run_spark_state(spark, spec)
    else:
        ns = f"m{uuid.uuid4().hex[:8]}"
        plain = {"protocol": protocol, "interval": interval, "jobId": ns, "stateDir": f"{tmp}/work"}
        opts = {}
        if protocol != "none":
            plain["backend"] = backend
            opts = backend_options(backend, ns, tmp)
        if fail_at:
            plain["failAt"] = ",".join(map(str, fail_at))
        metrics = run_job(spark, from_conf(to_conf(plain, opts)), spec)
    s = metrics.summary()
    return {"protocol": protocol, "backend": backend or "-", "throughput": s["Throughput(events/sec)"],
            "checkpoint_ms": s["CheckpointTime(ms)"], "recovery_ms": s["RecoveryTime(ms)"],
            "restart_ms": s["RestartTime(ms)"], "failures": s["Failures"],
            "exactly_once": metrics.exactly_once, "metrics": s}


def run_matrix(spark: Any, protocols: list[str], backends: list[str], spec: JobSpec, fail_at: list[int],
               interval: int = 1, spark_state: bool = True, echo=print) -> list[dict[str, Any]]:
    tmp = tempfile.mkdtemp(prefix="ckptbench-matrix-")
    rows: list[dict[str, Any]] = []
    try:
        plan = [(p, None) for p in protocols if p == "none"]
        plan += [(p, b) for p in protocols if p != "none" for b in backends]
        if spark_state:
            plan.append((SPARK_STATE, None))
        # warm the JVM and the Python workers first: otherwise whichever run comes first is slower
        from dataclasses import replace

        run_one(spark, "none", None, replace(spec, events=min(spec.events, 2 * spec.max_batch), verify=False),
                [], interval, tmp)
        for protocol, backend in plan:
            echo(f"# running {protocol} on {backend or '-'} ...", flush=True)
            rows.append(run_one(spark, protocol, backend, spec, fail_at if protocol != SPARK_STATE else [],
                                interval, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = {r["protocol"]: r["throughput"] for r in rows if r["protocol"] in ("none", SPARK_STATE)}
    for r in rows:
        r["ratio_none"] = round(r["throughput"] / base["none"], 3) if base.get("none") else None
        r["ratio_spark_state"] = round(r["throughput"] / base[SPARK_STATE], 3) if base.get(SPARK_STATE) else None
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    head = ("protocol", "backend", "events/s", "x none", "x spark-state", "ckpt ms", "recovery ms", "ExactlyOnce")
    lines = [head]
    for r in rows:
        eo = "-" if r["exactly_once"] is None else str(r["exactly_once"]).lower()
        lines.append((r["protocol"], r["backend"], f"{r['throughput']:,.0f}", f"{r['ratio_none'] or 0:.2f}",
                      f"{r['ratio_spark_state'] or 0:.2f}", f"{r['checkpoint_ms']:.1f}",
                      f"{r['recovery_ms']:.0f}", eo))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line, widths)) for line in lines)


def write_json(rows: list[dict[str, Any]], spec: JobSpec, fail_at: list[int], path: str) -> None:
    from dataclasses import asdict

    with open(path, "w") as f:
        json.dump({"job": asdict(spec), "fail_at": fail_at, "rows": rows}, f, indent=2)


__all__ = ["run_matrix", "format_table", "write_json", "PREFIX"]
