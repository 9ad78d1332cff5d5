"""The record format's value limit: a value it cannot carry is refused before anything is written;
one at the limit goes through end to end (clean reopen from the snapshot, rebuild by a full scan).
The limit is lowered in the tests (the module constant the rebuild checks, and the class bound
that ``put`` checks), so nothing large is written."""

from __future__ import annotations

import os

import pytest

from backends import ValueTooLargeError, open_backend
from backends.indexed_fs import store as store_mod
from backends.indexed_fs import segment

LIMIT = 4096


@pytest.fixture
def lowered(monkeypatch):
    monkeypatch.setattr(segment, "MAX_VALUE_LEN", LIMIT)
    monkeypatch.setattr(store_mod.IndexedFSBackend, "max_value_bytes", LIMIT)


def _segment_bytes(path) -> dict[str, int]:
    return {n: os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
            if n.endswith(".seg")}


def _drop_snapshots(path) -> None:
    for n in os.listdir(path):
        if n.startswith("snap-"):
            os.remove(os.path.join(path, n))


def test_the_class_bound_is_the_formats_bound():
    assert store_mod.IndexedFSBackend.max_value_bytes == segment.MAX_VALUE_LEN


def test_a_value_at_the_limit_survives_reopen_and_a_full_rebuild(tmp_path, lowered):
    path = str(tmp_path / "s")
    at_limit = bytes(range(256)) * (LIMIT // 256)
    with open_backend("indexed_fs", path=path, segment_size=LIMIT // 2) as s:
        s.put("big", at_limit)
        s.put("after", b"later write")
    with open_backend("indexed_fs", path=path) as s:  # from the snapshot
        assert s.get("big") == at_limit and s.get("after") == b"later write"
    _drop_snapshots(path)
    with open_backend("indexed_fs", path=path) as s:  # a full scan: the record is no damage
        assert s.stats()["corrupt_records"] == 0
        assert s.get("big") == at_limit and s.get("after") == b"later write"


def test_a_value_over_the_limit_is_refused_and_nothing_is_written(tmp_path, lowered):
    path = str(tmp_path / "s")
    with open_backend("indexed_fs", path=path) as s:
        s.put("k", b"v")
        before = _segment_bytes(path)
        with pytest.raises(ValueTooLargeError) as err:
            s.put("over", b"x" * (LIMIT + 1))
        assert f"more than the {LIMIT} bytes" in str(err.value) and "'over'" in str(err.value)
        with pytest.raises(ValueTooLargeError):
            s.put_many({"fine": b"y", "over": bytearray(LIMIT + 1)})
        assert _segment_bytes(path) == before
        s.put("after", b"still writable")
    _drop_snapshots(path)
    with open_backend("indexed_fs", path=path) as s:
        assert dict(s.scan()) == {"k": b"v", "after": b"still writable"}


def test_a_short_read_of_a_large_record_is_completed(tmp_path, monkeypatch):
    """One ``pread`` returns at most about 2 GiB on Linux: a record read keeps reading."""
    real = os.pread
    monkeypatch.setattr(segment.os, "pread", lambda fd, n, off: real(fd, min(n, 1000), off))
    with open_backend("indexed_fs", path=str(tmp_path / "s")) as s:
        s.put("k", b"z" * 5000)
        assert s.get("k") == b"z" * 5000
