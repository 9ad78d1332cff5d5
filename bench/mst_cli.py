"""``bench mst``: parse, check against the protocol registry, search, print ``[MST]`` lines.

The search and its stop criterion are :mod:`experiments.spark.mst`'s; this module only parses,
checks the names before Spark starts, calls and prints.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

from backends.base import CkptError
from spark_integration.protocols.registry import protocol_names, registration

from .args import EXIT_RUNTIME, PROG, UsageError, add_html_arg, at_least
from .outputs import save
from .spark_cli import COUNT, JOBS, jobs_covered

DEFAULT_JSON = "results/mst.json"


def _description() -> str:
    from experiments.spark.mst import FULL, QUICK, Criterion

    c = Criterion()
    text = f"""\
Find a protocol's maximum sustainable throughput (CheckMate's MST) on a job and a backend: run the
job paced at a rate (a probe), double the rate while probes keep up (halve it while they do not),
then bisect between the highest sustainable and the lowest unsustainable rate.  A probe is
unsustainable when, over its window (its input after the warm-up seconds), the backlog after each
micro-batch commit grows faster than {c.growth:.0%} of the rate per second, or the per-second p99
latency grows faster than {c.growth * 1e3:.0f} ms per second (least-squares slopes), by more than
{c.min_lag_s:g} s of input or of latency over the window, or fewer than
{c.min_commits} micro-batches commit in the window, or the probe does not finish within
{FULL.timeout_factor:g}x its input's duration.

Sizes: by default each probe is {FULL.probe_seconds:g} s of input ({FULL.warmup_seconds:g} s warm-up,
a {FULL.window_seconds:g} s window), the bracket is narrowed to {FULL.precision:.0%}, at most
{FULL.max_probes} probes (several minutes); --quick: {QUICK.probe_seconds:g} s probes ({QUICK.window_seconds:g} s
window), {QUICK.precision:.0%}, at most {QUICK.max_probes} probes (a smoke run, a few minutes).
Prints one [MST], Probe line per probe and the rate found; every probe goes to the JSON.  A probe
whose Spark job fails (not a verdict: e.g. a Python worker that did not start) is tried once more;
failing again, it ends the search with what it found, and the command exits 1.
"""
    return "\n\n".join(textwrap.fill(" ".join(par.split()), 100) for par in text.split("\n\n")) + "\n"


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("mst", help="search a protocol's maximum sustainable throughput on a Spark job",
                       description=_description(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--job", choices=sorted(JOBS), default="nexmark-q12")
    p.add_argument("--protocol", choices=protocol_names(baseline=False), default="coordinated")
    p.add_argument("--backend", help="registered backend name (required unless the protocol uses none)")
    p.add_argument("--parallelism", type=COUNT, default=2, help="instances of the keyed stage")
    p.add_argument("--interval", type=COUNT, default=1, help="micro-batches per checkpoint")
    p.add_argument("--quick", action="store_true", help="short probes: a smoke run (see above)")
    p.add_argument("--probe-seconds", type=at_least(4), metavar="S",
                   help="input per probe in seconds (default: 20, --quick 10); a quarter is warm-up")
    p.add_argument("--max-probes", type=COUNT, metavar="N", help="probes at most (default 10, --quick 7)")
    p.add_argument("--start-rate", type=COUNT, metavar="EVENTS_PER_S", help="the first probe's rate (default 1000)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--json", default=DEFAULT_JSON, metavar="FILE",
                   help=f"every probe (default {DEFAULT_JSON}; its report page goes beside it as .html)")
    add_html_arg(p)
    p.set_defaults(func=run, command="mst")


def check(args: argparse.Namespace) -> None:
    """What the registry rules out, said before Spark starts."""
    reg = registration(args.protocol)
    if args.job not in jobs_covered(reg.name):
        raise UsageError(f"--protocol {reg.name} covers the jobs {', '.join(jobs_covered(reg.name))}, not {args.job}")
    if reg.uses_backend and not args.backend:
        raise UsageError(f"--protocol {reg.name} checkpoints to a backend: give --backend, e.g. --backend indexed_fs")
    if not reg.uses_backend and args.backend:
        raise UsageError(f"--protocol {reg.name} takes no checkpoints: drop --backend")


def sizes_of(args: argparse.Namespace) -> Any:
    """The search's sizes: --quick's or the default, with the options given over them."""
    from dataclasses import replace

    from experiments.spark.mst import FULL, QUICK

    sizes = QUICK if args.quick else FULL
    if args.probe_seconds:
        sizes = replace(sizes, probe_seconds=float(args.probe_seconds), warmup_seconds=args.probe_seconds / 4)
    if args.max_probes:
        sizes = replace(sizes, max_probes=args.max_probes)
    if args.start_rate:
        sizes = replace(sizes, start_rate=float(args.start_rate))
    return sizes


def run(args: argparse.Namespace) -> int:
    from experiments.spark import mst

    check(args)  # usage errors: one line and exit 2 (bench.cli)
    if args.backend:
        from backends import backend_class
        backend_class(args.backend)  # an unknown name is one line, before Spark starts
    say = lambda text: print(text, flush=True)  # noqa: E731
    try:
        doc = mst.run(args.job, JOBS[args.job], args.protocol, args.backend, quick=args.quick,
                      parallelism=args.parallelism, interval=args.interval, master=args.master,
                      sizes=sizes_of(args), say=say)
    except CkptError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    save(args, doc, page_beside=True)
    for line in mst.summary_lines(doc):
        print(line)
    print(f"[MST], Json, {args.json}")
    return EXIT_RUNTIME if any(p.verdict == mst.FAILED for p in doc.probes) else 0
