"""The keydir rebuild on its own (:func:`backends.indexed_fs.recovery.init_keydir`), no store
around it: from a snapshot plus the log after it, from the log alone, past a damaged snapshot,
with a torn tail, with a damaged record in a sealed segment, with tombstones, and with several
records of one key spread over segments (the highest seq wins)."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

from backends import open_backend
from backends.indexed_fs.recovery import Keydir, init_keydir
from backends.indexed_fs.segment import FLAG_TOMBSTONE, HEADER_SIZE, decode, encode, segment_name
from backends.media import open_medium


@contextmanager
def rebuilt(path: Path):
    """``init_keydir`` on ``path``; its segments and the medium are closed afterwards."""
    medium = open_medium(str(path), "test")
    try:
        kd = init_keydir(medium)
        try:
            yield kd
        finally:
            for seg in kd.segments.values():
                seg.close()
    finally:
        medium.close()


def value_of(kd: Keydir, key: str) -> bytes | None:
    """What the rebuilt keydir says ``key`` holds, read and verified from its segment."""
    e = kd.index.get(key)
    if e is None:
        return None
    seq, k, value, flags = decode(kd.segments[e[0]].read(e[1], e[2]), key)
    assert not flags & FLAG_TOMBSTONE and seq == e[3]
    return value


def write_segment(path: Path, seg_id: int, records: list[tuple[int, str, bytes | None]]) -> Path:
    """A segment file of ``(seq, key, value)`` records, value ``None`` = a tombstone."""
    path.mkdir(exist_ok=True)
    out = path / segment_name(seg_id)
    out.write_bytes(b"".join(
        encode(seq, key.encode(), b"" if value is None else value,
               FLAG_TOMBSTONE if value is None else 0)
        for seq, key, value in records))
    return out


def crash_image(src: Path, dst: Path) -> None:
    """What a crash of the (open, flushed) store in ``src`` would leave: its files, copied."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("LOCK"))


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


# ------------------------------------------------------------------------------ from the log alone
def test_full_scan_without_snapshot(tmp_path):
    write_segment(tmp_path, 1, [(1, "a", b"A1"), (2, "b", b"B1")])
    write_segment(tmp_path, 2, [(3, "a", b"A2"), (4, "c", b"C1")])
    with rebuilt(tmp_path) as kd:
        assert kd.snapshot_used is None and kd.snapshots_invalid == 0
        assert sorted(kd.segments) == [1, 2] and kd.segments_scanned == 2
        assert kd.records_scanned == 4 and kd.corrupt_records == 0
        assert kd.next_seq == 5
        assert {k: value_of(kd, k) for k in "abc"} == {"a": b"A2", "b": b"B1", "c": b"C1"}
        assert len(kd.index) == 3
        assert kd.segments[1].min_seq == 1 and kd.segments[2].min_seq == 3


def test_empty_directory_rebuilds_an_empty_keydir(tmp_path):
    with rebuilt(tmp_path) as kd:
        assert kd.segments == {} and len(kd.index) == 0 and kd.next_seq == 1
        assert kd.snapshot_used is None and kd.segments_scanned == 0


def test_newest_seq_wins_across_segments(tmp_path):
    # "a": its newest write (seq 5) sits in an *older* segment than a compaction copy of an older
    # write (seq 2); "b": a compaction copy with the same seq — the later copy is the one kept
    write_segment(tmp_path, 1, [(2, "a", b"old"), (3, "b", b"B")])
    write_segment(tmp_path, 2, [(5, "a", b"new")])
    write_segment(tmp_path, 3, [(2, "a", b"old"), (3, "b", b"B")])
    with rebuilt(tmp_path) as kd:
        assert value_of(kd, "a") == b"new" and kd.index.get("a")[0] == 2
        assert value_of(kd, "b") == b"B" and kd.index.get("b")[0] == 3
        assert kd.next_seq == 6
        # accounting: segment 1 holds nothing live, so GC may take it (not the active one)
        assert kd.index.live.get(1, [0])[0] == 0
        assert kd.dead_segments(active_id=3) == {1}


def test_tombstones_hide_older_values_and_newer_values_win_over_them(tmp_path):
    write_segment(tmp_path, 1, [(1, "gone", b"v"), (2, "back", b"v1"), (3, "kept", b"k")])
    write_segment(tmp_path, 2, [(4, "gone", None), (5, "back", None), (6, "back", b"v2")])
    with rebuilt(tmp_path) as kd:
        assert kd.index.get("gone") is None and "gone" in kd.index.tombs
        assert kd.index.latest("gone")[1] is True  # a live tombstone, for compaction
        assert value_of(kd, "back") == b"v2" and "back" not in kd.index.tombs
        assert value_of(kd, "kept") == b"k"
        assert len(kd.index) == 2


# ----------------------------------------------------------------------------------- damage
def test_torn_tail_of_the_newest_segment_is_truncated(tmp_path):
    write_segment(tmp_path, 1, [(1, "a", b"A")])
    seg = write_segment(tmp_path, 2, [(2, "b", b"B"), (3, "c", b"C" * 50)])
    whole = seg.stat().st_size
    torn = HEADER_SIZE + 1 + 1 + HEADER_SIZE + 10  # b whole, c cut inside its value
    seg.write_bytes(seg.read_bytes()[:torn])
    with rebuilt(tmp_path) as kd:
        assert kd.torn_tail_truncated == 1 and kd.corrupt_records == 0
        assert kd.truncated_bytes == torn - (HEADER_SIZE + 2)
        assert value_of(kd, "a") == b"A" and value_of(kd, "b") == b"B"
        assert kd.index.get("c") is None and kd.next_seq == 3
        assert any("torn tail" in n for n in kd.notes)
    assert seg.stat().st_size == HEADER_SIZE + 2 < whole  # cut durably, on disk


def test_corrupt_record_in_a_sealed_segment_is_skipped_and_counted_not_cut(tmp_path):
    seg = write_segment(tmp_path, 1, [(1, "x", b"x-old"), (2, "y", b"Y"), (3, "x", b"x-new"),
                                      (4, "z", b"Z")])
    write_segment(tmp_path, 2, [(5, "w", b"W")])
    size = seg.stat().st_size
    third = 2 * HEADER_SIZE + (1 + 5) + (1 + 1)  # where x's newer record starts
    flip(seg, third + HEADER_SIZE + 1 + 2)  # a byte of its value: the CRC fails
    with rebuilt(tmp_path) as kd:
        assert kd.corrupt_records == 1 and kd.torn_tail_truncated == 0
        assert kd.truncated_bytes == 0
        assert value_of(kd, "x") == b"x-old"  # the damaged newer record is not used
        assert value_of(kd, "y") == b"Y" and value_of(kd, "z") == b"Z"
        assert value_of(kd, "w") == b"W"
        assert any("damaged bytes" in n for n in kd.notes)
        assert kd.damaged_ranges == [(1, third, third + HEADER_SIZE + 1 + 5)]
    assert seg.stat().st_size == size  # reported, never repaired


def test_unreadable_header_in_a_sealed_segment_ends_its_walk_without_cutting(tmp_path):
    seg = write_segment(tmp_path, 1, [(1, "a", b"A"), (2, "b", b"B")])
    write_segment(tmp_path, 2, [(3, "c", b"C")])
    flip(seg, HEADER_SIZE + 2 + 12 + 3)  # the high byte of b's key length: no real header
    size = seg.stat().st_size
    with rebuilt(tmp_path) as kd:
        assert kd.corrupt_records == 1 and kd.torn_tail_truncated == 0
        assert value_of(kd, "a") == b"A" and kd.index.get("b") is None
        assert value_of(kd, "c") == b"C"
    assert seg.stat().st_size == size


def test_temp_files_of_interrupted_writes_are_removed(tmp_path):
    write_segment(tmp_path, 1, [(1, "a", b"A")])
    (tmp_path / "snap-000000007.idx.tmp").write_bytes(b"half a snapshot")
    with rebuilt(tmp_path) as kd:
        assert kd.temp_files_removed == 1 and value_of(kd, "a") == b"A"
    assert not list(tmp_path.glob("*.tmp"))


# ------------------------------------------------------------------------------- snapshots
def _store_with_snapshot_and_tail(live: Path, crashed: Path) -> str:
    """A store that wrote k0..k9, a snapshot, then k10..k14 and a new k0, and crashed."""
    with open_backend("indexed_fs", path=str(live), index_flush_interval=0) as s:
        for i in range(10):
            s.put(f"k{i}", f"v{i}".encode())
        name = s.write_snapshot()
        for i in range(10, 15):
            s.put(f"k{i}", f"v{i}".encode())
        s.put("k0", b"v0-new")
        s.delete("k1")
        s.flush()
        crash_image(live, crashed)
    return name


def test_from_snapshot_plus_the_log_after_it(tmp_path):
    crashed = tmp_path / "crashed"
    name = _store_with_snapshot_and_tail(tmp_path / "live", crashed)
    with rebuilt(crashed) as kd:
        assert kd.snapshot_used == name and kd.snapshots_invalid == 0
        assert kd.snapshot_number == int(name[5:14])
        assert kd.records_scanned == 7  # only what came after the snapshot: 5 puts, k0, k1's delete
        assert kd.torn_tail_truncated == 0 and kd.corrupt_records == 0
        assert value_of(kd, "k0") == b"v0-new" and kd.index.get("k1") is None
        for i in range(2, 15):
            assert value_of(kd, f"k{i}") == f"v{i}".encode()
        assert kd.next_seq == 18


def test_damaged_snapshot_falls_back_to_a_full_scan(tmp_path):
    crashed = tmp_path / "crashed"
    name = _store_with_snapshot_and_tail(tmp_path / "live", crashed)
    flip(crashed / name, 40)
    with rebuilt(crashed) as kd:
        assert kd.snapshot_used is None and kd.snapshots_invalid == 1
        assert kd.snapshot_number == int(name[5:14])  # the next snapshot still outnumbers it
        assert any(name in n and "unusable" in n for n in kd.notes)
        assert kd.records_scanned == 17  # the whole log
        assert value_of(kd, "k0") == b"v0-new" and kd.index.get("k1") is None
        for i in range(2, 15):
            assert value_of(kd, f"k{i}") == f"v{i}".encode()
        assert kd.next_seq == 18
    assert (crashed / name).exists()  # kept for inspection


def test_a_snapshot_only_its_crc_shows_damaged_is_not_used(tmp_path):
    """The CRC is checked on a thread while the rebuild goes on with the snapshot's contents:
    damage to a key (the sizes still add up) must still keep the snapshot out of the result."""
    crashed = tmp_path / "crashed"
    name = _store_with_snapshot_and_tail(tmp_path / "live", crashed)
    raw = (crashed / name).read_bytes()
    flip(crashed / name, raw.index(b"k5"))  # a value key, in the middle of the key array
    with rebuilt(crashed) as kd:
        assert kd.snapshot_used is None and kd.snapshots_invalid == 1
        assert any(name in n and "CRC mismatch" in n for n in kd.notes)
        assert kd.records_scanned == 17  # the whole log, as without the snapshot
        assert value_of(kd, "k0") == b"v0-new" and kd.index.get("k1") is None
        for i in range(2, 15):
            assert value_of(kd, f"k{i}") == f"v{i}".encode()


def test_an_error_from_unchecked_contents_is_put_down_to_the_damage(tmp_path, monkeypatch):
    """Whatever the rebuild raises while a check is running is the damaged file's doing when
    the check fails: the rebuild starts over without the file instead of propagating it."""
    from backends.indexed_fs import recovery

    crashed = tmp_path / "crashed"
    name = _store_with_snapshot_and_tail(tmp_path / "live", crashed)
    raw = (crashed / name).read_bytes()
    flip(crashed / name, raw.index(b"k5"))
    real = recovery._load_base
    calls = []

    def load_base(index, snap, ids):
        calls.append(snap.number)
        if len(calls) == 1:
            raise IndexError("what garbage in an unchecked file can do")
        return real(index, snap, ids)

    monkeypatch.setattr(recovery, "_load_base", load_base)
    with rebuilt(crashed) as kd:
        assert kd.snapshot_used is None and kd.snapshots_invalid == 1
        assert len(calls) == 1 and value_of(kd, "k14") == b"v14"


def test_snapshot_covering_more_than_the_segments_hold_is_not_used(tmp_path):
    crashed = tmp_path / "crashed"
    name = _store_with_snapshot_and_tail(tmp_path / "live", crashed)
    for seg in crashed.glob("*.seg"):
        seg.write_bytes(b"")  # the log lost what the snapshot says it covers
    with rebuilt(crashed) as kd:
        assert kd.snapshot_used is None and kd.snapshots_invalid == 1
        assert any(name in n and "past its end" in n for n in kd.notes)
        assert len(kd.index) == 0


def test_counters_are_what_the_store_reports(tmp_path):
    crashed = tmp_path / "crashed"
    _store_with_snapshot_and_tail(tmp_path / "live", crashed)
    with rebuilt(crashed) as kd:
        expected = kd.counters()
    with open_backend("indexed_fs", path=str(crashed), index_flush_interval=0) as s:
        st = s.stats()
    assert {k: st[k] for k in expected} == expected


def _copy_open_store(src: Path, dst: Path) -> None:
    """The files of a store that is still open: what a crash at this instant leaves (minus
    the page cache, which a process crash keeps anyway)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("LOCK"))


def test_the_log_after_a_snapshot_merges_over_it_as_record_by_record_resolution_would(tmp_path):
    """Overwrites of snapshot keys, deletes of them, keys the snapshot holds as tombstones written
    again, new keys and deletes of new keys: the bulk merge over the mapped snapshot gives what
    a model of the writes says, and so does a full rebuild of the same log."""
    import random

    rng = random.Random(3)
    model: dict[str, bytes] = {}
    src = tmp_path / "src"
    s = open_backend("indexed_fs", path=str(src), segment_size=3000, index_flush_interval=0)
    try:
        for i in range(300):
            k, v = f"key{rng.randrange(120)}", f"v{i}".encode() * rng.randrange(1, 5)
            s.put(k, v)
            model[k] = v
        for k in list(model)[:20]:
            s.delete(k)
            del model[k]
        s.write_snapshot()
        for i in range(400):
            r = rng.random()
            k = f"key{rng.randrange(160)}"
            if r < 0.25:
                s.delete(k)
                model.pop(k, None)
            else:
                v = f"w{i}".encode() * rng.randrange(1, 5)
                s.put(k, v)
                model[k] = v
        _copy_open_store(src, tmp_path / "crashed")
    finally:
        s.close()
    with rebuilt(tmp_path / "crashed") as kd:
        assert kd.snapshot_used and kd.records_scanned > 0
        got = {k: value_of(kd, k) for k in kd.index.keys_from("")}
        assert got == model and len(kd.index) == len(model)
        live = {sid: list(v) for sid, v in kd.index.live.items() if v[0]}
    for name in (tmp_path / "crashed").iterdir():
        if name.suffix in (".idx", ".hint"):
            name.unlink()
    with rebuilt(tmp_path / "crashed") as kd:  # the whole log, no snapshot, no hints
        assert kd.snapshot_used is None
        assert {k: value_of(kd, k) for k in kd.index.keys_from("")} == model
        assert {sid: list(v) for sid, v in kd.index.live.items() if v[0]} == live
