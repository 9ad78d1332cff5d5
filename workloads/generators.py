"""YCSB's number generators, ported faithfully from ``site.ycsb.generator`` (brianfrankcooper/YCSB).

The arithmetic follows the Java sources line by line (Gray et al.'s zipfian, FNV-64 scrambling,
the acknowledged insert counter), so a distribution named here means what it means in YCSB.  Two
deliberate differences, both for reproducibility and speed in Python:

* every random draw comes from a ``random.Random`` handed in by the caller (YCSB uses
  ``ThreadLocalRandom``), so a run is reproducible from ``--seed``;
* ``fnvhash64`` and ``zetastatic`` are memoised: they are pure functions and sit on the hot path.

All generators have ``next()`` (YCSB's ``nextValue``) and ``last()`` (YCSB's ``lastValue``).
"""

from __future__ import annotations

import bisect
import functools
import math
import random
import threading

import numpy as np
from typing import Generic, Sequence, TypeVar

T = TypeVar("T")

ZIPFIAN_CONSTANT = 0.99
#: ScrambledZipfianGenerator draws from this many items and folds them into the key space.
SCRAMBLED_ITEM_COUNT = 10_000_000_000
#: zeta(10^10, 0.99), precomputed by YCSB (ScrambledZipfianGenerator.ZETAN).
SCRAMBLED_ZETAN = 26.46902820178302

_MASK64 = (1 << 64) - 1
_FNV_OFFSET_BASIS_64 = 0xCBF29CE484222325
_FNV_PRIME_64 = 1099511628211


@functools.lru_cache(maxsize=1 << 16)
def fnvhash64(val: int) -> int:
    """YCSB's ``Utils.fnvhash64``: FNV-1 over the 8 low bytes of a Java long, then ``Math.abs``.

    Java's ``val >> 8`` is arithmetic and its multiply wraps at 64 bits; both are emulated, and
    ``Math.abs(Long.MIN_VALUE)`` stays negative exactly as in Java.
    """
    val &= _MASK64
    hashval = _FNV_OFFSET_BASIS_64
    for _ in range(8):
        hashval = ((hashval ^ (val & 0xFF)) * _FNV_PRIME_64) & _MASK64
        # arithmetic shift of a signed 64-bit value
        val = (val >> 8) | (0xFF00000000000000 if val & 0x8000000000000000 else 0)
    if hashval & 0x8000000000000000:
        hashval -= 1 << 64  # to signed
    return abs(hashval) if hashval != -(1 << 63) else hashval


def fnvhash64_array(values: np.ndarray) -> np.ndarray:
    """:func:`fnvhash64` over an int64 array (same results; numpy's uint64 math wraps like Java)."""
    val = values.astype(np.int64)  # >> on int64 is arithmetic, as in Java
    hashval = np.full(val.shape, _FNV_OFFSET_BASIS_64, dtype=np.uint64)
    prime = np.uint64(_FNV_PRIME_64)
    for _ in range(8):
        hashval ^= (val & 0xFF).astype(np.uint64)
        hashval *= prime
        val >>= 8
    signed = hashval.view(np.int64)
    return np.abs(signed)  # np.abs(INT64_MIN) == INT64_MIN, like Math.abs


def build_key_name(keynum: int, ordered: bool = False, zeropadding: int = 1) -> str:
    """``CoreWorkload.buildKeyName``: ``"user" + keynum`` (hashed with FNV-64 unless ordered)."""
    if not ordered:
        keynum = fnvhash64(keynum)
    value = str(keynum)
    return "user" + "0" * max(0, zeropadding - len(value)) + value


class Generator(Generic[T]):
    """Base: ``next()`` draws a value, ``last()`` returns the previous one (YCSB's lastValue)."""

    _last: T | None = None

    def next(self) -> T:  # pragma: no cover - abstract
        raise NotImplementedError

    def last(self) -> T | None:
        return self._last


# ------------------------------------------------------------------------------------ counters
class CounterGenerator(Generator[int]):
    """Sequential integers from ``start``; thread-safe (YCSB: an AtomicLong)."""

    def __init__(self, start: int) -> None:
        self._next = start
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            value = self._next
            self._next += 1
        return value

    def last(self) -> int:
        return self._next - 1


class AcknowledgedCounterGenerator(CounterGenerator):
    """A counter whose ``last()`` only advances past values that were ``acknowledge``d, in order.

    YCSB uses it for transaction inserts: readers must not pick a key whose insert has not
    completed.  YCSB keeps a ring of 2^20 flags; a set of pending values is the same rule.
    """

    def __init__(self, start: int) -> None:
        super().__init__(start)
        self._limit = start - 1
        self._acked: set[int] = set()

    def acknowledge(self, value: int) -> None:
        with self._lock:
            self._acked.add(value)
            while self._limit + 1 in self._acked:
                self._limit += 1
                self._acked.discard(self._limit)

    def last(self) -> int:
        return self._limit


class SequentialGenerator(Generator[int]):
    """``start, start+1, ..., end, start, ...`` (YCSB SequentialGenerator, wraps around)."""

    def __init__(self, start: int, end: int) -> None:
        self._start = start
        self._interval = end - start + 1
        self._counter = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            value = self._start + self._counter % self._interval
            self._counter += 1
        self._last = value
        return value


# ------------------------------------------------------------------------------------- uniform
class UniformLongGenerator(Generator[int]):
    """Uniform integers in ``[lower, upper]`` inclusive."""

    def __init__(self, lower: int, upper: int, rng: random.Random) -> None:
        self.lower, self.upper = lower, upper
        self._rng = rng

    def next(self) -> int:
        value = self.lower + int(self._rng.random() * (self.upper - self.lower + 1))
        self._last = value
        return value


class HotspotIntegerGenerator(Generator[int]):
    """``hot_op_fraction`` of draws hit the lowest ``hotset_fraction`` of ``[lower, upper]``.

    Out-of-range fractions become 0.0 and swapped bounds are swapped back, as in YCSB.
    """

    def __init__(
        self,
        lower: int,
        upper: int,
        hotset_fraction: float,
        hot_op_fraction: float,
        rng: random.Random,
    ) -> None:
        if not 0.0 <= hotset_fraction <= 1.0:
            hotset_fraction = 0.0
        if not 0.0 <= hot_op_fraction <= 1.0:
            hot_op_fraction = 0.0
        if lower > upper:
            lower, upper = upper, lower
        self.lower, self.upper = lower, upper
        interval = upper - lower + 1
        self.hot_interval = int(interval * hotset_fraction)
        self.cold_interval = interval - self.hot_interval
        self.hotset_fraction = hotset_fraction
        self.hot_op_fraction = hot_op_fraction
        self._rng = rng

    def next(self) -> int:
        rng = self._rng
        if rng.random() < self.hot_op_fraction:
            value = self.lower + rng.randrange(self.hot_interval)
        else:
            value = self.lower + self.hot_interval + rng.randrange(self.cold_interval)
        self._last = value
        return value


# ------------------------------------------------------------------------------------- zipfian
@functools.lru_cache(maxsize=64)
def _zeta_from_zero(n: int, theta: float) -> float:
    return zetastatic(0, n, theta, 0.0)


def zetastatic(st: int, n: int, theta: float, initialsum: float) -> float:
    """``sum(1 / (i+1)^theta for i in [st, n)) + initialsum`` — YCSB's incremental zeta."""
    total = initialsum
    for i in range(st, n):
        total += 1.0 / ((i + 1) ** theta)
    return total


#: above this many items :func:`zeta` sums the head exactly and the tail by Euler-Maclaurin
ZETA_EXACT_ITEMS = 1_000_000
_ZETA_HEAD = 1000


def zeta(n: int, theta: float) -> float:
    """zeta(n, theta) from scratch, memoised (every client thread asks for the same value).

    Up to :data:`ZETA_EXACT_ITEMS` items the sum is YCSB's term by term.  Beyond, a term-by-term
    sum in Python takes minutes (a scrambled zipfian with a constant other than YCSB's needs
    zeta(10^10)), so the terms past the first thousand are summed with the Euler-Maclaurin
    formula up to the third derivative, whose remainder is far below a double's precision there.
    """
    if n <= ZETA_EXACT_ITEMS:
        return _zeta_from_zero(n, theta)
    return _zeta_large(n, theta)


@functools.lru_cache(maxsize=16)
def _zeta_large(n: int, theta: float) -> float:
    m = _ZETA_HEAD
    head = zetastatic(0, m - 1, theta, 0.0)  # items 1 .. m-1

    def f(x: float) -> float:
        return x ** -theta

    def d1(x: float) -> float:
        return -theta * x ** (-theta - 1)

    def d3(x: float) -> float:
        return -theta * (theta + 1) * (theta + 2) * x ** (-theta - 3)

    if theta == 1.0:
        integral = math.log(n / m)
    else:
        integral = (n ** (1 - theta) - m ** (1 - theta)) / (1 - theta)
    tail = integral + (f(m) + f(n)) / 2 + (d1(n) - d1(m)) / 12 - (d3(n) - d3(m)) / 720
    return head + tail


class ZipfianGenerator(Generator[int]):
    """Zipfian over ``[lower, upper]``; ``lower`` most popular (Gray et al., SIGMOD 1994).

    ``next_long(itemcount)`` with a larger ``itemcount`` than before extends zeta incrementally
    (used by SkewedLatest as inserts arrive).  As in YCSB, ``eta`` keeps using the constructor's
    item count and a smaller ``itemcount`` does not recompute zeta.
    """

    def __init__(
        self,
        lower: int,
        upper: int,
        rng: random.Random,
        constant: float = ZIPFIAN_CONSTANT,
        zetan: float | None = None,
    ) -> None:
        self._rng = rng
        self.items = upper - lower + 1
        self.base = lower
        self.theta = constant
        self.zeta2theta = zeta(2, self.theta)
        self.alpha = 1.0 / (1.0 - self.theta)
        self.zetan = zeta(self.items, self.theta) if zetan is None else zetan
        self.countforzeta = self.items
        self.eta = self._eta()
        self._lock = threading.Lock()
        self._half_pow_theta = 1.0 + 0.5**self.theta
        self.next()  # YCSB's constructor draws once

    def _eta(self) -> float:
        return (1 - (2.0 / self.items) ** (1 - self.theta)) / (1 - self.zeta2theta / self.zetan)

    def next_long(self, itemcount: int) -> int:
        if itemcount > self.countforzeta:
            with self._lock:
                if itemcount > self.countforzeta:
                    self.zetan = zetastatic(self.countforzeta, itemcount, self.theta, self.zetan)
                    self.countforzeta = itemcount
                    self.eta = self._eta()
        u = self._rng.random()
        uz = u * self.zetan
        if uz < 1.0:
            return self.base
        if uz < self._half_pow_theta:
            return self.base + 1
        ret = self.base + int(itemcount * ((self.eta * u - self.eta + 1) ** self.alpha))
        self._last = ret
        return ret

    def next(self) -> int:
        return self.next_long(self.items)


class ScrambledZipfianGenerator(Generator[int]):
    """Zipfian popularity scattered over ``[lower, upper]``: ``lower + fnvhash64(z) % n`` where
    ``z`` is zipfian over 10^10 items with YCSB's precomputed zeta.

    The item count of the inner zipfian never changes here, so draws are made ``BATCH`` at a
    time with numpy (same formulas, vectorized): per-draw pure-Python FNV hashing of a mostly
    unique 10^10-item space would otherwise be the client thread's largest cost.  The
    uniform variates come from a numpy generator seeded from ``rng``, so runs stay reproducible.
    """

    BATCH = 4096

    def __init__(
        self, lower: int, upper: int, rng: random.Random, constant: float = ZIPFIAN_CONSTANT
    ) -> None:
        self.lower, self.upper = lower, upper
        self.itemcount = upper - lower + 1
        self._gen = ZipfianGenerator(
            0,
            SCRAMBLED_ITEM_COUNT,
            rng,
            constant,
            SCRAMBLED_ZETAN if constant == ZIPFIAN_CONSTANT else None,
        )

        self._np = np.random.default_rng(rng.getrandbits(64))
        self._buffer: list[int] = []

    def _refill(self) -> None:
        z = self._gen
        u = self._np.random(self.BATCH)
        uz = u * z.zetan
        ret = z.base + (z.items * np.power(z.eta * u - z.eta + 1, z.alpha)).astype(np.int64)
        ret[uz < z._half_pow_theta] = z.base + 1
        ret[uz < 1.0] = z.base
        # Java's % keeps the dividend's sign (matters only for fnvhash64 == Long.MIN_VALUE)
        scrambled = self.lower + np.fmod(fnvhash64_array(ret), self.itemcount)
        self._buffer = scrambled.tolist()[::-1]

    def next(self) -> int:
        if not self._buffer:
            self._refill()
        value = self._buffer.pop()
        self._last = value
        return value


class SkewedLatestGenerator(Generator[int]):
    """Zipfian skewed towards the newest value of ``basis`` (YCSB's ``latest`` distribution)."""

    def __init__(self, basis: CounterGenerator, rng: random.Random) -> None:
        self._basis = basis
        self._zipfian = ZipfianGenerator(0, max(basis.last(), 1) - 1, rng)
        self.next()

    def next(self) -> int:
        top = self._basis.last()
        value = top - self._zipfian.next_long(top)
        self._last = value
        return value


# --------------------------------------------------------------------------------- exponential
class ExponentialGenerator(Generator[float]):
    """Exponentially distributed values with rate ``gamma``: small values most frequent, no upper
    bound (YCSB's ``exponential`` request distribution draws key offsets back from the newest).

    Built from a mean (``gamma = 1 / mean``) or, as CoreWorkload does, from "``percentile`` per
    cent of draws fall below ``span``": ``gamma = -ln(1 - percentile / 100) / span``.  A draw is
    ``-ln(u) / gamma`` with ``u`` uniform in ``(0, 1]`` (YCSB's ``u`` may be 0, which would give an
    infinite draw; the distribution is otherwise the same).
    """

    def __init__(self, percentile: float, span: float, rng: random.Random) -> None:
        if not 0.0 < percentile < 100.0 or span <= 0:
            raise ValueError("exponential needs 0 < percentile < 100 and a positive span")
        self.gamma = -math.log(1.0 - percentile / 100.0) / span
        self._rng = rng

    @classmethod
    def from_mean(cls, mean: float, rng: random.Random) -> "ExponentialGenerator":
        gen = cls.__new__(cls)
        gen.gamma = 1.0 / mean
        gen._rng = rng
        return gen

    def mean(self) -> float:
        return 1.0 / self.gamma

    def next(self) -> float:
        value = -math.log(1.0 - self._rng.random()) / self.gamma
        self._last = value
        return value


# ------------------------------------------------------------------------------------ discrete
class DiscreteGenerator(Generator[T]):
    """Chooses among values by weight (YCSB's operation chooser)."""

    def __init__(self, rng: random.Random, weighted: Sequence[tuple[float, T]] = ()) -> None:
        self._rng = rng
        self._values: list[T] = []
        self._weights: list[float] = []
        self._cumulative: list[float] = []
        for weight, value in weighted:
            self.add_value(weight, value)

    def add_value(self, weight: float, value: T) -> None:
        self._values.append(value)
        self._weights.append(weight)
        total = sum(self._weights)
        acc = 0.0
        self._cumulative = []
        for w in self._weights:
            acc += w / total
            self._cumulative.append(acc)
        self._cumulative[-1] = 1.0  # guard against rounding: u < 1.0 always lands somewhere

    @property
    def values(self) -> list[T]:
        return list(self._values)

    def next(self) -> T:
        # same as YCSB's linear walk (val < w/sum, else val -= w/sum), via cumulative sums
        value = self._values[bisect.bisect_right(self._cumulative, self._rng.random())]
        self._last = value
        return value
