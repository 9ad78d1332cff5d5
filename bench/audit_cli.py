"""``bench audit power-loss|sigkill``: cut the power (or SIGKILL) under a writing store and count
acknowledged writes lost or wrong; the mechanism is :mod:`experiments.audit.runner`.

Prints ``[AUDIT], Rounds|Acknowledged|Lost|Wrong|Claim, ...`` (and Kind, Backend, Durability,
HazardPoints, Verdict), one ``[AUDIT-FAILURE]`` line per failure (first 20), ``[NOTE]`` lines;
``--json`` writes the whole result.  Exit status 1 when a mode that claims durability lost or
garbled an acknowledged write (unless ``--allow-loss``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from backends import backend_names, parse_kv
from experiments.audit import runner as audit
from experiments.audit.spec import FS_MODELS, KINDS, SERVER_MEDIA, AuditSpec

from . import report
from .args import EXIT_RUNTIME, add_html_arg
from .outputs import save


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "audit", help="durability audit: power cuts (lossy FUSE file system) or SIGKILLs",
        description="Writers put and delete keys; the power is cut (power-loss: the store's "
                    "data is on a lossy FUSE file system that drops everything not fsynced) or "
                    "the processes are SIGKILLed (sigkill) at random instants and at the "
                    "store's named hazard points; every acknowledged write is checked after "
                    "each cut.  Redis, MinIO and HBase run as private servers (own ports, data "
                    "on the lossy file system).")
    p.add_argument("kind", choices=KINDS, help="power-loss or sigkill")
    p.add_argument("--backend", required=True, metavar="NAME",
                   help=f"the store audited: {', '.join(backend_names())} (all but memory)")
    p.add_argument("--rounds", type=int, default=20, help="cuts (default 20)")
    p.add_argument("--threads", type=int, default=3, help="writer threads (default 3)")
    p.add_argument("--durability", metavar="MODE",
                   help="the mode audited, one of the backend's durability modes (redis: the "
                        "server's appendfsync, always|everysec|no); default: the mode that "
                        "claims durability, as the backend declares it")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="backend option (repeatable); path is the audit's own")
    p.add_argument("--fs-model", choices=FS_MODELS,
                   help="power-loss: posix (a directory's entries are durable once it is "
                        "fsynced) or journal (any fsync commits every earlier namespace change, "
                        "as ext4 and XFS do); default posix, journal for hbase on hdfs, which "
                        "fsyncs no directory where it matters")
    p.add_argument("--torn", action="store_true",
                   help="power-loss: each cut keeps a random prefix of the newest unsynced write")
    p.add_argument("--hbase-root", choices=SERVER_MEDIA,
                   help="hbase: where its root and WAL live: hdfs (a private HDFS, its "
                        "NameNode and DataNode directories on the audited file system too) or "
                        "local (Hadoop's LocalFileSystem); default hdfs for wal_hsync, local "
                        "otherwise")
    p.add_argument("--cut-after-sync", metavar="GLOB", default="",
                   help="power-loss: cut right after a random one of the next fsyncs of a file "
                        "whose path on the mount matches GLOB (fnmatch), not at a random "
                        "instant: a fail point inside a server (e.g. '*/rbw/*.meta', an HDFS "
                        "DataNode's checksum fsync)")
    p.add_argument("--seed", type=int, help="random seed (default: random, printed)")
    p.add_argument("--run-seconds", type=float,
                   help="a random cut comes within this many seconds of the writer's start "
                        "(default: the backend's, 0.6 for a file store, longer for a server)")
    p.add_argument("--allow-loss", action="store_true",
                   help="exit 0 even when a mode that claims durability lost writes (for "
                        "tables that report the loss)")
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON here")
    add_html_arg(p)
    p.set_defaults(func=cmd_audit)


def cmd_audit(args: argparse.Namespace) -> int:
    spec = AuditSpec.build(args.kind, args.backend, rounds=args.rounds, threads=args.threads,
                           durability=args.durability, options=parse_kv(args.opt),
                           seed=args.seed, run_seconds=args.run_seconds,
                           fs_model=args.fs_model, torn=args.torn, hbase_root=args.hbase_root,
                           cut_after_sync=args.cut_after_sync)

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            print(f"[audit] {msg}", file=sys.stderr, flush=True)

    res = audit.audit(spec, progress=progress)
    print(f"[audit] seed {res.seed}", file=sys.stderr)
    lines = res.lines()
    lines += [f"[AUDIT-FAILURE], {f}" for f in res.failures]
    lines += [f"[NOTE], {n}" for n in res.notes]
    report.print_lines(lines)
    save(args, res)
    return 0 if res.ok or args.allow_loss else EXIT_RUNTIME
