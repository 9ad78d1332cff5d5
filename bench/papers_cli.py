"""``bench checkmate`` and ``bench logio-stragglers``: the seed papers' protocol experiments.

Each runs its experiment (:mod:`experiments.spark.checkmate`, :mod:`experiments.spark.stragglers`), writes the
JSON document and the chart, prints the tables beside the paper's numbers and one ``[SECTION],
Headline, ...`` line, and refreshes the generated block of its docs page (``docs/checkmate.md``,
``docs/logio.md``) when the page has the block's markers.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .args import add_html_arg, named, positive_int
from .outputs import save


@named("instances >= 1")
def _instances(text: str) -> int:
    value = positive_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def add_parsers(sub: Any) -> None:
    for name, summary, docs in (
            ("checkmate", "CheckMate's experiment: NexMark q1/q3/q8/q12 and a cyclic query under none, "
                          "coordinated, uncoordinated and cic, uniform and skewed input, one failure per run",
             "docs/checkmate.md"),
            ("logio-stragglers", "LOG.io's straggler experiment: one slow instance at a moderate rate, "
                                 "logio against coordinated in normal processing and in recovery",
             "docs/logio.md")):
        p = sub.add_parser(name, help=summary, description=summary + ".")
        p.add_argument("--quick", action="store_true",
                       help="small sizes (a few minutes): a smoke run, its ratios to none read 'too short'")
        p.add_argument("--backend", default="indexed_fs", help="checkpoint backend (default indexed_fs)")
        p.add_argument("--parallelism", type=_instances, default=2, help="instances (default 2)")
        p.add_argument("--json", default=f"results/{name}.json", metavar="FILE",
                       help="result document (its report page goes beside it as .html)")
        add_html_arg(p)
        p.add_argument("--png", default=f"results/{name}.png", metavar="FILE", help="chart")
        p.add_argument("--docs", default=docs, metavar="FILE",
                       help=f"markdown page whose generated block is refreshed (default {docs})")
        p.set_defaults(func=_run, experiment=name)


def _run(args: Any) -> int:
    from experiments.report import markdown_blocks
    from experiments.report import plots
    if args.experiment == "checkmate":
        from experiments.spark import checkmate as exp
    else:
        from experiments.spark import stragglers as exp
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    doc = exp.run(quick=args.quick, backend=args.backend, parallelism=args.parallelism, say=say)
    save(args, doc, page_beside=True)
    getattr(plots, exp.PLOT)(doc, args.png)
    panels = exp.latency_panels(doc) if hasattr(exp, "latency_panels") else {}
    latency_png = args.png.removesuffix(".png") + "-latency.png"
    if panels:  # the paced runs' latency per second, one panel a protocol (CheckMate Figs 9-10)
        plots.plot_latency_over_time(panels, latency_png, "p50/p99 latency per second; dashed: the failure",
                                     cols=len(getattr(exp, "PROTOCOLS", ())) or 2)
    table = exp.markdown(doc)
    print("\n".join(table))
    section = exp.SECTION
    if args.quick:
        print(f"{section}, Run, smoke run (--quick): its runs are too short to compare a protocol with none")
    print(f"{section}, Headline, {exp.headline(doc)}")
    print(f"{section}, Json, {args.json}")
    print(f"{section}, Plot, {args.png}")
    if panels:
        print(f"{section}, LatencyPlot, {latency_png}")
    markdown_blocks.update_file(args.docs, {args.experiment + ("-quick" if args.quick else ""): "\n".join(table)}, say)
    return 0
