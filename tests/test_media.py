"""The storage-medium layer (backends/media) on local disk, the real nfs-ganesha server and HDFS.

The same conformance checks run on every medium; the NFS and HDFS ones use the shared servers
started by ``bench services up nfs`` and ``bench services up hdfs`` (a start failure fails the
test loudly, never a skip).
"""

from __future__ import annotations

import uuid

import pytest

import services
from backends.base import BackendUnavailableError
from backends.media import open_medium
from backends.media.local import LocalMedium
from backends.media.hdfs import HdfsMedium
from backends.media.nfs import NfsMedium


@pytest.fixture(params=["local", pytest.param("nfs", marks=[pytest.mark.server, pytest.mark.nfs]),
                        pytest.param("hdfs", marks=[pytest.mark.server, pytest.mark.hdfs])])
def medium(request, tmp_path):
    if request.param == "local":
        m = open_medium(str(tmp_path / "medium"), "test")
        assert isinstance(m, LocalMedium)
    elif request.param == "hdfs":
        services.up(["hdfs"])
        url = services.client_options("hdfs", f"t{uuid.uuid4().hex[:12]}")["path"]
        m = open_medium(url, "test")
        assert isinstance(m, HdfsMedium)
    else:
        services.up(["nfs"], rtt=0)
        url = services.client_options("nfs", f"t{uuid.uuid4().hex[:12]}")["path"]
        m = open_medium(url, "test")
        assert isinstance(m, NfsMedium)
    yield m
    m.close()


def test_append_returns_offsets_and_reads_back(medium):
    with medium.open_append("log") as f:
        assert f.append(b"abc") == 0
        assert f.append(b"defgh") == 3
        f.sync()
        assert f.append(b"ij") == 8  # not yet synced: still visible to reads, like the page cache
        with medium.open_read("log") as r:
            assert r.pread(2, 4) == b"cdef"
            assert r.pread(8, 100) == b"ij"
            assert r.size() == 10
        assert medium.size("log") == 10
    with medium.open_append("log") as f:  # reopen continues at the end
        assert f.size == 10
        assert f.append(b"k") == 10
    assert medium.read_file("log") == b"abcdefghijk"


def test_large_append_crosses_flush_threshold(medium):
    blob = bytes(range(256)) * 8192  # 2 MiB
    with medium.open_append("big") as f:
        f.append(blob)
        f.append(b"tail")
        f.sync()
    assert medium.size("big") == len(blob) + 4
    with medium.open_read("big") as r:
        assert r.pread(len(blob) - 2, 6) == blob[-2:] + b"tail"


def test_atomic_write_rename_list_delete(medium):
    medium.makedirs("a/b")
    medium.write_atomic("a/b/k1", b"one")
    medium.write_atomic("a/b/k1", b"uno")  # replaces
    medium.write_atomic("a/b/k2", b"")
    assert medium.read_file("a/b/k1") == b"uno"
    assert sorted(medium.listdir("a/b")) == ["k1", "k2"]  # no temp files left behind
    medium.rename("a/b/k1", "a/b/k3")
    assert not medium.exists("a/b/k1") and medium.exists("a/b/k3")
    medium.delete("a/b/k3")
    medium.delete("a/b/k3")  # missing_ok
    with pytest.raises(FileNotFoundError):
        medium.delete("a/b/k3", missing_ok=False)
    with pytest.raises(FileNotFoundError):
        medium.read_file("a/b/nope")
    medium.sync_dir("a/b")
    assert sorted(medium.listdir("a/b")) == ["k2"]


def test_truncate(medium):
    with medium.open_append("t") as f:
        f.append(b"0123456789")
        f.sync()
    medium.truncate("t", 4)
    assert medium.size("t") == 4
    with medium.open_append("t") as f:
        assert f.append(b"x") == 4
    assert medium.read_file("t") == b"0123x"


def test_reopen_sees_durable_data(medium):
    with medium.open_append("d") as f:
        f.append(b"durable")
        f.sync()
    medium.close()
    again = open_medium(medium.path, "test")
    try:
        assert again.read_file("d") == b"durable"
    finally:
        again.close()


@pytest.mark.server
@pytest.mark.nfs
def test_unreachable_nfs_server_is_a_clear_error():
    url = "nfs://127.0.0.1/nowhere?version=3&nfsport=1&mountport=1&timeout=2"
    with pytest.raises(BackendUnavailableError, match="bench services up nfs"):
        open_medium(url, "test")


def test_appends_during_syncs_from_other_threads_are_all_kept(medium):
    """Group commit: writers append while a syncer pushes earlier bytes; none may be lost."""
    import threading

    f = medium.open_append("gc-log")
    lock, stop = threading.Lock(), threading.Event()
    expected: dict[int, bytes] = {}

    def writer(t: int) -> None:
        for i in range(200):
            rec = f"{t:02d}-{i:04d};".encode()
            with lock:  # the store serialises appends; syncs run outside this lock
                expected[f.append(rec)] = rec

    def syncer() -> None:
        while not stop.is_set():
            f.sync()

    s = threading.Thread(target=syncer)
    s.start()
    ws = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    stop.set()
    s.join()
    f.sync()
    f.close()
    data = medium.read_file("gc-log")
    assert len(data) == sum(len(r) for r in expected.values())
    for off, rec in expected.items():
        assert data[off : off + len(rec)] == rec


def test_list_files_names_regular_files_only_and_copy_takes_a_byte_range(medium):
    medium.write_atomic("a.seg", bytes(range(200)))
    medium.makedirs("b.seg")  # a directory named like a file
    assert "b.seg" in medium.listdir()
    assert sorted(medium.list_files()) == ["a.seg"]
    medium.makedirs("q")
    assert medium.copy("a.seg", "q/whole") == 200
    assert medium.copy("a.seg", "q/part", 10, 30) == 20
    assert medium.read_file("q/whole") == bytes(range(200))
    assert medium.read_file("q/part") == bytes(range(10, 30))
    assert sorted(medium.list_files("q")) == ["part", "whole"]
