"""A data directory belongs to one backend: ``.ckptbench-owner`` names it, and every other backend
refuses the directory with one line (the owner and the fix), touching nothing in it.  A store
written without a marker is recognised by its files: it still opens for its own backend (and
gets its marker), and is refused by the others."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest

from backends import ForeignDirectoryError, open_backend
from backends.owner import MARKER, SIGNATURES

from conftest import hdfs_dir, nfs_dir

#: every backend that keeps its store in a directory given by its ``path`` option
PATH_BACKENDS = ["indexed_fs", "default_fs", "rocksdb", "lmdb", "sqlite"]
PAIRS = list(itertools.permutations(PATH_BACKENDS, 2))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fill(backend: str, path: str) -> None:
    with open_backend(backend, path=path) as store:
        store.put("kept", b"intact")


def _listing(path) -> dict[str, bytes]:
    return {n: (path / n).read_bytes() for n in sorted(os.listdir(path)) if (path / n).is_file()}


def test_every_path_backend_is_recognised_without_a_marker():
    from backends import backend_class

    for name in PATH_BACKENDS:
        assert "path" in backend_class(name).all_options()
    assert sorted(SIGNATURES) == sorted(PATH_BACKENDS)


@pytest.mark.parametrize("owner, other", PAIRS, ids=[f"{a}-refuses-{b}" for b, a in PAIRS])
@pytest.mark.parametrize("marked", [True, False], ids=["marked", "markerless"])
def test_a_backend_refuses_another_backends_directory(owner, other, marked, tmp_path):
    path = tmp_path / "store"
    _fill(owner, str(path))
    assert (path / MARKER).read_text() == f"{owner}\n"
    if not marked:  # a store written before markers existed: known by its files
        (path / MARKER).unlink()
    before = _listing(path)
    with pytest.raises(ForeignDirectoryError) as err:
        open_backend(other, path=str(path))
    message = str(err.value)
    assert "\n" not in message and f"holds a store of backend {owner!r}" in message
    assert f"--backend {owner}" in message and "another --opt path=DIR" in message
    assert (f"its {MARKER} names {owner!r}" in message) == marked
    assert _listing(path) == before  # nothing created, changed or deleted
    with open_backend(owner, path=str(path)) as store:  # the owner still opens it, marked again
        assert store.get("kept") == b"intact"
    assert (path / MARKER).read_text() == f"{owner}\n"


@pytest.mark.parametrize("backend", PATH_BACKENDS)
def test_the_marker_survives_reopen_and_an_old_store_gets_one(backend, tmp_path):
    path = tmp_path / "store"
    _fill(backend, str(path))
    (path / MARKER).unlink()
    with open_backend(backend, path=str(path)) as store:  # markerless: still its own
        assert store.get("kept") == b"intact"
        store.put("more", b"1")
    assert (path / MARKER).read_text() == f"{backend}\n"
    for _ in range(2):
        with open_backend(backend, path=str(path)) as store:
            assert store.get("kept") == b"intact" and store.get("more") == b"1"
        assert (path / MARKER).read_text() == f"{backend}\n"


@pytest.mark.parametrize("backend", PATH_BACKENDS)
def test_an_empty_marker_counts_as_none(backend, tmp_path):
    """A power cut under durability=none can leave the renamed marker empty."""
    path = tmp_path / "store"
    _fill(backend, str(path))
    (path / MARKER).write_bytes(b"")
    with open_backend(backend, path=str(path)) as store:
        assert store.get("kept") == b"intact"
    assert (path / MARKER).read_text() == f"{backend}\n"


def test_a_directory_of_unrelated_files_is_claimed_and_left_as_it_was(tmp_path):
    path = tmp_path / "store"
    path.mkdir()
    (path / "notes.txt").write_text("mine")
    (path / "CURRENT").write_text("a CURRENT alone is not RocksDB's")
    with open_backend("indexed_fs", path=str(path)) as store:
        store.put("k", b"v")
    assert (path / "notes.txt").read_text() == "mine"
    assert (path / MARKER).read_text() == "indexed_fs\n"


def test_a_marker_naming_something_else_is_refused(tmp_path):
    path = tmp_path / "store"
    path.mkdir()
    (path / MARKER).write_text("cassandra\n")
    with pytest.raises(ForeignDirectoryError, match=r"holds a store of backend 'cassandra' \(its "):
        open_backend("default_fs", path=str(path))
    assert os.listdir(path) == [MARKER]


def test_the_command_line_says_it_in_one_line(tmp_path):
    path = tmp_path / "store"
    _fill("indexed_fs", str(path))
    proc = subprocess.run([sys.executable, "-m", "bench", "recovery", "--backend", "rocksdb",
                           "--opt", f"path={path}", "--records", "5", "--no-progress"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench: error: backend 'rocksdb': data "
                                                   "directory"), proc.stderr
    assert "holds a store of backend 'indexed_fs'" in lines[0]


def test_verify_takes_the_marker_for_no_damage(tmp_path):
    path = tmp_path / "store"
    _fill("indexed_fs", str(path))
    assert (path / MARKER).exists()
    proc = subprocess.run([sys.executable, "-m", "bench", "verify", "--backend", "indexed_fs",
                           "--opt", f"path={path}"], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert MARKER not in proc.stdout + proc.stderr


@pytest.mark.server
@pytest.mark.parametrize("medium", [pytest.param("nfs", marks=pytest.mark.nfs),
                                    pytest.param("hdfs", marks=pytest.mark.hdfs)])
def test_the_marker_goes_through_the_medium(medium):
    from backends.media import open_medium

    path = nfs_dir("own") if medium == "nfs" else hdfs_dir("own")
    _fill("indexed_fs", path)
    with open_medium(path, "test") as m:
        assert m.read_file(MARKER) == b"indexed_fs\n"
    with pytest.raises(ForeignDirectoryError, match="holds a store of backend 'indexed_fs'"):
        open_backend("default_fs", path=path)
    with open_backend("indexed_fs", path=path) as store:
        assert store.get("kept") == b"intact"



def test_compare_gives_each_backend_its_own_directory_of_a_shared_path():
    """``bench compare``/``sweep --backends a,b --opt path=DIR``: one store directory belongs to
    one backend, so each gets ``DIR/<backend>`` (a URL's query string stays at its end)."""
    from experiments.core.compare import options_for

    assert options_for("indexed_fs", {"path": "/d/"}, shared=True)["path"] == "/d/indexed_fs"
    assert options_for("default_fs", {"path": "nfs://h/e/d?version=3"}, shared=True)["path"] == \
        "nfs://h/e/d/default_fs?version=3"
    assert options_for("indexed_fs", {"path": "/d"})["path"] == "/d"


def test_openers_of_one_kind_racing_on_a_new_directory_all_claim_it(tmp_path):
    """Spark may start two tasks of one instance at once on a fresh directory: each writes
    the marker through a temporary file of its own, so no rename finds its file gone."""
    import threading

    from backends.base import StoreLockedError

    errors: list[str] = []
    for trial in range(30):
        path = str(tmp_path / f"d{trial}")

        def open_close() -> None:
            try:
                open_backend("indexed_fs", path=path).close()
            except StoreLockedError:
                pass  # the other opener holds the store: the lock did its job
            except Exception as exc:  # noqa: BLE001 - any other error is the bug
                errors.append(repr(exc))

        threads = [threading.Thread(target=open_close) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert (tmp_path / f"d{trial}" / ".ckptbench-owner").read_text() == "indexed_fs\n"
    assert errors == []
