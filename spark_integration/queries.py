"""The jobs: which source stream, which keyed operator, what runs before the shuffle, the truth.

A job (``JobSpec.kind``, ``bench spark --job``) is a source kind plus a keyed operator; the driver,
the protocols and the verification only ever go through this table, so a new query is one entry
(and, for a new kind of state, one :class:`~.operators.KeyedState` subclass).

  * ``wordcount``, ``bids``: keyed count (S4 word count; NexMark bids per auction, Q12-style).
  * ``q3``: NexMark Q3, the persons ⋈ auctions join (:mod:`.q3`), on NexMark's mixed stream.
  * ``q1``, ``q8``, ``q12``: NexMark Q1 (map), Q8 (windowed join), Q12 (windowed count)
    (:mod:`.nexmark_queries`), the rest of CheckMate's NexMark set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import nexmark_queries as nq
from . import q3
from .errors import SparkIntegrationError
from .verify import count_truth, windowed_counts


@dataclass(frozen=True)
class Query:
    name: str
    source: str  # source kind (:data:`.source.KINDS`)
    operator: str  # :data:`.operators.STATE_CLASSES` key; travels to executors in Settings
    #: ``mapInArrow`` body run before the shuffle (filters), same schema; None = none
    select: Callable[..., Any] | None = None
    #: the failure-free final state ``(seed, keys, skew, events) -> dense array``; None: by operator
    truth: Callable[..., np.ndarray] | None = None

    @property
    def sizable(self) -> bool:
        """Whether its keys can hold state of a size (``stateBytes``): the keyed count over the
        source's own events, whose rings the ground truth can rebuild (:mod:`.sized_state`)."""
        return self.operator == "count" and self.truth is None and self.select is None

    def ground_truth(self, seed: int, keys: int, skew: Any, events: int, window: int = 0,
                     watermark: int = 0) -> np.ndarray:
        """The final state of a failure-free run, as a dense array (index = state slot); a
        windowed count (``window`` events, a :attr:`sizable` job) with its windows closed at
        ``watermark``."""
        if window:
            return windowed_counts(self.source, seed, keys, skew, events, window, watermark)
        if self.truth is not None:
            return self.truth(seed, keys, skew, events)
        if self.operator == "join":
            return q3.ground_truth(seed, keys, skew, events)
        return count_truth(self.source, seed, keys, skew, events)


QUERIES = {
    "wordcount": Query("wordcount", "wordcount", "count"),
    "bids": Query("bids", "bids", "count"),
    "q3": Query("q3", "nexmark", "join", q3.select_partition),
    "q1": Query("q1", "bids", "count", nq.q1_select, nq.q1_truth),
    "q8": Query("q8", "nexmark", "join", nq.q8_select, nq.q8_truth),
    "q12": Query("q12", "bids", "count", nq.q12_select, nq.q12_truth),
}


def query(kind: str) -> Query:
    try:
        return QUERIES[kind]
    except KeyError:
        raise SparkIntegrationError(f"unknown job kind {kind!r}; valid kinds: {', '.join(QUERIES)}") from None


def ground_truth(kind: str, seed: int, keys: int, skew: Any, events: int) -> np.ndarray:
    """The final state of job ``kind`` after events ``[0, events)`` in a failure-free run."""
    return query(kind).ground_truth(seed, keys, skew, events)
