"""``bench compare`` and ``bench sweep``: several runs, one table, one chart.

The loops are :mod:`experiments.core.compare`; this module parses, prints the table (and one stderr
line per backend or point as it finishes), and writes the JSON, CSV and chart.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from backends import parse_kv
from experiments.core import compare as experiment
from experiments.report import plots
from experiments.core import results
from experiments.report import tables
from experiments.core.compare import Outcome
from workloads.core import PRESETS

from .args import (
    add_html_arg,
    EXIT_RUNTIME,
    UsageError,
    add_cpus_arg,
    add_spec_args,
    client_settings,
    config,
    count,
    csv_list,
    named,
    place,
    positive_float,
    progress,
    workload_spec,
)
from .outputs import save


@named("rates")
def _targets(text: str) -> str | list[float]:
    """``--targets``: ``auto`` or target rates, each > 0 (checked before any point runs)."""
    return "auto" if text.strip() == "auto" else csv_list(positive_float)(text)


def add_parsers(sub: Any) -> None:
    for name, helptext in (
        ("compare", "run one workload on several backends with identical settings"),
        ("sweep", "raise the target rate (or threads) per backend until throughput stops growing"),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext + ".  Backends that cannot "
                           "open are reported as skipped with the reason.")
        p.add_argument("workload", choices=list(PRESETS), metavar="WORKLOAD",
                       help=", ".join(PRESETS))
        p.add_argument("--backends", type=csv_list(str), required=True, metavar="A,B,...")
        p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                       help="option given to every backend that has it")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--json", metavar="FILE", help="write the results here")
        add_html_arg(p)
        p.add_argument("--csv", metavar="FILE", help="also write per-operation results as CSV")
        p.add_argument("--plot", metavar="FILE.png",
                       help="also draw a chart into FILE.png")
        p.add_argument("--no-progress", action="store_true",
                       help="no progress bars on stderr (there are none when it is not a TTY)")
        add_spec_args(p, None)
        add_cpus_arg(p)
        if name == "compare":
            p.add_argument("--target", type=positive_float, metavar="OPS")
            p.add_argument("--no-warmup", dest="warmup", action="store_false",
                           help="measure from the first run (default: every backend runs once "
                                "first, a tenth of the records and operations, unmeasured)")
            p.add_argument("--rounds", type=int, default=1, metavar="N",
                           help="run every backend N times, interleaved, and print each "
                                "backend's median run and the median of each round's ratios "
                                "to the first backend (a noisy machine's answer)")
            p.set_defaults(func=cmd_compare)
        else:
            p.add_argument("--targets", type=_targets, default="auto", metavar="R1,R2,...|auto",
                           help="target rates to try (default auto: 100, 200, 400, ...)")
            p.add_argument("--threads-sweep", type=csv_list(count), metavar="1,2,4,...",
                           help="sweep the thread count instead of the target rate")
            p.add_argument("--point-seconds", type=positive_float, default=3.0,
                           help="length of each point (default 3 s)")
            p.add_argument("--rounds", type=int, default=1, metavar="N",
                           help="run the whole sweep N times, backends interleaved, and print "
                                "the median of each round's ratios (a noisy machine's answer)")
            p.set_defaults(func=cmd_sweep)


def _settings(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The workload and the options shared by every backend, checked before any runs."""
    if args.threads < 1:
        raise UsageError(f"--threads must be >= 1 (got {args.threads})")
    spec = workload_spec(args)
    options: dict[str, Any] = dict(parse_kv(args.opt))
    experiment.check_options(args.backends, options)
    return spec, options


def _said(what: str, outcome: Outcome) -> None:
    print(f"bench: {what}: {outcome.backend}"
          + (f" {outcome.params}" if outcome.params else "") + ": "
          + (f"skipped: {outcome.skipped}" if outcome.skipped
             else f"{outcome.run.throughput:.1f} ops/s"), file=sys.stderr)


def _finish(args: argparse.Namespace, kind: str, doc: results.Compare | results.Sweep,
            table: list[str]) -> int:
    print("\n".join(table))
    save(args, doc)
    if args.csv:
        results.write_csv(args.csv, doc)
    if args.plot:  # nothing is written where the user did not ask
        (plots.plot_compare if kind == "compare" else plots.plot_sweep)(doc, args.plot)
        print(f"plot: {args.plot}", file=sys.stderr)
    skipped = sorted({e.backend for e in doc.results if e.skipped})
    if skipped:  # a comparison missing a store it was asked for is not the one asked for
        print(f"bench: {kind}: {', '.join(skipped)} skipped (see the table); start "
              f"{'it' if len(skipped) == 1 else 'them'} or leave {'it' if len(skipped) == 1 else 'them'}"
              f" out of --backends", file=sys.stderr)
        return EXIT_RUNTIME
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    spec, options = _settings(args)
    if args.rounds < 1:
        raise UsageError("--rounds must be >= 1")
    place(args, args.backends, options)
    doc = experiment.compare(
        args.backends, options, spec, client_settings(args), config=config(args, options),
        rounds=args.rounds, warmup=args.warmup, progress=progress(args),
        on_result=lambda r, o: _said("compare" + (f" round {r + 1}" if args.rounds > 1 else ""), o))
    return _finish(args, "compare", doc,
                   tables.compare_table(doc) + tables.ratio_lines(doc.ratios or []))


def cmd_sweep(args: argparse.Namespace) -> int:
    spec, options = _settings(args)
    if args.rounds < 1:
        raise UsageError("--rounds must be >= 1")
    place(args, args.backends, options)
    targets = None if args.targets == "auto" or args.threads_sweep else args.targets
    doc = experiment.sweep(
        args.backends, options, spec, config=config(args, options), targets=targets,
        threads_list=args.threads_sweep, point_seconds=args.point_seconds, rounds=args.rounds,
        clients=client_settings(args), progress=progress(args),
        on_point=lambda r, o: _said("sweep" + (f" round {r}" if args.rounds > 1 else ""), o))
    return _finish(args, "sweep", doc, tables.sweep_table(doc) + tables.ratio_lines(doc.ratios or []))
