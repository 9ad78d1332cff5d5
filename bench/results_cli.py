"""``bench report`` and ``bench diff``: saved results read back, tabulated, paged and compared.

``report`` prints one table of every input file (any schema a ``bench`` command writes) and
writes the same rows as CSV, the page (:mod:`experiments.report.page`) and, optionally, the old
chart.  ``diff`` compares two files metric by metric (:mod:`experiments.report.diff`) and
exits non-zero on a regression beyond ``--fail-above``.  Reading a file is one place
(:func:`read_documents`), so both commands refuse the same bad input with the same line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any

from experiments.core.document import Document, DocumentError, parse
from experiments.core.results import write_json

from .args import EXIT_RUNTIME, UsageError, non_negative_float

#: the modules that define the result documents: imported before a file is read, so that
#: :func:`experiments.core.document.parse` knows every schema a ``bench`` command writes
DOCUMENT_MODULES = (
    "experiments.core.results", "experiments.audit.runner", "experiments.spark.job",
    "experiments.spark.matrix_result", "experiments.spark.scaling_result", "experiments.spark.advise",
    "experiments.spark.advise_state",
    "experiments.spark.checkmate", "experiments.spark.mst",
    "experiments.spark.stragglers", "experiments.storage.thesis_result",
    "experiments.storage.compare_result", "experiments.storage.peers",
    "experiments.storage.binding_peer",
    "experiments.storage.verify", "experiments.reproduce.result", "experiments.report.diff",
)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="tabulate saved JSON results, as text, CSV and one HTML page",
        description="Print one table of every input (workload, backend, durability, "
                    "throughput, p50/p99 latency, ratios, each round's throughput), whatever "
                    "bench command wrote it.  --csv and --html cover every input; the page is "
                    "one self-contained file with the tables, the charts, the conditions "
                    "(commit, machine, load average, versions) and the commands.")
    p.add_argument("results", nargs="+", metavar="RESULTS.json")
    p.add_argument("--csv", metavar="FILE", help="write the table's rows as CSV")
    p.add_argument("--html", metavar="FILE", help="write the report page (one HTML file)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw one chart of all inputs")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "diff", help="compare two saved results metric by metric",
        description="For every metric of the rows both files have: the ratio new/base, "
                    "whether higher or lower is better, and whether the change exceeds the "
                    "noise the runs measured in their own rounds.  Differences in what was "
                    "measured (machine, durability, workload) are named, one line each.")
    p.add_argument("base", metavar="BASE.json")
    p.add_argument("new", metavar="NEW.json")
    p.add_argument("--fail-above", type=non_negative_float, metavar="PCT",
                   help="exit 1 when a metric got worse by more than PCT percent and not "
                        "within the runs' measured noise (exit 1 too when nothing matched)")
    p.add_argument("--json", metavar="FILE", help="also write the diff as JSON (- for stdout)")
    p.set_defaults(func=cmd_diff)


def read_documents(paths: list[str]) -> list[tuple[str, Document]]:
    """Each file as the document it is; :class:`UsageError` naming the file and the problem."""
    for module in DOCUMENT_MODULES:
        importlib.import_module(module)
    out = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                raw = json.load(fh)
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read results file {path}: {exc}")
        if not isinstance(raw, dict):
            raise UsageError(f"{path} is not a ckptbench result (a JSON {type(raw).__name__}, "
                             "not an object); give a file that --json wrote")
        try:
            out.append((path, parse(raw)))
        except DocumentError as exc:
            raise UsageError(f"{path}: {exc}")
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{path} is not a complete ckptbench result ({type(exc).__name__}: "
                             f"{exc}); give a file a bench command wrote")
    return out


def _sources(paths: list[str]) -> list[str]:
    """Short names for the inputs: the file names, or the paths where two names clash."""
    names = [os.path.basename(p) for p in paths]
    return names if len(set(names)) == len(names) else list(paths)


def cmd_report(args: argparse.Namespace) -> int:
    from experiments.report import page, summary

    docs = read_documents(args.results)
    inputs = list(zip(_sources(args.results), (d for _, d in docs)))
    table = [r for source, doc in inputs for r in summary.rows(doc, source)]
    print("\n".join(page.summary_lines(table)))
    if args.csv:
        page.write_csv(args.csv, table)
        print(f"csv: {args.csv}", file=sys.stderr)
    if args.html:
        page.write_page(args.html, inputs)
        print(f"html: {args.html}", file=sys.stderr)
    if args.plot:
        _plot(args.plot, [d for _, d in inputs], table)
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0


def _plot(path: str, docs: list[Document], table: list[Any]) -> None:
    from experiments.core.results import Compare, Result, Sweep
    from experiments.report import plots

    try:
        if all(isinstance(d, (Result, Compare, Sweep)) for d in docs):
            plots.plot_results(docs, path)  # type: ignore[arg-type]
        else:
            plots.plot_rows(table, path)
    except (ValueError, KeyError) as exc:
        raise UsageError(f"cannot plot these results: {exc}")


def cmd_diff(args: argparse.Namespace) -> int:
    from experiments.report import diff, summary

    (base_path, base), (new_path, new) = read_documents([args.base, args.new])
    base_name, new_name = _sources([base_path, new_path])
    d = diff.diff(base_name, base, summary.rows(base, base_name), new_name, new,
                  summary.rows(new, new_name), args.fail_above)
    text = "\n".join(diff.lines(d))
    print(text, file=sys.stderr if args.json == "-" else sys.stdout)
    if args.json:
        write_json(args.json, d)
    if not d.changes:  # a gate that compared nothing must not pass
        print("bench: diff: the two files have no row in common: nothing compared; give two "
              "results of the same command", file=sys.stderr)
        return EXIT_RUNTIME
    return EXIT_RUNTIME if d.regressions else 0
