"""``bench storage-compare``: Table 5.1, write-heavy, recovery and NFS RPC cost over several media.

The logic lives in :mod:`workloads.storage_compare`; this module only parses arguments, prints the
table and writes the JSON/PNG.  The lead wires :func:`add_parser` / :func:`run` into bench/cli.py.
"""

from __future__ import annotations

import argparse
import sys

DEFAULT_PLOT = "results/storage-compare.png"


def _positive(text: str) -> int:
    try:
        value = int(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. 10000 or 1e4)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "storage-compare",
        help="the same workloads over local disk, tmpfs and NFS: Table 5.1, write-heavy, "
             "recovery, RPCs per op",
        description="Runs the thesis' Table 5.1 (10-byte sequential vs random writes, with and "
                    "without sync), write-heavy on default_fs and indexed_fs (1 and 16 threads), "
                    "indexed_fs recovery after a clean close and after a crash, and the NFS RPC "
                    "count per durable append / file-per-key write, over each medium.  Default "
                    "media: a temp dir under the working directory (local), one under /dev/shm "
                    "(tmpfs) and the server of `bench services up nfs` (nfs); a medium that is "
                    "not available is reported as skipped.  A kernel NFS mount is local:/mnt/DIR.")
    p.add_argument("--media", metavar="KIND[:LOC],...",
                   help="comma-separated local[:DIR], tmpfs[:DIR], nfs[:nfs://HOST/EXPORT/DIR?"
                        "version=3|4.1] (default: local,tmpfs,nfs)")
    p.add_argument("--ops", type=_positive, default=10_000,
                   help="write-heavy operations per run (default 10000, the thesis' count)")
    p.add_argument("--sync-ops", type=_positive, default=10_000,
                   help="cap for Table 5.1 runs paying one durable write per op (synced ops; "
                        "random writes over NFS) (default 10000)")
    p.add_argument("--sizes", help="Table 5.1 op counts, comma-separated (default 1e5,1e6; "
                                   "--big adds 1e7,1e8)")
    p.add_argument("--big", action="store_true", help="also 10^7 and 10^8 ops in Table 5.1")
    p.add_argument("--threads", default="1,16", help="write-heavy client threads (default 1,16)")
    p.add_argument("--seconds", type=float, default=20.0,
                   help="upper bound per write-heavy run in seconds (default 20)")
    p.add_argument("--recovery-keys", type=_positive, default=100_000,
                   help="keys loaded for the recovery rows (default 100000)")
    p.add_argument("--rpc-ops", type=_positive, default=200,
                   help="operations per RPC-count row (default 200)")
    p.add_argument("--json", metavar="F", help="write every row with its configuration to F")
    p.add_argument("--plot", metavar="F.png", default=DEFAULT_PLOT,
                   help=f"PNG chart (default {DEFAULT_PLOT})")
    p.set_defaults(func=run)
    return p


def _ints(text: str, flag: str) -> list[int]:
    from backends.base import BadOptionError

    try:
        values = [int(float(x)) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadOptionError(f"{flag} {text!r}: give comma-separated numbers, e.g. 1e5,1e6") from None
    if not values or min(values) < 1:
        raise BadOptionError(f"{flag} {text!r}: give comma-separated positive numbers")
    return values


def run(args: argparse.Namespace) -> int:
    from backends.base import CkptError
    from experiments import results, tables
    from experiments import storage_compare as sc

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    try:
        sizes = _ints(args.sizes, "--sizes") if args.sizes else None
        if sizes and args.big:
            sizes += sc.BIG_SIZES
        threads = _ints(args.threads, "--threads")
        media = sc.parse_media(args.media)
    except (CkptError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for m in media:
        if m.skipped:
            say(f"storage-compare: {m.name} skipped: {m.skipped}")
    doc = sc.run(media, ops=args.ops, sync_ops=args.sync_ops, big=args.big, sizes=sizes,
                 threads_list=threads, wh_seconds=args.seconds,
                 recovery_keys=args.recovery_keys, rpc_ops=args.rpc_ops, say=say)
    print("\n".join(sc.table_lines(doc)))
    if args.json:
        results.ensure_parent(args.json)
        results.write_json(args.json, doc)
        say(f"storage-compare: wrote {args.json}")
    if args.plot:
        sc.plot(doc, args.plot)
        say(f"storage-compare: wrote {args.plot}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench")
    add_parser(parser.add_subparsers(dest="cmd", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
