"""How a figure is written into markdown: numbers, ratios, tables, target cells.

Shared by every experiment's table and headline (each beside the experiment's result type) and
by the docs writer of ``bench reproduce``, so every generated block rounds and lays out its
figures the same way.
"""

from __future__ import annotations

from typing import Any

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


def md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A GitHub markdown table; ``|`` inside a cell is escaped."""
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(head), "|" + "|".join("---" for _ in head) + "|"] + [line(r) for r in rows]


def target(ok: bool, what: str) -> str:
    """A target cell: the target and whether this run met it."""
    return f"{what}: {'met' if ok else 'NOT met'}"
