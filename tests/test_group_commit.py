"""Group commit checked for what it promises, on both committers (C and Python): a writer returns
only after a completed sync covered its bytes, with 16 writer threads queued behind slow syncs.

Two observers:

* the committer's own books (``group_commit.ack_log``: each acknowledgement's target against
  the bytes the committer had synced when it let the writer go);
* the C library, independently of the committer: the committer tests run in a child process
  with conftest's ``sync_shim`` preloaded (``LD_PRELOAD``), which notes, per fd, the file size
  at the start of each ``fdatasync``/``fsync`` that *returned*.  A committer that acknowledged before syncing,
  or that never called ``fdatasync`` at all, leaves acknowledged bytes above that mark.

Contention is forced, not hoped for: ``group_commit.set_sync_delay`` makes every sync sleep
first (in C and in Python), so writers queue behind it on any medium, tmpfs included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from backends import open_backend
from backends.indexed_fs import group_commit as commit

ROOT = Path(__file__).resolve().parents[1]
KINDS = [pytest.param("native", marks=pytest.mark.skipif(
             not commit.native_available, reason="the C committer was not built")),
         "python"]
THREADS = 16

@pytest.fixture
def hooks_off():
    yield
    commit.set_sync_delay(0)
    commit.ack_log = None


# The child: THREADS writers append records to one file through one committer and wait.
# Phase "rounds": every writer appends, all meet at a barrier, then all wait: exactly one sync
# per round covers all of them.  Phase "free": writers run without a barrier.  After every
# wait the writer reads the shim's durable mark and the committer's synced mark.
CHILD = """
import ctypes, json, os, sys, threading
from backends.indexed_fs import group_commit as commit
kind, path, shim, rounds, free = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:6])
THREADS = int(sys.argv[6])
lib = ctypes.CDLL(shim)
lib.shim_durable.restype = lib.shim_calls.restype = ctypes.c_longlong
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

class Seg:
    def sync(self):
        os.fdatasync(fd)

seg = Seg()
gc, handle = (commit._NativeGroupCommit(fd), fd) if kind == "native" else (commit.PyCommit(seg), seg)
commit.set_sync_delay(0.01)
log = {"end": 0, "n": 0}
lock = threading.Lock()
acks, records = [], []

def put(t, i):
    with lock:
        data = f"[{t}:{i}:{log['n']}]".encode().ljust(64, b".")
        off = log["end"]
        os.pwrite(fd, data, off)
        log["end"] += len(data)
        log["n"] += 1
        end = log["end"]
        gc.appended(handle, end, log["n"])
        records.append((off, data.decode()))
    return end

def ack(end):
    gc.wait(end)
    acks.append((end, lib.shim_durable(fd), gc.stats()["synced"]))

barrier = threading.Barrier(THREADS)
def rounds_writer(t):
    for i in range(rounds):
        end = put(t, i)
        barrier.wait()
        ack(end)
        barrier.wait()
def free_writer(t):
    for i in range(free):
        ack(put(t, rounds + i))

def run(target):
    errors = []
    def guarded(t):
        try:
            target(t)
        except BaseException as exc:
            errors.append(repr(exc))
            raise
    ts = [threading.Thread(target=guarded, args=(t,)) for t in range(THREADS)]
    for t in ts: t.start()
    for t in ts: t.join()
    if errors:
        sys.exit(f"writers failed: {errors[:3]}")

run(rounds_writer)
after_rounds = dict(gc.stats(), shim_calls=lib.shim_calls(fd))
run(free_writer)
final = dict(gc.stats(), shim_calls=lib.shim_calls(fd))
gc.close()
print(json.dumps({"acks": acks, "records": records, "rounds": after_rounds, "final": final}))
"""


@pytest.mark.parametrize("kind", KINDS)
def test_every_acknowledgement_is_covered_by_a_completed_fdatasync(kind, sync_shim, tmp_path):
    rounds, free = 4, 12
    env = dict(os.environ, LD_PRELOAD=str(sync_shim))
    proc = subprocess.run([sys.executable, "-c", CHILD, kind, str(tmp_path / "log"),
                           str(sync_shim), str(rounds), str(free), str(THREADS)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    acks, writes = out["acks"], THREADS * (rounds + free)
    assert len(acks) == writes
    # the promise, seen by the C library: every acknowledged byte was inside a returned sync
    late = [(end, durable) for end, durable, _ in acks if end > durable]
    assert not late, f"{len(late)} acknowledgements before a sync covered them: {late[:5]}"
    # and seen by the committer's own books
    assert all(end <= synced for end, _, synced in acks)
    # rounds: all 16 appended before anyone waits, so one sync per round covers all 16
    r = out["rounds"]
    assert r["syncs"] == rounds and r["shim_calls"] == rounds, r
    assert r["group_commit_max_batch"] == THREADS and r["synced_writes"] == THREADS * rounds
    # free-running writers queued behind slow syncs: far fewer syncs than writes
    f = out["final"]
    assert f["synced"] == 64 * writes and f["synced_writes"] == writes
    assert f["syncs"] < writes - THREADS * rounds, f
    data = (tmp_path / "log").read_bytes()
    assert len(data) == 64 * writes
    assert all(data[off:off + 64].decode() == rec for off, rec in out["records"])


@pytest.mark.parametrize("kind", KINDS)
def test_store_writers_return_only_after_a_covering_sync_and_all_keys_survive(
        kind, monkeypatch, tmp_path, hooks_off):
    """indexed_fs with durability=sync, 16 threads overwriting their keys with varying values
    behind slow syncs: every put's acknowledgement is covered, syncs are shared, and after a
    reopen every key holds the last value written to it."""
    monkeypatch.setattr(commit, "native_available", kind == "native")
    commit.ack_log = acks = []
    commit.set_sync_delay(0.005)
    path = str(tmp_path / "store")
    store = open_backend("indexed_fs", path=path, durability="sync")
    puts, keys = 20, 5
    last: dict[str, bytes] = {}

    def writer(t: int) -> None:
        for i in range(puts):
            key, value = f"t{t}-k{i % keys}", f"{t}/{i}/{os.urandom(4).hex()}".encode() * (1 + i)
            store.put(key, value)
            last[key] = value  # each thread owns its keys: the last put is the latest value

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    st = store.stats()
    assert st["group_commit"] == kind
    assert len(acks) == THREADS * puts
    assert all(target <= synced for target, synced in acks), [a for a in acks if a[0] > a[1]][:5]
    assert st["syncs"] < THREADS * puts // 2, st  # writers queued behind the slow syncs
    assert st["group_commit_max_batch"] > 1
    store.close()
    commit.set_sync_delay(0)
    with open_backend("indexed_fs", path=path) as again:
        assert len(last) == THREADS * keys
        assert dict(again.scan()) == last


def test_the_sync_delay_hook_reports_and_refuses():
    try:
        assert commit.set_sync_delay(0.002) == 0
        assert commit.set_sync_delay(0) == 0.002
    finally:
        commit.set_sync_delay(0)
    with pytest.raises(ValueError):
        commit.set_sync_delay(-1)
