"""How a figure is written into markdown or a terminal: numbers, ratios, tables, target cells.

Shared by every experiment's table and headline (each beside the experiment's result type) and
by the docs writer of ``bench reproduce``, so every generated block rounds and lays out its
figures the same way.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator

#: the documents one ``bench reproduce`` experiment's steps wrote, by step label: what a table
#: or headline function reads
Runs = dict[str, dict[str, Any]]


def num(value: float | None) -> str:
    """A measured value at a precision its noise allows: no decimals from 100 up (nor for
    counts, which are integers)."""
    if value is None:
        return "-"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def text_table(head: list[str], body: list[list[str]]) -> list[str]:
    """A fixed-width table: numbers right-aligned, text left-aligned, columns as wide as their
    widest cell, trailing blanks dropped."""
    widths = [max(len(c) for c in col) for col in zip(head, *body)]
    numeric = [all(_is_number(r[i]) for r in body) and any(r[i] for r in body)
               for i in range(len(head))]

    def line(cs: list[str]) -> str:
        return "  ".join(c.rjust(w) if n else c.ljust(w)
                         for c, w, n in zip(cs, widths, numeric)).rstrip()

    return [line(head)] + [line(r) for r in body]


def _is_number(text: str) -> bool:
    return not text or text.split()[0].replace(",", "").replace(".", "", 1).isdigit()


def md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A GitHub markdown table; ``|`` inside a cell is escaped."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(head), "|" + "|".join("---" for _ in head) + "|"] + [line(r) for r in rows]


#: the targets judged while :func:`collect_targets` is open, as (what, met)
_judged: contextvars.ContextVar[list[tuple[str, bool]] | None] = contextvars.ContextVar(
    "judged_targets", default=None)


def target(ok: bool, what: str) -> str:
    """A target cell: the target and whether this run met it (also noted for
    :func:`collect_targets`, so a table's targets are data as well as text)."""
    judged = _judged.get()
    if judged is not None:
        judged.append((what, bool(ok)))
    return f"{what}: {'met' if ok else 'NOT met'}"


@contextlib.contextmanager
def collect_targets() -> Iterator[list[tuple[str, bool]]]:
    """Every :func:`target` judged inside the block, in order, as ``(what, met)``: how
    ``bench reproduce`` knows which targets its tables found met without reading the text."""
    judged: list[tuple[str, bool]] = []
    token = _judged.set(judged)
    try:
        yield judged
    finally:
        _judged.reset(token)
