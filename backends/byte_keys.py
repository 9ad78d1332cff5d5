"""Keys as the stores hold them: utf-8 bytes within a format's bound, and prefix scans as ranges.

RocksDB, LMDB and SQLite (a ``BLOB`` key) order keys by ``memcmp``.  For utf-8 that order is the
order of code points, which is Python's ``str`` order, so a scan over a byte range comes back in
the order :meth:`backends.base.Backend.scan` promises without sorting.
"""

from __future__ import annotations

from .base import BadKeyError


def key_bytes(backend: str, key: str, limit: int | None = None) -> bytes:
    """``key`` as utf-8, at most ``limit`` bytes; a :class:`BadKeyError` naming the problem and
    the fix otherwise."""
    try:
        kb = key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadKeyError(
            f"{backend}: key {key!r} is not valid unicode text (character {exc.start} is a lone "
            f"surrogate, which has no utf-8 form); decode the key's bytes as utf-8, or give it "
            f"in a text form such as hex") from None
    if limit is not None and len(kb) > limit:
        raise BadKeyError(f"{backend}: keys are at most {limit} utf-8 bytes, not {len(kb)}; "
                          f"use a shorter key (a hash of a long one, say)")
    return kb


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest byte string above every string that starts with ``prefix`` (the exclusive
    end of a prefix scan); ``None`` when there is none (an empty prefix or all ``0xff``)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])
