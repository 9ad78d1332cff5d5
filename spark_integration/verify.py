"""The keyed count's failure-free ground truth, and the exactly-once comparison.

The truth is computed without Spark, straight from the deterministic event function
(:func:`spark_integration.source.generate`) in numpy chunks, so it shares nothing with the job's
operators, protocols or backends: a keyed count is a ``bincount``, Q3 a relational join over the
whole input (:func:`spark_integration.q3.ground_truth`).  Which truth belongs to which job is the
job table's business (:func:`spark_integration.queries.ground_truth`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .source import generate


def count_truth(kind: str, seed: int, keys: int, skew: Any, events: int, chunk: int = 1 << 20) -> np.ndarray:
    """Count per key id of source ``kind``'s events ``[0, events)`` (index = key id)."""
    counts = np.zeros(keys, np.int64)
    for start in range(0, events, chunk):
        cols = generate(kind, seed, keys, skew, start, min(events, start + chunk))
        bc = np.bincount(cols["key"], minlength=keys)
        if len(bc) > len(counts):
            counts = np.concatenate([counts, np.zeros(len(bc) - len(counts), np.int64)])
        counts[: len(bc)] += bc
    return counts


def latest_windows(kind: str, seed: int, keys: int, skew: Any, events: int, window: int,
                   chunk: int = 1 << 20) -> np.ndarray:
    """Each key id's latest tumbling window of ``window`` events (``seq // window`` of its last
    event; -1: the key has no event) over events ``[0, events)``."""
    latest = np.full(keys, -1, np.int64)
    for start in range(0, events, chunk):
        cols = generate(kind, seed, keys, skew, start, min(events, start + chunk))
        if len(cols["key"]) and int(cols["key"].max()) >= len(latest):
            latest = np.concatenate([latest, np.full(int(cols["key"].max()) + 1 - len(latest), -1, np.int64)])
        np.maximum.at(latest, cols["key"], cols["seq"] // window)
    return latest


def in_latest_window(latest: np.ndarray, window: int, watermark: int, key: np.ndarray,
                     seq: np.ndarray) -> np.ndarray:
    """Which events ``(key, seq)`` a windowed key holds at the end: those of its latest window,
    when that window had not closed at ``watermark`` (:mod:`.sized_state`)."""
    return (seq // window == latest[key]) & (latest[key] >= watermark // window)


def windowed_counts(kind: str, seed: int, keys: int, skew: Any, events: int, window: int,
                    watermark: int, chunk: int = 1 << 20) -> np.ndarray:
    """Count per key id of a windowed keyed count after events ``[0, events)``, its windows closed
    at ``watermark``: each key's events of its latest window, 0 for a key whose latest window
    had closed (:mod:`.sized_state`)."""
    latest = latest_windows(kind, seed, keys, skew, events, window, chunk)
    counts = np.zeros(len(latest), np.int64)
    for start in range(0, events, chunk):
        cols = generate(kind, seed, keys, skew, start, min(events, start + chunk))
        key = cols["key"]
        counts += np.bincount(key[in_latest_window(latest, window, watermark, key, cols["seq"])],
                              minlength=len(latest))
    return counts


@dataclass
class Comparison:
    exactly_once: bool
    keys_compared: int
    wrong_keys: int
    expected_total: int
    actual_total: int
    #: sized state: keys whose ring differs from the truth, of the keys whose ring was compared
    wrong_rings: int = 0
    rings_compared: int = 0

    def describe(self) -> str:
        rings = f", and {self.rings_compared} keys' state bytes" if self.rings_compared else ""
        if self.exactly_once:
            return f"exactly-once: {self.keys_compared} keys (state slots){rings} match the failure-free result"
        return (f"NOT exactly-once: {self.wrong_keys} of {self.keys_compared} keys differ; "
                f"values sum to {self.actual_total}, expected {self.expected_total}"
                + (f"; {self.wrong_rings} of {self.rings_compared} keys' state bytes differ"
                   if self.rings_compared else ""))


def compare(expected: np.ndarray, actual_keys: np.ndarray, actual_counts: np.ndarray,
            wrong_rings: int = 0, rings_compared: int = 0) -> Comparison:
    """Final per-key state (sparse pairs, keys may repeat across nothing) vs the ground truth;
    a sized state's rings were compared on the executors (``wrong_rings`` of ``rings_compared``)."""
    size = max(len(expected), int(actual_keys.max()) + 1 if len(actual_keys) else 0)
    actual = np.zeros(size, np.int64)
    np.add.at(actual, actual_keys, actual_counts)
    exp = np.zeros(size, np.int64)
    exp[: len(expected)] = expected
    wrong = int(np.count_nonzero(actual != exp))
    return Comparison(wrong == 0 and wrong_rings == 0, int(np.count_nonzero(exp | actual)), wrong,
                      int(exp.sum()), int(actual.sum()), wrong_rings, rings_compared)
