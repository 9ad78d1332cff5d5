"""Workload definitions: YCSB's CoreWorkload parameters, its presets A–F, and the thesis' write-heavy mix.

A :class:`WorkloadSpec` is plain data (what to run).  A :class:`CoreWorkload` holds the state
shared by all client threads (the load key counter and the acknowledged insert counter); each
thread gets a :class:`Client` with its own seeded generators, so one thread's op/key stream is
reproducible from the seed.

Differences from YCSB, on purpose:
* one opaque value of ``value_size`` bytes per key instead of ``fieldcount`` fields;
* a read-modify-write is measured once, as ``READ-MODIFY-WRITE`` (YCSB also counts its inner
  read and update under ``READ``/``UPDATE``), so per-op counts add up to the op count;
* a scan is "``count`` keys from ``start`` in key order", built on the interface's prefix scan
  (:func:`scan_from`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import generators as g

_now = time.perf_counter_ns

OPS = ("READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE")
DISTRIBUTIONS = ("zipfian", "uniform", "latest", "hotspot", "sequential")
#: YCSB's key prefix
KEY_PREFIX = "user"


class WorkloadError(ValueError):
    """A workload parameter that cannot work (names the parameter and the fix)."""


@dataclass
class WorkloadSpec:
    """CoreWorkload's parameters (YCSB property names in comments)."""

    name: str = "custom"
    records: int = 1000  # recordcount
    operations: int = 1000  # operationcount
    read: float = 0.95  # readproportion
    update: float = 0.05  # updateproportion
    insert: float = 0.0  # insertproportion
    scan: float = 0.0  # scanproportion
    rmw: float = 0.0  # readmodifywriteproportion
    distribution: str = "zipfian"  # requestdistribution
    value_size: int = 1024  # fieldlength * fieldcount, one opaque value here
    min_scan_length: int = 1  # minscanlength
    max_scan_length: int = 100  # maxscanlength (YCSB: 1000 in CoreWorkload, 100 in workload E)
    ordered_inserts: bool = False  # insertorder=hashed
    hotspot_data_fraction: float = 0.2  # hotspotdatafraction
    hotspot_op_fraction: float = 0.8  # hotspotopnfraction

    def proportions(self) -> dict[str, float]:
        return {
            "READ": self.read,
            "UPDATE": self.update,
            "INSERT": self.insert,
            "SCAN": self.scan,
            "READ-MODIFY-WRITE": self.rmw,
        }

    def validate(self) -> "WorkloadSpec":
        if self.records < 1:
            raise WorkloadError(f"records must be >= 1 (got {self.records})")
        if self.operations < 0:
            raise WorkloadError(f"operations must be >= 0 (got {self.operations})")
        if self.value_size < 0:
            raise WorkloadError(f"value size must be >= 0 bytes (got {self.value_size})")
        for op, p in self.proportions().items():
            if p < 0 or not math.isfinite(p):
                raise WorkloadError(f"the {op} proportion must be >= 0 (got {p})")
        if sum(self.proportions().values()) <= 0:
            raise WorkloadError("all operation proportions are 0; give at least one a weight")
        if self.distribution not in DISTRIBUTIONS:
            raise WorkloadError(
                f"unknown request distribution {self.distribution!r}; "
                f"valid: {', '.join(DISTRIBUTIONS)}"
            )
        if self.distribution == "hotspot" and (
            int(self.records * self.hotspot_data_fraction) < 1
            or self.records - int(self.records * self.hotspot_data_fraction) < 1
        ):
            raise WorkloadError(
                f"hotspot needs a non-empty hot and cold set: {self.records} records with hot "
                f"fraction {self.hotspot_data_fraction}; load more records"
            )
        if not 1 <= self.min_scan_length <= self.max_scan_length:
            raise WorkloadError("scan lengths need 1 <= min_scan_length <= max_scan_length")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _preset(name: str, **kw: Any) -> WorkloadSpec:
    base = dict(read=0.0, update=0.0, insert=0.0, scan=0.0, rmw=0.0)
    base.update(kw)
    return WorkloadSpec(name=name, **base)


#: YCSB's workloads/workload[a-f] files, and the thesis' micro-benchmark (Fig 4.1).
PRESETS: dict[str, WorkloadSpec] = {
    "ycsb-a": _preset("ycsb-a", read=0.5, update=0.5),
    "ycsb-b": _preset("ycsb-b", read=0.95, update=0.05),
    "ycsb-c": _preset("ycsb-c", read=1.0),
    "ycsb-d": _preset("ycsb-d", read=0.95, insert=0.05, distribution="latest"),
    "ycsb-e": _preset("ycsb-e", scan=0.95, insert=0.05, max_scan_length=100),
    "ycsb-f": _preset("ycsb-f", read=0.5, rmw=0.5),
    "write-heavy": _preset(
        "write-heavy", records=1000, operations=10000, read=0.1, update=0.9, value_size=1024
    ),
}


def preset(name: str, **overrides: Any) -> WorkloadSpec:
    """A copy of preset ``name`` with ``overrides`` (None values are ignored), validated."""
    try:
        spec = PRESETS[name]
    except KeyError:
        raise WorkloadError(
            f"unknown workload {name!r}; valid: {', '.join(PRESETS)}"
        ) from None
    changes = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(spec, **changes).validate()


# ------------------------------------------------------------------------------------- values
class ValueSource:
    """Cheap pseudo-random values: a slice of a pre-generated random buffer at a random offset."""

    SPAN = 1 << 16  # offsets are 16 random bits

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size = size
        self._rng = rng
        self._buf = rng.randbytes(self.SPAN + size)

    def next(self) -> bytes:
        off = self._rng.getrandbits(16)  # SPAN == 2**16
        return self._buf[off : off + self.size]


def deterministic_value(key: str, size: int, seed: int = 0) -> bytes:
    """A value derived from ``key`` and ``seed`` alone, so it can be verified without a copy."""
    block = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=64).digest()
    return (block * (size // 64 + 1))[:size]


# --------------------------------------------------------------------------------------- scan
def scan_from(store: Any, start: str, count: int, expected_keys: int, floor: int = len(KEY_PREFIX)):
    """Up to ``count`` ``(key, value)`` pairs with key >= ``start``, in key order.

    The interface only scans by prefix, so this scans ``start[:L]`` and widens the prefix one
    character at a time until ``count`` pairs are found.  Every key in a narrower prefix range
    that is >= ``start`` has been taken before widening, so the result is exactly the first
    ``count`` keys >= ``start``.  ``L`` starts where the range should hold about ``count`` keys
    (hashed keys spread evenly over decimal digits).
    """
    digits = max(0, int(math.log10(max(expected_keys, 1) / max(count, 1))))
    length = min(len(start), floor + digits)
    out: list[tuple[str, bytes]] = []
    last: str | None = None
    while True:
        for key, value in store.scan(start[:length]):
            if key < start or (last is not None and key <= last):
                continue
            out.append((key, value))
            last = key
            if len(out) >= count:
                return out
        if length <= floor:
            return out
        length -= 1


# ------------------------------------------------------------------------------------ workload
class CoreWorkload:
    """State shared by every client thread of one run, and the factory of per-thread clients."""

    def __init__(self, spec: WorkloadSpec, seed: int = 0) -> None:
        self.spec = spec.validate()
        self.seed = seed
        self.load_sequence = g.CounterGenerator(0)  # keysequence (insertstart=0)
        self.insert_sequence = g.AcknowledgedCounterGenerator(spec.records)
        self.sequential = g.SequentialGenerator(0, spec.records - 1)
        # key names of the loaded records, computed once (FNV-64 hashing in Python is not free,
        # and every operation needs one)
        self.key_cache = [g.build_key_name(i, spec.ordered_inserts) for i in range(spec.records)]

    def key(self, keynum: int) -> str:
        """YCSB's buildKeyName for ``keynum``."""
        if keynum < len(self.key_cache):
            return self.key_cache[keynum]
        return g.build_key_name(keynum, self.spec.ordered_inserts)

    def load_keys(self) -> list[str]:
        """The keys of the load phase, in insertion order."""
        return list(self.key_cache)

    def client(self, index: int) -> "Client":
        """The client for thread ``index``; its randomness comes from (seed, index) only."""
        return Client(self, random.Random(f"{self.seed}/{index}"))


class Client:
    """One client thread's generators and transaction methods (YCSB's doTransaction*).

    Each ``do_*`` returns ``(status, start_ns, end_ns)``; status is ``"OK"``, or ``"NOT_FOUND"``
    for a read of a missing key.  Backend exceptions propagate: the runner counts them as
    ``ERROR``.
    """

    def __init__(self, workload: CoreWorkload, rng: random.Random) -> None:
        spec = workload.spec
        self.workload = workload
        self.spec = spec
        self.rng = rng
        self.chooser = g.DiscreteGenerator(
            rng, [(p, op) for op, p in spec.proportions().items() if p > 0]
        )
        self.keychooser = self._key_chooser(spec, workload, rng)
        self.scan_length = g.UniformLongGenerator(spec.min_scan_length, spec.max_scan_length, rng)
        self.values = ValueSource(spec.value_size, rng)
        self.ops: dict[str, Callable[[Any], str]] = {
            "READ": self.do_read,
            "UPDATE": self.do_update,
            "INSERT": self.do_insert,
            "SCAN": self.do_scan,
            "READ-MODIFY-WRITE": self.do_rmw,
        }

    @staticmethod
    def _key_chooser(spec: WorkloadSpec, workload: CoreWorkload, rng: random.Random) -> g.Generator:
        n = spec.records
        dist = spec.distribution
        if dist == "uniform":
            return g.UniformLongGenerator(0, n - 1, rng)
        if dist == "sequential":
            return workload.sequential  # shared, as in YCSB: each key once per pass overall
        if dist == "zipfian":
            # room for the inserts expected during the run (YCSB: 2 is a fudge factor)
            expected_new = int(spec.operations * spec.insert * 2.0)
            return g.ScrambledZipfianGenerator(0, n + expected_new, rng)
        if dist == "latest":
            return g.SkewedLatestGenerator(workload.insert_sequence, rng)
        if dist == "hotspot":
            return g.HotspotIntegerGenerator(
                0, n - 1, spec.hotspot_data_fraction, spec.hotspot_op_fraction, rng
            )
        raise WorkloadError(f"unknown request distribution {dist!r}")

    def next_op(self) -> str:
        return self.chooser.next()

    def next_key(self) -> str:
        """YCSB's nextKeynum: redraw while the key has not been inserted (acknowledged) yet."""
        limit = self.workload.insert_sequence.last()
        keynum = self.keychooser.next()
        while keynum > limit or keynum < 0:  # < 0: SkewedLatest over a single record
            keynum = self.keychooser.next()
        return self.workload.key(keynum)

    # -- transactions -------------------------------------------------------------------
    # Each returns (status, start_ns, end_ns): only the store calls are timed, as YCSB's
    # DBWrapper does, so choosing keys and building values never counts as store latency.
    def do_read(self, store: Any) -> tuple[str, int, int]:
        key = self.next_key()
        st = _now()
        value = store.get(key)
        return ("OK" if value is not None else "NOT_FOUND"), st, _now()

    def do_update(self, store: Any) -> tuple[str, int, int]:
        key = self.next_key()
        value = self.values.next()
        st = _now()
        store.put(key, value)
        return "OK", st, _now()

    def do_insert(self, store: Any) -> tuple[str, int, int]:
        seq = self.workload.insert_sequence
        keynum = seq.next()
        try:
            key = self.workload.key(keynum)
            value = self.values.next()
            st = _now()
            store.put(key, value)
            en = _now()
        finally:
            seq.acknowledge(keynum)
        return "OK", st, en

    def do_scan(self, store: Any) -> tuple[str, int, int]:
        start = self.next_key()
        count = self.scan_length.next()
        expected = self.workload.insert_sequence.last() + 1
        st = _now()
        scan_from(store, start, count, expected)
        return "OK", st, _now()

    def do_rmw(self, store: Any) -> tuple[str, int, int]:
        key = self.next_key()
        value = self.values.next()
        st = _now()
        if store.get(key) is None:
            return "NOT_FOUND", st, _now()
        store.put(key, value)
        return "OK", st, _now()
