"""YCSB generator ports: exact hashing, distribution shapes against theory, reproducibility."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from workloads import generators as g

N = 100_000


def within(observed: float, p: float, n: int = N, sigmas: float = 5.0) -> bool:
    """|observed - p| within ``sigmas`` binomial standard deviations."""
    return abs(observed - p) <= sigmas * math.sqrt(p * (1 - p) / n)


def test_fnvhash64_matches_ycsb_key_names():
    # YCSB's first hashed key is the well-known "user6284781860667377211"
    assert g.build_key_name(0) == "user6284781860667377211"
    assert g.build_key_name(1) == "user8517097267634966620"
    assert g.build_key_name(42, ordered=True) == "user42"
    assert g.build_key_name(7, ordered=True, zeropadding=4) == "user0007"


def test_fnvhash64_array_equals_scalar():
    rng = random.Random(5)
    values = [0, 1, 255, 256, 2**62, 2**63 - 1, -1, -(2**63)] + [
        rng.getrandbits(63) for _ in range(200)
    ]
    arr = g.fnvhash64_array(np.array(values, dtype=np.int64)).tolist()
    assert arr == [g.fnvhash64(v) for v in values]
    assert all(v >= 0 or v == -(2**63) for v in arr)


def test_zeta_incremental_equals_from_scratch():
    z = g.ZipfianGenerator(0, 99, random.Random(1))
    z.next_long(200)
    assert z.countforzeta == 200
    assert z.zetan == g.zetastatic(0, 200, g.ZIPFIAN_CONSTANT, 0.0)


def test_zipfian_head_matches_theory():
    n = 1000
    z = g.ZipfianGenerator(0, n - 1, random.Random(7))
    counts = Counter(z.next() for _ in range(N))
    zetan = g.zeta(n, g.ZIPFIAN_CONSTANT)
    # items 0 and 1 are drawn exactly with probability 1/zeta and 2^-theta/zeta (Gray et al.)
    assert within(counts[0] / N, 1 / zetan)
    assert within(counts[1] / N, 0.5**g.ZIPFIAN_CONSTANT / zetan)
    assert min(counts) >= 0 and max(counts) <= n - 1
    assert counts[0] > counts[1] > counts[10] > counts[500]


def test_scrambled_zipfian_scatters_the_head():
    n = 1000
    z = g.ScrambledZipfianGenerator(0, n - 1, random.Random(3))
    counts = Counter(z.next() for _ in range(N))
    assert min(counts) >= 0 and max(counts) <= n - 1
    top, top_count = counts.most_common(1)[0]
    # the most popular item is zipf item 0, scrambled: fnvhash64(0) % n, p >= 1/zeta(10^10)
    assert top == g.fnvhash64(0) % n
    assert 0.033 <= top_count / N <= 0.045
    assert len(counts) > 0.95 * n  # spread over (almost) the whole key space
    hot = [k for k, _ in counts.most_common(10)]
    assert max(hot) - min(hot) > n / 4  # popular items are not clustered together


def test_scrambled_zipfian_with_offset_stays_in_range():
    z = g.ScrambledZipfianGenerator(500, 509, random.Random(1))
    assert {z.next() for _ in range(5000)} <= set(range(500, 510))


def test_skewed_latest_favours_recent_items():
    basis = g.CounterGenerator(0)
    for _ in range(1000):
        basis.next()
    assert basis.last() == 999
    gen = g.SkewedLatestGenerator(basis, random.Random(1))
    values = [gen.next() for _ in range(N)]
    assert max(values) <= 999 and min(values) >= 0
    assert sum(v == 999 for v in values) / N > 0.1
    assert sum(v >= 990 for v in values) / N > 0.3
    # follows the basis as it grows
    for _ in range(100):
        basis.next()
    assert max(gen.next() for _ in range(1000)) == 1099


def test_acknowledged_counter_advances_only_over_contiguous_acks():
    c = g.AcknowledgedCounterGenerator(10)
    assert c.last() == 9
    a, b, d = c.next(), c.next(), c.next()
    assert (a, b, d) == (10, 11, 12)
    c.acknowledge(11)
    assert c.last() == 9
    c.acknowledge(10)
    assert c.last() == 11
    c.acknowledge(12)
    assert c.last() == 12


def test_hotspot_fractions():
    gen = g.HotspotIntegerGenerator(0, 999, 0.2, 0.8, random.Random(2))
    values = [gen.next() for _ in range(N)]
    assert min(values) >= 0 and max(values) <= 999
    assert within(sum(v < 200 for v in values) / N, 0.8)
    # out-of-range fractions fall back to 0.0 as in YCSB: every draw is cold
    cold = g.HotspotIntegerGenerator(0, 99, 2.0, 0.5, random.Random(1))
    assert cold.hot_interval == 0 and cold.hotset_fraction == 0.0


def test_uniform_covers_range_evenly():
    gen = g.UniformLongGenerator(10, 19, random.Random(4))
    counts = Counter(gen.next() for _ in range(N))
    assert set(counts) == set(range(10, 20))
    assert all(within(c / N, 0.1) for c in counts.values())


def test_sequential_wraps():
    gen = g.SequentialGenerator(5, 7)
    assert [gen.next() for _ in range(7)] == [5, 6, 7, 5, 6, 7, 5]


def test_discrete_proportions():
    gen = g.DiscreteGenerator(random.Random(9), [(0.9, "UPDATE"), (0.1, "READ")])
    counts = Counter(gen.next() for _ in range(N))
    assert within(counts["READ"] / N, 0.1)
    single = g.DiscreteGenerator(random.Random(9), [(3.0, "SCAN")])
    assert {single.next() for _ in range(100)} == {"SCAN"}


@pytest.mark.parametrize(
    "make",
    [
        lambda r: g.ZipfianGenerator(0, 999, r),
        lambda r: g.ScrambledZipfianGenerator(0, 999, r),
        lambda r: g.UniformLongGenerator(0, 999, r),
        lambda r: g.HotspotIntegerGenerator(0, 999, 0.2, 0.8, r),
    ],
    ids=["zipfian", "scrambled", "uniform", "hotspot"],
)
def test_reproducible_from_seed(make):
    a, b, c = make(random.Random(11)), make(random.Random(11)), make(random.Random(12))
    seq_a = [a.next() for _ in range(5000)]
    assert seq_a == [b.next() for _ in range(5000)]
    assert seq_a != [c.next() for _ in range(5000)]
