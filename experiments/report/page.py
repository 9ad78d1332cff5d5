"""A run's report: the summary table (text, CSV) and one self-contained HTML page.

The page holds everything a reader needs to judge the figures and nothing it must fetch: the
summary table of every input (:mod:`experiments.report.summary`), each document's own table,
its charts as PNG images inlined as ``data:`` URIs, the conditions each document was made under
(version, commit, machine, CPUs, load average, Python and library versions) and the exact
command lines.  It has no script and no link to another file or host, so it opens the same
offline, from a mail attachment or an archive, years later.

Charts are drawn by :mod:`experiments.report.plots` from the same documents the tables read,
so a chart never shows a figure the table beside it does not.  A chart that cannot be drawn is
named on the page with the reason instead of failing the report.

:func:`write_beside` is the one way an experiment writes its page next to its JSON
(``NAME.json`` -> ``NAME.html``).
"""

from __future__ import annotations

import base64
import csv
import html
import os
import shlex
import tempfile
from dataclasses import fields
from typing import Any, Callable

from experiments.core.document import Document, Environment
from experiments.core.format import text_table
from experiments.core.results import Compare, Result, Sweep, ensure_parent, write_text
from experiments.report import plots, tables
from experiments.report.summary import Row, environment, rows

#: the summary table's columns: (heading, the cell of a row)
COLUMNS: tuple[tuple[str, Callable[[Row], str]], ...] = (
    ("source", lambda r: r.source),
    ("workload", lambda r: r.workload),
    ("backend", lambda r: r.backend),
    ("durability", lambda r: r.durability),
    ("setting", lambda r: r.setting),
    ("throughput", lambda r: "" if r.throughput is None else f"{r.throughput:,.1f} {r.unit}"),
    ("op", lambda r: r.op),
    ("p50 us", lambda r: "" if r.p50_us is None else f"{r.p50_us:,.0f}"),
    ("p99 us", lambda r: "" if r.p99_us is None else f"{r.p99_us:,.0f}"),
    ("ratio", lambda r: r.ratio),
    ("rounds", lambda r: " ".join(f"{x:,.0f}" for x in r.rounds)),
    ("note", lambda r: r.note),
)


def cells(table: list[Row]) -> tuple[list[str], list[list[str]]]:
    """The summary table as heading and rows of strings (the text table and the page's)."""
    return [h for h, _ in COLUMNS], [[cell(r) for _, cell in COLUMNS] for r in table]


def summary_lines(table: list[Row]) -> list[str]:
    return text_table(*cells(table))


def write_csv(path: str, table: list[Row]) -> None:
    """The summary rows as CSV, one column per :class:`Row` field (numbers unformatted)."""
    names = [f.name for f in fields(Row)]
    ensure_parent(path)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        for r in table:
            w.writerow([" ".join(map(str, v)) if isinstance(v, list) else ("" if v is None else v)
                        for v in (getattr(r, n) for n in names)])


# ----------------------------------------------------------------------------------- charts
def _chart_drawers(doc: Document, table: list[Row]) -> list[tuple[str, Callable[[str], None]]]:
    """The charts of ``doc``: (caption, a function drawing it into a PNG path)."""
    name = doc.SCHEMA.partition("/")[0]
    if isinstance(doc, (Result, Compare, Sweep)):
        kind = "latency against throughput" if isinstance(doc, Sweep) else "throughput and latency"
        return [(f"{doc.workload}: {kind}", lambda p: plots.plot_results([doc], p))]
    if name == "ckptbench.spark" and getattr(doc, "latency", None):  # a paced run: CheckMate's Figs 9-10
        label = str(doc.settings.get("protocol"))
        return [(f"{label}: latency per second of event creation",
                 lambda p: plots.plot_latency_over_time({label: doc.latency}, p, cols=1))]
    if name == "ckptbench.spark-matrix":
        return [("Spark matrix: throughput, checkpoint and recovery time",
                 lambda p: plots.plot_spark_matrix(doc.rows, p))]
    own = {"ckptbench.storage-compare": plots.plot_storage_compare,
           "ckptbench.checkmate": plots.plot_checkmate,
           "ckptbench.logio-stragglers": plots.plot_stragglers,
           "ckptbench.advise": plots.plot_advise, "ckptbench.advise-state": plots.plot_advise}
    if name in own:
        return [(name.partition(".")[2], lambda p: own[name](doc, p))]
    thesis = {"fig4.2": plots.plot_fig42, "fig4.5": plots.plot_fig45, "fig4.7": plots.plot_fig47}
    if name == "ckptbench.thesis" and getattr(doc, "experiment", "") in thesis:
        return [(f"thesis {doc.experiment}", lambda p: thesis[doc.experiment](doc, p))]
    if any(r.throughput is not None for r in table):
        return [("throughput", lambda p: plots.plot_rows(table, p))]
    return []


def _png(draw: Callable[[str], None]) -> bytes:
    with tempfile.TemporaryDirectory(prefix="ckptbench-chart-") as tmp:
        path = os.path.join(tmp, "chart.png")
        draw(path)
        with open(path, "rb") as fh:
            return fh.read()


def _figure(caption: str, draw: Callable[[str], None]) -> str:
    """An inlined chart, or the reason it could not be drawn."""
    try:
        data = base64.b64encode(_png(draw)).decode("ascii")
    except Exception as exc:  # noqa: BLE001 - a chart that fails must not lose the page's tables
        return f"<p class=note>chart not drawn ({html.escape(caption)}): " \
               f"{html.escape(type(exc).__name__)}: {html.escape(str(exc))}</p>"
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


# ------------------------------------------------------------------------------------ tables
def own_table(doc: Document) -> list[str]:
    """The table the command that wrote ``doc`` printed (or published), where it has one."""
    if isinstance(doc, Compare):
        return tables.compare_table(doc) + tables.ratio_lines(doc.ratios or [])
    if isinstance(doc, Sweep):
        return tables.sweep_table(doc) + tables.ratio_lines(doc.ratios or [])
    if hasattr(doc, "lines") and callable(doc.lines):  # the audit's [AUDIT] lines
        return list(doc.lines())
    return list(getattr(doc, "table", None) or [])


def command_line(argv: list[str]) -> str:
    """``argv`` as a ``bench`` command to paste into a shell (``python -m bench`` and the
    script's path both print as ``bench``)."""
    return shlex.join(["bench", *argv[1:]]) if argv else ""


def _conditions(env: Environment | None) -> list[tuple[str, str]]:
    if env is None:
        return [("conditions", "not recorded in this document")]
    libs = ", ".join(f"{k} {v}" for k, v in env.libraries.items()) or "not recorded"
    return [("ckptbench", f"{env.version} (commit {env.commit or 'unknown: not a git checkout'})"),
            ("machine", f"{env.hostname}: {env.cpu_model or '?'}; {env.platform}"),
            ("CPUs", f"{env.cpu_count} (allowed: {','.join(map(str, env.cpus_allowed))})"),
            ("load average", " ".join(f"{x:.2f}" for x in env.loadavg) + " (1, 5, 15 min)"),
            ("Python", f"{env.implementation} {env.python}"),
            ("libraries", libs),
            ("made", env.time),
            ("command", command_line(env.argv))]


def _html_table(head: list[str], body: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


STYLE = """body{font-family:sans-serif;margin:1.5em;max-width:110em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.2em .5em;
text-align:left;font-size:90%}th{background:#f0f0f0}pre{background:#f7f7f7;padding:.6em;
overflow-x:auto;font-size:85%}figure{margin:1em 0}img{max-width:100%;border:1px solid #ddd}
figcaption,.note{color:#555;font-size:90%}dl{display:grid;grid-template-columns:max-content auto;
gap:.2em 1em}dt{font-weight:bold}"""


def html_page(inputs: list[tuple[str, Document]], title: str = "ckptbench report",
              commands: list[str] | None = None) -> str:
    """The page of ``inputs`` (source name, document): the summary table of all of them, then
    per input its conditions, command, own table and charts; ``commands``: the command lines
    that made the inputs, when they are not each document's own (``bench reproduce``)."""
    table = [r for source, doc in inputs for r in rows(doc, source)]
    parts = [f"<h1>{html.escape(title)}</h1>", "<h2>Summary</h2>", _html_table(*cells(table))]
    if commands:
        parts += ["<h2>Commands</h2>", "<pre>" + html.escape("\n".join(commands)) + "</pre>"]
    for source, doc in inputs:
        parts.append(f"<h2>{html.escape(source)} <small>({html.escape(doc.SCHEMA)})</small></h2>")
        parts.append("<dl>" + "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>"
                                      for k, v in _conditions(environment(doc))) + "</dl>")
        own = own_table(doc)
        if own:
            parts.append("<pre>" + html.escape("\n".join(own)) + "</pre>")
        own_rows = [r for r in table if r.source == source]
        parts += [_figure(caption, draw) for caption, draw in _chart_drawers(doc, own_rows)]
        for step in getattr(doc, "runs", None) or []:  # bench reproduce: each command's document
            sub = getattr(step, "document", None)
            if sub is not None:
                parts.append(f"<h3>{html.escape(step.label)}</h3><pre>"
                             f"{html.escape(step.command)}</pre>")
                sub_doc = _parsed(sub)
                if sub_doc is not None:
                    sub_rows = [r for r in table if r.source == f"{source}:{step.label}"]
                    parts += [_figure(c, d) for c, d in _chart_drawers(sub_doc, sub_rows)]
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def _parsed(doc: dict[str, Any]) -> Document | None:
    from experiments.core.document import DocumentError, parse

    try:
        return parse(doc)
    except (DocumentError, KeyError, TypeError, ValueError):
        return None


def write_page(path: str, inputs: list[tuple[str, Document]], title: str = "ckptbench report",
               commands: list[str] | None = None) -> None:
    """Write :func:`html_page` to ``path`` atomically (a reader never sees half a page)."""
    ensure_parent(path)
    write_text(path, html_page(inputs, title, commands))


def beside(json_path: str) -> str:
    """Where the page of ``json_path`` goes: the same name with ``.html``."""
    root, ext = os.path.splitext(json_path)
    return (root if ext == ".json" else json_path) + ".html"


def write_beside(json_path: str, doc: Document, commands: list[str] | None = None) -> str:
    """Write ``doc``'s page beside its JSON file (``NAME.json`` -> ``NAME.html``); its path."""
    path = beside(json_path)
    write_page(path, [(os.path.basename(json_path), doc)],
               f"ckptbench: {os.path.basename(json_path)}", commands)
    return path
