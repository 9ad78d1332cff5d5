"""``bench <workload> --spark-master MASTER [--clients N]``: the workload's clients as Spark tasks.

Kept out of :mod:`bench.cli` so that PySpark is imported only when ``--spark-master`` is given.
The logic is :mod:`workloads.spark_clients`; this module adds the two options, checks the
combinations that cannot work, prints YCSB's lines (plus ``[OVERALL], Clients, N``) and writes
the usual JSON with a ``clients`` per-client breakdown and a ``spark`` section.
"""

from __future__ import annotations

import argparse
from typing import Any

from backends import BadOptionError
from workloads.core import WorkloadSpec

from experiments import results

from . import report


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--spark-master`` and ``--clients`` to a workload parser."""
    p.add_argument("--spark-master", metavar="MASTER",
                   help="run the clients as Spark tasks on this master (local[N], spark://, "
                        "yarn, k8s://); the backend's server must be reachable from executors")
    p.add_argument("--clients", type=int, metavar="N",
                   help="Spark clients (tasks), each with --threads threads and its own slice of "
                        "the load; needs --spark-master (default: the master's task slots)")


def wanted(args: argparse.Namespace) -> bool:
    """Whether this run goes to Spark; ``--clients`` alone is a usage error."""
    master = getattr(args, "spark_master", None)
    if master is None and getattr(args, "clients", None) is not None:
        raise BadOptionError("--clients needs --spark-master (e.g. --spark-master 'local[2]'); "
                             "for clients on this machine use --processes")
    return master is not None


def clients_lines(lines: list[str], clients: int) -> list[str]:
    """YCSB's run lines with ``[OVERALL], Clients, N`` after the throughput line."""
    at = next(i for i, line in enumerate(lines) if line.startswith("[OVERALL], Throughput")) + 1
    return lines[:at] + [f"[OVERALL], Clients, {clients}"] + lines[at:]


def run_distributed(args: argparse.Namespace, spec: WorkloadSpec, options: dict[str, Any]) -> int:
    """The workload command with ``--spark-master``: load and run on Spark, print, write JSON."""
    from workloads import spark_clients

    from .cli import write_results  # the workload command's own JSON/CSV writer

    if getattr(args, "processes", 1) != 1:
        raise BadOptionError("--processes and --spark-master both choose the client processes; "
                             "give one (with Spark, use --clients)")
    if getattr(args, "baseline", False):
        raise BadOptionError("--baseline needs a file backend, which cannot run on Spark clients")
    operations = None if args.duration and args.ops is None else spec.operations
    result = spark_clients.run_clients(
        args.backend, options, spec, master=args.spark_master, clients=args.clients,
        threads=args.threads, seed=args.seed, operations=operations, duration=args.duration,
        target=args.target, load_batch=args.load_batch, skip_load=args.skip_load)
    phases = result.phases
    n = len(result.clients)
    for name, phase in phases.items():
        report.print_errors(phase)
        if name == "load":
            report.print_lines(report.phase_lines(phase, "LOAD-"))
        else:
            report.print_lines(clients_lines(report.phase_lines(phase), n))
    extra = {
        "spark": {"master": args.spark_master, "clients": n,
                  "start_skew_ms": {name: result.start_skew_ms(name) for name in phases}},
        "clients": result.clients_json(results.phase_json),
    }
    write_results(args, options, spec, phases, None, extra)
    return 0
