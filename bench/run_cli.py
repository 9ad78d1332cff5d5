"""``bench write-heavy | ycsb-a ... ycsb-f``: one workload run, printed as YCSB prints it.

These are the one-invocation shorthands: they load and run (``bench load`` / ``bench run``,
:mod:`bench.ycsb_cli`, are YCSB's two-invocation form).  The run phase is printed first under
YCSB's own sections, so a parser that takes the first ``[OVERALL]`` reads the run, then the load
phase under ``[LOAD-...]`` sections; ``--baseline`` adds
``[BASELINE]``/``[BASELINE-C]``; ``--spark-master`` adds ``[OVERALL], Clients, N``.  The run
itself is :func:`experiments.core.run.run`.

Seeds are random unless ``--seed`` is given, as in YCSB; the seed used is printed on stderr and
recorded in the JSON, so any run can be replayed.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import replace
from typing import Any

from experiments.core import results
from experiments.core import run as run_experiment
from experiments.core.run import PhaseObserver
from experiments.core.spec import RunResult, RunSpec
from workloads import client_properties, parallel
from workloads.core import PRESETS
from workloads.runner import PhaseResult

from . import report
from .args import (
    add_backend_args,
    add_cpus_arg,
    add_spec_args,
    store_and_options,
    client_settings,
    config,
    place,
    positive_float,
    progress,
    workload_spec,
)
from .outputs import save


def add_parsers(sub: Any) -> None:
    for name in PRESETS:
        _add_workload_parser(sub, name)


def _add_workload_parser(sub: Any, name: str) -> None:
    spec = PRESETS[name]
    mix = ", ".join(f"{p:g} {op}" for op, p in spec.proportions().items() if p > 0)
    p = sub.add_parser(
        name,
        help=f"{mix}; {spec.distribution}",
        description=f"Workload {name}: {mix}, request distribution {spec.distribution}, "
                    f"{spec.records} records, {spec.operations} operations by default.  "
                    "Proportions are weights (normalized to sum 1); where the preset mixes only "
                    "reads and updates, --read-proportion alone sets update = 1 - read.",
    )
    add_backend_args(p, random_seed=True)
    add_spec_args(p, spec)
    p.add_argument("--processes", type=int, default=1, metavar="N",
                   help="client processes, each with --threads threads (beyond the GIL; "
                        "histograms merged exactly).  memory: each process has its own store; "
                        "file backends lock their directory and refuse N > 1")
    p.add_argument("--spark-master", metavar="MASTER",
                   help="run the clients as Spark tasks on this master (local[N], spark://, "
                        "yarn, k8s://); the backend's server must be reachable from executors")
    p.add_argument("--clients", type=int, metavar="N",
                   help="Spark clients (tasks), each with --threads threads and its own slice of "
                        "the load; needs --spark-master (default: the master's task slots)")
    add_cpus_arg(p)
    p.add_argument("--target", type=positive_float, metavar="OPS",
                   help="target ops/s over all processes and threads (the latency from each "
                        "operation's intended start is printed with --measurement-interval "
                        "intended or both)")
    p.add_argument("--measurement-interval", choices=client_properties.INTERVALS, default="op",
                   help="YCSB's measurement.interval: op (default) prints the service latency, "
                        "intended the latency from the intended start under the plain sections, "
                        "both adds [Intended-<OP>] sections")
    p.add_argument("--skip-load", action="store_true",
                   help="do not load (the store at --opt path= already holds the records)")
    p.add_argument("--status-interval", type=positive_float, metavar="SECONDS",
                   help="print a status line to stderr this often")
    p.add_argument("--csv", metavar="FILE", help="also write per-operation results as CSV")
    if name == "write-heavy":
        p.add_argument("--baseline", action="store_true",
                       help="around the run, time bare os.write+fdatasync appends of the same "
                            "values in the same kind of directory (with --threads N: N threads "
                            "sharing fdatasyncs), in Python ([BASELINE]) and in C ([BASELINE-C], "
                            "the machine's ceiling), and print the ratios")
    p.set_defaults(func=cmd_workload, workload=name)


def resolve_seed(args: argparse.Namespace) -> int:
    """The seed of this run: ``--seed``, or a new random one (recorded in ``args``)."""
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    return args.seed


def say_seed(spec: RunSpec) -> None:
    """The seed on stderr (see :func:`seed_told`)."""
    seed = spec.clients.seed
    print(f"bench: seed {seed} (--seed {seed} repeats this run)", file=sys.stderr)


def say_gil(spec: RunSpec) -> None:
    """The one line that points a multi-threaded server run at ``--processes``."""
    if spec.spark_master is None:
        note = parallel.gil_note(spec.backend_class, spec.clients.threads, spec.processes)
        if note:
            print(f"bench: {note}", file=sys.stderr)


def run_spec(args: argparse.Namespace) -> RunSpec:
    """The :class:`RunSpec` a workload command line asks for."""
    from backends import BadOptionError

    if args.spark_master is None and args.clients is not None:
        raise BadOptionError("--clients needs --spark-master (e.g. --spark-master 'local[2]'); "
                             "for clients on this machine use --processes")
    store, options = store_and_options(args)
    spec = workload_spec(args)
    resolve_seed(args)
    return RunSpec(backend=args.backend, store=store, options=options, workload=spec,
                   clients=client_settings(args), processes=args.processes,
                   spark_master=args.spark_master, spark_clients=args.clients,
                   skip_load=args.skip_load, baseline=getattr(args, "baseline", False),
                   status_interval=args.status_interval,
                   config=config(args, options, workload_spec=spec.to_dict()))


def cmd_workload(args: argparse.Namespace) -> int:
    spec = run_spec(args)
    run_experiment.check(spec)
    place(args, [spec.backend], spec.options)  # records cpus_pinned in args, hence config again
    spec = replace(spec, config=config(args, spec.options, workload_spec=spec.workload.to_dict()))
    on_spark = spec.spark_master is not None
    say_gil(spec)
    interval = args.measurement_interval
    load_lines: list[str] = []

    def show(name: str, phase: PhaseResult) -> None:
        report.print_errors(phase)
        if name == "load":  # printed after the run's: first-match parsers read the run
            load_lines.extend(report.phase_lines(phase, "LOAD-", interval))
        elif not on_spark:  # with Spark clients the run's lines wait for the client count
            report.print_lines(report.phase_lines(phase, interval=interval))
            report.print_lines(load_lines)
            load_lines.clear()

    result = run_experiment.run(spec, progress=progress(args), on_phase=seed_told(spec, show))
    if on_spark:
        report.print_lines(report.clients_lines(report.phase_lines(result.phases["run"],
                                                                   interval=interval),
                                                result.extra["spark"].clients))
        report.print_lines(load_lines)
    if result.baseline is not None:
        report.print_lines(report.baseline_lines(result.baseline))
    if "run" in result.phases:
        report.print_lines(report.cost_lines(result.backend_stats, result.phases["run"]))
        if (throttled := report.throttle_line(result.backend_stats)) is not None:
            print(f"bench: {throttled}", file=sys.stderr)
    report.print_warnings(result.backend_stats)
    write_results(args, result)
    return 0


def seed_told(spec: RunSpec, then: PhaseObserver | None = None) -> PhaseObserver:
    """A phase observer that says the seed when the first phase ends, then calls ``then``: by
    then the store has opened, so an error opening it stays the command's only stderr line."""
    told: list[bool] = []

    def observe(name: str, phase: PhaseResult) -> None:
        if not told:
            told.append(True)
            say_seed(spec)
        if then is not None:
            then(name, phase)

    return observe


def write_results(args: argparse.Namespace, result: RunResult) -> None:
    """``--json`` and ``--csv`` of a run, however its clients ran."""
    if args.json or getattr(args, "html", None):
        save(args, result.document(args.workload))
    if getattr(args, "csv", None):
        results.write_csv(args.csv, result.document(args.workload))
