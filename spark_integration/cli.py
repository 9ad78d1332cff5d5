"""``bench spark``: run a keyed-count job on local Spark under a protocol and a backend.

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

JOBS = {"wordcount": "wordcount", "nexmark-bids": "bids"}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("spark", help="run a Spark streaming job checkpointing to a backend",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--job", choices=sorted(JOBS), default="wordcount")
    p.add_argument("--protocol", choices=PROTOCOLS, default="coordinated")
    p.add_argument("--backend", help="registered backend name (required unless --protocol none)")
    p.add_argument("--opt", action="append", default=[], metavar="K=V", help="backend option (repeatable)")
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--rate", type=float, default=0.0, help="events/s (0: as fast as possible)")
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--skew", type=float, default=1.0, help="zipfian exponent (0: uniform)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--parallelism", type=int, default=2, help="instances of the keyed stage")
    p.add_argument("--batch", type=int, default=250_000, help="max events per micro-batch")
    p.add_argument("--interval", type=int, default=1, help="micro-batches per checkpoint")
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
             "fullEvery": args.full_every, "failInstance": args.fail_instance}
    if args.fail_at:
        plain["failAt"] = ",".join(map(str, args.fail_at))
    return to_conf(plain, parse_kv(args.opt))


def run(args: argparse.Namespace) -> int:
    from .runner import JobSpec, as_json, build_session, print_metrics, run_job

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
