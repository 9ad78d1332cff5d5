"""``bench advise``: parse, read (or run) a spark matrix or read a state sweep, call the model, print.

The model — Young's and Daly's checkpoint interval, expected overhead and recovery time — is
:mod:`experiments.spark.advise`; the matrix it reads is ``bench spark-matrix``'s JSON (``--from``), or a
fresh quick matrix run here (indexed_fs, one injected failure so the restart cost is measured).  A
``bench state-sweep`` document, or ``bench reproduce state-sweep``'s holding its steps' sweeps
(``--from``, recognised by their schemas), is carried to the user's ``--state`` and ``--dirty``
first (:mod:`experiments.spark.advise_state`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .args import EXIT_USAGE, PROG, UsageError, add_html_arg, byte_size, fraction_or_percent
from .outputs import save

DESCRIPTION = """\
Advise a protocol, a backend and a checkpoint interval from a measured spark matrix: for each
protocol x backend, the interval minimising expected overhead (Young/Daly: T = sqrt(2 C MTBF), C
the measured checkpoint time), the overhead there, the expected recovery time and whether it meets
the recovery-time objective.  Prints a ranked table and [ADVISE] lines; writes JSON and a plot of
overhead against interval.  From a state sweep (bench state-sweep's JSON) with --state and
--dirty, each store x layout is first carried along its measured slopes to your state size and
dirty share; every row says how far it extrapolates, and rows beyond the stated limit (the
[ADVISE], MaxExtrapolation line) are shown but ranked only with --extrapolate.  The model and
its assumptions: docs/advise.md.
"""


def _typed(name: str, parse: Any) -> Any:
    """An argparse type whose error is the model's own one-line message (with the fix)."""

    def typed(text: str) -> Any:
        from experiments.spark.advise import AdviseError

        try:
            return parse(text)
        except AdviseError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    typed.__name__ = name
    return typed


def _duration(flag: str) -> Any:
    def parse(text: str) -> float:
        from experiments.spark.advise import parse_duration

        return parse_duration(text, flag)

    return _typed("duration", parse)


def _rate(text: str) -> float:
    from experiments.spark.advise import parse_rate

    return parse_rate(text, "--rate")


def add_parsers(sub: Any) -> None:
    add_parser(sub).set_defaults(func=run)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("advise", help="advise a protocol, backend and checkpoint interval from a matrix",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="source", metavar="MATRIX.json",
                   help="bench spark-matrix's JSON, or bench reproduce state's (results/state.json: every "
                        "store and layout at gigabytes of state), or bench state-sweep's or bench "
                        "reproduce state-sweep's (results/state-sweep.json; with --state and --dirty) "
                        "(default: run a quick matrix now)")
    p.add_argument("--state", type=byte_size, metavar="SIZE",
                   help="with a state sweep: your job's live state, e.g. 50GiB")
    p.add_argument("--dirty", type=fraction_or_percent, metavar="FRACTION",
                   help="with a state sweep: the share of the state one checkpoint interval changes, "
                        "e.g. 2%% or 0.02")
    p.add_argument("--extrapolate", action="store_true",
                   help="with a state sweep: rank the rows carried beyond the limit too "
                        "([ADVISE], MaxExtrapolation)")
    p.add_argument("--mtbf", type=_duration("--mtbf"), required=True,
                   help="mean time between failures: 30m, 1h, 2d, 1h30m")
    p.add_argument("--rate", type=_typed("rate", _rate),
                   help="your events/s (default: the matrix job's rate; unpaced: each row's throughput)")
    p.add_argument("--rto", type=_duration("--rto"),
                   help="recovery-time objective, e.g. 30s (default: none)")
    p.add_argument("--optimize", choices=("time", "cost"), default="time",
                   help="rank by expected overhead (time, the default) or by dollars a month at --rpo "
                        "(cost: the runs' measured requests and stored bytes at list prices)")
    p.add_argument("--rpo", type=_duration("--rpo"),
                   help="with --optimize cost: recovery-point objective, the longest interval allowed "
                        "between checkpoints, e.g. 1m")
    p.add_argument("--prices", metavar="FILE",
                   help="with --optimize cost: price table (default experiments/core/prices.toml; "
                        "docs/cost.md)")
    p.add_argument("--provider", metavar="NAME",
                   help="with --optimize cost: price every row at this provider of the table (default: "
                        "each row at the cheapest provider that prices its backend)")
    p.add_argument("--json", default="results/advise.json", metavar="FILE",
                   help="(default results/advise.json; its report page goes beside it as .html)")
    add_html_arg(p)
    p.add_argument("--plot", "--png", dest="plot", default="results/advise.png", metavar="FILE.png",
                   help="the chart, as every command names it (--png: the older spelling) "
                        "(default results/advise.png)")
    p.set_defaults(command="advise")
    return p


def read_json(path: str) -> Any:
    """The JSON document at ``path``; one line naming the problem otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise UsageError(f"--from {path}: no such file; run bench spark-matrix first (it writes "
                         f"results/spark-matrix.json) or bench state-sweep") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--from {path}: not a readable JSON file ({type(exc).__name__}); give "
                         f"bench spark-matrix's JSON") from None


def load_matrix(doc: Any, path: str) -> dict[str, Any]:
    """A saved matrix document (or a state experiment's runs read as one)."""
    from experiments.spark.advise import matrix_of_runs

    doc = matrix_of_runs(doc) or doc  # bench reproduce state's runs read as a matrix
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise UsageError(f"--from {path}: not a spark-matrix document (no rows); give bench spark-matrix's "
                         f"JSON or bench reproduce state's (results/state.json)")
    return doc


def load_sweeps(docs: list[dict[str, Any]], path: str, args: argparse.Namespace) -> list[Any]:
    """The state sweeps a saved document holds, with the --state and --dirty they need."""
    from experiments.core.document import DocumentError
    from experiments.spark.state_sweep_result import StateSweep

    if args.state is None or args.dirty is None:
        raise UsageError(f"--from {path} is a state sweep: give your job's --state (e.g. 50GiB) and "
                         f"--dirty (the share an interval changes, e.g. 2%)")
    try:
        return [StateSweep.from_json(doc) for doc in docs]
    except (DocumentError, TypeError, ValueError, KeyError, AttributeError) as exc:
        raise UsageError(f"--from {path}: not a readable state sweep ({exc}); give bench state-sweep's "
                         f"JSON as it wrote it") from None


def quick_matrix() -> dict[str, Any]:
    """A fresh quick matrix: every checkpointing protocol on indexed_fs, one failure injected
    (in its JSON form: advise reads a matrix as its file holds it)."""
    from experiments.spark import matrix as spark_matrix
    from spark_integration.job import JobSpec
    from spark_integration.protocols.registry import protocol_names

    spec = JobSpec(events=200_000, keys=2_000, max_batch=50_000, verify=True)
    print(f"{PROG}: no --from: running a quick spark matrix (indexed_fs, {spec.events} events, one "
          f"failure) ...", file=sys.stderr)
    return spark_matrix.run(protocol_names(baseline=False), ["indexed_fs"], spec, [spec.events * 6 // 10],
                            baselines=False, rounds=1, warmup=1, echo=lambda *a, **k: None).to_json()


def run(args: argparse.Namespace) -> int:
    from experiments.spark import advise, advise_state
    from experiments.report.plots import plot_advise

    from backends.base import BadOptionError
    from experiments.core import prices

    model: Any = advise
    try:
        cost = args.optimize == "cost"
        if not cost and (args.rpo is not None or args.prices or args.provider):
            raise UsageError("--rpo, --prices and --provider price the ranking: give --optimize cost too")
        table = prices.load(args.prices) if cost else None  # a bad table: refused before any run
        doc = read_json(args.source) if args.source else None
        sweeps = advise_state.sweep_documents(doc)
        if sweeps and cost:
            raise UsageError("--optimize cost prices measured runs: give --from bench spark-matrix's JSON "
                             "or bench reproduce cost's (results/cost.json), not a state sweep")
        if sweeps:
            model = advise_state
            result = advise_state.advise_state(load_sweeps(sweeps, args.source, args), args.state, args.dirty,
                                               args.mtbf, args.rate, args.rto, args.extrapolate, args.source)
        else:
            if args.state is not None or args.dirty is not None or args.extrapolate:
                raise UsageError("--state, --dirty and --extrapolate need a state sweep: give --from "
                                 "bench state-sweep's JSON (e.g. results/state-sweep.json)")
            if args.source:
                matrix, source = load_matrix(doc, args.source), args.source
            else:
                matrix, source = quick_matrix(), "a quick matrix run now"
            result = advise.advise(matrix, args.mtbf, args.rate, args.rto, source=source,
                                   optimize=args.optimize, rpo_s=args.rpo, table=table, provider=args.provider)
    except (UsageError, advise.AdviseError, BadOptionError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(advise.format_cost_table(result) if args.optimize == "cost" else model.format_table(result))
    for line in model.advise_lines(result):
        print(line)
    from experiments.core.results import ensure_parent

    ensure_parent(args.json)
    save(args, result, page_beside=True)
    plot_advise(result, args.plot)
    print(f"wrote {args.json} and {args.plot}")
    return 0
