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


_native_read = pytest.importorskip("backends.indexed_fs.segment").read_value


@pytest.mark.skipif(_native_read is None, reason="the C read path was not built")
@pytest.mark.parametrize("damage", ["none", "crc", "key", "tombstone", "short", "long",
                                    "past-end"])
def test_the_c_read_returns_only_an_intact_record_of_the_key(tmp_path, damage):
    """read_value (C), through a file descriptor and through a buffer: the value only for an
    intact value record of the key exactly ``size`` long (what segment.decode returns then),
    else None, and the store reads the record again in Python, which names the damage."""
    import os

    from backends.indexed_fs.segment import FLAG_TOMBSTONE, decode, encode

    key, value = "user42", b"v" * 300
    rec = bytearray(encode(7, key.encode(), b"" if damage == "tombstone" else value,
                           FLAG_TOMBSTONE if damage == "tombstone" else 0))
    size, qkey = len(rec), key
    if damage == "crc":
        rec[HEADER_SIZE + 10] ^= 1
    elif damage == "key":
        qkey = "user43"
    elif damage == "short":
        size -= 1
    elif damage == "long":
        size += 1
    data = b"pad" + bytes(rec) + (b"x" if damage == "long" else b"")
    if damage == "past-end":
        size = len(rec) + 64
    path = tmp_path / "seg"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        got_fd, got_buf = _native_read(fd, 3, size, qkey), _native_read(data, 3, size, qkey)
    finally:
        os.close(fd)
    assert got_fd == got_buf
    if damage == "none":
        assert got_fd == value == decode(data[3 : 3 + size], qkey)[2]
    else:
        assert got_fd is None


def test_a_store_reads_the_same_without_the_c_read(tmp_path, monkeypatch):
    from backends.indexed_fs import store as store_mod

    path = str(tmp_path / "s")
    with open_backend("indexed_fs", path=path, segment_size=300) as s:
        for i in range(8):
            s.put(f"k{i}", bytes([65 + i]) * 100)
        with_c = {f"k{i}": s.get(f"k{i}") for i in range(9)}
        monkeypatch.setattr(store_mod, "read_value", None)
        assert {f"k{i}": s.get(f"k{i}") for i in range(9)} == with_c
        assert with_c["k3"] == b"D" * 100 and with_c["k8"] is None
