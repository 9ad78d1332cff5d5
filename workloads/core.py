"""Workload definitions: YCSB's CoreWorkload parameters, its presets A–F, and the thesis' write-heavy mix.

A :class:`WorkloadSpec` is plain data (what to run).  A :class:`CoreWorkload` holds the state
shared by all client threads (the load key counter and the acknowledged insert counter); each
thread gets a :class:`Client` with its own seeded generators, so one thread's op/key stream is
reproducible from the seed.

Two record models (:mod:`workloads.record`): ``field_count == 0`` is the thesis' model, one
opaque value of ``value_size`` bytes per key (the presets' default); ``field_count > 0`` is
YCSB's record of named fields, where a read reads all fields or one (``read_all_fields``) and an
update writes one field unless ``write_all_fields``.  How a record is stored depends on the
store, and is decided once per client (:meth:`CoreWorkload.client`):

* a store that keeps records of fields (``record_fields``: a Redis hash) gets the fields as
  they are: a read is one ``get_fields``, a one-field update one ``put_fields`` of that field,
  as YCSB's bindings for such stores do (the ``*_fields`` transactions of :class:`Client`);
* every other store holds one blob per key, the record encoded into it, so a one-field update
  is a read-modify-write of the blob (:meth:`Client.do_update`).
  :meth:`WorkloadSpec.update_is_rmw` says when that happens.

A store is loaded and run in the same model: the load writes records the way the run reads them.

Counting follows YCSB's DBWrapper: every store call is measured under its own name, so a
read-modify-write adds one ``READ`` and (when the read found the record) one ``UPDATE`` beside its
own ``READ-MODIFY-WRITE`` latency, and workload F's ``READ`` count equals its operation count.

Difference from YCSB, on purpose: a scan is "``count`` keys from ``start`` in key order", built
on the interface's prefix scan (:func:`scan_from`).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import generators as g
from . import record
from .record import MAX_VALUE_SIZE, ValueSource
from .record import RecordError, deterministic_value  # noqa: F401 - part of this module's API

_now = time.perf_counter_ns

OPS = ("READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE")
DISTRIBUTIONS = ("zipfian", "uniform", "latest", "hotspot", "sequential", "exponential")
FIELD_LENGTH_DISTRIBUTIONS = ("constant", "uniform", "zipfian")
SCAN_LENGTH_DISTRIBUTIONS = ("uniform", "zipfian")
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
    zipfian_constant: float = g.ZIPFIAN_CONSTANT  # zipfianconstant (zipfian and latest)
    exponential_percentile: float = 95.0  # exponential.percentile
    exponential_frac: float = 0.8571428571  # exponential.frac
    scan_length_distribution: str = "uniform"  # scanlengthdistribution
    insert_start: int = 0  # insertstart
    insert_count: int | None = None  # insertcount (None: records - insert_start)
    #: fieldcount; 0 = one opaque value of value_size bytes (the thesis' model)
    field_count: int = 0
    field_length: int = 100  # fieldlength (the longest field with a non-constant distribution)
    min_field_length: int = 1  # minfieldlength
    field_length_distribution: str = "constant"  # fieldlengthdistribution
    read_all_fields: bool = True  # readallfields
    write_all_fields: bool = False  # writeallfields
    field_name_prefix: str = "field"  # fieldnameprefix
    #: zeropadding: a key's number is left-padded with zeros to this many digits
    zero_padding: int = 1
    #: dataintegrity: values derived from key and field (YCSB's buildDeterministicValue), and
    #: every read checked against them under ``VERIFY``
    data_integrity: bool = False

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
        if self.data_integrity and (self.field_count == 0
                                    or self.field_length_distribution != "constant"):
            raise WorkloadError("dataintegrity needs YCSB's record of fields (fieldcount > 0, not "
                                "valuesize) and fieldlengthdistribution=constant")
        if self.zero_padding < 1:
            raise WorkloadError(f"zeropadding must be >= 1 digit (got {self.zero_padding})")
        if self.value_size < 0:
            raise WorkloadError(f"value size must be >= 0 bytes (got {self.value_size})")
        if self.field_count == 0 and self.value_size > MAX_VALUE_SIZE:
            raise WorkloadError(f"value size {self.value_size} is above the largest value a store "
                                f"holds ({MAX_VALUE_SIZE} bytes); give a smaller --value-size")
        self._validate_fields()
        if self.insert_start < 0 or self.inserts() < 0 \
                or self.insert_start + self.inserts() > self.records:
            raise WorkloadError(
                f"insertstart {self.insert_start} + insertcount {self.inserts()} must be within "
                f"recordcount {self.records} (and neither negative)")
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
        if self.scan_length_distribution not in SCAN_LENGTH_DISTRIBUTIONS:
            raise WorkloadError(f"unknown scanlengthdistribution {self.scan_length_distribution!r}"
                                f"; valid: {', '.join(SCAN_LENGTH_DISTRIBUTIONS)}")
        if not 0.0 < self.zipfian_constant < 1.0 and self.distribution in ("zipfian", "latest"):
            raise WorkloadError(f"zipfianconstant must be in (0, 1) (got {self.zipfian_constant})")
        if self.distribution == "exponential" and not (
                0.0 < self.exponential_percentile < 100.0 and self.exponential_frac > 0):
            raise WorkloadError("exponential needs 0 < exponential.percentile < 100 and "
                                "exponential.frac > 0")
        return self

    def _validate_fields(self) -> None:
        if self.field_count == 0:
            return
        if not 0 < self.field_count <= record.MAX_FIELDS:
            raise WorkloadError(f"fieldcount must be 0 (one opaque value) or 1..{record.MAX_FIELDS}"
                                f" (got {self.field_count})")
        if self.field_length_distribution not in FIELD_LENGTH_DISTRIBUTIONS:
            raise WorkloadError(
                f"unknown fieldlengthdistribution {self.field_length_distribution!r}; valid: "
                f"{', '.join(FIELD_LENGTH_DISTRIBUTIONS)}")
        low = self.min_field_length if self.field_length_distribution != "constant" else 0
        if not 0 <= low <= self.field_length:
            raise WorkloadError("field lengths need 0 <= minfieldlength <= fieldlength")
        size = record.encoded_size(self.field_count, self.field_length, self.field_name_prefix)
        if size > MAX_VALUE_SIZE:
            raise WorkloadError(f"a record of {self.field_count} fields of {self.field_length} "
                                f"bytes is {size} bytes, above the largest value a store holds "
                                f"({MAX_VALUE_SIZE} bytes); lower fieldcount or fieldlength")

    def inserts(self) -> int:
        """Records the load inserts (YCSB's insertcount)."""
        if self.insert_count is None:
            return self.records - self.insert_start
        return self.insert_count

    def update_is_rmw(self, record_fields: bool = False) -> bool:
        """Whether an UPDATE reads the record first: one field written into a one-blob store
        (not into a store that keeps records of fields, ``record_fields``)."""
        return self.field_count > 0 and not self.write_all_fields and not record_fields

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


# --------------------------------------------------------------------------------------- scan
def scan_from(store: Any, start: str, count: int, expected_keys: int, floor: int = len(KEY_PREFIX),
              scan: Callable[[str], Any] | None = None):
    """Up to ``count`` ``(key, value)`` pairs with key >= ``start``, in key order (``scan``:
    the prefix scan to use, ``store.scan`` unless given; ``store.scan_fields`` for records).

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
        for key, value in (scan or store.scan)(start[:length]):
            if key < start or (last is not None and key <= last):
                continue
            out.append((key, value))
            last = key
            if len(out) >= count:
                return out
        if length <= floor:
            return out
        length -= 1


def _java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (a signed 32-bit int)."""
    h = 0
    for c in text:
        h = (31 * h + ord(c)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def deterministic_field(key: str, field: str, size: int) -> bytes:
    """YCSB's buildDeterministicValue: ``key:field``, then, until ``size`` characters, ``:``
    followed by the Java hash of everything so far (that ``:`` included); cut to ``size``."""
    text = f"{key}:{field}"
    while len(text) < size:
        text += ":"
        text += str(_java_hash(text))
    return text[:size].encode("ascii")


# ------------------------------------------------------------------------------------ workload
class CoreWorkload:
    """State shared by every client thread of one run, and the factory of per-thread clients."""

    def __init__(self, spec: WorkloadSpec, seed: int = 0) -> None:
        self.spec = spec.validate()
        self.seed = seed
        # keysequence: the load's shared key counter, from insertstart (YCSB's split of a load
        # over threads: every thread takes the next key number from it)
        self.load_sequence = g.CounterGenerator(spec.insert_start)
        self.insert_sequence = g.AcknowledgedCounterGenerator(spec.records)
        first, count = spec.insert_start, spec.inserts()
        self.sequential = g.SequentialGenerator(first, first + max(count, 1) - 1)
        self.field_names = [f"{spec.field_name_prefix}{i}" for i in range(spec.field_count)]
        # key names of the loaded records, computed once (FNV-64 hashing in Python is not free,
        # and every operation needs one)
        self.key_cache = [g.build_key_name(i, spec.ordered_inserts, spec.zero_padding)
                          for i in range(spec.records)]

    def key(self, keynum: int) -> str:
        """YCSB's buildKeyName for ``keynum``."""
        if keynum < len(self.key_cache):
            return self.key_cache[keynum]
        return g.build_key_name(keynum, self.spec.ordered_inserts, self.spec.zero_padding)

    def load_keys(self) -> list[str]:
        """The keys of the load phase (``insertstart`` .. ``insertstart + insertcount - 1``), in
        insertion order."""
        start = self.spec.insert_start
        return self.key_cache[start : start + self.spec.inserts()]

    def client(self, index: int, store: Any = None) -> "Client":
        """The client for thread ``index``; its randomness comes from (seed, index) only.
        ``store``: the store it will work on, whose ``record_fields`` decides how a record of
        fields is written and read (see the module docstring); ``None``: as one blob."""
        return Client(self, random.Random(f"{self.seed}/{index}"),
                      fields_in_store=bool(getattr(store, "record_fields", False)))


class Client:
    """One client thread's generators and transaction methods (YCSB's doTransaction*).

    Each ``do_*`` returns ``(status, start_ns, end_ns)``; status is ``"OK"``, or ``"NOT_FOUND"``
    for a read of a missing key.  Backend exceptions propagate: the runner counts them as
    ``ERROR``.  ``recorder`` (set by the runner) receives the store calls inside a
    read-modify-write, as YCSB's DBWrapper measures them.
    """

    def __init__(self, workload: CoreWorkload, rng: random.Random,
                 fields_in_store: bool = False) -> None:
        spec = workload.spec
        self.workload = workload
        self.spec = spec
        self.rng = rng
        self.recorder: Any = None
        self.chooser = g.DiscreteGenerator(
            rng, [(p, op) for op, p in spec.proportions().items() if p > 0]
        )
        self.keychooser = self._key_chooser(spec, workload, rng)
        # the per-operation choices are made once here, not on every operation (hot path)
        if isinstance(self.keychooser, g.ExponentialGenerator):
            self.next_key = self._next_key_back_from_newest  # type: ignore[method-assign]
        self._update_rmw = spec.update_is_rmw()
        if spec.scan_length_distribution == "zipfian":
            self.scan_length: g.Generator = g.ZipfianGenerator(
                spec.min_scan_length, spec.max_scan_length, rng)
        else:
            self.scan_length = g.UniformLongGenerator(spec.min_scan_length,
                                                      spec.max_scan_length, rng)
        self.fields = spec.field_count > 0
        #: the record's fields go to the store as fields (``put_fields`` ...), not in one blob
        self.native_fields = self.fields and fields_in_store
        if self.fields:
            self.values = ValueSource(spec.field_length, rng)
            self.field_chooser = g.UniformLongGenerator(0, spec.field_count - 1, rng)
            self.field_length = self._field_length(spec, rng)
        else:
            self.values = ValueSource(spec.value_size, rng)
            self.new_value = self.values.next  # type: ignore[method-assign]
        self.ops: dict[str, Callable[[Any], tuple[str, int, int]]] = {
            "READ": self.do_read,
            "UPDATE": self.do_update,
            "INSERT": self.do_insert,
            "SCAN": self.do_scan,
            "READ-MODIFY-WRITE": self.do_rmw,
        }
        if self.native_fields:
            self.ops.update({"READ": self.do_read_fields, "UPDATE": self.do_update_fields,
                             "INSERT": self.do_insert_fields,
                             "READ-MODIFY-WRITE": self.do_rmw_fields})

    @staticmethod
    def _key_chooser(spec: WorkloadSpec, workload: CoreWorkload, rng: random.Random) -> g.Generator:
        first, count = spec.insert_start, max(spec.inserts(), 1)
        last = first + count - 1
        dist = spec.distribution
        if dist == "uniform":
            return g.UniformLongGenerator(first, last, rng)
        if dist == "sequential":
            return workload.sequential  # shared, as in YCSB: each key once per pass overall
        if dist == "zipfian":
            # room for the inserts expected during the run (YCSB: 2 is a fudge factor)
            expected_new = int(spec.operations * spec.insert * 2.0)
            return g.ScrambledZipfianGenerator(first, last + 1 + expected_new, rng,
                                               spec.zipfian_constant)
        if dist == "latest":
            return g.SkewedLatestGenerator(workload.insert_sequence, rng)
        if dist == "hotspot":
            return g.HotspotIntegerGenerator(
                first, last, spec.hotspot_data_fraction, spec.hotspot_op_fraction, rng
            )
        if dist == "exponential":
            return g.ExponentialGenerator(spec.exponential_percentile,
                                          spec.records * spec.exponential_frac, rng)
        raise WorkloadError(f"unknown request distribution {dist!r}")

    @staticmethod
    def _field_length(spec: WorkloadSpec, rng: random.Random) -> Callable[[], int]:
        dist = spec.field_length_distribution
        if dist == "uniform":
            return g.UniformLongGenerator(spec.min_field_length, spec.field_length, rng).next
        if dist == "zipfian":
            return g.ZipfianGenerator(spec.min_field_length, spec.field_length, rng).next
        length = spec.field_length
        return lambda: length

    def next_op(self) -> str:
        return self.chooser.next()

    def next_key(self) -> str:
        """YCSB's nextKeynum: redraw while the key has not been inserted (acknowledged) yet."""
        limit = self.workload.insert_sequence.last()
        keynum = self.keychooser.next()
        while keynum > limit or keynum < 0:  # < 0: SkewedLatest over a single record
            keynum = self.keychooser.next()
        return self.workload.key(keynum)

    def _next_key_back_from_newest(self) -> str:
        """``exponential``: YCSB's nextKeynum counts back from the newest acknowledged key."""
        limit = self.workload.insert_sequence.last()
        keynum = limit - int(self.keychooser.next())
        while keynum < 0:
            keynum = limit - int(self.keychooser.next())
        return self.workload.key(keynum)

    # -- values -------------------------------------------------------------------------
    def new_value(self) -> bytes:
        """A whole new value: a record with every field (replaced by the value source's own
        ``next`` when the workload stores one opaque value)."""
        return record.encode(self._new_fields())

    def value_for(self, key: str) -> bytes:
        """The value ``key`` gets: with dataintegrity the one derived from it, else a new one."""
        if not self.spec.data_integrity:
            return self.new_value()
        return record.encode(self.fields_for(key))

    def fields_for(self, key: str) -> dict[str, bytes]:
        """The record ``key`` gets, field by field: with dataintegrity the one derived from it,
        else new random fields."""
        if self.spec.data_integrity:
            return {name: deterministic_field(key, name, self.spec.field_length)
                    for name in self.workload.field_names}
        return self._new_fields()

    def _new_fields(self) -> dict[str, bytes]:
        return {name: self.values.next(self.field_length()) for name in self.workload.field_names}

    def update_fields(self, key: str) -> dict[str, bytes]:
        """What an update of ``key`` writes: one field (YCSB's ``writeallfields=false``: a
        uniformly chosen one, with a new value, or with dataintegrity the derived one), or all."""
        if self.spec.write_all_fields:
            return self.fields_for(key)
        name, value = self._one_field(), self.values.next(self.field_length())
        if self.spec.data_integrity:
            value = deterministic_field(key, name, self.spec.field_length)
        return {name: value}

    def _verify(self, key: str, blob: bytes) -> None:
        """YCSB's verifyRow on a record read as one blob (see :meth:`_verified`)."""
        st = _now()
        try:
            fields = record.decode(blob, None if self.spec.read_all_fields else
                                   self._one_field())
        except RecordError:
            fields = {}
        self._verified(key, fields, st)

    def _verified(self, key: str, fields: dict[str, bytes] | None, st: int) -> None:
        """YCSB's verifyRow: the fields read must be the ones derived from the key; the check's
        time from ``st`` and ``Return=OK`` or ``UNEXPECTED_STATE`` go under ``VERIFY``."""
        good = bool(fields) and all(v == deterministic_field(key, n, self.spec.field_length)
                                    for n, v in fields.items())
        if self.recorder is not None:
            self.recorder.with_status("VERIFY", "OK" if good else "UNEXPECTED_STATE",
                                      (_now() - st) // 1000)

    def _one_field(self) -> str:
        return self.workload.field_names[self.field_chooser.next()]

    def read_names(self) -> list[str] | None:
        """The fields a read asks for: all (``None``, YCSB's ``readallfields=true``) or one."""
        return None if self.spec.read_all_fields else [self._one_field()]

    def _read_fields(self, blob: bytes) -> None:
        """What a YCSB binding's read does with the record: all fields, or one."""
        record.decode(blob, None if self.spec.read_all_fields else self._one_field())

    # -- transactions -------------------------------------------------------------------
    # Each returns (status, start_ns, end_ns): only the store calls are timed, as YCSB's
    # DBWrapper does, so choosing keys and building values never counts as store latency.
    def do_read(self, store: Any) -> tuple[str, int, int]:
        key = self.next_key()
        st = _now()
        value = store.get(key)
        if value is None:
            return "NOT_FOUND", st, _now()
        if self.spec.data_integrity:
            en = _now()
            self._verify(key, value)
            return "OK", st, en
        if self.fields:
            self._read_fields(value)
        return "OK", st, _now()

    def do_update(self, store: Any) -> tuple[str, int, int]:
        key = self.next_key()
        if not self._update_rmw:
            value = self.value_for(key) if self.spec.data_integrity else self.new_value()
            st = _now()
            store.put(key, value)
            return "OK", st, _now()
        ((name, value),) = self.update_fields(key).items()
        st = _now()
        blob = store.get(key)  # one field into a one-blob store: read, modify, write
        if blob is None:
            return "NOT_FOUND", st, _now()
        store.put(key, record.replace_field(blob, name, value))
        return "OK", st, _now()

    def do_insert(self, store: Any) -> tuple[str, int, int]:
        return self._insert(store.put, self.value_for)

    def _insert(self, put: Callable[[str, Any], None],
                make: Callable[[str], Any]) -> tuple[str, int, int]:
        """YCSB's insert: the next key number, ``put(key, make(key))``, and the number
        acknowledged however the put ends (readers wait for it)."""
        seq = self.workload.insert_sequence
        keynum = seq.next()
        try:
            key = self.workload.key(keynum)
            value = make(key)
            st = _now()
            put(key, value)
            en = _now()
        finally:
            seq.acknowledge(keynum)
        return "OK", st, en

    def do_scan(self, store: Any) -> tuple[str, int, int]:
        """Both record models: records of fields come from ``scan_fields`` as fields, blobs
        from ``scan`` and are decoded as a binding's scan decodes them."""
        start = self.next_key()
        count = self.scan_length.next()
        expected = self.workload.insert_sequence.last() + 1
        st = _now()
        rows = scan_from(store, start, count, expected,
                         scan=store.scan_fields if self.native_fields else None)
        if self.fields and not self.native_fields:
            for _key, blob in rows:
                self._read_fields(blob)
        return "OK", st, _now()

    def do_rmw(self, store: Any) -> tuple[str, int, int]:
        """Read the record, then (when found) update it; the read and the update are measured
        as ``READ`` and ``UPDATE`` too.  The update reuses the blob just read, so a one-field
        update costs no second ``get``."""
        key = self.next_key()
        if self.fields and not self.spec.write_all_fields:
            ((name, value),) = self.update_fields(key).items()
        else:
            name, value = None, self.value_for(key)

        def read() -> bytes | None:
            blob = store.get(key)
            if blob is not None and self.fields:
                self._read_fields(blob)
            return blob

        return self._read_then_write(read, lambda blob: store.put(
            key, value if name is None else record.replace_field(blob, name, value)))

    def _read_then_write(self, read: Callable[[], Any],
                         write: Callable[[Any], None]) -> tuple[str, int, int]:
        """A read-modify-write: ``read()`` (``None``: not found), then ``write(what it read)``,
        each also measured as ``READ`` and ``UPDATE``, as YCSB's DBWrapper measures them."""
        rec = self.recorder
        st = _now()
        found = read()
        mid = _now()
        if found is None:
            if rec is not None:
                rec.failed("READ", "NOT_FOUND", (mid - st) // 1000)
            return "NOT_FOUND", st, mid
        if rec is not None:
            rec.ok("READ", (mid - st) // 1000)
        put_st = _now()
        try:
            write(found)
        except Exception:
            if rec is not None:
                rec.failed("UPDATE", "ERROR", (_now() - put_st) // 1000)
            raise
        en = _now()
        if rec is not None:
            rec.ok("UPDATE", (en - put_st) // 1000)
        return "OK", st, en

    # -- transactions on a store that keeps records of fields (``native_fields``) ----------
    # As YCSB's bindings for such stores: a read asks for the fields it reads, an update
    # writes the fields it changes; nothing is read to be written back.
    def do_read_fields(self, store: Any) -> tuple[str, int, int]:
        key = self.next_key()
        names = self.read_names()
        st = _now()
        fields = store.get_fields(key, names)
        en = _now()
        if fields is None:
            return "NOT_FOUND", st, en
        if self.spec.data_integrity:
            self._verified(key, fields, _now())
        return "OK", st, en

    def do_update_fields(self, store: Any) -> tuple[str, int, int]:
        """YCSB's update: the changed fields are set, the record is not read (a store's own
        update of a missing record creates it, as the bindings' does)."""
        key = self.next_key()
        fields = self.update_fields(key)
        st = _now()
        store.put_fields(key, fields)
        return "OK", st, _now()

    def do_insert_fields(self, store: Any) -> tuple[str, int, int]:
        return self._insert(store.put_fields, self.fields_for)

    def do_rmw_fields(self, store: Any) -> tuple[str, int, int]:
        """Read the record's fields, then (when found) write the changed ones; measured as
        ``READ`` and ``UPDATE`` too, as :meth:`do_rmw`."""
        key = self.next_key()
        names = self.read_names()
        fields = self.update_fields(key)
        return self._read_then_write(lambda: store.get_fields(key, names),
                                     lambda _found: store.put_fields(key, fields))
