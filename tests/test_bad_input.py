"""Bad input gets one clear message naming the problem and the fix, and leaves stored data intact."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from backends import (
    BackendUnavailableError,
    BadOptionError,
    CorruptDataError,
    StorageFullError,
    StoreLockedError,
    UnknownBackendError,
    open_backend,
)

FILE_BACKENDS = ["default_fs", "indexed_fs"]


def test_unknown_backend_lists_valid_ones():
    with pytest.raises(UnknownBackendError) as err:
        open_backend("casandra")
    assert "casandra" in str(err.value)
    for name in ("indexed_fs", "default_fs", "memory", "redis"):
        assert name in str(err.value)


def test_unknown_option_lists_valid_ones(tmp_path):
    with pytest.raises(BadOptionError) as err:
        open_backend("default_fs", path=str(tmp_path), pth="x")
    assert "'pth'" in str(err.value) and "path" in str(err.value)


def test_bad_option_type_is_named(tmp_path):
    with pytest.raises(BadOptionError, match="durability"):
        open_backend("default_fs", path=str(tmp_path), durability="always")


@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_missing_path_says_how(name):
    with pytest.raises(BadOptionError, match="path=DIR"):
        open_backend(name)


@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_unwritable_path(name, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    with pytest.raises(BackendUnavailableError, match="path=DIR"):
        open_backend(name, path=str(blocker / "store"))
    assert blocker.read_bytes() == b"not a directory"


@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_directory_locked_by_another_process(name, tmp_path):
    path = str(tmp_path / "store")
    with open_backend(name, path=path) as store:
        store.put("k", b"v")
        store.flush()
        code = (
            "import sys\n"
            "from backends import open_backend, StoreLockedError\n"
            f"try:\n    open_backend({name!r}, path={path!r})\n"
            "except StoreLockedError as e:\n    print(e); sys.exit(3)\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 3, proc.stderr
        assert "locked by another process" in proc.stdout and str(os.getpid()) in proc.stdout
        with pytest.raises(StoreLockedError):
            open_backend(name, path=path)  # a second opener in the same process too
        assert store.get("k") == b"v"
    with open_backend(name, path=path) as again:  # released on close
        assert again.get("k") == b"v"


@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_full_disk(name, small_tmpfs):
    path = str(small_tmpfs / "store")
    # indexed_fs preallocates nothing, but keep its segments small so the disk fills mid-segment
    extra = {"segment_size": 256 * 1024} if name == "indexed_fs" else {}
    acked = {}
    with open_backend(name, path=path, **extra) as store:
        with pytest.raises(StorageFullError) as err:
            for i in range(10_000):
                value = os.urandom(8 * 1024)
                store.put(f"k{i:05d}", value)
                acked[f"k{i:05d}"] = value
        assert "no space left" in str(err.value)
        assert len(acked) > 10
        for key, value in acked.items():  # still readable right after the failure
            assert store.get(key) == value
    # free some space by removing an unrelated file? there is none: reopen must work on a full disk
    with open_backend(name, path=path, **extra) as store:
        for key, value in acked.items():
            assert store.get(key) == value


def test_default_fs_corrupt_file_is_detected_not_returned(tmp_path):
    path = tmp_path / "store"
    with open_backend("default_fs", path=str(path)) as store:
        store.put("pe-1", b"A" * 100)
        store.put("pe-2", b"B" * 100)
    victim = path / "pe-1.ckpt"
    blob = bytearray(victim.read_bytes())
    blob[-10] ^= 0xFF
    victim.write_bytes(bytes(blob))
    with open_backend("default_fs", path=str(path)) as store:
        with pytest.raises(CorruptDataError, match="pe-1"):
            store.get("pe-1")
        assert store.get("pe-2") == b"B" * 100
    (path / "pe-2.ckpt").write_bytes((path / "pe-2.ckpt").read_bytes()[:7])  # torn
    with open_backend("default_fs", path=str(path)) as store:
        with pytest.raises(CorruptDataError):
            store.get("pe-2")


def test_default_fs_drops_leftover_temp_files(tmp_path):
    path = tmp_path / "store"
    with open_backend("default_fs", path=str(path)) as store:
        store.put("k", b"v")
    (path / f".tmp-999-{uuid.uuid4().hex}").write_bytes(b"half a checkpoint")
    with open_backend("default_fs", path=str(path)) as store:
        assert store.stats()["leftover_temp_files_removed"] == 1
        assert [k for k, _ in store.scan("")] == ["k"]


def _nfs_dir() -> str:
    import services

    services.up(["nfs"])
    return services.client_options("nfs", f"bad{uuid.uuid4().hex[:10]}")["path"]


@pytest.mark.server
@pytest.mark.nfs
@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_corrupt_data_over_nfs_is_detected_not_returned(name):
    from backends.media import open_medium

    path = _nfs_dir()
    with open_backend(name, path=path) as store:
        store.put("pe-1", b"A" * 100)
        store.put("pe-2", b"B" * 100)
    with open_medium(path, "test") as medium:
        victim = "pe-1.ckpt" if name == "default_fs" else "000000001.seg"
        blob = bytearray(medium.read_file(victim))
        blob[50 if name == "indexed_fs" else -10] ^= 0xFF  # indexed_fs: inside pe-1's value
        medium.write_atomic(victim, bytes(blob))
    with open_backend(name, path=path) as store:
        with pytest.raises(CorruptDataError, match="pe-1"):
            store.get("pe-1")
        assert store.get("pe-2") == b"B" * 100


@pytest.mark.server
@pytest.mark.nfs
@pytest.mark.parametrize("name", FILE_BACKENDS)
def test_unreachable_nfs_server_is_a_clear_error(name):
    url = "nfs://127.0.0.1/nowhere?version=3&nfsport=1&mountport=1&timeout=2"
    with pytest.raises(BackendUnavailableError, match="bench services up nfs"):
        open_backend(name, path=url)
