"""The jobs: which source stream, which keyed operator, what runs before the shuffle, the truth.

A job (``JobSpec.kind``, ``bench spark --job``) is a source kind plus a keyed operator; the driver,
the protocols and the verification only ever go through this table, so a new query is one entry
(and, for a new kind of state, one :class:`~.operators.KeyedState` subclass).

  * ``wordcount``, ``bids``: keyed count (S4 word count; NexMark bids per auction, Q12-style).
  * ``q3``: NexMark Q3, the persons ⋈ auctions join (:mod:`.q3`), on NexMark's mixed stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .conf import SparkIntegrationError


@dataclass(frozen=True)
class Query:
    name: str
    source: str  # source kind (:data:`.source.KINDS`)
    operator: str  # :data:`.operators.STATE_CLASSES` key; travels to executors in Settings
    #: ``mapInArrow`` body run before the shuffle (filters), same schema; None = none
    select: Callable[..., Any] | None = None

    def ground_truth(self, seed: int, keys: int, skew: Any, events: int) -> np.ndarray:
        """The final state of a failure-free run, as a dense array (index = state slot)."""
        if self.operator == "join":
            from .q3 import ground_truth

            return ground_truth(seed, keys, skew, events)
        from .verify import count_truth

        return count_truth(self.source, seed, keys, skew, events)


def _q3_select(batches):
    from .q3 import select_partition

    return select_partition(batches)


QUERIES = {
    "wordcount": Query("wordcount", "wordcount", "count"),
    "bids": Query("bids", "bids", "count"),
    "q3": Query("q3", "nexmark", "join", _q3_select),
}


def query(kind: str) -> Query:
    try:
        return QUERIES[kind]
    except KeyError:
        raise SparkIntegrationError(f"unknown job kind {kind!r}; valid kinds: {', '.join(QUERIES)}") from None
