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


@pytest.mark.parametrize("backend", PEERS)
def test_a_batch_over_the_batch_limits_reaches_the_store_in_several_calls(tmp_path, monkeypatch,
                                                                          backend):
    """``put_many`` splits a batch above ``max_batch_bytes`` / ``max_batch_items`` into calls of
    ``_put_many`` within the limits, in order (a repeated key keeps its last value), and every
    value arrives intact; a single item above the byte limit goes alone."""
    cls = backend_class(backend)
    monkeypatch.setattr(cls, "max_batch_bytes", 1000)
    monkeypatch.setattr(cls, "max_batch_items", 4)
    calls: list[list[tuple[str, bytes]]] = []
    real = cls._put_many

    def spy(self, items):
        calls.append(items)
        return real(self, items)

    monkeypatch.setattr(cls, "_put_many", spy)
    items = [(f"k{i}", bytes([i]) * (100 * (i % 4))) for i in range(10)]
    items += [("big", b"b" * 1500), ("k0", b"last")]
    with open_backend(backend, path=str(tmp_path)) as s:
        s.put_many(items)
        assert [item for call in calls for item in call] == items
        assert len(calls) > 1 and all(len(c) <= 4 for c in calls)
        assert all(sum(len(k) + len(v) for k, v in c) <= 1000 or len(c) == 1 for c in calls)
        assert [c for c in calls if ("big", b"b" * 1500) in c] == [[("big", b"b" * 1500)]]
        assert dict(s.scan()) == {**dict(items)}
        calls.clear()
        s.put_many(items[:2])  # within the limits: one call, as before
        assert calls == [items[:2]]


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
