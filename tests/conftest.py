"""Shared fixtures: a store factory for every registered backend.

File backends get a fresh directory; server backends get the real server started by
``bench services`` (``./dev test`` starts them first) and a namespace of their own, so tests never
see each other's keys.  A server that cannot be reached fails the test loudly — never a skip.

The file backends also run over NFS: the parameters ``default_fs@nfs`` and ``indexed_fs@nfs``
open them on a fresh directory of the real nfs-ganesha export (an ``nfs://`` URL, userspace
client), marked ``server`` and ``nfs``; ``default_fs@hdfs`` and ``indexed_fs@hdfs`` the same on
the real single-node HDFS (an ``hdfs://`` URL, WebHDFS), marked ``server`` and ``hdfs``.
``backend_name`` is always the plain backend name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from backends import Backend, backend_class, backend_names, open_backend

SERVER_BACKENDS = ("redis", "hbase", "minio")
#: file backends that also run on the NFS server, as parameter ``NAME@nfs``
NFS_BACKENDS = ("default_fs", "indexed_fs")

_started: set[str] = set()


def server_options(name: str, namespace: str) -> dict[str, Any]:
    """Options for talking to the real ``name`` server, started on first use."""
    import services

    if name not in _started:
        services.up([name])
        _started.add(name)
    return services.client_options(name, namespace)


def nfs_dir(prefix: str = "t") -> str:
    """A fresh directory on the real NFS server, as an ``nfs://`` URL."""
    return server_options("nfs", f"{prefix}{uuid.uuid4().hex[:12]}")["path"]


def hdfs_dir(prefix: str = "t") -> str:
    """A fresh directory on the real HDFS, as an ``hdfs://`` URL."""
    return server_options("hdfs", f"{prefix}{uuid.uuid4().hex[:12]}")["path"]


def backend_options(name: str, tmp_path: Path) -> dict[str, Any]:
    """The options that open ``name`` (or ``NAME@nfs``, ``NAME@hdfs``) in isolation for one test."""
    if name.endswith("@nfs"):
        return {"path": nfs_dir()}
    if name.endswith("@hdfs"):
        return {"path": hdfs_dir()}
    if name in SERVER_BACKENDS:
        return server_options(name, f"t{uuid.uuid4().hex[:12]}")
    if "path" in backend_class(name).all_options():
        return {"path": str(tmp_path / f"{name}-store")}
    return {}


def _marks(name: str) -> list:
    return [getattr(pytest.mark, name), pytest.mark.server] if name in SERVER_BACKENDS else []


ALL_BACKENDS = [pytest.param(n, marks=_marks(n), id=n) for n in backend_names()] + [
    pytest.param(f"{n}@nfs", marks=[pytest.mark.nfs, pytest.mark.server], id=f"{n}@nfs")
    for n in NFS_BACKENDS
] + [
    pytest.param(f"{n}@hdfs", marks=[pytest.mark.hdfs, pytest.mark.server], id=f"{n}@hdfs")
    for n in NFS_BACKENDS
]


@pytest.fixture(params=ALL_BACKENDS)
def backend_param(request) -> str:
    """``NAME``, ``NAME@nfs`` or ``NAME@hdfs`` (a file backend on the NFS server or HDFS)."""
    return request.param


@pytest.fixture
def backend_name(backend_param: str) -> str:
    return backend_param.split("@")[0]


@pytest.fixture
def store_factory(backend_param: str, backend_name: str, tmp_path: Path) -> Callable[..., Backend]:
    """``store_factory(**extra)`` opens the parametrized backend; the same options each call, so a
    second call after ``close()`` reopens the same data.  Stores still open at the end are closed."""
    base = backend_options(backend_param, tmp_path)
    opened: list[Backend] = []

    def make(**extra: Any) -> Backend:
        store = open_backend(backend_name, **{**base, **extra})
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(store_factory) -> Backend:
    return store_factory()


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    """A real 2 MiB tmpfs to fill up (full-disk tests); needs root, as CI and ./dev test have."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a 2 MiB tmpfs to fill (needs root): {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


#: file systems that keep data in memory: no disk behind them, and syncs that cost nothing
MEMORY_FS = ("tmpfs", "ramfs")


def fs_type(path: str) -> str:
    """The type of the file system ``path`` is on (the longest mount point above it)."""
    path, best, kind = os.path.realpath(path), "", "?"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mount, fstype = fields[4], fields[fields.index("-") + 1]
            mount = mount.replace("\\040", " ")
            if (path == mount or path.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                best, kind = mount, fstype
    return kind


@pytest.fixture
def real_disk_dir() -> Path:
    """A fresh directory on a real disk, for tests that need one (whatever ``TMPDIR`` is):
    ``$CKPTBENCH_DISK_DIR`` if set, else under the repository's ``.state``.  A test that uses
    it fails, naming the fix, when that is a memory file system."""
    root = Path(os.environ.get("CKPTBENCH_DISK_DIR") or Path(__file__).resolve().parents[1]
                / ".state" / "disk-tests")
    root.mkdir(parents=True, exist_ok=True)
    kind = fs_type(str(root))
    if kind in MEMORY_FS:
        pytest.fail(f"{root} is on {kind}, not a disk: set CKPTBENCH_DISK_DIR to a directory "
                    "on a real disk")
    d = root / uuid.uuid4().hex[:12]
    d.mkdir()
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def slow_sync():
    """Every group-commit sync (C and Python committer) sleeps 5 ms first, so that writers queue
    behind it on any medium (a tmpfs sync takes no time) and with any load."""
    from backends.indexed_fs import group_commit

    group_commit.set_sync_delay(0.005)
    yield 0.005
    group_commit.set_sync_delay(0)


@pytest.fixture(scope="module")
def spark(request):
    """A local[2] SparkSession shared by one test module's Spark jobs (starting one takes ~5 s)."""
    from spark_integration.runner import build_session

    session = build_session("local[2]", f"ckptbench-{request.module.__name__}")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
