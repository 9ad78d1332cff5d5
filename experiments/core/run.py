"""One workload run: open the store, load, run (optionally bracketed by baselines), close.

:func:`run` takes a :class:`~experiments.core.spec.RunSpec` and returns a
:class:`~experiments.core.spec.RunResult`.  The clients run as threads of this process, as
``--processes`` child processes (:mod:`workloads.parallel`) or as Spark tasks
(:mod:`workloads.spark_clients`); the result has the same shape either way, so every run writes
the same JSON.  ``on_phase(name, phase)`` is called as each phase ends, so the caller can print
the load's lines before the run starts, as YCSB does.

A run may be one phase only, as YCSB's ``load`` and ``run`` are: ``skip_run`` loads (with
``load_threads`` threads) and stops; ``skip_load`` runs against what an earlier load left at
``options["path"]``.  With ``hdr_prefix`` the phase writes one HdrHistogram interval log per
measurement (:class:`workloads.status.HdrLogs`).

File backends get a fresh temporary directory (:func:`data_dir`) unless ``path`` was given; it is
removed after the run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import replace
from typing import Any, Callable, Iterator

from backends import Backend
from workloads import core, runner
from workloads.runner import PhaseResult
from workloads.status import STDERR, HdrLogs

from experiments.core import results
from experiments.core.document import load
from experiments.core.spec import (ProgressFactory, RunResult, RunSpec, SpecError, no_progress,
                                   with_bar)

PhaseObserver = Callable[[str, PhaseResult], None]


@contextlib.contextmanager
def data_dir(backend: type[Backend], options: dict[str, Any]) -> Iterator[str | None]:
    """A fresh temporary ``path`` for file backends unless one was given; removed afterwards.
    Yields the store's path (``None`` for backends without one)."""
    if not backend.keeps_a_directory():
        yield None
        return
    if options.get("path"):
        given = str(options["path"])
        yield given if "://" in given else os.path.abspath(os.path.expanduser(given))
        return
    tmp = tempfile.mkdtemp(prefix=f"ckptbench-{backend.name}-")
    options["path"] = os.path.join(tmp, "store")
    try:
        yield options["path"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        options.pop("path", None)


def check(spec: RunSpec) -> None:
    """Refuse combinations that cannot work, before anything starts."""
    if spec.clients.threads < 1:
        raise SpecError(f"--threads must be >= 1 (got {spec.clients.threads})")
    spec.clients.validate()
    if spec.load_threads < 1:
        raise SpecError(f"load threads must be >= 1 (got {spec.load_threads})")
    if spec.skip_load and spec.skip_run:
        raise SpecError("nothing to do: both the load and the run are skipped")
    if spec.skip_run and (spec.processes > 1 or spec.spark_master is not None
                          or spec.baseline):
        raise SpecError("a load alone runs in this process: drop --processes, --spark-master "
                        "and --baseline")
    if spec.hdr_prefix is not None and (spec.processes > 1 or spec.spark_master is not None):
        raise SpecError("hdrhistogram.fileoutput needs the clients in this process; drop "
                        "--processes and --spark-master")
    if spec.processes < 1:
        raise SpecError(f"--processes must be >= 1 (got {spec.processes})")
    if spec.skip_load and spec.backend_class.keeps_a_directory() \
            and not spec.options.get("path"):
        raise SpecError("--skip-load needs the existing store's --opt path=DIR")
    if spec.spark_master is not None and spec.processes != 1:
        raise SpecError("--processes and --spark-master both choose the client processes; "
                        "give one (with Spark, use --clients)")
    if spec.baseline and (spec.processes > 1 or spec.spark_master is not None):
        raise SpecError("--baseline needs a file backend in this process; it cannot run with "
                        "--processes > 1 or --spark-master")


def run(spec: RunSpec, *, progress: ProgressFactory = no_progress,
        on_phase: PhaseObserver | None = None) -> RunResult:
    """Load (unless ``spec.skip_load``) and run ``spec``; see the module docstring."""
    check(spec)
    observe = on_phase or (lambda _name, _phase: None)
    if spec.spark_master is not None:
        return _on_spark(spec, observe)
    if spec.processes > 1:
        return _in_processes(spec, progress, observe)
    return _in_threads(spec, progress, observe)


def _run_clients(spec: RunSpec) -> runner.ClientSettings:
    """The run phase's settings: with neither an op count nor a duration, the workload's op
    count; with ``--duration`` alone, until the time is up."""
    if spec.clients.operations is None and spec.clients.duration is None:
        return replace(spec.clients, operations=spec.workload.operations)
    return spec.clients


def _hdr_logs(spec: RunSpec) -> Any:
    """The phase's HdrHistogram logs, or None; a load alone and a run alone each write theirs,
    as YCSB's ``load`` and ``run`` do (a run after a load in one invocation overwrites)."""
    return HdrLogs(spec.hdr_prefix) if spec.hdr_prefix is not None else None


def _in_threads(spec: RunSpec, progress: ProgressFactory, observe: PhaseObserver) -> RunResult:
    options = dict(spec.options)
    status: dict[str, Any] = {"status_interval": spec.status_interval, "status_out": STDERR}
    phases: dict[str, PhaseResult] = {}
    baseline = None
    with data_dir(spec.backend_class, options) as path:
        workload = core.CoreWorkload(spec.workload, seed=spec.clients.seed)
        store = spec.backend_class(**options)
        try:
            if not spec.skip_load:
                logs = _hdr_logs(spec) if spec.skip_run else None
                try:
                    phases["load"] = with_bar(
                        progress, "load", spec.workload.inserts(), lambda update: runner.load(
                            store, workload, batch=spec.clients.load_batch,
                            threads=spec.load_threads, progress=update, hdr_logs=logs,
                            **status))
                finally:
                    if logs is not None:
                        logs.close()
                observe("load", phases["load"])
            if spec.skip_run:
                return RunResult(spec, phases, store.stats())
            loaded = store.requests()  # the open's and the load's: the run's are the rest
            clients = _run_clients(spec)
            before = None
            if spec.baseline:  # the first half of the bracket (see experiments.core.baselines)
                # imported here: only --baseline needs indexed_fs's committer, and every
                # bench invocation would otherwise pay for importing the store
                from experiments.core import baselines

                before = baselines.leg(path, operations=(clients.operations or 2000) // 2,
                                       value_size=spec.workload.value_size,
                                       seed=spec.clients.seed, threads=spec.clients.threads,
                                       progress=progress)
            logs = _hdr_logs(spec)
            try:
                phases["run"] = with_bar(progress, "run", clients.operations, lambda update:
                                       runner.run(store, workload, clients, progress=update,
                                                  hdr_logs=logs, **status))
            finally:
                if logs is not None:
                    logs.close()
            observe("run", phases["run"])
            run_requests = store.requests().since(loaded)  # before stats(), which asks a server too
            stats = store.stats()
            stats["ledger_by_phase"] = {"load": loaded.as_dict(), "run": run_requests.as_dict()}
        finally:
            store.close()
        if before is not None:
            ran = phases["run"]
            after = baselines.leg(path, operations=ran.operations - before.python.operations,
                                  value_size=spec.workload.value_size, seed=spec.clients.seed,
                                  threads=spec.clients.threads, progress=progress)
            baseline = baselines.Baseline.of(before, after, ran, path)
    return RunResult(spec, phases, stats, baseline=baseline)


def _in_processes(spec: RunSpec, progress: ProgressFactory, observe: PhaseObserver) -> RunResult:
    """``--processes N > 1``: load once (shared stores) or per process (memory), run, merge."""
    from workloads import parallel

    mode = parallel.check_backend(spec.backend_class)
    phases: dict[str, PhaseResult] = {}
    if mode == "shared" and not spec.skip_load:
        store = spec.backend_class(**spec.options)
        try:
            phases["load"] = runner.load(store, core.CoreWorkload(spec.workload,
                                                                  seed=spec.clients.seed),
                                         batch=spec.clients.load_batch)
        finally:
            store.close()
    clients = _run_clients(spec)

    def work(update: Callable[[int], None]) -> tuple[PhaseResult | None, PhaseResult]:
        return parallel.run_processes(
            spec.backend_class, spec.options, spec.workload, clients, processes=spec.processes,
            progress=update, status_interval=spec.status_interval, status_out=STDERR)

    own_load, phases["run"] = with_bar(progress, "run", clients.operations, work)
    if own_load is not None:
        phases = {"load": own_load, **phases}
    for name, phase in phases.items():
        observe(name, phase)
    return RunResult(spec, phases)


def _on_spark(spec: RunSpec, observe: PhaseObserver) -> RunResult:
    """The clients as barrier-synchronized Spark tasks; histograms merged exactly."""
    from workloads import spark_clients

    result = spark_clients.run_clients(
        spec.backend, spec.options, spec.workload, _run_clients(spec),
        master=spec.spark_master, clients=spec.spark_clients, skip_load=spec.skip_load)
    for name, phase in result.phases.items():
        observe(name, phase)
    n = len(result.clients)
    extra = {
        "spark": results.SparkClients(spec.spark_master, n, {
            name: result.start_skew_ms(name) for name in result.phases}),
        "clients": load(list[results.SparkClient], result.clients_json(results.phase_json)),
    }
    return RunResult(spec, result.phases, None, extra)
