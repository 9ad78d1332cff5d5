"""Record values: the thesis' one opaque value per key, or YCSB's record of named fields.

Every store holds one blob per key, so a YCSB record (``fieldcount`` fields named
``field0 .. field<n-1>``, each ``fieldlength`` bytes by default) is encoded into that blob.
The encoding, all integers big-endian::

    record := b"YF" version:u8 count:u16 field*count
    field  := name_len:u16 name:bytes value_len:u32 value:bytes

``version`` is 1.  Fields appear in the order they were written; a name appears at most once
(:func:`replace_field` keeps that true).  The header makes a record recognisable: a blob that
does not start with it is not a record, and :func:`decode` raises :class:`RecordError` rather
than guessing (a store loaded with opaque values and run with fields reports that, not garbage).

A field is at most ``2**32 - 1`` bytes and a record holds at most ``2**16 - 1`` fields, the limits
of the length fields above.  The whole value of either model is bounded by :data:`MAX_VALUE_SIZE`.

Values are pseudo-random: a :class:`ValueSource` slices a pre-generated random buffer at a random
offset, which is what keeps value generation off the client threads' profile.  The buffer is
generated in chunks, so its size is bounded by memory only (``random.randbytes`` alone refuses
sizes of ``2**28`` bytes and more).
"""

from __future__ import annotations

import hashlib
import random
import struct

#: the largest value a workload writes: the indexed store's record format holds a value of up to
#: this many bytes, and no store in the project holds more in one value
MAX_VALUE_SIZE = 1 << 31
MAX_FIELDS = (1 << 16) - 1
MAX_FIELD_LENGTH = (1 << 32) - 1

_MAGIC = b"YF\x01"
_COUNT = struct.Struct(">H")
_NAME = struct.Struct(">H")
_VALUE = struct.Struct(">I")


class RecordError(ValueError):
    """A value that is not an encoded record (e.g. the store was loaded with opaque values)."""


def encode(fields: dict[str, bytes]) -> bytes:
    """The blob of ``fields`` (see the module docstring)."""
    parts = [_MAGIC, _COUNT.pack(len(fields))]
    for name, value in fields.items():
        raw = name.encode()
        parts += [_NAME.pack(len(raw)), raw, _VALUE.pack(len(value)), value]
    return b"".join(parts)


def decode(blob: bytes, only: str | None = None) -> dict[str, bytes]:
    """The fields of ``blob``; with ``only``, just that field (empty when absent)."""
    if blob[:3] != _MAGIC:
        raise RecordError("the stored value is not a field record; load the store with the same "
                          "record model (fieldcount/valuesize) as the run")
    try:
        (count,) = _COUNT.unpack_from(blob, 3)
        at, out = 5, {}
        view = memoryview(blob)
        for _ in range(count):
            (nlen,) = _NAME.unpack_from(blob, at)
            name = bytes(view[at + 2 : at + 2 + nlen]).decode()
            at += 2 + nlen
            (vlen,) = _VALUE.unpack_from(blob, at)
            at += 4
            if only is None or name == only:
                out[name] = bytes(view[at : at + vlen])
            at += vlen
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordError(f"a truncated field record ({exc})") from None
    if at != len(blob):
        raise RecordError("a field record with trailing bytes")
    return out


def replace_field(blob: bytes, name: str, value: bytes) -> bytes:
    """``blob`` with field ``name`` set to ``value`` (added when absent): a one-field update of
    a record held as one blob, i.e. the modify step of a read-modify-write."""
    fields = decode(blob)
    fields[name] = value
    return encode(fields)


def encoded_size(field_count: int, field_length: int, prefix: str = "field") -> int:
    """Bytes of a record of ``field_count`` fields of ``field_length`` bytes each."""
    names = sum(len(f"{prefix}{i}".encode()) for i in range(field_count))
    return len(_MAGIC) + _COUNT.size + field_count * (_NAME.size + _VALUE.size + field_length) \
        + names


class ValueSource:
    """Cheap pseudo-random values: a slice of a pre-generated random buffer at a random offset."""

    SPAN = 1 << 16  # offsets are 16 random bits
    #: the buffer is generated this many bytes at a time (below ``randbytes``' own limit)
    CHUNK = 1 << 26

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size = size
        self._rng = rng
        total = self.SPAN + size
        self._buf = b"".join(rng.randbytes(min(self.CHUNK, total - at))
                             for at in range(0, total, self.CHUNK))

    def next(self, size: int | None = None) -> bytes:
        """``size`` bytes (at most the source's size; default: all of it)."""
        off = self._rng.getrandbits(16)  # SPAN == 2**16
        return self._buf[off : off + (self.size if size is None else size)]


def deterministic_value(key: str, size: int, seed: int = 0) -> bytes:
    """A value derived from ``key`` and ``seed`` alone, so it can be verified without a copy."""
    block = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=64).digest()
    return (block * (size // 64 + 1))[:size]
