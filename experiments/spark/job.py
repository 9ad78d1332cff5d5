"""``bench spark``: one Spark job on a local SparkSession, and its result document.

The job itself (driver, protocols, verification) is :func:`spark_integration.runner.run_job`;
this module owns the session around it — a baseline protocol's own Spark conf included — and the
JSON document of the result.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from backends.media import is_remote_url
from spark_integration.job import JobSpec, Metrics
from spark_integration.protocols.registry import baseline_class, registration
from spark_integration.runner import build_session, run_job
from spark_integration.settings import Settings

from experiments.core.document import Document, Environment, dump, optional
from experiments.spark import disk_baseline as disk_baseline_mod


def session_conf(protocols: list[str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark conf for a session running ``protocols``: ``extra`` plus what their baselines need."""
    conf = dict(extra or {})
    for name in protocols:
        if registration(name).baseline:
            conf.update(baseline_class(name).session_conf)
    return conf


def run_local(settings: Settings, spec: JobSpec, master: str = "local[2]",
              conf: Mapping[str, str] | None = None) -> Metrics:
    """Start a session on ``master``, run ``spec`` under ``settings``, stop the session."""
    spark = build_session(master, conf=session_conf([settings.protocol], conf))
    # Spark would log every task failure (injected kills included) with its Python traceback;
    # the runner raises what failed itself, as one line where it can
    spark.sparkContext.setLogLevel("OFF")
    try:
        return run_job(spark, settings, spec)
    finally:
        spark.stop()


def disk_baseline(metrics: Metrics, settings: Settings) -> dict[str, Any]:
    """``--disk-baseline``: the same bytes as the run's full state written and read back
    sequentially beside the store (:mod:`.disk_baseline`), and the run's ratios to them; a
    backend without a local directory gets one line saying so."""
    path = str(settings.backend_options.get("path", ""))
    if not path or is_remote_url(path):
        where = "a server" if not path else "a remote medium"
        return {"DiskBaseline": f"n/a ({settings.backend or 'no backend'} keeps its data on {where}, "
                                f"not in a local directory)"}
    summary = metrics.summary()
    base = disk_baseline_mod.sequential(os.path.dirname(path.rstrip("/")) or path, summary["StateBytes"])
    return {"DiskBaselineBytes": base.bytes, **disk_baseline_mod.ratios(summary, base)}


@dataclass
class SparkJob(Document):
    """``ckptbench.spark/1``: one ``bench spark`` run.  ``metrics`` are the ``[SPARK]`` lines by
    name (the ``Recovery.*`` phase means among them, ``ExactlyOnce`` when verified),
    ``checkpoints`` as Flink's REST API names them (``end_to_end_duration``,
    ``checkpointed_size``, ``state_size``), ``recovery_phases`` every episode's detect, load,
    restore, replay and catch-up (summing to ``total_ms``)."""

    SCHEMA = "ckptbench.spark/1"

    #: the Settings (a baseline protocol: its name and Spark conf)
    settings: dict[str, Any]
    job: JobSpec
    metrics: dict[str, Any]
    checkpoints: dict[str, Any]
    recovery_phases: list[dict[str, Any]] = field(default_factory=list)
    verify: str | None = optional()
    disk_baseline: dict[str, Any] | None = optional()
    environment: Environment = field(default_factory=Environment.here)


def job_document(metrics: Metrics, settings: Settings, spec: JobSpec) -> SparkJob:
    """The run as a :class:`SparkJob` document."""
    reg = registration(settings.protocol)
    if reg.baseline:
        described: dict[str, Any] = {"protocol": reg.name, **baseline_class(reg.name).session_conf}
    else:
        described = dump({**asdict(settings), "backend_options": dict(settings.backend_options)})
    doc = SparkJob(settings=described, job=spec, metrics=metrics.summary(),
                   checkpoints=metrics.checkpoint_statistics(),
                   recovery_phases=[r.as_dict() for r in metrics.recoveries])
    if metrics.exactly_once is not None:
        doc.metrics["ExactlyOnce"] = metrics.exactly_once
        doc.verify = metrics.verify_detail
    return doc
