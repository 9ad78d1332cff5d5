"""Opening and closing an indexed_fs store: an error while opening surfaces as itself (or a
``CkptError`` naming the file) and releases the lock and every file descriptor, so a retry in the
same process works; damage the rebuild cannot repair is reported in ``stats()``; a close with
nothing new writes no snapshot."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

import pytest

from backends import BackendUnavailableError, open_backend
from backends.indexed_fs import segment, store as store_mod
from backends.indexed_fs.segment import segment_name


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _store_with_segments(path: str, n: int = 6) -> None:
    """``n`` keys of 100 bytes, one sealed segment each, then a clean close (a snapshot)."""
    with open_backend("indexed_fs", path=path, segment_size=150) as s:
        for i in range(n):
            s.put(f"k{i}", bytes([i]) * 100)


def _files(path: str, suffix: str) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(suffix))


def _reopen_works(path: str) -> None:
    with open_backend("indexed_fs", path=path) as s:
        assert s.get("k1") == bytes([1]) * 100


# ---------------------------------------------------------------------------- errors on open
def test_a_directory_named_like_a_segment_is_left_alone(tmp_path):
    path = str(tmp_path / "s")
    _store_with_segments(path)
    for name in ("000000099.seg", segment_name(100)):
        os.mkdir(os.path.join(path, name))
    for _ in range(2):
        with open_backend("indexed_fs", path=path) as s:
            st = s.stats()
            assert s.get("k1") == bytes([1]) * 100
        assert sorted(st["foreign_files"]) == sorted(["000000099.seg", segment_name(100)])
        assert any("not a file" in w for w in st["warnings"])
    assert os.path.isdir(os.path.join(path, "000000099.seg"))


def test_an_unreadable_segment_names_the_file(tmp_path, monkeypatch):
    path = str(tmp_path / "s")
    _store_with_segments(path)
    for n in _files(path, ".idx") + _files(path, ".hint"):
        os.remove(os.path.join(path, n))  # a full scan reads every segment

    def broken(self, start=0, stop=None):
        if self.id == 3:
            raise OSError(errno.EIO, "Input/output error")
        return real(self, start, stop)

    real = segment.Segment.read_all
    monkeypatch.setattr(segment.Segment, "read_all", broken)
    before = _fds()
    with pytest.raises(OSError) as err:
        open_backend("indexed_fs", path=path)
    assert err.value.errno == errno.EIO
    assert err.value.filename == os.path.join(path, segment_name(3))
    assert _fds() == before
    monkeypatch.setattr(segment.Segment, "read_all", real)
    _reopen_works(path)


def test_an_immutable_segment_is_unavailable_naming_the_file(tmp_path):
    if not shutil.which("chattr"):
        pytest.skip("chattr is not installed")
    path = str(tmp_path / "s")
    _store_with_segments(path)
    seg = os.path.join(path, segment_name(2))
    if subprocess.run(["chattr", "+i", seg], capture_output=True).returncode != 0:
        pytest.skip("cannot make a file immutable here (needs root and ext4/xfs/btrfs)")
    try:
        before = _fds()
        for _ in range(2):
            with pytest.raises(BackendUnavailableError, match=segment_name(2)):
                open_backend("indexed_fs", path=path)
        assert _fds() == before
    finally:
        subprocess.run(["chattr", "-i", seg], check=True)
    _reopen_works(path)


def test_any_error_after_the_rebuild_surfaces_as_itself(tmp_path, monkeypatch):
    path = str(tmp_path / "s")
    _store_with_segments(path)

    def boom(_segment):
        raise RuntimeError("no committer today")

    monkeypatch.setattr(store_mod, "committer", boom)
    before = _fds()
    for _ in range(2):
        with pytest.raises(RuntimeError, match="no committer today"):
            open_backend("indexed_fs", path=path)
    assert _fds() == before
    monkeypatch.undo()
    _reopen_works(path)


# ------------------------------------------------------------------------- snapshot on close
def test_a_close_with_nothing_new_writes_no_snapshot(tmp_path):
    path = str(tmp_path / "s")
    _store_with_segments(path)
    snaps = _files(path, ".idx")
    stamp = os.stat(os.path.join(path, snaps[0])).st_mtime_ns
    for _ in range(2):
        with open_backend("indexed_fs", path=path) as s:
            assert s.get("k0") == bytes(100)
            s.delete("never-there")  # no record: nothing changes
    assert _files(path, ".idx") == snaps
    assert os.stat(os.path.join(path, snaps[0])).st_mtime_ns == stamp
    with open_backend("indexed_fs", path=path) as s:
        s.put("new", b"v")
    assert _files(path, ".idx") != snaps
    with open_backend("indexed_fs", path=path) as s:
        assert s.stats()["records_scanned"] == 0  # the new snapshot holds everything
        assert s.get("new") == b"v"


def test_a_close_after_a_full_rebuild_writes_a_snapshot(tmp_path):
    path = str(tmp_path / "s")
    _store_with_segments(path)
    for n in _files(path, ".idx"):
        os.remove(os.path.join(path, n))
    with open_backend("indexed_fs", path=path):
        pass
    assert len(_files(path, ".idx")) == 1


# ------------------------------------------------------------------------- damage is reported
def _damaged(path: str) -> dict:
    with open_backend("indexed_fs", path=path) as s:
        st = s.stats()
    return st


def test_a_missing_middle_segment_is_reported(tmp_path):
    path = str(tmp_path / "s")
    _store_with_segments(path)
    os.remove(os.path.join(path, segment_name(3)))
    for _ in range(2):  # the snapshot showing it is kept, so the next open reports it too
        st = _damaged(path)
        assert st["damaged_segments"] == 1 and len(st["warnings"]) == 2
        assert st["warnings"][0].startswith("segment 3: missing")
        assert "'k2'" in st["warnings"][0] and "bench verify" in st["warnings"][0]
        assert "snapshots are held back" in st["warnings"][1]


def test_a_truncated_middle_segment_is_reported(tmp_path):
    path = str(tmp_path / "s")
    _store_with_segments(path)
    os.truncate(os.path.join(path, segment_name(2)), 50)
    st = _damaged(path)
    assert st["damaged_segments"] == 1
    assert st["warnings"][0].startswith("segment 2: truncated: the file ends at 50")


def test_a_truncated_middle_segment_is_reported_by_a_full_scan(tmp_path):
    path = str(tmp_path / "s")
    _store_with_segments(path)
    for n in _files(path, ".idx"):
        os.remove(os.path.join(path, n))
    os.truncate(os.path.join(path, segment_name(2)), 50)
    st = _damaged(path)
    assert st["damaged_segments"] == 1 and st["corrupt_records"] == 1
    assert "damaged bytes at offsets [0, 50) to its end" in st["warnings"][0]


def test_a_clean_store_has_no_warnings(tmp_path):
    path = str(tmp_path / "s")
    _store_with_segments(path)
    st = _damaged(path)
    assert st["damaged_segments"] == 0 and st["warnings"] == []
