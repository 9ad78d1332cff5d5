"""The peer stores (rocksdb, lmdb, sqlite): what their durability modes set, their limits, and the
facts their module docstrings state about the bindings.  The interface contract itself is
``tests/test_conformance.py`` (every registered backend) and crash safety ``tests/test_crash.py``."""

from __future__ import annotations

import builtins
import threading

import pytest

from backends import (
    BackendUnavailableError,
    BadOptionError,
    ValueTooLargeError,
    backend_class,
    open_backend,
    registry,
)

PEERS = ("rocksdb", "lmdb", "sqlite")


@pytest.mark.parametrize("backend", PEERS)
def test_the_default_mode_is_sync_and_none_exists(backend):
    modes = backend_class(backend).durability_modes
    assert modes[0] == "sync" and "none" in modes


@pytest.mark.parametrize("mode,pragma", [("sync", 2), ("normal", 1), ("none", 0)])
def test_sqlite_modes_set_synchronous_in_wal(tmp_path, mode, pragma):
    with open_backend("sqlite", path=str(tmp_path), durability=mode) as s:
        assert s._run("", "PRAGMA synchronous") == [(pragma,)]
        assert s._run("", "PRAGMA journal_mode") == [("wal",)]
        s.put("k", b"v")
        s.flush()  # syncs through a FULL checkpoint and restores the mode
        assert s._run("", "PRAGMA synchronous") == [(pragma,)]


@pytest.mark.parametrize("mode,sync", [("sync", True), ("none", False)])
def test_lmdb_and_rocksdb_modes(tmp_path, mode, sync):
    with open_backend("lmdb", path=str(tmp_path / "l"), durability=mode) as s:
        assert s._env.flags()["sync"] is sync
    with open_backend("rocksdb", path=str(tmp_path / "r"), durability=mode) as s:
        assert s._write.sync is sync


def test_rocksdb_group_commit_never_forms_from_python_threads(tmp_path):
    """The GIL is held across a rocksdict put: concurrent durable writers are never merged into
    one WAL sync (``writes_grouped`` counts writes another thread's group carried)."""
    with open_backend("rocksdb", path=str(tmp_path), statistics=True) as s:
        def writer(t: int) -> None:
            for i in range(30):
                s.put(f"t{t}-{i}", b"x" * 512)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        st = s.stats()
    assert st["writes_leading"] == st["wal_syncs"] == 8 * 30
    assert st["writes_grouped"] == 0


@pytest.mark.parametrize("backend", PEERS)
def test_a_remote_url_is_refused(backend):
    with pytest.raises(BadOptionError, match="local directory"):
        open_backend(backend, path="nfs://host/export/dir")


@pytest.mark.parametrize("backend", PEERS)
def test_a_path_that_is_a_file_is_unavailable_not_a_traceback(tmp_path, backend):
    f = tmp_path / "file"
    f.write_bytes(b"x")
    with pytest.raises(BackendUnavailableError, match="is a file, not a directory; give a directory"):
        open_backend(backend, path=str(f))


def test_lmdb_key_limit_is_a_clear_value_error(tmp_path):
    with open_backend("lmdb", path=str(tmp_path)) as s:
        limit = s.max_key_bytes
        s.put("k" * limit, b"v")
        with pytest.raises(ValueError, match=f"at most {limit} utf-8 bytes"):
            s.put("k" * (limit + 1), b"v")


@pytest.mark.parametrize("backend", PEERS)
def test_a_value_over_the_limit_is_refused_before_anything_is_written(tmp_path, monkeypatch,
                                                                      backend):
    monkeypatch.setattr(backend_class(backend), "max_value_bytes", 100)
    with open_backend(backend, path=str(tmp_path)) as s:
        s.put("at-limit", b"x" * 100)
        with pytest.raises(ValueTooLargeError, match="more than the 100 bytes"):
            s.put("over", b"x" * 101)
        with pytest.raises(ValueTooLargeError):
            s.put_many([("ok", b"y"), ("over", memoryview(b"x" * 101))])
        assert dict(s.scan()) == {"at-limit": b"x" * 100}


def test_a_missing_client_library_names_its_extra(monkeypatch):
    real_import = builtins.__import__

    def no_rocksdict(name, *args, **kwargs):
        if name == "rocksdict":
            raise ModuleNotFoundError("No module named 'rocksdict'", name="rocksdict")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_rocksdict)
    monkeypatch.setitem(registry._registry, "rocksdb", registry._BUILTIN["rocksdb"])
    monkeypatch.delitem(__import__("sys").modules, "backends.rocksdb", raising=False)
    with pytest.raises(BackendUnavailableError, match=r"ckptbench\[peers\]"):
        backend_class("rocksdb")
