"""``bench spark``: parse, check against the protocol registry, run, print.

``bench spark`` runs a keyed job (a count, a NexMark query, a join) on Spark under a protocol and a
backend; its arguments become ``spark.ckptbench.*`` conf entries and go through the same
validation as ``spark-submit --conf`` (one path, one set of error messages).  What a protocol
takes — a backend, injected failures, which jobs — comes from its registration
(:mod:`spark_integration.protocols.registry`), so a new protocol needs no change here.
``bench spark-matrix`` (:mod:`bench.spark_matrix_cli`) shares its job options (:data:`JOBS`,
:func:`job_spec`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from backends.base import CkptError, parse_kv
from spark_integration.conf import PREFIX, from_conf, to_conf
from spark_integration.job import JobSpec, print_metrics
from spark_integration.orphans import lines as orphan_lines
from spark_integration.layouts.registry import DEFAULT as DEFAULT_LAYOUT, DEFAULT_CHUNK_BYTES, layout_help, layout_names
from spark_integration.protocols.registry import protocol_names, registration
from spark_integration.queries import query
from spark_integration.settings import Settings
from spark_integration.skew import SYNTAX as SKEW_SYNTAX, skew_arg
from spark_integration.state_size import SYNTAX as STATE_SYNTAX, state_size_arg

from .args import (EXIT_RUNTIME, EXIT_USAGE, PROG, UsageError, add_html_arg, at_least, named,
                   non_negative_float, positive_float)
from .outputs import save

#: ``--job`` name -> :data:`spark_integration.queries.QUERIES` kind
JOBS = {"wordcount": "wordcount", "nexmark-bids": "bids", "nexmark-q3": "q3", "nexmark-q1": "q1",
        "nexmark-q8": "q8", "nexmark-q12": "q12"}
#: ``--skew``'s type, named as the user knows it
SKEW = named("skew")(skew_arg)
STATE_BYTES = named("state size")(state_size_arg)
#: the ranges of the job options: a count of at least one, an offset or a seed of at least zero
COUNT, OFFSET = at_least(1), at_least(0)
#: a chunk holds at least a few rows
CHUNK_BYTES = at_least(64)

SPARK_DESCRIPTION = """\
Run a keyed job (a count, a NexMark query, a join: --job) on Spark under a checkpointing protocol and a backend,
or under a baseline.  Arguments become spark.ckptbench.* conf entries and go through the same
validation as spark-submit --conf.  Prints [SPARK], <metric>, <value> lines.
"""

def _protocol_help() -> str:
    return "; ".join(f"{n}: {registration(n).summary}" for n in protocol_names())


def add_parsers(sub: Any) -> None:
    add_parser(sub).set_defaults(func=run)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("spark", help="run a Spark streaming job checkpointing to a backend",
                              description=SPARK_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--job", choices=sorted(JOBS), default="wordcount",
                   help="wordcount: S4 word count; nexmark-bids: bids per auction (Q12-style keyed "
                        "count); nexmark-q3: NexMark Q3, persons JOIN auctions on the seller; nexmark-q1, "
                        "-q8, -q12: NexMark Q1 (map), Q8 (windowed join), Q12 (windowed count)")
    p.add_argument("--protocol", choices=protocol_names(), default="coordinated", help=_protocol_help())
    p.add_argument("--backend", help="registered backend name (required unless the protocol uses none)")
    p.add_argument("--opt", action="append", default=[], metavar="K=V", help="backend option (repeatable)")
    p.add_argument("--events", type=COUNT, default=1_000_000)
    p.add_argument("--rate", type=non_negative_float, default=0.0, help="events/s (0: as fast as possible)")
    p.add_argument("--keys", type=COUNT, default=10_000,
                   help="distinct keys (nexmark-q3: active persons/auctions, NexMark's window)")
    p.add_argument("--skew", type=SKEW, default="1.0", help=SKEW_SYNTAX)
    add_state_args(p, "state per key beside its count (wordcount, nexmark-bids): ")
    p.add_argument("--window-events", type=OFFSET, default=0, metavar="N",
                   help="count per tumbling window of N source events (event time = the source's "
                        "offset): a key holds its latest window and its state is dropped when that "
                        "window closes, so checkpoints delete as well as write; prints DroppedKeys "
                        "(needs --state-bytes; default 0: keys live for ever)")
    p.add_argument("--seed", type=OFFSET, default=42)
    p.add_argument("--parallelism", type=COUNT, default=2, help="instances of the keyed stage")
    p.add_argument("--batch", type=COUNT, default=250_000, help="max events per micro-batch")
    p.add_argument("--interval", type=COUNT, default=1,
                   help="micro-batches per checkpoint (spark-state commits its store at every one)")
    p.add_argument("--jitter", type=OFFSET, default=0,
                   help="uncoordinated: each checkpoint due interval +- up to this many micro-batches")
    p.add_argument("--full-every", type=COUNT, default=10,
                   help="full snapshot every N checkpoints (logio: every N x --interval Input Sets; "
                        "uncoordinated: of an instance, 1 = all full as CheckMate)")
    p.add_argument("--fail-at", type=OFFSET, action="append", default=[], metavar="OFFSET",
                   help="kill an instance when it reaches this event offset (repeatable; spark-state: "
                        "fail the micro-batch passing it and restart the query from its checkpoint)")
    p.add_argument("--fail-instance", type=OFFSET, default=0)
    p.add_argument("--fail-node", type=COUNT, metavar="K",
                   help="--master cluster: kill host K (its Spark worker, executor, Python workers "
                        "and DataNode, and its local directory) when the job reaches the --fail-at "
                        "offset (default: half of --events) instead of one instance")
    p.add_argument("--master", default="local[2]",
                   help="local[N], spark://HOST:PORT, or cluster: the hosts of `bench services up "
                        "cluster` (a store every host reaches: a server, hdfs:// or nfs://)")
    p.add_argument("--conf", action="append", default=[], metavar="K=V", help="extra Spark conf")
    p.add_argument("--verify", action="store_true", help="compare the final state with the ground truth")
    p.add_argument("--resume", action="store_true",
                   help="take over a job whose driver died (same spark.ckptbench.jobId, stateDir and backend): "
                        "recover from the protocol's records in the backend instead of starting over")
    p.add_argument("--medium", metavar="KIND[:LOC]",
                   help="put a file backend's store in a fresh directory on local[:DIR], tmpfs[:DIR], "
                        "nfs[:nfs://HOST/EXPORT/DIR] or hdfs[:hdfs://HOST:PORT/DIR] (nfs and hdfs: by "
                        "default the servers of `bench services up`), removed after the run; "
                        "spark-state: its checkpoint location (local, tmpfs or hdfs)")
    p.add_argument("--retain-checkpoints", action="store_true",
                   help="leave the job's checkpoints in the store when it ends (Flink's "
                        "RETAIN_ON_CANCELLATION); by default a run that ends deletes them once "
                        "measured, and a failed run leaves them for --resume")
    p.add_argument("--orphans", action="store_true",
                   help="count what the protocol leaves in the store that its recovery line does not "
                        "reference: after every checkpoint, and at the end before and after the "
                        "protocol's GC ([ORPHANS] lines; the census lists the store between "
                        "micro-batches, so measure times without it; docs/cost.md)")
    p.add_argument("--disk-baseline", action="store_true",
                   help="after the job, write each checkpoint's bytes again sequentially beside the "
                        "store at the run's pace (write + fdatasync), read the largest back cold, and "
                        "print the ratios to them; a file backend's default store then lives on disk")
    p.add_argument("--prices", metavar="FILE",
                   help="price table (TOML) for the [COST] lines' dollars (default: "
                        "experiments/core/prices.toml; docs/cost.md)")
    p.add_argument("--price-interval", type=positive_float, metavar="SECONDS",
                   help="price a month of checkpoints taken every SECONDS (default: the run's own "
                        "interval, wall time / checkpoints)")
    p.add_argument("--timeout", type=at_least(1), default=int(JobSpec.timeout), metavar="SECONDS",
                   help=f"give up on a job that has not finished after this long (default {int(JobSpec.timeout)})")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    add_html_arg(p)
    return p


def add_state_args(p: argparse.ArgumentParser, state_help: str) -> None:
    """What each key holds and how checkpoints lay it out (``bench spark`` and ``spark-matrix``)."""
    p.add_argument("--state-bytes", type=STATE_BYTES, default="0", metavar="SIZE",
                   help=state_help + STATE_SYNTAX)
    p.add_argument("--layout", choices=layout_names(), default=DEFAULT_LAYOUT,
                   help="how a checkpoint becomes store records; " + layout_help())
    p.add_argument("--chunk-bytes", type=CHUNK_BYTES, default=DEFAULT_CHUNK_BYTES, metavar="BYTES",
                   help=f"the chunks layout's object size (default {DEFAULT_CHUNK_BYTES})")
    p.add_argument("--cold-restore", action="store_true",
                   help="evict the store's files from the page cache before each restore, so the "
                        "recovery reads from the device (local directories; says why where it cannot)")


def settings_conf(args: argparse.Namespace) -> dict[str, str]:
    """The ``spark.ckptbench.*`` entries these arguments stand for."""
    plain = {"protocol": args.protocol, "backend": args.backend, "interval": args.interval,
             "jitter": args.jitter, "fullEvery": args.full_every, "failInstance": args.fail_instance,
             "stateBytes": args.state_bytes, "layout": args.layout, "chunkBytes": args.chunk_bytes,
             "coldRestore": str(args.cold_restore).lower(),
             "retainCheckpoints": str(args.retain_checkpoints).lower()}
    if args.fail_at and getattr(args, "fail_node", None) is None:  # a node loss is the driver's
        plain["failAt"] = ",".join(map(str, args.fail_at))
    if args.window_events:
        plain["windowEvents"] = args.window_events
    return to_conf(plain, parse_kv(args.opt))


def jobs_covered(protocol: str) -> list[str]:
    """The ``--job`` names ``protocol`` covers."""
    reg = registration(protocol)
    return [job for job, kind in JOBS.items() if reg.supports(query(kind).operator)]


def check_failures(args: argparse.Namespace) -> None:
    """Every ``--fail-at`` offset lies inside the job's input: an offset at or past ``--events``
    is never reached, so the run would end without the failure it was asked for."""
    late = [offset for offset in args.fail_at if offset >= args.events]
    if late:
        raise UsageError(f"--fail-at {late[0]} is never reached by a job of --events {args.events}; "
                         f"give an offset below {args.events}")


def check_protocol(args: argparse.Namespace) -> None:
    """What the protocol's registration rules out, named by this command's options."""
    check_failures(args)
    reg = registration(args.protocol)
    if args.job not in jobs_covered(reg.name):
        raise UsageError(f"--protocol {reg.name} covers the jobs {', '.join(jobs_covered(reg.name))}, "
                         f"not {args.job}")
    if reg.baseline and (args.backend or args.opt):
        raise UsageError(f"--protocol {reg.name} keeps its state in Spark's own store: drop --backend/--opt")
    if args.fail_at and not reg.failure_injection:
        raise UsageError(f"--protocol {reg.name} runs without injected failures: drop --fail-at")
    fail_node = getattr(args, "fail_node", None)
    if fail_node is not None:
        if args.master != "cluster":
            raise UsageError(f"--fail-node {fail_node} kills a host of the cluster: give --master cluster")
        if not reg.failure_injection:
            raise UsageError(f"--protocol {reg.name} runs without injected failures: drop --fail-node")
        if len(args.fail_at) > 1:
            raise UsageError("--fail-node kills one host, at one offset: give at most one --fail-at")
    if args.fail_instance >= args.parallelism:
        raise UsageError(f"--fail-instance {args.fail_instance} must be < --parallelism {args.parallelism}")


def fail_node_offset(args: argparse.Namespace) -> int:
    """Where ``--fail-node`` strikes: its ``--fail-at`` offset, else half the events."""
    return args.fail_at[0] if args.fail_at else args.events // 2


def job_spec(args: argparse.Namespace, verify: bool) -> JobSpec:
    return JobSpec(kind=JOBS[args.job], events=args.events, keys=args.keys, skew=args.skew,
                   seed=getattr(args, "seed", 42), rate=getattr(args, "rate", 0.0),
                   parallelism=args.parallelism, max_batch=args.batch, verify=verify,
                   resume=getattr(args, "resume", False), timeout=getattr(args, "timeout", JobSpec.timeout),
                   orphans=getattr(args, "orphans", False))


def run(args: argparse.Namespace) -> int:
    from experiments.core import prices
    from experiments.spark import cost
    from experiments.spark import job as spark_job
    from experiments.spark import on_cluster

    try:
        check_protocol(args)
        table = prices.load(args.prices)  # a bad table is refused before Spark starts
        extra = parse_kv(args.conf)
        settings: Settings = from_conf({**extra, **settings_conf(args)})
        spec = job_spec(args, args.verify)
        spark_conf = {k: v for k, v in extra.items() if not k.startswith(PREFIX)}
        with spark_job.store_on_medium(settings, args.medium) as settings, \
                spark_job.store_on_disk(settings, args.disk_baseline) as settings:
            master, spark_conf, settings = on_cluster.placement(args.master, settings, spark_conf)
            losses = on_cluster.node_losses(args.fail_node, fail_node_offset(args))
            metrics = spark_job.run_local(settings, spec, master, spark_conf, losses)
            baseline = spark_job.disk_baseline(metrics, settings) if args.disk_baseline else None
    except (CkptError, UsageError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print_metrics(metrics)
    if settings.writes_checkpoints:
        print(f"[SPARK], Layout, {settings.layout}")
    document = spark_job.job_document(metrics, settings, spec)
    document.cost = cost.cost_report(metrics, settings.backend, table, args.price_interval)
    cost.print_cost(document.cost, settings.backend)
    if metrics.orphans is not None:
        document.orphans = metrics.orphans
        for name, value in orphan_lines(metrics.orphans):
            print(f"[ORPHANS], {name}, {value}")
    if baseline is not None:
        document.disk_baseline = baseline
        for name, value in baseline.items():
            print(f"[SPARK], {name}, {value}")
    save(args, document)
    failed = metrics.exactly_once is False and registration(settings.protocol).exactly_once
    return EXIT_RUNTIME if failed else 0
