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

from .args import UsageError, add_html_arg, named, positive_int
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
        if name == "checkmate":
            p.add_argument("--part", choices=("uniform", "skew", "paired"), default="uniform",
                           help="uniform (default): the MST step, the grid with one failure per run and the "
                                "cyclic query; skew: the paper's Fig 12, hot items at 50 %% and 80 %% of each "
                                "protocol's uniform MST, no failure; paired: none and coordinated probed side "
                                "by side at the ends of their MST brackets, 3 rounds")
            p.add_argument("--mst-from", metavar="FILE",
                           help="--part skew or paired: take the uniform MSTs from this full uniform run's "
                                "JSON instead of searching them again")
        p.set_defaults(func=_run, experiment=name)


def _run(args: Any) -> int:
    from experiments.report import markdown_blocks
    from experiments.report import plots
    if args.experiment == "checkmate":
        from experiments.spark import checkmate as exp
    else:
        from experiments.spark import stragglers as exp
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    extra: dict[str, Any] = {}
    block = args.experiment
    if args.experiment == "checkmate":
        extra = dict(part=args.part, mst_from=_mst_source(exp, args.mst_from) if args.mst_from else None,
                     mst_source=args.mst_from)
        block = exp.page_block(args.part, args.parallelism)
    try:
        doc = exp.run(quick=args.quick, backend=args.backend, parallelism=args.parallelism, say=say, **extra)
    except getattr(exp, "MstSourceError", ()) as exc:  # --mst-from does not fit the run
        raise UsageError(f"--mst-from {args.mst_from}: {exc}") from None
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
    markdown_blocks.update_file(args.docs, {block + ("-quick" if args.quick else ""): "\n".join(table)}, say)
    return 0


def _mst_source(exp: Any, path: str) -> Any:
    """The document ``--mst-from`` names, read before Spark starts (a clear error if it cannot be)."""
    import json

    from experiments.core.document import DocumentError

    try:
        with open(path, encoding="utf-8") as fh:
            return exp.Checkmate.from_json(json.load(fh))
    except OSError as exc:
        raise UsageError(f"--mst-from {path}: {exc.strerror}; give the JSON of a full `bench checkmate` run") from None
    except (ValueError, DocumentError, TypeError, KeyError) as exc:
        raise UsageError(f"--mst-from {path}: not a checkmate document ({exc}); give the JSON of a full "
                         f"`bench checkmate` run") from None
