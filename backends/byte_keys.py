"""Keys as the embedded byte-ordered stores hold them: utf-8 bytes, and prefix scans as ranges.

RocksDB, LMDB and SQLite (a ``BLOB`` key) order keys by ``memcmp``.  For utf-8 that order is the
order of code points, which is Python's ``str`` order, so a scan over a byte range comes back in
the order :meth:`backends.base.Backend.scan` promises without sorting.
"""

from __future__ import annotations


def key_bytes(backend: str, key: str, limit: int) -> bytes:
    """``key`` as utf-8, at most ``limit`` bytes; a ``ValueError`` naming the problem otherwise."""
    try:
        kb = key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{backend} keys must be encodable as utf-8; {key!r} is not") from None
    if len(kb) > limit:
        raise ValueError(f"{backend} keys are at most {limit} utf-8 bytes, not {len(kb)}")
    return kb


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest byte string above every string that starts with ``prefix`` (the exclusive
    end of a prefix scan); ``None`` when there is none (an empty prefix or all ``0xff``)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])
