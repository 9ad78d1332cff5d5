"""``bench thesis``, ``bench peer``, ``bench storage-compare`` and ``bench reproduce``: parse, call
:mod:`experiments`, print."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from backends import open_backend, parse_kv
from experiments.core import results

from . import report
from .args import UsageError, add_html_arg, named
from .outputs import save


def add_parsers(sub: Any) -> None:
    _add_thesis_parser(sub)
    _add_peer_parser(sub)
    _add_storage_compare_parser(sub)
    _add_reproduce_parser(sub)


def _add_peer_parser(sub: Any) -> None:
    p = sub.add_parser(
        "peer", help="our backend beside the server's own load tool (redis-benchmark) or beside "
                     "what YCSB's Redis binding does",
        description="Against redis-benchmark (default): runs redis-benchmark -t set, then "
                    "--clients processes putting through the redis backend, then redis-benchmark "
                    "again: same server, value size, connections and pipeline depth (put_many of "
                    "--pipeline keys).  The ratio uses the mean of the two redis-benchmark runs.  "
                    "Keys are left on the server under the backend's prefix (default "
                    "ckptbench-peer:).  "
                    "Against ycsb-binding: loads --records of YCSB's record model once, then per "
                    "--threads count runs bench run's --workload (--ops operations) and a plain "
                    "redis-py client doing what YCSB's Redis binding does (HGETALL per read, "
                    "HMSET of the changed field per update, one connection per thread), same keys "
                    "and mix from the same seed: --warmup pairs first, then the binding, and "
                    "--rounds times ours and the binding again; each fresh process, same "
                    "placement.  The records live under the backend's prefix (default "
                    "ckptbench-peer-ycsb:), replaced at the start and removed at the end.")
    p.add_argument("server", choices=["redis"])
    p.add_argument("--against", choices=["redis-benchmark", "ycsb-binding"],
                   default="redis-benchmark",
                   help="the peer: the server's load tool (default), or a plain client doing "
                        "what YCSB's Redis binding does")
    p.add_argument("--clients", type=int, default=1, help="connections / client processes (default 1)")
    p.add_argument("--pipeline", type=int, default=1, help="requests per round trip (default 1)")
    p.add_argument("--ops", type=int,
                   help="operations per run (default 20000; 100000 against ycsb-binding)")
    p.add_argument("--value-size", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=1,
                   help="alternate (ours, the peer) this many times after the peer's first run; "
                        "the ratio is the median round's (default 1)")
    p.add_argument("--workload", default="workloada", metavar="NAME",
                   help="ycsb-binding: the shipped workload file bench run runs (default "
                        "workloada)")
    p.add_argument("--records", type=int, default=10_000,
                   help="ycsb-binding: records loaded (recordcount; default 10000)")
    p.add_argument("--threads", default="1,8", metavar="N[,N...]",
                   help="ycsb-binding: client threads of each comparison (default 1,8)")
    p.add_argument("--warmup", type=int, default=1,
                   help="ycsb-binding: (binding, ours) pairs run first and not counted (default 1)")
    p.add_argument("--placement", choices=["cross", "same", "any"], default="cross",
                   help="CPUs of a local server and of both clients: cross (default: server on one "
                        "CPU, clients on the others), same (all on one), any (the scheduler's "
                        "choice: single-connection figures then vary between runs)")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="redis backend option (host, port, password, prefix, ...)")
    p.add_argument("--json", metavar="FILE")
    add_html_arg(p)
    p.set_defaults(func=cmd_peer)


def cmd_peer(args: argparse.Namespace) -> int:
    from experiments.storage import peers as peer

    if args.against == "ycsb-binding":
        return _peer_binding(args)
    args.ops = 20_000 if args.ops is None else args.ops
    if min(args.clients, args.pipeline, args.ops, args.rounds) < 1:
        raise UsageError("--clients, --pipeline, --ops and --rounds must be >= 1")
    options: dict[str, Any] = {"prefix": "ckptbench-peer:", **parse_kv(args.opt)}
    open_backend("redis", **options).close()  # a clear error before any run if the server is not there
    res = peer.compare_redis(options, clients=args.clients, pipeline=args.pipeline,
                             ops=args.ops, value_size=args.value_size, place=args.placement,
                             rounds=args.rounds)
    lines = [f"[PEER], Clients, {res.clients}", f"[PEER], Pipeline, {res.pipeline}",
             f"[PEER], Placement, {res.placement}",
             f"[PEER], redis-benchmark Throughput(ops/sec), {res.peer_throughput[0]!r}"]
    for i, (ours, ratio) in enumerate(zip(res.ours_rounds, res.ratios)):
        tag = "" if len(res.ours_rounds) == 1 else f" round {i + 1}"
        lines += [f"[PEER], ckptbench{tag} Throughput(ops/sec), {ours!r}",
                  f"[PEER], redis-benchmark-again{tag} Throughput(ops/sec), "
                  f"{res.peer_throughput[i + 1]!r}"]
        if tag:
            lines.append(f"[PEER], Ratio{tag}, {ratio!r}")
    lines.append(f"[PEER], Ratio, {res.ratio!r}")
    report.print_lines(lines)
    save(args, res.document(args.server))
    return 0


def _peer_binding(args: argparse.Namespace) -> int:
    """``bench peer redis --against ycsb-binding``: run, print ``[PEER]`` and ``[RATIO]`` lines."""
    from experiments.core.results import Ratio
    from experiments.report.tables import ratio_lines
    from experiments.storage import binding_peer

    ops = 100_000 if args.ops is None else args.ops
    threads = _ints(args.threads, "--threads")
    if min(ops, args.records, args.rounds) < 1 or args.warmup < 0:
        raise UsageError("--ops, --records and --rounds must be >= 1, --warmup >= 0")
    options: dict[str, Any] = {"prefix": binding_peer.PREFIX, **parse_kv(args.opt)}
    open_backend("redis", **options).close()  # a clear error before any run if the server is not there
    doc = binding_peer.compare(options, workload=args.workload, records=args.records, ops=ops,
                               threads=tuple(threads), rounds=args.rounds, warmup=args.warmup,
                               place=args.placement)
    lines = [f"[PEER], Against, {doc.against}",
             f"[PEER], Workload, {doc.workload} ({doc.records} records of {doc.field_count} "
             f"fields x {doc.field_length} bytes; {doc.ops} operations; {doc.distribution}; "
             f"read {doc.read_proportion:g} update {doc.update_proportion:g})",
             f"[PEER], Placement, {doc.placement}", f"[PEER], Warm-up pairs, {doc.warmup}"]
    ratios = []
    for entry in doc.by_threads:
        n = entry.threads
        lines.append(f"[PEER], Threads {n} binding Throughput(ops/sec), "
                     + " ".join(f"{v:.1f}" for v in entry.binding_throughput))
        lines.append(f"[PEER], Threads {n} ckptbench Throughput(ops/sec), "
                     + " ".join(f"{v:.1f}" for v in entry.ours_throughput))
        lines.append(f"[PEER], Threads {n} binding ClientCPU(us/op), "
                     + " ".join(f"{v:.1f}" for v in entry.binding_cpu_us))
        lines.append(f"[PEER], Threads {n} ckptbench ClientCPU(us/op), "
                     + " ".join(f"{v:.1f}" for v in entry.ours_cpu_us))
        ratios.append(Ratio(f"ckptbench / binding, {n} thread{'s' * (n != 1)}", entry.ratio,
                            entry.round_ratios))
    report.print_lines(lines + ratio_lines(ratios))
    save(args, doc)
    return 0


def _add_thesis_parser(sub: Any) -> None:
    from experiments.storage import thesis

    p = sub.add_parser("thesis", help="reproduce one of the S4 thesis' experiments",
                       description="Run one thesis experiment; writes results/<name>.json and "
                                   ".png and prints the thesis' figure beside ours.  table5.2 "
                                   "is built from the other experiments' JSON.")
    p.add_argument("experiment", choices=list(thesis.EXPERIMENTS))
    p.add_argument("--quick", action="store_true", help="smaller sizes (minutes, not tens)")
    p.add_argument("--out", default="results", metavar="DIR", help="output directory")
    p.set_defaults(func=lambda args: (thesis.run(args.experiment, args.out, args.quick), 0)[1])


DEFAULT_PLOT = "results/storage-compare.png"


@named("count >= 1")
def _positive(text: str) -> int:
    try:
        value = int(float(text))
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (e.g. 10000 or 1e4)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _add_storage_compare_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "storage-compare",
        help="the same workloads over local disk, tmpfs, NFS and HDFS: Table 5.1, write-heavy, "
             "recovery, RPCs per op",
        description="Runs the thesis' Table 5.1 (10-byte sequential vs random writes, with and "
                    "without sync), write-heavy on default_fs and indexed_fs (1 and 16 threads), "
                    "indexed_fs recovery after a clean close and after a crash, and the NFS RPC "
                    "count per durable append / file-per-key write, over each medium.  Default "
                    "media: a temp dir under the working directory (local), one under /dev/shm "
                    "(tmpfs), the server of `bench services up nfs` (nfs) and the HDFS of "
                    "`bench services up hdfs` (hdfs); a medium that is not available is "
                    "reported as skipped.  A kernel NFS mount is local:/mnt/DIR.  Beside the "
                    "chart, one Fig 4.1 chart per medium (write-heavy latency against "
                    "throughput over --threads).")
    p.add_argument("--media", metavar="KIND[:LOC],...",
                   help="comma-separated local[:DIR], tmpfs[:DIR], nfs[:nfs://HOST/EXPORT/DIR?"
                        "version=3|4.1], hdfs[:hdfs://HOST:PORT/DIR] (default: "
                        "local,tmpfs,nfs,hdfs)")
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
    add_html_arg(p)
    p.add_argument("--plot", metavar="F.png", default=DEFAULT_PLOT,
                   help=f"PNG chart (default {DEFAULT_PLOT})")
    p.set_defaults(func=cmd_storage_compare)
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


def cmd_storage_compare(args: argparse.Namespace) -> int:
    from backends.base import CkptError
    from experiments.report import plots
    from experiments.core import media as storage_media
    from experiments.storage import compare as sc
    from experiments.storage.compare_table import table_lines

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    try:
        sizes = _ints(args.sizes, "--sizes") if args.sizes else None
        if sizes and args.big:
            sizes += sc.BIG_SIZES
        threads = _ints(args.threads, "--threads")
        media = storage_media.parse_media(args.media)
    except (CkptError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for m in media:
        if m.skipped:
            say(f"storage-compare: {m.name} skipped: {m.skipped}")
    doc = sc.run(media, ops=args.ops, sync_ops=args.sync_ops, big=args.big, sizes=sizes,
                 threads_list=threads, wh_seconds=args.seconds,
                 recovery_keys=args.recovery_keys, rpc_ops=args.rpc_ops, say=say)
    print("\n".join(table_lines(doc)))
    if args.json:
        results.ensure_parent(args.json)
        say(f"storage-compare: wrote {args.json}")
    save(args, doc)
    if args.plot:
        plots.plot_storage_compare(doc, args.plot)
        say(f"storage-compare: wrote {args.plot}")
        for path in sc.plot_fig41(doc, args.plot):
            say(f"storage-compare: wrote {path}")
    return 0


def _add_reproduce_parser(sub: Any) -> None:
    p = sub.add_parser(
        "reproduce", help="run named experiments and regenerate their tables in the docs",
        description="Runs each named experiment's bench commands (as subprocesses, with their "
                    "output in --out), writes OUT/NAME.json, regenerates the NAME block of "
                    "--docs and the summary block of --readme.  An experiment whose server is "
                    "not running is skipped with one line; a failing command fails its "
                    "experiment, the others still run, and the exit status is 1; so is it "
                    "when a target is not met, unless --allow-missed.  Each experiment's "
                    "report page goes beside its JSON, OUT/NAME.html.")
    p.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (see --list)")
    p.add_argument("--all", action="store_true", help="every experiment, in --list order")
    p.add_argument("--list", action="store_true", help="print the experiment names and exit")
    p.add_argument("--quick", action="store_true", help="the small sizes (minutes, not hours)")
    p.add_argument("--allow-missed", action="store_true",
                   help="exit 0 even when a target of an experiment was not met (the tables "
                        "still say NOT met)")
    p.add_argument("--rerun", metavar="STEP[,STEP...]",
                   help="run only these steps of the one named experiment (its step labels: the "
                        "names of OUT/NAME/*.json) and take the others over from OUT/NAME.json of "
                        "an earlier run of the same commands; the docs' note says which ran when")
    p.add_argument("--out", default="results", metavar="DIR", help="results directory (default results)")
    p.add_argument("--docs", default="docs/results.md", metavar="FILE",
                   help="markdown with the experiments' blocks (default docs/results.md)")
    p.add_argument("--readme", default="README.md", metavar="FILE",
                   help="markdown with the summary block (default README.md)")
    p.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from experiments.reproduce import run as reproduce

    names = reproduce.names()
    if args.list:
        print("\n".join(names))
        return 0
    unknown = [n for n in args.names if n not in names]
    if unknown:
        raise UsageError(f"unknown experiment {unknown[0]!r}; valid: {', '.join(names)}")
    if args.all == bool(args.names):
        raise UsageError("give experiment names or --all (not both); --list shows the names")
    rerun = [label.strip() for label in (args.rerun or "").split(",") if label.strip()]
    if args.rerun is not None and (args.all or len(args.names) != 1 or not rerun):
        raise UsageError("--rerun STEP[,STEP...] takes the steps of one named experiment, e.g. "
                         "bench reproduce state --rerun redis-chunks")
    try:
        return reproduce.run(names if args.all else args.names, quick=args.quick, out=args.out,
                             docs=args.docs, readme=args.readme, allow_missed=args.allow_missed,
                             rerun=rerun or None)
    except reproduce.RerunError as exc:
        raise UsageError(str(exc)) from None
