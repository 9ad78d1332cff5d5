"""indexed_fs's read path: sealed segments are read from a read-only mapping of their records,
the active one from a mapping of the space it reserved (a record past it, or in a segment
without a reservation, with ``pread``); either way a record whose CRC, lengths or key do not
match is never returned as data, also when the bytes change under an open store, and no mapping
reaches past the end of its file."""

from __future__ import annotations

import os

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
        assert sealed and all(len(seg.mapped) == seg.size for seg in sealed)
        assert len(s._active.mapped) == s._active.file_size == 300  # its reservation
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


@pytest.mark.parametrize("native", [True, False])
def test_a_record_past_the_active_mapping_is_read_and_checked_through_the_fd(tmp_path, native):
    """A record longer than the segment lands past the space reserved (and mapped) for it: it
    is read with ``pread``, in C and in Python, and its damage is refused all the same.  Without
    a reservation the active segment is not mapped at all."""
    path = str(tmp_path / "s")
    with open_backend("indexed_fs", path=path, segment_size=4096, native_path=native) as s:
        s.put("small", b"s" * 10)
        s.put("big", b"b" * 10_000)  # a segment of its own, past its 4096 reserved bytes
        seg = s._segments[s._index.get("big")[0]]
        assert seg is s._active and len(seg.mapped) == 4096 < seg.size
        assert s.get("big") == b"b" * 10_000 and s.get("small") == b"s" * 10
        assert s.get_many(["big", "small"]) == {"big": b"b" * 10_000, "small": b"s" * 10}
        _flip(seg.path, s._index.get("big")[1] + HEADER_SIZE + 3 + 5_000)
        with pytest.raises(CorruptDataError, match="'big'"):
            s.get("big")
    with open_backend("indexed_fs", path=str(tmp_path / "p"), preallocate=False) as s:
        s.put("k", b"v")
        assert s._active.mapped is None and s.get("k") == b"v"


def test_a_failed_append_and_every_cut_of_the_file_drop_the_mapping_first(small_tmpfs):
    """An append past the reservation that meets a full disk cuts the file back to its
    records; the mapping of the reserved space goes before it (a read of a mapped page past
    the end of the file would be a SIGBUS, not an error).  Sealing trims the reservation and
    maps exactly the records."""
    from backends.base import StorageFullError

    path = str(small_tmpfs / "s")
    with open_backend("indexed_fs", path=path, segment_size=64 * 1024) as s:
        s.put("a", b"a" * 100)
        seg = s._active
        assert len(seg.mapped) == seg.file_size == 64 * 1024
        with pytest.raises(StorageFullError):
            s.put("huge", b"h" * (4 << 20))  # past the reservation, bigger than the disk
        failed = s._active  # the huge record's own segment, reserved and mapped, then cut
        assert failed is not seg and failed.mapped is None
        assert os.fstat(failed.fd).st_size == failed.size == 0
        assert len(seg.mapped) == seg.size == os.fstat(seg.fd).st_size  # sealed: trimmed
        assert s.get("a") == b"a" * 100
        s.put("b", b"b" * 100)
        assert s.get("b") == b"b" * 100
    with open_backend("indexed_fs", path=path, segment_size=64 * 1024) as s:
        assert s.get("a") == b"a" * 100 and s.get("b") == b"b" * 100


_native_read = pytest.importorskip("backends.indexed_fs.segment").read_value


@pytest.mark.skipif(_native_read is None, reason="the C read path was not built")
@pytest.mark.parametrize("damage", ["none", "crc", "key", "tombstone", "short", "long",
                                    "past-end"])
def test_the_c_read_returns_only_an_intact_record_of_the_key(tmp_path, damage):
    """read_value (C), through a file descriptor and through a buffer: the value only for an
    intact value record of the key exactly ``size`` long (what segment.decode returns then),
    else None, and the store reads the record again in Python, which names the damage."""
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
