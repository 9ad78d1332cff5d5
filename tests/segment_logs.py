"""Logs of indexed_fs records for the walk tests (the Python walk, the C walk, the resolution):
hypothesis strategies for records and damage, and the log and its damaged copy built from them."""

from __future__ import annotations

from hypothesis import strategies as st

from backends.indexed_fs.segment import FLAG_TOMBSTONE, encode


def records(keys: list[str]) -> st.SearchStrategy:
    """(key, value, tombstone, how far its seq goes back) tuples over ``keys``."""
    return st.tuples(st.sampled_from(keys), st.sampled_from([b"", b"v" * 7, b"w" * 40]),
                     st.booleans(), st.integers(0, 3))


KEYS = ["a", "bb", "k/1", "k/2", "é", "n\x00", "zzzz"]
RECORD = records(KEYS)
#: (position, byte) overwrites
DAMAGE = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3)
#: (position, length) of a run of bytes zeroed (a write a crash kept from the disk), or None
GAP = st.none() | st.tuples(st.integers(0, 10**6), st.integers(1, 200))


def build(recs, runs: int) -> bytes:
    """A log: each record ``runs`` times with consecutive seqs (equal-size runs), seqs sometimes
    going back (a compaction copy keeps its old seq)."""
    out, seq = [], 1
    for key, value, tomb, back in recs:
        for _ in range(runs):
            out.append(encode(max(1, seq - back), key.encode(), b"" if tomb else value,
                              FLAG_TOMBSTONE if tomb else 0))
            seq += 1
    return b"".join(out)


def damaged(data: bytes, damage: list[tuple[int, int]], cut: int,
            gap: tuple[int, int] | None = None) -> bytearray:
    """``data`` with the ``gap`` zeroed, the ``damage`` bytes overwritten and its last ``cut``
    bytes torn off."""
    out = bytearray(data)
    if gap and out:
        at = gap[0] % len(out)
        out[at : at + gap[1]] = bytes(len(out[at : at + gap[1]]))
    for where, byte in damage:
        if out:
            out[where % len(out)] = byte
    if cut and len(out) > cut:
        del out[-cut:]
    return out
