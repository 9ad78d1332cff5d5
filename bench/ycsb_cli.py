"""``bench load`` and ``bench run``: YCSB's two-phase command line (``ycsb load|run``)."""

from __future__ import annotations

from typing import Any


def add_parsers(sub: Any) -> None:
    """Register ``load`` and ``run``."""
