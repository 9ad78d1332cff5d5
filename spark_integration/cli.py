"""``bench spark``: run a keyed job (count or NexMark Q3 join) on Spark under a protocol and a backend.

The CLI owner wires :func:`add_parser` / :func:`run` into ``bench``; ``python -m
spark_integration.cli spark ...`` runs it standalone.  Arguments become ``spark.ckptbench.*``
conf entries and go through the same validation as ``spark-submit --conf`` (one path, one set of
error messages).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from backends.base import CkptError, parse_kv

from .conf import PROTOCOLS, from_conf, to_conf
from .skew import SYNTAX as SKEW_SYNTAX, skew_arg

#: ``--job`` name -> :data:`.queries.QUERIES` kind
JOBS = {"wordcount": "wordcount", "nexmark-bids": "bids", "nexmark-q3": "q3"}
SPARK_STATE = "spark-state"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("spark", help="run a Spark streaming job checkpointing to a backend",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--job", choices=sorted(JOBS), default="wordcount",
                   help="wordcount: S4 word count; nexmark-bids: bids per auction (Q12-style keyed "
                        "count); nexmark-q3: NexMark Q3, persons JOIN auctions on the seller")
    p.add_argument("--protocol", choices=PROTOCOLS + (SPARK_STATE,), default="coordinated",
                   help=f"{SPARK_STATE}: Spark's own RocksDB state store baseline (no backend, no failures)")
    p.add_argument("--backend", help="registered backend name (required unless --protocol none)")
    p.add_argument("--opt", action="append", default=[], metavar="K=V", help="backend option (repeatable)")
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--rate", type=float, default=0.0, help="events/s (0: as fast as possible)")
    p.add_argument("--keys", type=int, default=10_000,
                   help="distinct keys (nexmark-q3: active persons/auctions, NexMark's window)")
    p.add_argument("--skew", type=skew_arg, default="1.0", help=SKEW_SYNTAX)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--parallelism", type=int, default=2, help="instances of the keyed stage")
    p.add_argument("--batch", type=int, default=250_000, help="max events per micro-batch")
    p.add_argument("--interval", type=int, default=1, help="micro-batches per checkpoint")
    p.add_argument("--jitter", type=int, default=0,
                   help="uncoordinated: each checkpoint due interval +- up to this many micro-batches")
    p.add_argument("--full-every", type=int, default=10, help="full snapshot every N checkpoints")
    p.add_argument("--fail-at", type=int, action="append", default=[], metavar="OFFSET",
                   help="kill an instance when it reaches this event offset (repeatable)")
    p.add_argument("--fail-instance", type=int, default=0)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--conf", action="append", default=[], metavar="K=V", help="extra Spark conf")
    p.add_argument("--verify", action="store_true", help="compare the final state with the ground truth")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")


def settings_conf(args: argparse.Namespace) -> dict[str, str]:
    """The ``spark.ckptbench.*`` entries these arguments stand for."""
    plain = {"protocol": args.protocol, "backend": args.backend, "interval": args.interval,
             "jitter": args.jitter, "fullEvery": args.full_every, "failInstance": args.fail_instance}
    if args.fail_at:
        plain["failAt"] = ",".join(map(str, args.fail_at))
    return to_conf(plain, parse_kv(args.opt))


def run_spark_state_cli(args: argparse.Namespace) -> int:
    """``--protocol spark-state``: the same job on Spark's own state store."""
    from .runner import JobSpec, build_session, print_metrics
    from .spark_state import STATE_CONF, run_spark_state

    if args.fail_at or args.backend:
        print(f"error: --protocol {SPARK_STATE} uses Spark's own state store: drop --backend/--fail-at",
              file=sys.stderr)
        return 2
    if JOBS[args.job] == "q3":
        print(f"error: --protocol {SPARK_STATE} covers the keyed counts (wordcount, nexmark-bids), "
              f"not {args.job}", file=sys.stderr)
        return 2
    spec = JobSpec(kind=JOBS[args.job], events=args.events, keys=args.keys, skew=args.skew, seed=args.seed,
                   rate=args.rate, parallelism=args.parallelism, max_batch=args.batch, verify=args.verify)
    spark = build_session(args.master, conf={**parse_kv(args.conf), **STATE_CONF})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        metrics = run_spark_state(spark, spec)
    finally:
        spark.stop()
    print_metrics(metrics)
    if args.json:
        out = {"settings": {"protocol": SPARK_STATE, **STATE_CONF}, "job": vars(spec), "metrics": metrics.summary()}
        if metrics.exactly_once is not None:
            out["metrics"]["ExactlyOnce"] = metrics.exactly_once
            out["verify"] = metrics.verify_detail
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0 if metrics.exactly_once in (None, True) else 1


def run(args: argparse.Namespace) -> int:
    from .runner import JobSpec, as_json, build_session, print_metrics, run_job

    if args.protocol == SPARK_STATE:
        return run_spark_state_cli(args)
    try:
        extra = parse_kv(args.conf)
        settings = from_conf({**extra, **settings_conf(args)})
        if args.fail_instance >= args.parallelism:
            print(f"error: --fail-instance {args.fail_instance} must be < --parallelism {args.parallelism}",
                  file=sys.stderr)
            return 2
        spec = JobSpec(kind=JOBS[args.job], events=args.events, keys=args.keys, skew=args.skew,
                       seed=args.seed, rate=args.rate, parallelism=args.parallelism,
                       max_batch=args.batch, verify=args.verify)
        spark = build_session(args.master, conf={k: v for k, v in extra.items() if not k.startswith("spark.ckptbench.")})
        spark.sparkContext.setLogLevel("ERROR")
        try:
            metrics = run_job(spark, settings, spec)
        finally:
            spark.stop()
    except CkptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_metrics(metrics)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(as_json(metrics, settings, spec), f, indent=2)
    return 0 if metrics.exactly_once in (None, True) or args.protocol == "none" else 1


def add_matrix_parser(subparsers: Any) -> argparse.ArgumentParser:
    """``bench spark-matrix``: protocols x backends, table + JSON + PNG (see :mod:`.matrix`)."""
    p = subparsers.add_parser("spark-matrix", help="run Spark protocols x backends and plot them",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--protocols", default="none,coordinated,uncoordinated,logio",
                   help="comma-separated, from: " + ", ".join(PROTOCOLS))
    p.add_argument("--backends", default="indexed_fs,redis", help="comma-separated registered backend names")
    p.add_argument("--job", choices=sorted(JOBS), default="wordcount")
    p.add_argument("--skew", type=skew_arg, default="1.0", help=SKEW_SYNTAX)
    p.add_argument("--no-spark-state", action="store_true", help=f"skip the {SPARK_STATE} baseline")
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=250_000, help="max events per micro-batch")
    p.add_argument("--interval", type=int, default=1, help="micro-batches per checkpoint")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--fail-at", type=int, action="append", default=[], metavar="OFFSET")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--json", default="spark-matrix.json", metavar="FILE")
    p.add_argument("--png", default="spark-matrix.png", metavar="FILE")
    p.set_defaults(command="spark-matrix")
    return p


def run_matrix(args: argparse.Namespace) -> int:
    from backends import backend_class

    from experiments.plots import plot_spark_matrix as plot
    from experiments.spark_matrix import format_table, run_matrix as run_all, write_json
    from .runner import JobSpec, build_session
    from .spark_state import STATE_CONF

    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    try:
        bad = [p for p in protocols if p not in PROTOCOLS]
        if bad:
            raise CkptError(f"--protocols: {bad[0]!r} is not a protocol; valid: {', '.join(PROTOCOLS)}")
        for b in backends:
            backend_class(b)  # UnknownBackendError lists the valid names
        spec = JobSpec(kind=JOBS[args.job], events=args.events, keys=args.keys, skew=args.skew,
                       max_batch=args.batch, parallelism=args.parallelism, verify=True)
        spark = build_session(args.master, conf=STATE_CONF)
        spark.sparkContext.setLogLevel("ERROR")
        try:
            baseline = not args.no_spark_state and spec.kind != "q3"  # spark-state: keyed counts only
            rows = run_all(spark, protocols, backends, spec, args.fail_at, args.interval, baseline)
        finally:
            spark.stop()
    except CkptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_table(rows))
    write_json(rows, spec, args.fail_at, args.json)
    plot(rows, args.png)
    print(f"wrote {args.json} and {args.png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    add_matrix_parser(sub)
    args = parser.parse_args(argv)
    return run_matrix(args) if args.command == "spark-matrix" else run(args)


if __name__ == "__main__":
    sys.exit(main())
