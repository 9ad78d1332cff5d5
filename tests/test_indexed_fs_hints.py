"""indexed_fs's hint files: one per sealed segment, taken instead of a walk by the crash rebuild,
deleted with their segment by GC and compaction, and ignored (the segment walked) when they do not
fit the segment file."""

from __future__ import annotations

import shutil
from pathlib import Path

from backends import open_backend
from backends.indexed_fs import hint
from backends.indexed_fs.segment import segment_name

OPTS = dict(segment_size=600, index_flush_interval=0)


def _ids(path: Path, suffix: str) -> set[int]:
    return {int(p.stem) for p in path.iterdir() if p.suffix == suffix}


def _crash_copy(src: Path, dst: Path) -> None:
    """The files of the open store at ``src``, without its snapshots: a crash before any."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("LOCK", "*.idx", "*.tmp"))


def _fill(s, n: int, tag: str) -> dict[str, bytes]:
    model = {}
    for i in range(n):
        k, v = f"k{i % 17}", f"{tag}{i}".encode() * 9
        s.put(k, v)
        model[k] = v
    return model


def test_a_crash_rebuild_takes_sealed_segments_from_their_hints(tmp_path):
    src = tmp_path / "src"
    s = open_backend("indexed_fs", path=str(src), **OPTS)
    try:
        model = _fill(s, 60, "a")
        s.delete("k3")
        del model["k3"]
        s._write_hints()  # what the background thread does after each seal
        sealed = {sid for sid in s._segments if sid != s._active.id}
        assert sealed and _ids(src, ".hint") == sealed
        _crash_copy(src, tmp_path / "crashed")
    finally:
        s.close()
    with open_backend("indexed_fs", path=str(tmp_path / "crashed"), **OPTS) as c:
        st = c.stats()
        assert st["snapshot_used"] is None and st["hints_used"] == len(sealed)
        assert st["segments_scanned"] == 1  # the active segment alone is walked
        assert dict(c.scan()) == model


def test_a_bulk_write_snapshots_a_doubling_index_not_every_sealed_segment(tmp_path):
    """After seals, a snapshot (every key) only once the records appended since the newest are
    as many as it holds: 6,400 records sealing a segment every batch make 7 snapshots, not 64;
    every sealed segment gets its hint, and a crash rebuild from them finds every key."""
    src = tmp_path / "src"
    s = open_backend("indexed_fs", path=str(src), segment_size=64 << 10, delta_records=100,
                     index_flush_interval=3600)
    try:
        model = {}
        for b in range(64):
            batch = {f"k{b:02d}-{i:03d}": bytes([b]) * 1000 for i in range(100)}
            s.put_many(batch)
            model.update(batch)
            s._after_seal()  # the maintenance round after the batch's seals
        st = s.stats()
        sealed = {sid for sid in s._segments if sid != s._active.id}
        assert st["snapshots_written"] == 7  # at 100, 200, 400, ... 6,400 records
        assert len(sealed) > 64 and _ids(src, ".hint") == sealed
        _crash_copy(src, tmp_path / "crashed")
    finally:
        s.close()
    with open_backend("indexed_fs", path=str(tmp_path / "crashed"), index_flush_interval=0) as c:
        assert c.stats()["hints_used"] == len(sealed)
        assert dict(c.scan()) == model


def test_a_hint_that_does_not_fit_its_segment_is_not_taken(tmp_path):
    src = tmp_path / "src"
    s = open_backend("indexed_fs", path=str(src), **OPTS)
    try:
        model = _fill(s, 40, "b")
        s._write_hints()
        _crash_copy(src, tmp_path / "crashed")
    finally:
        s.close()
    crashed = tmp_path / "crashed"
    first = min(_ids(crashed, ".hint"))
    seg = crashed / segment_name(first)
    seg.write_bytes(seg.read_bytes() + b"\0" * 7)  # the file no longer has the hint's size
    with open_backend("indexed_fs", path=str(crashed), **OPTS) as c:
        st = c.stats()
        assert st["hints_used"] == len(_ids(crashed, ".hint")) - 1
        assert any(f"{hint.file_name(first)} unusable" in n for n in st["rebuild_notes"])
        assert dict(c.scan()) == model


def test_gc_and_compaction_delete_hints_with_their_segments(tmp_path):
    path = tmp_path / "s"
    with open_backend("indexed_fs", path=str(path), compaction_live_ratio=0.9, **OPTS) as s:
        _fill(s, 80, "c")
        s._write_hints()
        before = set(_ids(path, ".hint"))
        model = _fill(s, 80, "d")  # every key overwritten: the old segments are dead
        s.compact()
        s._gc()
        s._write_hints()
        segs, hints = _ids(path, ".seg"), _ids(path, ".hint")
        assert before - segs and not (before - segs) & hints  # deleted segments lost their hint
        assert hints <= segs and hints == segs - {s._active.id}  # every sealed one has its hint
        assert dict(s.scan()) == model
    with open_backend("indexed_fs", path=str(path), **OPTS) as s:
        assert dict(s.scan()) == model
