"""Key skew of the generated streams: a zipfian exponent, or a hot set taking a fixed share.

``--skew`` (and the source option ``skew``) accepts two forms, parsed once by :func:`parse_skew`:

* a number ``S >= 0``: zipfian, P(rank r) ∝ 1/(r+1)^S over ``keys`` ranks (0 = uniform). It is
  the classic "a few keys are much hotter" shape, but how much of the load the top keys get depends
  on ``keys`` too (S=1 over 10,000 keys gives rank 0 about 10 %).
* ``hot:F`` or ``hot:F:N``: exactly the fraction ``F`` (0 < F <= 1) of the events goes to the
  ``N`` hot keys (ranks ``0..N-1``, uniformly among them); the other ``1 - F`` go uniformly to the
  remaining ``keys - N`` (cold) keys. ``N`` defaults to 1 % of ``keys`` (at least 1). This is
  the knob for "one instance is overloaded": the hot share does not move when ``keys`` does.
  ``hot:F`` with ``F = N/keys`` is the uniform distribution.
* either, prefixed ``load+`` (``load+hot:1:20000``): the first ``keys`` events visit every key once,
  in key order, as YCSB's load phase inserts every record before its run phase; the distribution
  applies from event ``keys`` on.  This is how a job holds its whole state from the start while
  each interval touches a few keys (1 % dirty: ``load+hot:1:N`` with ``N`` = 1 % of the keys);
  the runner measures steady throughput after the load.  For the keyed counts (word count,
  bids); NexMark's persons and auctions are created as the stream goes.

Ranks become key ids in the generator (rank 0 = key 0 for word count and bids; the most recent
person/auction for NexMark's sellers and bids). Sampling is a pure function of ``(seed, stream,
event number)`` like everything in :mod:`.source`, so replays see the same keys.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from .errors import SparkIntegrationError

SYNTAX = ("a zipfian exponent >= 0 (e.g. 1.0; 0 = uniform) or hot:FRACTION[:HOTKEYS] (e.g. hot:0.2), "
          "either prefixed load+ to visit every key once first (e.g. load+hot:1:20000)")
LOAD = "load+"


@dataclass(frozen=True)
class Skew:
    """A validated skew; ``str()`` is its canonical text (what travels in source options)."""

    exponent: float = 1.0  # zipfian (used when fraction is None)
    fraction: float | None = None  # hot mode: share of events going to the hot keys
    hot_keys: int | None = None  # hot mode: explicit hot-set size (None = 1 % of keys)
    load: bool = False  # events [0, keys) visit key i in order before the distribution applies

    @property
    def is_hot(self) -> bool:
        return self.fraction is not None

    def hot_set(self, keys: int) -> int:
        """The number of hot keys among ``keys``; a clear error if it does not fit."""
        n = self.hot_keys if self.hot_keys is not None else max(1, keys // 100)
        if n > keys:
            raise SparkIntegrationError(f"skew {self}: {n} hot keys but only {keys} keys")
        return n

    def load_events(self, keys: int) -> int:
        """How many of the stream's first events are the load phase (0 without ``load+``)."""
        return keys if self.load else 0

    def __str__(self) -> str:
        text = (repr(float(self.exponent)) if not self.is_hot else
                f"hot:{self.fraction!r}" + (f":{self.hot_keys}" if self.hot_keys is not None else ""))
        return LOAD + text if self.load else text


def parse_skew(value: "str | float | Skew") -> Skew:
    """``1.0`` / ``"1.0"`` / ``"hot:0.2"`` / ``"hot:0.2:10"`` -> :class:`Skew`, or one clear error."""
    if isinstance(value, Skew):
        return value
    text = str(value).strip()
    bad = f"skew {text!r} is not valid; expected {SYNTAX}"
    if text.lower().startswith(LOAD):
        inner = text[len(LOAD):]
        if not inner.strip() or inner.lower().startswith(LOAD):
            raise SparkIntegrationError(bad)
        return dataclasses.replace(parse_skew(inner), load=True)
    if text.lower().startswith("hot:"):
        parts = text.split(":")[1:]
        if len(parts) not in (1, 2):
            raise SparkIntegrationError(bad)
        try:
            fraction = float(parts[0])
            hot_keys = int(parts[1]) if len(parts) == 2 else None
        except ValueError:
            raise SparkIntegrationError(bad) from None
        if not 0 < fraction <= 1:
            raise SparkIntegrationError(f"skew {text!r}: the hot FRACTION must be in (0, 1], got {fraction}")
        if hot_keys is not None and hot_keys < 1:
            raise SparkIntegrationError(f"skew {text!r}: HOTKEYS must be >= 1, got {hot_keys}")
        return Skew(fraction=fraction, hot_keys=hot_keys)
    try:
        exponent = float(text)
    except ValueError:
        raise SparkIntegrationError(bad) from None
    if not exponent >= 0 or exponent == float("inf"):  # also rejects nan
        raise SparkIntegrationError(f"skew {text!r}: a zipfian exponent must be a finite number >= 0")
    return Skew(exponent=exponent)


def skew_arg(text: str) -> str:
    """``argparse`` type: validate early, keep the text (it is passed on as a string)."""
    import argparse

    try:
        return str(parse_skew(text))
    except SparkIntegrationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@functools.lru_cache(maxsize=16)
def _zipf_cdf(keys: int, exponent: float) -> np.ndarray:
    ranks = np.arange(1, keys + 1, dtype=np.float64)
    weights = ranks ** -exponent if exponent > 0 else np.ones(keys)
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def ranks(skew: Skew, keys: int, u: np.ndarray, v: np.ndarray | None) -> np.ndarray:
    """Ranks in ``[0, keys)`` from two independent uniform arrays (``v`` is used by hot mode only)."""
    if not skew.is_hot:
        idx = np.searchsorted(_zipf_cdf(keys, skew.exponent), u, side="right")
        return np.minimum(idx, keys - 1).astype(np.int64)
    hot = skew.hot_set(keys)
    cold = keys - hot
    if cold == 0:
        return np.minimum((v * hot).astype(np.int64), hot - 1)
    is_hot = u < skew.fraction
    r = np.where(is_hot, v * hot, hot + v * cold).astype(np.int64)
    return np.minimum(r, keys - 1)
