"""The lease lock used where ``flock`` does not exist (nfs:// directories): taken atomically, kept
alive by a heartbeat, broken only when stale.  Runs on the real NFS server and, since it only uses
the medium interface, on a local directory too."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

import services
from backends import StoreLockedError, open_backend
from backends.dir_lock import LOCK_NAME, LeaseLock
from backends.media import open_medium


@pytest.fixture(params=["local", pytest.param("nfs", marks=[pytest.mark.server, pytest.mark.nfs])])
def medium(request, tmp_path):
    if request.param == "local":
        path = str(tmp_path / "dir")
    else:
        services.up(["nfs"])
        path = services.client_options("nfs", f"lease{uuid.uuid4().hex[:10]}")["path"]
    m = open_medium(path, "test")
    yield m
    m.close()


def _plant(medium, **fields) -> None:
    """A lock record as another holder would have left it."""
    rec = {"pid": 1, "host": "elsewhere", "token": "theirs", "heartbeat": time.time(), "lease": 30}
    rec.update(fields)
    assert medium.create_exclusive(LOCK_NAME, json.dumps(rec).encode())


def test_exclusive_then_released(medium):
    lock = LeaseLock("t", medium)
    with pytest.raises(StoreLockedError, match="locked by another process"):
        LeaseLock("t", medium)
    lock.release()
    assert not medium.exists(LOCK_NAME)
    LeaseLock("t", medium).release()


def test_live_holder_elsewhere_is_not_broken(medium):
    _plant(medium)
    with pytest.raises(StoreLockedError, match="elsewhere"):
        LeaseLock("t", medium)


def test_expired_lease_is_broken(medium):
    _plant(medium, heartbeat=time.time() - 100)
    lock = LeaseLock("t", medium)
    assert json.loads(medium.read_file(LOCK_NAME))["token"] == lock.token
    lock.release()


def test_dead_pid_on_this_host_is_broken_at_once(medium):
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    _plant(medium, pid=int(proc.stdout), host=socket.gethostname())
    LeaseLock("t", medium).release()


def test_heartbeat_renews_and_notices_a_stolen_lock(medium):
    lock = LeaseLock("t", medium, lease=0.6)
    first = json.loads(medium.read_file(LOCK_NAME))["heartbeat"]
    time.sleep(0.5)
    assert json.loads(medium.read_file(LOCK_NAME))["heartbeat"] > first
    medium.delete(LOCK_NAME)
    _plant(medium)
    deadline = time.monotonic() + 5
    while not lock.lost and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lock.lost
    lock.release()
    assert json.loads(medium.read_file(LOCK_NAME))["token"] == "theirs"  # not deleted by us


@pytest.mark.server
@pytest.mark.nfs
@pytest.mark.parametrize("name", ["default_fs", "indexed_fs"])
def test_store_on_nfs_is_locked_against_another_process(name):
    services.up(["nfs"])
    path = services.client_options("nfs", f"lease{uuid.uuid4().hex[:10]}")["path"]
    with open_backend(name, path=path) as store:
        store.put("k", b"v")
        code = ("import sys\nfrom backends import open_backend, StoreLockedError\n"
                f"try:\n    open_backend({name!r}, path={path!r})\n"
                "except StoreLockedError as e:\n    print(e); sys.exit(3)\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, cwd=os.path.dirname(os.path.dirname(__file__)))
        assert proc.returncode == 3, proc.stderr
        assert f"pid {os.getpid()}" in proc.stdout
    with open_backend(name, path=path) as again:
        assert again.get("k") == b"v"
