"""``bench spark-matrix``: parse, check names against the registries, run, print.

The method (warm-up rounds, interleaved rounds in a rotated order, medians and their spread, the
work each row did) is :mod:`experiments.spark.matrix`'s; this module only parses, calls and
prints.  Output goes to ``results/`` unless ``--json``/``--png`` say otherwise.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from backends.base import CkptError
from spark_integration.protocols.registry import protocol_names

from .args import EXIT_USAGE, PROG, UsageError, add_html_arg, named
from .outputs import save_page
from .spark_cli import (COUNT, JOBS, OFFSET, SKEW, SKEW_SYNTAX, add_state_args, check_failures,
                        job_spec)

#: the session the matrix runs on without --cluster
MASTER = "local[2]"

DESCRIPTION = """\
Run every protocol on every backend (a protocol without a backend once) and the baselines on one
local SparkSession: --warmup rounds first, then --rounds interleaved rounds, each in an order
rotated by one place.  Prints medians, their range over the rounds and the work each row did
(checkpoints, bytes checkpointed and logged), writes them as JSON and as a chart.  Ratios are the
median of per-round ratios to the protocol without checkpoints (none) and to each baseline.

With --cluster the matrix runs on the hosts of `bench services up cluster`, once per
--parallelism (2,4,6 by default), on one session: a table per parallelism and one of how
throughput, checkpoint and recovery time change with the instances.  File backends keep their
store on the cluster's HDFS, servers are reached at the cluster's relays, a store local to each
host is refused; --fail-node K loses host K in every run that takes failures (and brings it back
after).  No baselines, no chart: the JSON goes to results/spark-scaling.json by default.
"""


def add_parsers(sub: Any) -> None:
    add_parser(sub).set_defaults(func=run)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from experiments.spark.matrix import DEFAULT_JSON, DEFAULT_PNG, WARMUP_ROUNDS
    from experiments.spark.scaling import DEFAULT_JSON as SCALING_JSON
    from experiments.spark.scaling_result import PARALLELISM

    p = subparsers.add_parser("spark-matrix", help="run Spark protocols x backends in rounds and plot them",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    checkpointing = protocol_names(baseline=False)
    p.add_argument("--protocols", default=",".join(checkpointing),
                   help="comma-separated, from: " + ", ".join(checkpointing))
    p.add_argument("--backends", default="indexed_fs,redis", help="comma-separated registered backend names")
    p.add_argument("--job", choices=sorted(JOBS), default="wordcount")
    p.add_argument("--skew", type=SKEW, default="1.0", help=SKEW_SYNTAX)
    add_state_args(p, "state per key beside its count (the spark-state baseline's too): ")
    p.add_argument("--no-spark-state", action="store_true",
                   help="skip the baselines (" + ", ".join(protocol_names(baseline=True)) + ")")
    p.add_argument("--events", type=COUNT, default=1_000_000)
    p.add_argument("--keys", type=COUNT, default=10_000)
    p.add_argument("--batch", type=COUNT, default=250_000, help="max events per micro-batch")
    p.add_argument("--interval", type=COUNT, default=1, help="micro-batches per checkpoint")
    p.add_argument("--parallelism", type=PARALLELISMS, default=None, metavar="N[,N...]",
                   help="instances (default 2; with --cluster several, default "
                        f"{','.join(map(str, PARALLELISM))})")
    p.add_argument("--cluster", action="store_true",
                   help="run on the hosts of `bench services up cluster`, once per --parallelism")
    p.add_argument("--fail-node", type=COUNT, metavar="K",
                   help="--cluster: kill host K in every run that takes failures, at the --fail-at "
                        "offset (default: half of --events), and start it again after the run")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds measured (median reported)")
    p.add_argument("--warmup", type=int, default=WARMUP_ROUNDS, help="rounds run first and not measured")
    p.add_argument("--fail-at", type=OFFSET, action="append", default=[], metavar="OFFSET")
    p.add_argument("--orphans", action="store_true",
                   help="count what each protocol leaves in each store off its recovery line, before "
                        "and after its GC (bench spark --orphans; the census adds to the runs' time)")
    p.add_argument("--master", default=MASTER)
    p.add_argument("--json", default=None, metavar="FILE",
                   help=f"(default {DEFAULT_JSON}, with --cluster {SCALING_JSON}; its report page "
                        f"goes beside it as .html)")
    add_html_arg(p)
    p.add_argument("--png", default=DEFAULT_PNG, metavar="FILE", help=f"(default {DEFAULT_PNG})")
    p.set_defaults(command="spark-matrix")
    return p


def names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


@named("instance counts, comma-separated")
def PARALLELISMS(text: str) -> list[int]:  # noqa: N802 - an argparse type, named as COUNT is
    """``2,4,6``: each a count (:data:`COUNT`)."""
    return [COUNT(n) for n in names(text)] or [COUNT(text)]


def check_cluster(args: argparse.Namespace) -> None:
    """``--parallelism`` and ``--fail-node`` as ``--cluster`` (or its absence) takes them; sets
    ``args.parallelism`` to the list ``--cluster`` runs, else to the one instance count."""
    from experiments.spark.scaling_result import PARALLELISM

    given = args.parallelism
    if not args.cluster:
        if args.fail_node is not None:
            raise UsageError(f"--fail-node {args.fail_node} kills a host of the cluster: give --cluster")
        if given and len(given) > 1:
            raise UsageError(f"--parallelism {','.join(map(str, given))}: several instance counts "
                             f"run with --cluster only; give one")
        args.parallelism = given[0] if given else 2
        return
    if args.master != MASTER:
        raise UsageError(f"--master {args.master} and --cluster: --cluster runs on the cluster's own "
                         f"master; give one of them")
    if args.fail_node is not None and len(args.fail_at) > 1:
        raise UsageError("--fail-node kills one host, at one offset: give at most one --fail-at")
    args.parallelism = list(dict.fromkeys(given or PARALLELISM))


def check(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The protocols and backends named, every name checked before Spark starts."""
    from backends import backend_class

    protocols, backends = names(args.protocols), names(args.backends)
    checkpointing = protocol_names(baseline=False)
    bad = [p for p in protocols if p not in checkpointing]
    if bad:
        raise UsageError(f"--protocols: {bad[0]!r} is not a protocol; valid: {', '.join(checkpointing)}")
    if not protocols:
        raise UsageError("--protocols is empty; name at least one, e.g. --protocols none,coordinated")
    for b in backends:
        backend_class(b)  # UnknownBackendError lists the valid names
    if args.rounds < 1:
        raise UsageError(f"--rounds {args.rounds}: give 1 or more")
    if args.warmup < 0:
        raise UsageError(f"--warmup {args.warmup}: give 0 or more")
    check_failures(args)
    check_cluster(args)
    return protocols, backends


def run(args: argparse.Namespace) -> int:
    from experiments.spark import matrix as spark_matrix
    from experiments.report.plots import plot_recovery_phases, plot_spark_matrix

    try:
        protocols, backends = check(args)
        tty = sys.stderr.isatty()
        echo = lambda *a, **k: tty and print(*a, file=sys.stderr, **k)  # noqa: E731 - progress: a TTY's only
        if args.cluster:
            return run_cluster(args, protocols, backends, echo)
        args.json = args.json or spark_matrix.DEFAULT_JSON
        spec = job_spec(args, verify=True)
        doc = spark_matrix.run(protocols, backends, spec, args.fail_at, args.interval,
                               baselines=not args.no_spark_state, master=args.master,
                               rounds=args.rounds, warmup=args.warmup, echo=echo,
                               state=spark_matrix.StateSetup(str(args.state_bytes), args.layout,
                                                             args.chunk_bytes, args.cold_restore))
    except (CkptError, UsageError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(spark_matrix.format_table(doc.rows, doc.after_load))
    orphans = spark_matrix.orphan_table(doc.rows)
    if orphans is not None:
        print(f"\n[ORPHANS] what each protocol left off its recovery line, before and after its GC\n{orphans}")
    for line in spark_matrix.summary_lines(doc):
        print(line)
    spark_matrix.write_json(doc, args.json)
    save_page(args, doc, page_beside=True)
    plot_spark_matrix(doc.rows, args.png)
    print(f"wrote {args.json} and {args.png}")
    if args.fail_at:  # recovery time by phase: one stacked bar per protocol x backend
        phases_png = (args.png[:-4] if args.png.endswith(".png") else args.png) + "-recovery.png"
        plot_recovery_phases(doc.rows, phases_png)
        print(f"wrote {phases_png}")
    return 0


def run_cluster(args: argparse.Namespace, protocols: list[str], backends: list[str], echo: Any) -> int:
    """``--cluster``: every parallelism's matrix on the cluster, its tables, its JSON."""
    from experiments.spark import matrix as spark_matrix
    from experiments.spark import scaling
    from experiments.spark.scaling_result import to_text

    parallelisms, args.parallelism = args.parallelism, args.parallelism[0]
    spec = job_spec(args, verify=True)
    args.json = args.json or scaling.DEFAULT_JSON
    doc = scaling.run(protocols, backends, spec, parallelisms, args.fail_at, args.fail_node,
                      args.interval, rounds=args.rounds, warmup=args.warmup, echo=echo,
                      state=spark_matrix.StateSetup(str(args.state_bytes), args.layout, args.chunk_bytes,
                                                    args.cold_restore))
    print(to_text(doc))
    spark_matrix.write_json(doc, args.json)
    save_page(args, doc, page_beside=True)
    print(f"wrote {args.json}")
    return 0
