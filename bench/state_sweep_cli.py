"""``bench state-sweep``: parse, check every name and size, run the sweep, print, plot.

The sweep itself (which runs, how each is spelled, the caps) is
:mod:`experiments.spark.state_sweep`'s; the document, slopes and tables are
:mod:`experiments.spark.state_sweep_result`'s; this module only parses, calls and prints.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .args import EXIT_RUNTIME, PROG, UsageError, byte_size, csv_list, fraction_or_percent

DESCRIPTION = """\
How checkpoint time, recovery time and space grow with the state: bench spark word-count runs
under coordinated, every key holding --state-bytes, one failure per run restored from a cold
cache, exactly-once verified.  Sweeps the live state (16 MiB to 4 GiB, x4 apart; --quick: 4 to
64 MiB on three stores) and, at one size, the share of the keys an interval dirties (0.1 % to
100 %, through --skew load+hot:1:N).  Prints every point, the log-log slope of each metric per
store x layout and where a curve bends; writes the JSON and a log-log plot (the dirty sweep
beside it as -dirty.png).  The full sweep takes about 90 minutes.
"""
DEFAULT_JSON = "results/state-sweep.json"
DEFAULT_PLOT = "results/state-sweep.png"


def add_parsers(sub: Any) -> None:
    add_parser(sub).set_defaults(func=run)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    from experiments.spark import state_sweep as sweep

    p = subparsers.add_parser("state-sweep", help="how checkpoint, recovery and space grow with the state",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"{', '.join(sweep.QUICK_STORES)} (chunks) at small sizes: a few minutes")
    p.add_argument("--stores", metavar="LIST",
                   help="comma-separated backends, or spark-state for Spark's own state store (default: "
                        + ", ".join(sweep.STORES) + "; --quick: " + ", ".join(sweep.QUICK_STORES) + ")")
    p.add_argument("--layouts", metavar="LIST",
                   help="comma-separated layouts every store runs (default: every layout on "
                        "indexed_fs, chunks on the others)")
    p.add_argument("--sizes", type=csv_list(byte_size), metavar="LIST",
                   help="live state sizes, e.g. 16MiB,64MiB,256MiB (default: 16MiB to 4GiB x4; "
                        "--quick: 4MiB,16MiB,64MiB)")
    p.add_argument("--dirty", metavar="LIST",
                   help="shares of the keys an interval may dirty, e.g. 0.1%%,1%%,10%%,100%% "
                        "(default: those; --quick: 1%%,10%%,100%%); 'none' skips the dirty sweep")
    p.add_argument("--dirty-size", type=byte_size, metavar="SIZE",
                   help="the live state of the dirty sweep (default 64MiB; --quick: 16MiB)")
    p.add_argument("--state-bytes", type=byte_size, default=sweep.STATE_BYTES, metavar="BYTES",
                   help=f"state per key beside its count (default {sweep.STATE_BYTES})")
    p.add_argument("--resume", action="store_true",
                   help="take over the points of the sweep already in --json whose command is the "
                        "same and that succeeded; run the others (the tables say which)")
    p.add_argument("--json", default=DEFAULT_JSON, metavar="FILE",
                   help=f"(default {DEFAULT_JSON}; each run's own JSON and output go in a "
                        f"directory beside it)")
    p.add_argument("--plot", default=DEFAULT_PLOT, metavar="FILE", help=f"(default {DEFAULT_PLOT})")
    p.set_defaults(command="state-sweep")
    return p


def names(text: str | None) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] if text else None


def check(args: argparse.Namespace) -> Any:
    """The plan the options ask for, every name and size checked before anything runs."""
    from backends import backend_class
    from spark_integration.layouts.registry import layout_names

    from experiments.spark import state_sweep as sweep

    if args.json == "-":
        raise UsageError("--json -: the sweep rewrites its JSON after every run and keeps each run's "
                         "own beside it; give a file, e.g. --json results/state-sweep.json")
    stores, layouts = names(args.stores), names(args.layouts)
    for store in stores or ():
        if store == sweep.SPARK_STATE:
            continue
        backend_class(store)  # UnknownBackendError lists the valid names
        if store == "memory":
            raise UsageError("--stores memory: the memory store keeps nothing across the injected "
                             "failure; give a store that persists, e.g. indexed_fs")
    bad = [x for x in layouts or () if x not in layout_names()]
    if bad:
        raise UsageError(f"--layouts: {bad[0]!r} is not a layout; valid: {', '.join(layout_names())}")
    if args.stores is not None and not stores or args.layouts is not None and not layouts:
        raise UsageError("--stores and --layouts need at least one name, e.g. --stores indexed_fs")
    if args.state_bytes < 8:
        raise UsageError(f"--state-bytes {args.state_bytes}: a key holds at least 8 bytes of state")
    dirty = None
    if args.dirty is not None:
        dirty = [] if args.dirty.strip().lower() == "none" else _fractions(args.dirty)
    p = sweep.plan(args.quick, stores, layouts, args.sizes, dirty, args.dirty_size, args.state_bytes)
    for size in [*p.sizes, *([p.dirty_size] if p.dirty else [])]:
        if p.keys(size) < sweep.MIN_KEYS:
            raise UsageError(f"a state of {size} bytes holds {p.keys(size)} keys of --state-bytes "
                             f"{p.state_bytes}; give sizes of at least {sweep.MIN_KEYS * p.state_bytes} bytes")
    if len(set(p.sizes)) < 2 and not p.dirty:
        raise UsageError("--sizes: give at least two sizes (a slope needs two points), e.g. 16MiB,64MiB")
    return p


def _fractions(text: str) -> list[float]:
    try:
        return csv_list(fraction_or_percent)(text)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"--dirty: {exc}; give shares such as 0.1%,1%,100% or 'none'") from None


def run(args: argparse.Namespace) -> int:
    from experiments.report.plots import plot_state_sweep
    from experiments.spark import state_sweep as sweep
    from experiments.spark.state_sweep_result import text_report

    p = check(args)
    todo = len(p.points())
    print(f"{PROG} state-sweep: {todo} runs over {len(p.lines)} store x layout lines; each run's "
          f"JSON and output in {sweep.points_directory(args.json)}/", file=sys.stderr, flush=True)
    try:
        doc = sweep.run(p, args.json, echo=lambda line: print(line, file=sys.stderr, flush=True),
                        resume=args.resume)
    except sweep.ResumeError as exc:
        raise UsageError(str(exc)) from None
    for line in text_report(doc):
        print(line)
    drawn = plot_state_sweep(doc, args.plot)
    print(f"wrote {args.json} and {', '.join(drawn)}")
    failed = [pt for pt in doc.points if not pt.ok]
    if failed:  # each a row of its own, as a run of the matrix that could not run is
        print(f"{PROG}: {len(failed)} of {len(doc.points)} runs failed: their rows above say how; "
              f"their output is in {sweep.points_directory(args.json)}/", file=sys.stderr)
    if len(failed) == len(doc.points):
        print(f"{PROG}: error: no run of the sweep succeeded", file=sys.stderr)
        return EXIT_RUNTIME
    return 0
