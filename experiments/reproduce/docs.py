"""From reproduce documents to the docs: the ``docs/results.md`` blocks, their charts, the README summary.

Each block is the experiment's table plus one line saying how to regenerate it, which commands
produced it, when, and under which conditions (machine, CPUs, load average before and after):
a figure is only meaningful with the machine and the load it was measured under.  The README
summary is rebuilt from every ``results/NAME.json`` that exists and succeeded, one headline per
experiment linking to its section, so it never shows a figure the detailed table does not; an
experiment with no such document (not run on this machine: ``results/`` is not committed) keeps
the row an earlier run wrote, as its block in ``docs/results.md`` keeps its table.

A chart never disagrees with the table beside it: the charts copied to ``img/`` are the ones
the run drew (:class:`~experiments.reproduce.result.Chart`), and the block records, in HTML
comments that do not render, the digest of the documents its table was made from and, per
chart, the PNG's digest, the document it was drawn from and that run's digest.
:func:`chart_problems` checks every chart a page embeds against the block before it, so a
chart of another run, or one changed by hand, is found without the run's ``results/`` (which
are not committed).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
from typing import Any, Callable

from experiments.report import markdown_blocks
from experiments.core.format import md_table
from experiments.reproduce.result import Chart, Reproduce

SUMMARY = "summary"


def note(doc: Reproduce, commands: bool = True) -> str:
    """The line under a table: how to regenerate it, when, with which commands (or, where the
    table is quoted in the README, where to find them), under which conditions."""
    flag = " --quick" if doc.quick else ""
    load = (f"load average {doc.loadavg_before[0]:.2f} before, "
            f"{doc.loadavg_after[0]:.2f} after")
    run = ("commands: " + "; ".join(f"`{c}`" for c in doc.commands) if commands
           else f"its commands in [docs/results.md](docs/results.md#{markdown_blocks.anchor(doc.name)})")
    reran = ""
    if doc.reused:
        fresh = [r.label for r in doc.runs if r.label not in doc.reused]
        reran = (f" (`--rerun {','.join(fresh)}`: the other {len(doc.reused)} steps are from the run "
                 f"of {(doc.reused_from or '')[:10]})")
    return (f"`bench reproduce {doc.name}{flag}` on {doc.started[:10]}{reran}; {run}; "
            f"conditions: {doc.machine}, {doc.cpus} CPUs, {load}")


def block(doc: Reproduce, commands: bool = True) -> str:
    return "\n".join(doc.table or []) + "\n\n" + note(doc, commands)


# -------------------------------------------------------------------- charts and their sources
#: ``<!-- run sha256:... -->``: the digest of the documents the block's table was made from
RUN_LINE = "<!-- run sha256:{run}: the digest of the documents this table was made from -->"
#: one per published chart
CHART_LINE = "<!-- chart img/{name} sha256:{png} from {source} sha256:{source_sha256} run sha256:{run} -->"
_RUN = re.compile(r"<!-- run sha256:([0-9a-f]+):")
_CHART = re.compile(r"<!-- chart img/(\S+) sha256:([0-9a-f]+) from (\S+) sha256:([0-9a-f]+) "
                    r"run sha256:([0-9a-f]+) -->")
_EMBED = re.compile(r"!\[[^\]]*\]\(img/([^)\s]+)\)")


def digest_json(data: Any) -> str:
    """SHA-256 of a JSON value's content (keys sorted, no blanks): the same for a document
    whatever its file's layout."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def digest_file(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def charts_of(doc: Reproduce, document: str) -> list[Chart]:
    """The charts ``doc``'s run drew, each with its source: a command's chart (and those it
    draws beside it, ``<stem>-*.png``) comes from that command's document; the experiment's
    own chart (``doc.chart``) from all of them, kept in ``document`` (``out/NAME.json``)."""
    drawn = [(r.plot, r.document_path, digest_json(r.document)) for r in doc.runs
             if r.plot and r.document is not None]
    if doc.chart:
        drawn.append((doc.chart, document, digest_json(doc.documents())))
    plots = {plot for plot, _, _ in drawn}  # a chart another command drew is that command's
    out = []
    for plot, source, source_sha256 in drawn:
        if not os.path.exists(plot):
            continue
        beside = sorted(glob.glob(glob.escape(os.path.splitext(plot)[0]) + "-*.png"))
        for png in [plot, *(p for p in beside if p not in plots)]:
            out.append(Chart(png, digest_file(png), source, source_sha256))
    return out


def provenance(doc: Reproduce) -> list[str]:
    """The block's comment lines: its run's digest, and each chart's."""
    if doc.run_sha256 is None:
        return []
    return [RUN_LINE.format(run=doc.run_sha256)] + [
        CHART_LINE.format(name=os.path.basename(c.png), png=c.sha256, source=c.source,
                          source_sha256=c.source_sha256, run=doc.run_sha256)
        for c in doc.charts or []]


def chart_problems(docs: str) -> list[str]:
    """Every chart ``docs`` embeds (``![...](img/NAME.png)``) that is not, byte for byte, a
    chart drawn by the run whose table is in the experiment's block before it: one line each,
    naming the ``bench reproduce`` command that regenerates table and chart together."""
    text = markdown_blocks.read(docs) or ""
    img = os.path.join(os.path.dirname(os.path.abspath(docs)), "img")
    ends = [(m.end(), m.group(1)) for m in re.finditer(markdown_blocks.END.format(name=r"(\S+)"), text)]
    problems = []
    for embed in _EMBED.finditer(text):
        name = embed.group(1)
        before = [exp for end, exp in ends if end <= embed.start()]
        if not before:
            problems.append(f"img/{name}: embedded before any experiment's table")
            continue
        exp = before[-1]
        body = markdown_blocks.block(text, exp) or ""
        said = re.search(r"`(bench reproduce [^`]+)` on ", body)  # as the block's note says
        regenerate = f"regenerate both with `{said.group(1) if said else f'bench reproduce {exp}'}`"
        run = _RUN.search(body)
        records = {m.group(1): m for m in _CHART.finditer(body)}
        path = os.path.join(img, name)
        if run is None or name not in records:
            problems.append(f"img/{name}: the {exp} block records no run that drew it, so it may "
                            f"not show its table's figures; {regenerate}")
        elif records[name].group(5) != run.group(1):
            problems.append(f"img/{name}: drawn by another run than the {exp} table's; {regenerate}")
        elif not os.path.exists(path):
            problems.append(f"img/{name}: missing beside {docs}; {regenerate}")
        elif digest_file(path) != records[name].group(2):
            problems.append(f"img/{name}: not the chart the {exp} table's run drew (its digest "
                            f"differs); {regenerate}")
    return problems


def publish(exp: Any, doc: Reproduce, docs: str, say: Callable[[str], None],
            readme: str | None = None) -> None:
    """Print the experiment's block, copy its charts beside the docs (``img/``) and regenerate
    its block in ``docs`` (with the charts' sources: :func:`provenance`), and in ``readme`` too
    where it has one (the audit's durability table, which the README quotes beside the
    backends' claims)."""
    text = block(doc)
    print(f"## {exp.name}\n\n{text}\n", flush=True)
    if doc.charts and os.path.exists(docs):
        img = os.path.join(os.path.dirname(os.path.abspath(docs)), "img")
        os.makedirs(img, exist_ok=True)
        for chart in doc.charts:
            shutil.copyfile(chart.png, os.path.join(img, os.path.basename(chart.png)))
    text = "\n".join([text, *provenance(doc)])
    if markdown_blocks.update_file(docs, {exp.name: text}, say):
        say(f"reproduce: {exp.name}: block regenerated in {docs}")
    readme_text = markdown_blocks.read(readme) if readme else None
    short = block(doc, commands=False)  # the README stays a guide: the commands are in the docs
    if readme_text and markdown_blocks.replace_block(readme_text, exp.name, short) is not None:
        markdown_blocks.update_file(readme, {exp.name: short}, say)
        say(f"reproduce: {exp.name}: block regenerated in {readme}")


def _link(name: str, docs: str, readme: str, docs_text: str | None) -> str:
    heading = markdown_blocks.heading_before(docs_text, name) if docs_text else None
    target = os.path.relpath(os.path.abspath(docs), os.path.dirname(os.path.abspath(readme)))
    return f"[{name}]({target}#{markdown_blocks.anchor(heading or name)})"


def _earlier_rows(readme: str) -> dict[str, str]:
    """The rows of the summary now in ``readme``, by experiment name."""
    text = markdown_blocks.read(readme)
    body = markdown_blocks.block(text, SUMMARY) if text else None
    rows = {}
    for line in (body or "").splitlines():
        match = re.match(r"^\| \[([^\]]+)\]\(", line)
        if match:
            rows[match.group(1)] = line
    return rows


def summary(registry: dict[str, Any], out: str, docs: str, readme: str,
            say: Callable[[str], None]) -> str:
    """The README block: one headline row per experiment whose ``out/NAME.json`` succeeded,
    and the earlier row of each experiment without one."""
    docs_text = markdown_blocks.read(docs)
    earlier = _earlier_rows(readme)
    rows: list[list[str] | str] = []
    for name, exp in registry.items():
        path = os.path.join(out, f"{name}.json")
        doc = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            try:
                doc = Reproduce.from_json(data)
            except (ValueError, TypeError) as exc:  # another schema, or fields missing
                say(f"reproduce: {path}: not a reproduce document ({exc}); row left as it was")
        if doc is None or doc.status != "ok":
            if name in earlier:
                rows.append(earlier[name])
            continue
        try:
            headline = exp.headline(doc.documents())
        except Exception as exc:  # noqa: BLE001 - one unreadable document must not hide the rest
            say(f"reproduce: {path}: no headline ({type(exc).__name__}: {exc}); row left out")
            continue
        rows.append([_link(name, docs, readme, docs_text), headline,
                     doc.started[:10] + (" (`--quick`)" if doc.quick else "")])
    if not rows:
        return "Not generated yet: run `bench reproduce --all`."
    table = md_table(["experiment", "result", "measured"], [r for r in rows if isinstance(r, list)])
    made = iter(table[2:])  # the header and rule first, then the new rows in order
    return "\n".join(table[:2] + [r if isinstance(r, str) else next(made) for r in rows])


def update_summary(registry: dict[str, Any], out: str, docs: str, readme: str,
                   say: Callable[[str], None]) -> None:
    if markdown_blocks.update_file(readme, {SUMMARY: summary(registry, out, docs, readme, say)}, say):
        say(f"reproduce: summary regenerated in {readme}")
