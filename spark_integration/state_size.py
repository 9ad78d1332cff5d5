"""How many bytes of state each key holds: ``spark.ckptbench.stateBytes`` (``bench spark --state-bytes``).

Real operators keep more per key than a count: a window's values, a session, a model.  With a size
``B`` every key of a keyed count also keeps a *ring buffer* of its last ``B / 8`` events (their
event numbers, a holistic window), so its checkpointed state is about ``B`` bytes, and every event
rewrites 8 of them.  The forms, parsed once by :func:`parse_state_size`:

* ``0`` (the default): counts only, 16 bytes a key in a checkpoint (key and count);
* ``B``: every key holds ``B`` bytes (``B >= 8``);
* ``uniform:LO:HI``: each key's size drawn uniformly from ``[LO, HI]``;
* ``lognormal:MEDIAN:SIGMA``: each key's size drawn from a log-normal with that median and shape,
  the long tail of real per-key state (a few keys hold far more than the median).

Sizes are rounded down to whole 8-byte slots (at least one), and drawn per key *id* as a pure
function of the id (:mod:`.counter_random`), so every instance, every restore and the ground
truth agree on a key's size without storing it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .counter_random import uniform
from .errors import SparkIntegrationError

SYNTAX = "0 (counts only), BYTES (e.g. 1024), uniform:LO:HI or lognormal:MEDIAN:SIGMA"
#: the counter-based random stream of the key sizes (apart from the sources' streams)
_STREAM = 0x5153
#: the largest ring a key may hold: 16 MiB of state per key
MAX_BYTES = 1 << 24


@dataclass(frozen=True)
class StateSize:
    """A validated per-key state size; ``str()`` is its canonical text (what travels in the conf)."""

    kind: str = "fixed"  # fixed, uniform, lognormal
    a: float = 0.0  # fixed: bytes; uniform: low; lognormal: median
    b: float = 0.0  # uniform: high; lognormal: sigma

    @property
    def sized(self) -> bool:
        """Whether keys hold more than their count."""
        return not (self.kind == "fixed" and self.a == 0)

    def __str__(self) -> str:
        if self.kind == "fixed":
            return str(int(self.a))
        return f"{self.kind}:{self.a:g}:{self.b:g}"

    def slots(self, keys: np.ndarray) -> np.ndarray:
        """The ring length of every key in ``keys`` (int64 slots of 8 bytes, at least 1)."""
        keys = np.asarray(keys, np.int64)
        if self.kind == "fixed":
            return np.full(len(keys), max(1, int(self.a) // 8), np.int64)
        u = uniform(0, _STREAM, keys)
        if self.kind == "uniform":
            size = self.a + u * (self.b - self.a + 1)
        else:  # lognormal, by the inverse normal CDF of a uniform draw (no per-key RNG state)
            size = self.a * np.exp(self.b * _probit(np.clip(u, 1e-12, 1 - 1e-12)))
        return np.clip(size.astype(np.int64) // 8, 1, MAX_BYTES // 8)

    def mean_bytes(self, keys: int) -> float:
        """The mean state bytes per key over key ids ``0 .. keys-1`` (the ring only)."""
        return 8.0 * float(self.slots(np.arange(keys)).mean()) if keys else 0.0


def _probit(p: np.ndarray) -> np.ndarray:
    """The standard normal quantile function (Acklam's rational approximation, |error| < 1.2e-9
    after one Newton step is unnecessary at these sizes)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
         1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
         6.680131188771972e+01, -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
         -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    p = np.asarray(p, np.float64)
    out = np.empty_like(p)
    lo, hi = p < 0.02425, p > 1 - 0.02425
    mid = ~(lo | hi)
    q = np.sqrt(-2 * np.log(p[lo]))
    out[lo] = ((((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
               / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1))
    q = np.sqrt(-2 * np.log(1 - p[hi]))
    out[hi] = -((((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
                / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1))
    q = p[mid] - 0.5
    r = q * q
    out[mid] = ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q
                / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1))
    return out


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SparkIntegrationError(f"state size {what} {text!r} is not a number; use {SYNTAX}") from None
    if not math.isfinite(value) or value <= 0:
        raise SparkIntegrationError(f"state size {what} {text!r} must be a positive number; use {SYNTAX}")
    return value


def parse_state_size(value: "str | int | StateSize") -> StateSize:
    """``0`` / ``1024`` / ``"uniform:64:4096"`` / ``"lognormal:1024:1.0"`` -> :class:`StateSize`,
    or one clear error naming the accepted forms."""
    if isinstance(value, StateSize):
        return value
    text = str(value).strip().lower()
    kind, _, rest = text.partition(":")
    if not rest:
        try:
            n = int(text)
        except ValueError:
            raise SparkIntegrationError(f"state size {text!r} is not valid; use {SYNTAX}") from None
        if n != 0 and not 8 <= n <= MAX_BYTES:
            raise SparkIntegrationError(f"state size {n} must be 0 or from 8 to {MAX_BYTES} bytes")
        return StateSize("fixed", float(n))
    parts = rest.split(":")
    if kind not in ("uniform", "lognormal") or len(parts) != 2:
        raise SparkIntegrationError(f"state size {text!r} is not valid; use {SYNTAX}")
    a, b = _number(parts[0], "first parameter"), _number(parts[1], "second parameter")
    if kind == "uniform" and not 8 <= a <= b <= MAX_BYTES:
        raise SparkIntegrationError(
            f"state size {text!r}: need 8 <= LO <= HI <= {MAX_BYTES} bytes")
    if kind == "lognormal" and (a < 8 or a > MAX_BYTES or b > 4):
        raise SparkIntegrationError(
            f"state size {text!r}: need a median from 8 to {MAX_BYTES} bytes and sigma <= 4")
    return StateSize(kind, a, b)


def state_size_arg(text: str) -> StateSize:
    """argparse ``type=`` for ``--state-bytes``: a clear usage error instead of a traceback."""
    import argparse

    try:
        return parse_state_size(text)
    except SparkIntegrationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
