"""From reproduce documents to the docs: the ``docs/results.md`` blocks, their charts, the README summary.

Each block is the experiment's table plus one line saying how to regenerate it, which commands
produced it, when, and under which conditions (machine, CPUs, load average before and after):
a figure is only meaningful with the machine and the load it was measured under.  The README
summary is rebuilt from every ``results/NAME.json`` that exists and succeeded, one headline per
experiment linking to its section, so it never shows a figure the detailed table does not; an
experiment with no such document (not run on this machine: ``results/`` is not committed) keeps
the row an earlier run wrote, as its block in ``docs/results.md`` keeps its table.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from typing import Any, Callable

from experiments.report import markdown_blocks
from experiments.core.format import md_table
from experiments.reproduce.result import Reproduce

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


def publish(exp: Any, doc: Reproduce, docs: str, say: Callable[[str], None],
            readme: str | None = None) -> None:
    """Print the experiment's block, copy its charts beside the docs (``img/``) and regenerate
    its block in ``docs``, and in ``readme`` too where it has one (the audit's durability table,
    which the README quotes beside the backends' claims)."""
    text = block(doc)
    print(f"## {exp.name}\n\n{text}\n", flush=True)
    plots = [p for p in [*(r.plot for r in doc.runs), doc.chart] if p and os.path.exists(p)]
    if plots and os.path.exists(docs):
        img = os.path.join(os.path.dirname(os.path.abspath(docs)), "img")
        os.makedirs(img, exist_ok=True)
        for p in plots:  # with the charts a command draws beside its own (<stem>-*.png)
            for q in [p, *sorted(glob.glob(glob.escape(os.path.splitext(p)[0]) + "-*.png"))]:
                shutil.copyfile(q, os.path.join(img, os.path.basename(q)))
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
