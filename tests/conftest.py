"""Shared fixtures: a store factory for every registered backend.

File backends get a fresh directory; server backends get the real server started by
``bench services`` (``./dev test`` starts them first) and a namespace of their own, so tests never
see each other's keys.  A server that cannot be reached fails the test loudly — never a skip.

Three session-wide checks live here too:

* **Skips in CI.**  With ``CI=true`` in the environment (``.ci/run`` sets it) a skip whose
  reason is not in :data:`CI_SKIP_ALLOWLIST` fails the run: a missing package, server or build
  step must not turn into a green run that tested less.
* **Shared servers stay as they were.**  After the last test of a module that used a shared
  server (by its marker), the server must still run with the settings and process it had when
  first seen running (:func:`pytest_runtest_teardown`); a test that changed it fails there.
* **What ran, per marker**: the terminal summary counts the tests that ran (passed or failed)
  and were skipped under each marker.

The file backends also run over NFS: the parameters ``default_fs@nfs`` and ``indexed_fs@nfs``
open them on a fresh directory of the real nfs-ganesha export (an ``nfs://`` URL, userspace
client), marked ``server`` and ``nfs``; ``default_fs@hdfs`` and ``indexed_fs@hdfs`` the same on
the real single-node HDFS (an ``hdfs://`` URL, WebHDFS), marked ``server`` and ``hdfs``.
``backend_name`` is always the plain backend name.

``--backend-opt NAME:KEY=VALUE`` (repeatable) opens every ``NAME`` store of the server tests
with that option as well, to run the conformance and backend tests under a layout or setting
(``pytest tests/test_minio.py --backend-opt minio:prefix_entropy=8``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest

from backends import Backend, backend_class, backend_names, open_backend

SERVER_BACKENDS = ("redis", "hbase", "minio")
#: file backends that also run on the NFS server, as parameter ``NAME@nfs``
NFS_BACKENDS = ("default_fs", "indexed_fs")

_started: set[str] = set()
#: options of ``--backend-opt``, by backend name
_extra_options: dict[str, dict[str, str]] = {}


def pytest_addoption(parser) -> None:
    parser.addoption("--backend-opt", action="append", default=[], metavar="NAME:KEY=VALUE",
                     help="open every NAME store of the server tests with this option too "
                          "(e.g. minio:prefix_entropy=8)")


def pytest_configure(config) -> None:
    for given in config.getoption("--backend-opt"):
        name, _, pair = given.partition(":")
        key, sep, value = pair.partition("=")
        if not (name and key and sep):
            raise pytest.UsageError(f"--backend-opt {given!r}: give NAME:KEY=VALUE, "
                                    f"e.g. minio:prefix_entropy=8")
        _extra_options.setdefault(name, {})[key] = value


def server_options(name: str, namespace: str) -> dict[str, Any]:
    """Options for talking to the real ``name`` server, started on first use (with the
    ``--backend-opt`` options given for ``name``)."""
    import services

    if name not in _started:
        services.up([name])
        _started.add(name)
    return {**services.client_options(name, namespace), **_extra_options.get(name, {})}


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
    if backend_class(name).keeps_a_directory():
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


SYNC_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#define MAXFD 4096
#define MAXEV 65536
static long long durable[MAXFD], calls[MAXFD];
/* every completed sync, in order: kind 0 fdatasync, 1 fsync, 2 sync(), 3 syncfs() */
static struct { int kind; long long dev, ino, size; } events[MAXEV];
static long long nev;
static int (*real_fdatasync)(int), (*real_fsync)(int), (*real_syncfs)(int);
static void (*real_sync)(void);

static void note(int kind, long long dev, long long ino, long long size) {
    long long i = __atomic_fetch_add(&nev, 1, __ATOMIC_SEQ_CST);
    if (i < MAXEV) {
        events[i].kind = kind; events[i].dev = dev; events[i].ino = ino; events[i].size = size;
    }
}

static int observed(int fd, int kind, int (*real)(int)) {
    struct stat st;
    int known = fstat(fd, &st) == 0;
    long long size = known ? (long long)st.st_size : -1;
    int rc = real(fd);
    if (rc == 0 && fd >= 0 && fd < MAXFD) {
        __atomic_fetch_add(&calls[fd], 1, __ATOMIC_SEQ_CST);
        long long cur = __atomic_load_n(&durable[fd], __ATOMIC_SEQ_CST);
        while (size > cur && !__atomic_compare_exchange_n(&durable[fd], &cur, size, 0,
                                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
    }
    if (rc == 0 && known)
        note(kind, (long long)st.st_dev, (long long)st.st_ino, size);
    return rc;
}
int fdatasync(int fd) {
    if (!real_fdatasync) real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return observed(fd, 0, real_fdatasync);
}
int fsync(int fd) {
    if (!real_fsync) real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return observed(fd, 1, real_fsync);
}
int syncfs(int fd) {
    if (!real_syncfs) real_syncfs = (int (*)(int))dlsym(RTLD_NEXT, "syncfs");
    return observed(fd, 3, real_syncfs);
}
void sync(void) {
    if (!real_sync) real_sync = (void (*)(void))dlsym(RTLD_NEXT, "sync");
    real_sync();
    note(2, 0, 0, 0);
}
long long shim_durable(int fd) { return __atomic_load_n(&durable[fd], __ATOMIC_SEQ_CST); }
long long shim_calls(int fd) { return __atomic_load_n(&calls[fd], __ATOMIC_SEQ_CST); }
long long shim_events(void) { return __atomic_load_n(&nev, __ATOMIC_SEQ_CST); }
long long shim_event(long long i, int field) {
    return field == 0 ? events[i].kind : field == 1 ? events[i].dev
         : field == 2 ? events[i].ino : events[i].size;
}
"""


@pytest.fixture(scope="session")
def sync_shim(tmp_path_factory) -> Path:
    """An observer of the C library's syncs, for a child process to preload (``LD_PRELOAD``):
    ``fdatasync``/``fsync``/``syncfs``/``sync`` behave as always and are noted once they return
    (per fd: ``shim_durable(fd)``, the largest file size a returned sync started at, and
    ``shim_calls(fd)``; in order: ``shim_events()`` and ``shim_event(i, field)``, field 0 kind
    (0 fdatasync, 1 fsync, 2 sync, 3 syncfs), 1 st_dev, 2 st_ino, 3 size).  It sees what the
    code under test really asked of the kernel, whatever its own bookkeeping says.  Built with
    the C compiler the project's extension is built with."""
    d = tmp_path_factory.mktemp("sync-shim")
    (d / "shim.c").write_text(SYNC_SHIM)
    out = d / "shim.so"
    res = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(out), str(d / "shim.c"),
                          "-ldl"], capture_output=True, text=True)
    assert res.returncode == 0, f"cannot build the sync observer: {res.stderr}"
    return out


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


# ----------------------------------------------------------------------------- skips in CI

#: the only skips a CI run (CI=true) may have, as regexes over the reason, each with why it is
#: not a gap in what CI tests
CI_SKIP_ALLOWLIST = {
    r"keeps nothing after close by design": "the memory backend is not persistent",
    r"on a disk without interrupts of its own here \(overlay\)": "depends on the machine's disk",
    r"^no /dev/shm here$": "depends on the machine",
    r"cannot make a file immutable here": "chattr +i needs ext4/xfs/btrfs under the temp dir",
    r"no lossy mount here: /dev/fuse is absent": "the kernel or container has no FUSE",
    r"keeps one value per key \(record_fields is false\)":
        "a store without fields: the test checked its refusal (NoFieldsError) before skipping",
}

_skips: list[tuple[str, str]] = []  # (nodeid, reason) of every skip
_marks: dict[str, set[str]] = {}  # nodeid -> its markers declared in pyproject.toml
_ran: Counter = Counter()  # marker -> tests that ran (passed or failed)
_skipped: Counter = Counter()  # marker -> tests skipped
SERVER_MARKS = ("redis", "hbase", "minio", "nfs", "hdfs")


def _declared_markers(config) -> set[str]:
    return {line.split(":")[0].strip() for line in config.getini("markers")}


def pytest_collection_modifyitems(config, items) -> None:
    declared = _declared_markers(config)
    for item in items:
        _marks[item.nodeid] = {m.name for m in item.iter_markers()} & declared


def pytest_runtest_logreport(report) -> None:
    marks = _marks.get(report.nodeid, set()) or {"(unmarked)"}
    if report.skipped and report.when in ("setup", "call"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skips.append((report.nodeid, reason.removeprefix("Skipped: ")))
        _skipped.update(marks)
    elif report.when == "call":
        _ran.update(marks)


def _ci_skips_not_allowed() -> list[tuple[str, str]]:
    if os.environ.get("CI", "").lower() != "true":
        return []
    return [(nodeid, reason) for nodeid, reason in _skips
            if not any(re.search(pattern, reason) for pattern in CI_SKIP_ALLOWLIST)]


def pytest_sessionfinish(session, exitstatus) -> None:
    if _ci_skips_not_allowed() and session.exitstatus == 0:
        session.exitstatus = 1  # the summary below names them


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    tr = terminalreporter
    names = sorted(set(_ran) | set(_skipped), key=lambda m: (m == "(unmarked)", m))
    if names:
        tr.write_sep("-", "tests per marker (ran / skipped)")
        tr.write_line(", ".join(f"{m} {_ran[m]}/{_skipped[m]}" for m in names))
    bad = _ci_skips_not_allowed()
    if bad:
        tr.write_sep("=", f"CI=true: {len(bad)} skip(s) outside the allowlist fail the run", red=True)
        for nodeid, reason in bad:
            tr.write_line(f"SKIPPED IN CI {nodeid}: {reason}")
        tr.write_line("fix what the reason names (install, build, start), or, if the skip is "
                      "no gap in what CI tests, add its reason to CI_SKIP_ALLOWLIST in "
                      "tests/conftest.py")


# ------------------------------------------------------------ shared servers stay unchanged

_baseline: dict[str, dict] = {}  # server -> (pid, settings) when first seen running
#: status fields that move on their own (a NameNode leaving safe mode): not compared
_VOLATILE = ("fs_state", "live_datanodes", "aof_last_write_status")


def _shared_status(name: str) -> dict | None:
    import services

    st = services.status([name])[0]
    if not st.get("running"):
        return None
    settings = {k: v for k, v in (st.get("settings") or {}).items() if k not in _VOLATILE}
    return {"pid": st.get("pid"), "settings": settings}


_tried: set[str] = set()


def pytest_runtest_setup(item) -> None:
    """Before the first test that uses a shared server: note how it runs (if it runs yet)."""
    for name in sorted(_marks.get(item.nodeid, set()) & set(SERVER_MARKS) - _tried):
        _tried.add(name)
        now = _shared_status(name)
        if now is not None:
            _baseline[name] = now


def pytest_runtest_teardown(item, nextitem) -> None:
    """After a module's last test: every shared server it used runs as it was first seen."""
    if nextitem is not None and nextitem.module is item.module:
        return
    used = set()
    for other in item.session.items:
        if other.module is item.module:
            used |= _marks.get(other.nodeid, set()) & set(SERVER_MARKS)
    for name in sorted(used):
        now = _shared_status(name)
        before = _baseline.get(name)
        if before is None:
            if now is not None:
                _baseline[name] = now
            continue
        if now != before:
            changed = "stopped" if now is None else ", ".join(
                k for k in ("pid", "settings") if now[k] != before[k])
            detail = "" if now is None else f": {before} -> {now}"
            _baseline.pop(name)  # report once; the next module starts from what is there now
            raise AssertionError(
                f"the shared {name} server was changed by {item.module.__name__} ({changed}"
                f"{detail}); tests that stop, kill or reconfigure a server use a private one")
