"""The protocol papers' headlines in ``docs/results.md``, each marked from the reproduce documents.

CheckMate's four headlines (coordinated ≈ ``none`` on uniform input, uncoordinated about 10 %
below it, CIC far lower at high parallelism, uncoordinated's relative gain under skew) and
LOG.io's (recovery with stragglers) are each marked *reproduced*, *not reproduced* or *not yet
measured at full size*, with the measured reason, by the experiments' own verdict functions
(:func:`experiments.spark.checkmate.paper_verdicts`, :func:`experiments.spark.stragglers.verdict`)
over the documents of the full runs in the results directory: ``checkmate``,
``checkmate-skew``, ``checkmate-parallelism``, ``checkmate-paired`` (which, where it ran, decides
coordinated ≈ ``none`` for its queries) and ``logio-stragglers``.  A ``--quick``,
failed or missing run counts as not measured at full size.  ``results/`` is not committed, so a
headline whose documents are not on this machine keeps the line an earlier run wrote (as the
README summary keeps its rows): the block never loses a measured verdict to a machine that has
not run the experiment, and never shows one no document decided.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable

from experiments.report import markdown_blocks
from experiments.reproduce.result import Reproduce

BLOCK = "paper-headlines"
#: the part of the experiments each verdict reads -> the reproduce experiment that makes it
SOURCES = {"uniform": "checkmate", "skew": "checkmate-skew", "parallel": "checkmate-parallelism",
           "paired": "checkmate-paired", "logio": "logio-stragglers"}
NOT_MEASURED = "*not yet measured at full size*"
LOGIO_CLAIM = ("LOG.io: recovery with stragglers (Fig 5: with a straggler at a moderate rate, LOG.io costs "
               "about what ABS costs and recovers with far less overhead)")
_LINE = re.compile(r"^- \*\*(.+?)\*\*: ")


def full_run(out: str, name: str) -> tuple[dict[str, Any], str] | None:
    """The ``run`` document of ``out/NAME.json`` and the day it started, when that is a full
    run that succeeded (None otherwise)."""
    path = os.path.join(out, f"{name}.json")
    try:
        with open(path, encoding="utf-8") as fh:
            doc = Reproduce.from_json(json.load(fh))
    except (OSError, ValueError, TypeError):
        return None
    if doc.status != "ok" or doc.quick:
        return None
    run = doc.documents().get("run")
    return (run, doc.started[:10]) if run is not None else None


def verdicts(out: str) -> list[tuple[str, str, str, bool]]:
    """(claim, mark, reason, ran) for every headline, from the full runs in ``out``; a reason ends
    with the runs it was measured in, and ``ran`` says whether every run it reads is in ``out``
    (a headline missing one is one this machine cannot decide anew)."""
    import importlib

    checkmate = importlib.import_module("experiments.spark.checkmate")  # loads Spark's modules: only here
    stragglers = importlib.import_module("experiments.spark.stragglers")
    runs = {part: full_run(out, name) for part, name in SOURCES.items()}
    doc = {part: run[0] if run else None for part, run in runs.items()}

    def measured(*parts: str) -> str:
        said = [f"`bench reproduce {SOURCES[p]}` of {runs[p][1]}" for p in parts if runs[p]]
        return f" (measured in {', '.join(said)})" if said else ""
    out_lines = []
    # the paired part, where it ran, refines the first headline; without it the uniform run decides
    first = ("uniform", "paired") if runs["paired"] else ("uniform",)
    for (claim, mark, reason), parts in zip(
            checkmate.paper_verdicts(doc["uniform"], doc["skew"], doc["parallel"], doc["paired"]),
            (first, ("uniform",), ("uniform", "parallel"), ("skew",))):
        ran = all(runs[p] for p in parts)
        out_lines.append((claim, mark, reason + (measured(*parts) if ran else ""), ran))
    if doc["logio"] is None:
        out_lines.append((LOGIO_CLAIM, NOT_MEASURED, "no full run's document on the machine that made this block: "
                                                     "the logio-stragglers section holds the table last published, "
                                                     "and `bench reproduce logio-stragglers` brings its verdict here",
                          False))
    else:
        mark, reason = stragglers.verdict(doc["logio"])
        out_lines.append((LOGIO_CLAIM, mark, reason + measured("logio"), True))
    return out_lines


def block(out: str, earlier: str | None) -> str:
    """The block's text: one line a headline; a headline missing one of its full runs here keeps
    its line in ``earlier`` (the block as it stands) when that one was measured.  One whose run
    is here but decides nothing (too short, or a search that did not narrow its bracket) says so:
    a newer run replaces the verdict an older one gave."""
    kept = {}
    for line in (earlier or "").splitlines():
        match = _LINE.match(line)
        if match and NOT_MEASURED not in line:
            kept[match.group(1)] = line
    lines = []
    for claim, mark, reason, ran in verdicts(out):
        if mark == NOT_MEASURED and not ran and claim in kept:
            lines.append(kept[claim])
        else:
            lines.append(f"- **{claim}**: {mark} — {reason}.")
    return "\n".join(lines)


def update(out: str, docs: str, say: Callable[[str], None]) -> None:
    """Regenerate the block in ``docs`` (a page without the block is left as it is)."""
    text = markdown_blocks.read(docs)
    if text is None or markdown_blocks.block(text, BLOCK) is None:
        return
    if markdown_blocks.update_file(docs, {BLOCK: block(out, markdown_blocks.block(text, BLOCK))}, say):
        say(f"reproduce: the papers' headlines regenerated in {docs}")
