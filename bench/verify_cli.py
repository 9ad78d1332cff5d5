"""``bench verify``: check every record and snapshot of a store's directory, report the damage.

The checking is :mod:`backends.indexed_fs.verify` (read-only, under the store's lock); this module
parses, calls, prints ``[VERIFY]`` summary lines, one ``[DAMAGED]`` line per damaged range with
the keys it held, ``[SNAPSHOT-DAMAGED]`` per snapshot and ``[HINT-DAMAGED]`` per hint file that
fails its checks and ``[NOTE]`` for
findings that are no damage.  Exit status: 0 nothing damaged, 1 damage found, 2 the store could
not be checked (no store there, in use, unreadable, bad arguments).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from backends import parse_kv
from backends.base import CkptError
from experiments.storage.verify import Verify

from . import report
from .args import EXIT_RUNTIME, EXIT_USAGE, PROG, UsageError, add_html_arg
from .outputs import save

SUPPORTED = ("indexed_fs",)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "verify", help="check every record's CRC and every snapshot of a store; report damage",
        description="Read a store's directory without changing it: every record's CRC, every "
                    "index snapshot, and segments that snapshots point into but that are missing "
                    "or truncated.  Prints each damaged range with the keys whose latest value "
                    "it held; exit status 0: nothing damaged, 1: damage found, 2: the store could not be checked.")
    p.add_argument("--backend", required=True, metavar="NAME",
                   help=f"the store's backend: {', '.join(SUPPORTED)}")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="path=DIR: the store's data directory (required)")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON here")
    add_html_arg(p)
    p.set_defaults(func=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    if args.backend not in SUPPORTED:
        raise UsageError(f"bench verify checks {', '.join(SUPPORTED)} stores, not "
                         f"{args.backend!r}; give --backend indexed_fs")
    options = parse_kv(args.opt)
    unknown = sorted(set(options) - {"path"})
    if unknown:
        raise UsageError(f"bench verify takes only --opt path=DIR, not {', '.join(unknown)}")
    if not options.get("path"):
        raise UsageError("bench verify needs the store's directory: --opt path=DIR")
    from backends.indexed_fs import verify as checker  # the store's modules, only when used

    try:
        rep = checker.verify_path(options["path"])
    except (CkptError, OSError) as exc:  # cannot check: not the same answer as "damaged"
        print(f"{PROG}: error: cannot check {options['path']}: {str(exc).splitlines()[0]}",
              file=sys.stderr)
        return EXIT_USAGE
    lines = [f"[VERIFY], Segments, {rep.segments}",
             f"[VERIFY], Records, {rep.records}",
             f"[VERIFY], Snapshots, {rep.snapshots}",
             f"[VERIFY], DamagedRanges, {len(rep.damaged)}",
             f"[VERIFY], DamagedSnapshots, {len(rep.bad_snapshots)}",
             f"[VERIFY], Hints, {rep.hints}",
             f"[VERIFY], DamagedHints, {len(rep.bad_hints)}",
             f"[VERIFY], DamagedKeys, {len(rep.damaged_keys)}",
             f"[VERIFY], LostKeys, {len(rep.lost)}",
             f"[VERIFY], RolledBackKeys, {len(rep.rolled_back)}",
             f"[VERIFY], Result, {'ok' if rep.ok else 'DAMAGED'}"]
    lines += [f"[DAMAGED], {r.line()}" for r in rep.damaged]
    lines += [f"[SNAPSHOT-DAMAGED], {b}" for b in rep.bad_snapshots]
    lines += [f"[HINT-DAMAGED], {b}" for b in rep.bad_hints]
    lines += [f"[NOTE], {n}" for n in rep.notes]
    report.print_lines(lines)
    if args.json or args.html:
        save(args, Verify.of(args.backend, options["path"], rep))
    return 0 if rep.ok else EXIT_RUNTIME
