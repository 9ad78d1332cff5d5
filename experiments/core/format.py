"""How a figure is written into markdown or a terminal: numbers, ratios, tables, target cells.

Shared by every experiment's table and headline (each beside the experiment's result type) and
by the docs writer of ``bench reproduce``, so every generated block rounds and lays out its
figures the same way.

Terminal tables are laid out by ``rich`` (:func:`text_table`), the library the progress bars use
too, rather than ``tabulate``: one dependency serves both, and without borders or colour its
tables are plain text a test can compare and a reader can paste.  Markdown tables
(:func:`md_table`) go into the docs and stay as GitHub renders them.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import re
from dataclasses import dataclass
from typing import Any, Iterator

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

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


@dataclass(frozen=True)
class Note:
    """A table row whose leading cells (``lead``) are followed by one phrase instead of the
    other cells (``redis  skipped: why``): the phrase widens no column."""

    lead: tuple[str, ...]
    text: str


def text_table(head: list[str], body: list[list[str] | Note], *, align: str | None = None,
               indent: str = "", header: bool = True) -> list[str]:
    """A terminal table as plain lines: columns as wide as their widest cell, two blanks
    between them, no borders, no trailing blanks, no colour, never wrapped, so it pastes as it
    looks and a test can compare it.  ``align`` gives each column's ``l`` or ``r``; by default
    a column of numbers (cells that are a number, perhaps with a unit such as ``x`` or ``us``,
    or a ``-`` placeholder) is right-aligned and any other left-aligned.  ``header=False``
    leaves the heading line out (``head`` still says how many columns there are).

    Laid out by ``rich`` (the library of the progress bars too): each cell is a
    :class:`rich.text.Text`, so brackets and colons in the data are never read as markup or
    emoji codes, and wide characters count as wide."""
    if align is None:
        rows = [r for r in body if not isinstance(r, Note)]
        align = "".join("r" if all(_is_number(r[i]) or r[i] in _PLACEHOLDERS for r in rows)
                        and any(_is_number(r[i]) for r in rows) else "l" for i in range(len(head)))
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 1),
                  show_header=header, header_style="", highlight=False)
    for name, side in zip(head, align):
        table.add_column(Text(name), justify="right" if side == "r" else "left", no_wrap=True)
    cells = [[*r.lead, *[""] * (len(head) - len(r.lead))] if isinstance(r, Note) else r
             for r in body]
    for row in cells:
        table.add_row(*(Text(c) for c in row))
    console = Console(file=io.StringIO(), width=100_000, color_system=None, force_terminal=False,
                      no_color=True, highlight=False, markup=False, emoji=False, soft_wrap=False)
    with console.capture() as captured:
        console.print(table)
    lines = [ln.rstrip() for ln in captured.get().splitlines()]
    widths = [max(map(cell_len, col), default=0) for col in zip(*([head] if header else []), *cells)]
    for i, r in enumerate(body, int(header)):
        if isinstance(r, Note):  # the lead as laid out, padded to its last column's end
            end = sum(widths[:len(r.lead)]) + 2 * (len(r.lead) - 1)
            lines[i] = (lines[i] + " " * (end - cell_len(lines[i])) + "  " + r.text).rstrip()
    return [indent + ln if ln else ln for ln in lines]


#: cells that stand for "no figure" in a column of numbers
_PLACEHOLDERS = ("", "-", "–")
_NUMBER = re.compile(r"[-+]?(\d[\d,]*(\.\d+)?|\.\d+)([eE][-+]?\d+)?(x|us|µs|ms|s|%)?")


def _is_number(text: str) -> bool:
    words = text.split()
    return bool(words) and _NUMBER.fullmatch(words[0]) is not None


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
