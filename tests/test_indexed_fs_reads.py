"""indexed_fs's read path: sealed segments are read from a read-only mapping, the active one with
``pread``; either way a record whose CRC, lengths or key do not match is never returned as data,
also when the bytes change under an open store."""

from __future__ import annotations

import pytest

from backends import open_backend
from backends.base import CorruptDataError
from backends.indexed_fs.segment import HEADER_SIZE


def _flip(path: str, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))


def test_sealed_segments_are_mapped_and_damage_under_an_open_store_is_refused(tmp_path):
    path = str(tmp_path / "s")
    with open_backend("indexed_fs", path=path, segment_size=300) as s:
        for i in range(8):
            s.put(f"k{i}", bytes([65 + i]) * 100)
        sealed = [seg for seg in s._segments.values() if seg is not s._active]
        assert sealed and all(seg.mapped is not None for seg in sealed)
        assert s._active.mapped is None
        e = s._index.get("k0")
        seg = s._segments[e[0]]
        assert seg.mapped is not None
        _flip(seg.path, e[1] + HEADER_SIZE + 2 + 10)  # inside k0's value, seen through the map
        with pytest.raises(CorruptDataError, match="'k0'"):
            s.get("k0")
        a = s._index.get("k7")
        assert s._segments[a[0]] is s._active
        _flip(s._active.path, a[1] + 1)  # the active segment's record: its CRC field
        with pytest.raises(CorruptDataError, match="'k7'"):
            s.get("k7")
        assert s.get("k3") == bytes([68]) * 100


def test_a_record_of_another_key_at_the_position_is_refused(tmp_path):
    """Two keys with the same length: if the index pointed at the other's intact record (a hash
    collision would), its CRC is right but the key is not."""
    path = str(tmp_path / "s")
    with open_backend("indexed_fs", path=path, index_flush_interval=0) as s:
        s.put("ka", b"1" * 20)
        s.put("kb", b"2" * 20)
        s._index.d["ka"] = s._index.d["kb"]  # what a collision in a key-hash index would do
        with pytest.raises(CorruptDataError, match="holds key 'kb'"):
            s.get("ka")


def test_an_index_entry_at_a_tombstone_is_refused(tmp_path):
    path = str(tmp_path / "s")
    with open_backend("indexed_fs", path=path, index_flush_interval=0) as s:
        s.put("a", b"x")
        s.delete("a")
        tomb = s._index.tombs["a"]
        s._index.d["a"] = tomb
        with pytest.raises(CorruptDataError, match="tombstone"):
            s.get("a")
