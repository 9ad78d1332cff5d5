"""``bench spark``: one Spark job on a local SparkSession, and its result document.

The job itself (driver, protocols, verification) is :func:`spark_integration.runner.run_job`;
this module owns the session around it — a baseline protocol's own Spark conf included — and the
JSON document of the result.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator, Mapping

from backends import backend_class
from backends.base import BadOptionError
from backends.media import is_remote_url
from backends.media.local import disk_directory, memory_backed
from spark_integration.conf import default_store_path
from spark_integration.job import JobSpec, Metrics
from spark_integration.protocols.registry import baseline_class, registration
from spark_integration.node_loss import NodeLoss
from spark_integration.runner import build_session, run_job
from spark_integration.settings import Settings

from experiments.core.document import Document, Environment, dump, optional
from experiments.spark import disk_baseline as disk_baseline_mod


#: the settings a baseline run honours (spark-state: its state, failures and checkpoint location)
BASELINE_SETTINGS = ("state_bytes", "fail_at", "cold_restore", "checkpoint_location", "retain_checkpoints")


def session_conf(protocols: list[str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark conf for a session running ``protocols``: ``extra`` plus what their baselines need."""
    conf = dict(extra or {})
    for name in protocols:
        if registration(name).baseline:
            conf.update(baseline_class(name).session_conf)
    return conf


def run_local(settings: Settings, spec: JobSpec, master: str = "local[2]",
              conf: Mapping[str, str] | None = None, node_losses: tuple[NodeLoss, ...] = ()) -> Metrics:
    """Start a session on ``master``, run ``spec`` under ``settings`` (killing the hosts of
    ``node_losses`` on the way), stop the session."""
    reg = registration(settings.protocol)
    if reg.baseline:  # what the baseline cannot do, said before a session starts
        baseline_class(reg.name).check(spec, settings)
    spark = build_session(master, conf=session_conf([settings.protocol], conf))
    # Spark would log every task failure (injected kills included) with its Python traceback;
    # the runner raises what failed itself, as one line where it can
    spark.sparkContext.setLogLevel("OFF")
    try:
        return run_job(spark, settings, spec, node_losses)
    finally:
        spark.stop()


@contextlib.contextmanager
def store_on_disk(settings: Settings, wanted: bool) -> Iterator[Settings]:
    """``settings`` with a file backend's store moved off a memory file system when ``wanted``
    (``--disk-baseline``: a disk is what it measures) and the store has its default directory,
    which lives with the working state (tmpfs); a store whose ``path`` the user gave stays put.
    The directory is removed when the block ends, as the default one is with the job."""
    path = str(settings.backend_options.get("path", ""))
    if not (wanted and path == default_store_path(settings.state_dir, settings.job_id) and memory_backed(path)):
        yield settings
        return
    top = tempfile.mkdtemp(prefix=f"ckptbench-{settings.job_id}-", dir=disk_directory())
    try:  # the whole directory goes when the block ends: the run need not delete record by record
        yield replace(settings, backend_options={**settings.backend_options, "path": os.path.join(top, "checkpoints")},
                      retain_checkpoints=True)
    finally:
        shutil.rmtree(top, ignore_errors=True)


@contextlib.contextmanager
def store_on_medium(settings: Settings, medium: str | None) -> Iterator[Settings]:
    """``settings`` with a file backend's store in a fresh directory on ``medium`` (``--medium
    KIND[:LOC]``, as ``bench storage-compare --media`` spells one: ``local``, ``tmpfs``, ``nfs``
    and ``hdfs``, the last two by default on the servers of ``bench services up``), removed when
    the block ends; ``None`` leaves the settings as they are.  A baseline's own checkpoints
    (``spark-state``'s checkpoint location) go there instead: the baseline makes its directory
    in it and removes it unless it retains its checkpoints (then the medium's directory stays too)."""
    if not medium:
        yield settings
        return
    from experiments.core.media import cleanup, fresh_location, parse_media

    baseline = registration(settings.protocol).baseline
    if baseline:
        if medium.strip().lower().startswith("nfs"):
            raise BadOptionError(f"--medium {medium}: Spark writes its checkpoint location through Hadoop's "
                                 f"file systems, which have no nfs://; mount the export and give --medium "
                                 f"local:/mnt/..., or use --medium hdfs")
    elif not (settings.backend and backend_class(settings.backend).keeps_a_directory()):
        raise BadOptionError(f"--medium {medium} places a file backend's directory; "
                         f"{settings.backend or 'no backend'} keeps no directory: drop --medium")
    elif settings.backend_options.get("path") != default_store_path(settings.state_dir, settings.job_id):
        raise BadOptionError(f"--medium {medium} and --opt path= both place the store; give one of them")
    kind, _, where = medium.partition(":")
    if kind.strip().lower() == "local" and not where:
        medium = f"local:{disk_directory()}"  # a disk, not the working directory (maybe tmpfs)
    found = parse_media(medium)
    if len(found) != 1:
        raise BadOptionError(f"--medium {medium!r}: give one medium, e.g. --medium nfs")
    place = found[0]
    try:
        if place.skipped:
            raise BadOptionError(f"--medium {medium}: {place.skipped}")
        if baseline:
            yield replace(settings, checkpoint_location=place.location)
            return
        yield replace(settings, backend_options={**settings.backend_options,
                                                 "path": fresh_location(place, "spark")},
                      retain_checkpoints=True)  # removed whole below
    finally:
        if not (baseline and settings.retain_checkpoints):
            cleanup(found)


def disk_baseline(metrics: Metrics, settings: Settings) -> dict[str, Any]:
    """``--disk-baseline``: the run's checkpoint bytes written at its pace and read back cold
    beside the store (:mod:`.disk_baseline`), and the run's ratios to them; a backend without a
    local directory gets one line saying so."""
    path = str(settings.backend_options.get("path", ""))
    if not path or is_remote_url(path):
        where = "a server" if not path else "a remote medium"
        return {"DiskBaseline": f"n/a ({settings.backend or 'no backend'} keeps its data on {where}, "
                                f"not in a local directory)"}
    summary = metrics.summary()
    directory = os.path.dirname(path.rstrip("/")) or path
    period = metrics.wall_seconds / len(metrics.checkpoint_sizes) if metrics.checkpoint_sizes else 0.0
    base = disk_baseline_mod.replay(directory, metrics.checkpoint_sizes or [summary["StateBytes"]], period)
    return {"DiskBaselineDirectory": directory, "DiskBaselineBytes": base.bytes,
            **disk_baseline_mod.ratios(summary, base)}


@dataclass
class SparkJob(Document):
    """``ckptbench.spark/1``: one ``bench spark`` run.  ``metrics`` are the ``[SPARK]`` lines by
    name (the ``Recovery.*`` phase means among them, ``ExactlyOnce`` when verified),
    ``checkpoints`` as Flink's REST API names them (``end_to_end_duration``,
    ``checkpointed_size``, ``state_size``), ``recovery_phases`` every episode's detect, load,
    restore, replay and catch-up (summing to ``total_ms``), ``timeline`` every micro-batch."""

    SCHEMA = "ckptbench.spark/1"

    #: the Settings (a baseline protocol: its name and Spark conf)
    settings: dict[str, Any]
    job: JobSpec
    metrics: dict[str, Any]
    checkpoints: dict[str, Any]
    recovery_phases: list[dict[str, Any]] = field(default_factory=list)
    #: every micro-batch: end offset, events, wall ms, its checkpoint's ms, recovered, steady
    timeline: list[dict[str, Any]] = field(default_factory=list)
    #: a paced run's latency over time (:func:`latency_over_time`; None: unpaced)
    latency: dict[str, Any] | None = optional()
    verify: str | None = optional()
    disk_baseline: dict[str, Any] | None = optional()
    #: the ``[COST]`` lines' data: requests per checkpoint, restore and cleanup, and their prices
    #: (:func:`experiments.spark.cost.cost_report`)
    cost: dict[str, Any] | None = optional()
    #: with ``--orphans``: what the protocol left in the store off its recovery line, after every
    #: checkpoint and before and after its GC (:func:`spark_integration.orphans.report`)
    orphans: dict[str, Any] | None = optional()
    environment: Environment = field(default_factory=Environment.here)


def latency_over_time(metrics: Metrics) -> dict[str, Any] | None:
    """A paced run's end-to-end latency per second of event creation (p50/p99, events), its
    failures on the same clock (seconds since the pacing started) and each failure's recovery by
    latency (ms; None: p50 not back in time) — CheckMate's Figs 9-10 and recovery time — and the
    micro-batch commits they are read off (``[start, end, done_s]``); None for
    an unpaced run, whose events all exist before it starts."""
    if metrics.rate <= 0:
        return None
    return {"rate": metrics.rate, "per_second": metrics.latency_per_second(),
            "failure_s": list(metrics.failure_s), "recovery_by_latency_ms": metrics.recovery_by_latency(),
            "commits": [[c.start, c.end, c.done_s] for c in metrics.commits]}


def job_document(metrics: Metrics, settings: Settings, spec: JobSpec) -> SparkJob:
    """The run as a :class:`SparkJob` document."""
    reg = registration(settings.protocol)
    if reg.baseline:
        # what a baseline honours of the settings, beside the Spark conf it runs under
        described: dict[str, Any] = {"protocol": reg.name, **baseline_class(reg.name).session_conf,
                                     **dump({k: getattr(settings, k) for k in BASELINE_SETTINGS})}
    else:
        described = dump({**asdict(settings), "backend_options": dict(settings.backend_options)})
    doc = SparkJob(settings=described, job=spec, metrics=metrics.summary(),
                   checkpoints=metrics.checkpoint_statistics(),
                   recovery_phases=[r.as_dict() for r in metrics.recoveries], timeline=list(metrics.timeline),
                   latency=latency_over_time(metrics))
    if metrics.exactly_once is not None:
        doc.metrics["ExactlyOnce"] = metrics.exactly_once
        doc.verify = metrics.verify_detail
    return doc
