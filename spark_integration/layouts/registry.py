"""Layout name -> implementation: the one table the conf, ``bench spark`` and the protocols ask.

A protocol never names a layout: it asks :func:`layout_for` for the job's and writes, lists,
loads and deletes its checkpoints through it (:class:`~.base.Layout`).  A new layout joins
everything with its module and one line in ``_BUILTIN``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import SparkIntegrationError
from ..settings import Settings

if TYPE_CHECKING:  # annotations only: the layouts import the registry's lookup (base.Layout.load)
    from .base import Layout

#: name -> "module:Class", in the order ``--help`` lists them; the first is the default
_BUILTIN = {
    "changelog": "spark_integration.layouts.changelog:ChangelogLayout",
    "per-key": "spark_integration.layouts.per_key:PerKeyLayout",
    "chunks": "spark_integration.layouts.chunks:ChunksLayout",
}
DEFAULT = "changelog"
#: ``spark.ckptbench.chunkBytes``'s default: 4 MiB chunks
DEFAULT_CHUNK_BYTES = 4 << 20


class UnknownLayoutError(SparkIntegrationError):
    """A layout name that is not registered; the message lists the registered ones."""


def layout_names() -> list[str]:
    return list(_BUILTIN)


def layout_class(name: str) -> type[Layout]:
    """The layout registered as ``name``; one clear error listing the valid names otherwise."""
    try:
        module_name, _, attr = _BUILTIN[name].partition(":")
    except (KeyError, TypeError):
        raise UnknownLayoutError(
            f"unknown layout {name!r}; valid layouts: {', '.join(layout_names())}") from None
    return getattr(importlib.import_module(module_name), attr)


def layout_for(settings: Settings) -> Layout:
    """The job's layout (``spark.ckptbench.layout``, ``chunkBytes``)."""
    return layout_class(settings.layout)(settings.chunk_bytes)


def layout_help() -> str:
    """One line per layout for ``--help``."""
    return "; ".join(f"{n}: {layout_class(n).summary}" for n in layout_names())
