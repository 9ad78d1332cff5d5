"""``bench throttle-curve``: checkpoint writes on MinIO against the request rate S3 would allow
per prefix, with and without ``prefix_entropy``.  The measurement is
:mod:`experiments.storage.throttle_curve`'s; this module parses, calls and prints."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from backends import backend_class, parse_kv

from .args import PROG, UsageError, csv_list, positive_float, positive_int

DEFAULT_RATES = "25,50,100,200,400"


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "throttle-curve", help="checkpoint writes on MinIO against the request rate allowed per "
                               "prefix (503 SlowDown above it), with and without prefix_entropy",
        description="write-heavy with only updates on the minio backend through its throttling "
                    "relay (--opt throttle_rps=R), each allowed rate on one prefix and on "
                    "--entropy prefixes, then the relay without a limit and the server directly: "
                    "updates/s, update latency, 503 SlowDown answers, retries and their backoff, "
                    "failed updates (docs/cost.md)")
    p.add_argument("--rates", type=csv_list(positive_float), default=DEFAULT_RATES,
                   metavar="R1,R2,...", help=f"requests a second allowed per prefix "
                                             f"(default {DEFAULT_RATES})")
    p.add_argument("--entropy", type=positive_int, default=8, metavar="N",
                   help="prefix_entropy of each rate's second run (default 8)")
    p.add_argument("--records", type=positive_int, default=200, help="keys (default 200)")
    p.add_argument("--ops", type=positive_int, default=2000, help="updates a point (default 2000)")
    p.add_argument("--threads", type=positive_int, default=8, help="client threads (default 8)")
    p.add_argument("--value-size", type=positive_int, default=1024, metavar="BYTES",
                   help="bytes a checkpoint (default 1024)")
    p.add_argument("--retries", type=positive_int, default=10, metavar="N",
                   help="attempts a request at most (the backend's retries; default 10)")
    p.add_argument("--retry-mode", choices=("standard", "adaptive"), default="standard",
                   help="botocore's retry mode (default standard)")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="a minio option (endpoint, bucket, prefix, credentials, ...)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", metavar="FILE", help="write the document here")
    p.add_argument("--plot", metavar="FILE.png", help="draw the curve here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.core.results import write_json
    from experiments.storage import throttle_curve as curve

    options = dict(parse_kv(args.opt))
    taken = sorted({"throttle_rps", "prefix_entropy", "retries", "retry_mode"} & set(options))
    if taken:
        raise UsageError(f"--opt {taken[0]}= is what throttle-curve varies or sets; give "
                         f"--rates, --entropy, --retries or --retry-mode instead")
    backend_class(curve.BACKEND).parse_options(options)  # one line before any point runs
    if args.entropy < 2:
        raise UsageError("--entropy must be at least 2 (1 is every rate's first run)")
    print(f"{PROG} throttle-curve: {2 * len(args.rates) + 2} points of {args.ops} updates "
          f"({args.threads} threads), botocore {args.retry_mode} retries, at most {args.retries} "
          f"attempts a request", file=sys.stderr)
    doc = curve.measure(options, args.rates, args.entropy, records=args.records,
                        operations=args.ops, threads=args.threads, value_size=args.value_size,
                        retries=args.retries, retry_mode=args.retry_mode, seed=args.seed,
                        say=lambda p: print(curve.point_line(p), file=sys.stderr, flush=True))
    for line in curve.table(doc):
        print(line)
    if args.json:
        write_json(args.json, doc)
    if args.plot:
        from experiments.report.plots import plot_throttle_curve

        plot_throttle_curve(doc, args.plot)
    skipped = [p for p in doc.points if p.skipped]
    if skipped:
        print(f"{PROG}: error: {len(skipped)} of {len(doc.points)} points were skipped; first: "
              f"{skipped[0].skipped}", file=sys.stderr)
        return 1
    return 0
