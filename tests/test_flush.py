"""``flush()`` makes every acknowledged write durable, whatever the durability mode: checked
against what the store really asked of the kernel, for the project's local file stores.

A child process with conftest's ``sync_shim`` preloaded overwrites keys with varying values,
flushes, and reports every file and directory under the store with its inode and size.  After
the flush each must be covered by a sync that returned: a file by an ``fsync``/``fdatasync`` of
its inode that started at its present size or more (any time since the open: a sync made by the
put itself counts), or by a whole-system ``sync()``/``syncfs()`` made during the flush; a
directory (whose entries the puts changed) by a sync of its inode or a whole-system one.  With
``durability=none`` the puts sync nothing, so it is the flush that must.

The same observer checks that a ``default_fs`` put under ``durability=sync`` is durable when it
returns: its file synced at its size, then its directory (removing either sync from the
medium's ``write_atomic`` fails that test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import ctypes, json, os, sys
from backends import open_backend
backend, path, mode, shim = sys.argv[1:5]
lib = ctypes.CDLL(shim)
lib.shim_events.restype = lib.shim_event.restype = ctypes.c_longlong
lib.shim_event.argtypes = [ctypes.c_longlong, ctypes.c_int]
def listing():
    return {root: sorted(files + dirs) for root, dirs, files in os.walk(path)}
store = open_backend(backend, path=path, durability=mode)
opened = lib.shim_events()
at_open = listing()
for i in range(60):
    store.put(f"ckpt/{i % 13}", f"{i}:".encode() * (1 + i * 7))
before_flush = lib.shim_events()
store.flush()
after_flush = lib.shim_events()
events = [[lib.shim_event(i, f) for f in range(4)] for i in range(after_flush)]
entries = []
for root, dirs, files in os.walk(path):
    for name in [*files, "."]:
        full = os.path.join(root, name)
        st = os.stat(full)
        entries.append({"path": os.path.relpath(full, path), "dir": name == ".",
                        "changed": name == "." and at_open.get(root) != sorted(files + dirs),
                        "dev": st.st_dev, "ino": st.st_ino, "size": st.st_size})
print(json.dumps({"events": events, "opened": opened, "flush_from": before_flush,
                  "entries": entries}))
os._exit(0)  # no close: only what the flush made durable counts
"""

WHOLE_SYSTEM = (2, 3)  # sync(), syncfs()


@pytest.mark.parametrize("mode", ["none", "sync"])
@pytest.mark.parametrize("backend", ["default_fs", "indexed_fs"])
def test_flush_leaves_every_file_and_directory_synced(backend, mode, sync_shim, tmp_path):
    path = tmp_path / "store"
    env = dict(os.environ, LD_PRELOAD=str(sync_shim))
    proc = subprocess.run([sys.executable, "-c", CHILD, backend, str(path), mode, str(sync_shim)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    events, opened, flush_from = out["events"], out["opened"], out["flush_from"]
    whole = any(kind in WHOLE_SYSTEM for kind, *_ in events[flush_from:])

    def synced(since: int) -> dict[tuple[int, int], int]:
        got: dict[tuple[int, int], int] = {}
        for kind, dev, ino, size in events[since:]:
            if kind not in WHOLE_SYSTEM:
                got[(dev, ino)] = max(size, got.get((dev, ino), -1))
        return got

    ever, since_open = synced(0), synced(opened)
    uncovered = []
    for e in out["entries"]:
        if whole:
            break
        if e["path"] == "LOCK":
            continue  # the lock file (dir_lock) holds a pid, no data
        if e["dir"]:  # a directory whose entries the puts changed needs a sync since the open
            got = (since_open if e["changed"] else ever).get((e["dev"], e["ino"]))
            if got is None:
                uncovered.append((e["path"], "directory", e["changed"]))
        else:
            got = ever.get((e["dev"], e["ino"]))
            if got is None or got < e["size"]:
                uncovered.append((e["path"], e["size"], got))
    assert not uncovered, f"not durable after flush (path, size, synced size): {uncovered}"


PUTS = r"""
import ctypes, json, os, sys
from backends import open_backend
path, shim = sys.argv[1:3]
lib = ctypes.CDLL(shim)
lib.shim_events.restype = lib.shim_event.restype = ctypes.c_longlong
lib.shim_event.argtypes = [ctypes.c_longlong, ctypes.c_int]
store = open_backend("default_fs", path=path, durability="sync")
dir_st = os.stat(path)
puts = []
for i in range(30):
    key = f"ckpt/{i % 7}"
    start = lib.shim_events()
    store.put(key, f"{i}:".encode() * (1 + i * 11))
    end = lib.shim_events()
    st = os.stat(os.path.join(path, f"ckpt%2F{i % 7}.ckpt"))
    events = [[lib.shim_event(j, f) for f in range(4)] for j in range(start, end)]
    puts.append({"file": [st.st_dev, st.st_ino, st.st_size], "events": events})
print(json.dumps({"dir": [dir_st.st_dev, dir_st.st_ino], "puts": puts}))
os._exit(0)
"""


def test_a_default_fs_sync_put_syncs_its_file_then_the_directory_before_it_returns(
        sync_shim, tmp_path):
    """Durable on return: within each put, a sync of the new file's inode at its full size,
    then a sync of the directory that now names it (the rename is durable only then)."""
    env = dict(os.environ, LD_PRELOAD=str(sync_shim))
    proc = subprocess.run([sys.executable, "-c", PUTS, str(tmp_path / "s"), str(sync_shim)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for n, put in enumerate(out["puts"]):
        dev, ino, size = put["file"]
        order = [e for e in put["events"] if e[0] not in WHOLE_SYSTEM]
        file_at = [i for i, (_, d, n_, s) in enumerate(order) if (d, n_) == (dev, ino) and s >= size]
        assert file_at, f"put {n}: its file was not synced at its size before the put returned"
        dir_after = [i for i, (_, d, n_, _s) in enumerate(order)
                     if [d, n_] == out["dir"] and i > file_at[0]]
        assert dir_after, f"put {n}: the directory was not synced after the file, before return"
