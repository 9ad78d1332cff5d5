"""Spark's partitioning of a ``long`` key, in numpy: the instance ``repartition(P, "key")`` sends
each event to, computed where the events are made.

Spark's ``HashPartitioning`` puts a row in partition ``pmod(murmur3(key, seed 42), P)``, where
``murmur3`` is ``Murmur3_x86_32.hashLong``: the key's low then high 32-bit word mixed into the
seed, then the 8-byte finalizer.  A sender that logs its events per destination outside the JVM
(the source's tap, :mod:`.protocols.sender_log`) must put each event under exactly the instance
the shuffle delivers it to, or a replayed log would feed an instance another's events; the tests
check :func:`destinations` against Spark's own ``pmod(hash(key), P)`` on real keys.

All arithmetic is on ``uint32`` arrays, which wrap as Java's ``int`` does; only the final value
is read as signed (Java's ``int``) before the floor modulo that ``pmod`` is.
"""

from __future__ import annotations

import numpy as np

SEED = 42  # HashPartitioning's (Spark's ``hash()`` function uses the same)
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix(h1: np.ndarray, word: np.ndarray) -> np.ndarray:
    k1 = _rotl(word * _C1, 15) * _C2
    return _rotl(h1 ^ k1, 13) * np.uint32(5) + np.uint32(0xE6546B64)


def murmur3_long(keys: np.ndarray, seed: int = SEED) -> np.ndarray:
    """``Murmur3_x86_32.hashLong(key, seed)`` of every key, as int32."""
    with np.errstate(over="ignore"):
        v = np.asarray(keys, dtype=np.int64).view(np.uint64)
        h1 = np.full(v.shape, seed, dtype=np.uint32)
        h1 = _mix(h1, (v & np.uint64(0xFFFFFFFF)).astype(np.uint32))
        h1 = _mix(h1, (v >> np.uint64(32)).astype(np.uint32))
        h1 ^= np.uint32(8)  # the length in bytes
        h1 ^= h1 >> np.uint32(16)
        h1 *= np.uint32(0x85EBCA6B)
        h1 ^= h1 >> np.uint32(13)
        h1 *= np.uint32(0xC2B2AE35)
        h1 ^= h1 >> np.uint32(16)
    return h1.view(np.int32)


def destinations(keys: np.ndarray, parallelism: int) -> np.ndarray:
    """The partition of each key under ``repartition(parallelism, "key")``: ``pmod(hash, P)``."""
    return murmur3_long(keys).astype(np.int64) % parallelism
