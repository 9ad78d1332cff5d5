"""indexed_fs ended at each of its named fail points (:mod:`backends.failpoints`): no acknowledged
write is lost and no wrong value comes back.

For every point ``indexed_fs.*`` that the store declares, a child process opens a store with small
segments, writes overwritten keys with varying values, deletes some (one key, or a batch with
``delete_many``) and batches some, and snapshots,
writes index deltas and compacts now and then, so that every step of the store is reached within a few hundred
operations.  It logs each operation before it starts and again once it returned, unbuffered, so
the log survives the ``os._exit`` that the armed point ends it with.  The test then reopens the
store and checks every key: the value of its last acknowledged write (``None`` after a delete),
or, for the keys of the one operation in flight, that value or the in-flight one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backends import failpoints, open_backend
from backends.indexed_fs import store as _store  # noqa: F401  (declares the points)
from backends.indexed_fs import verify

ROOT = Path(__file__).resolve().parent.parent

#: the hit on which each point ends the child: late enough that there is history to check
HIT = {"indexed_fs.put.after_append": 40}

OPTS = dict(segment_size=4096, index_flush_interval=0.05, compaction_live_ratio=0.9,
            delta_records=4)

CHILD = r"""
import os, random, sys
from backends import open_backend
path, log, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
opts = dict(segment_size=4096, index_flush_interval=0.05, compaction_live_ratio=0.9,
            delta_records=4)
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
rng = random.Random(seed)
store = open_backend("indexed_fs", path=path, **opts)

def note(line):
    os.write(fd, (line + "\n").encode())

for i in range(3000):
    op = rng.random()
    if op < 0.1:
        key = f"k{rng.randrange(24)}"
        note(f"S\tdel\t{key}")
        store.delete(key)
    elif op < 0.15:
        keys = [f"k{rng.randrange(24)}" for j in range(3)]
        note("S\tdelmany\t" + "\t".join(keys))
        store.delete_many(keys)
    elif op < 0.3:
        items = [(f"k{rng.randrange(24)}", f"{i}-{j}-" + "b" * rng.randrange(300))
                 for j in range(3)]
        note("S\tmany\t" + "\t".join(f"{k}={v}" for k, v in items))
        store.put_many([(k, v.encode()) for k, v in items])
    else:
        key, value = f"k{rng.randrange(24)}", f"{i}-" + "v" * rng.randrange(400)
        note(f"S\tput\t{key}={value}")
        store.put(key, value.encode())
    note("A")
    if i % 30 == 29:
        store.write_snapshot()
    if i % 40 == 39:
        store.compact()
    if i % 10 == 5:
        store.write_delta()  # also written in the background, which a fast disk may outrun
    if i % 50 == 49:
        # hint files are written by a background thread, which a fast disk (tmpfs) may outrun
        # until compaction has deleted every sealed segment: write them here as well, so the
        # hint fail point is reached on every machine
        store._write_hints()
store.close()
"""


def _expected(log: str) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """From the child's log: each key's last acknowledged value (``None``: deleted), and the
    keys and values of the operation in flight when it ended."""
    acked: dict[str, str | None] = {}
    pending: dict[str, str | None] = {}
    for line in Path(log).read_text().splitlines():
        if line == "A":
            acked.update(pending)
            pending = {}
            continue
        _, kind, *rest = line.split("\t")
        if kind in ("del", "delmany"):
            pending = dict.fromkeys(rest)
        else:  # put, many (a key twice in one batch: its last value)
            pending = dict(item.split("=", 1) for item in rest)
    return acked, pending


POINTS = sorted(n for n in failpoints.DECLARED if n.startswith("indexed_fs."))


def test_every_point_named_in_the_store_is_declared():
    assert {"indexed_fs.put.after_append", "indexed_fs.rotate.before_seal",
            "indexed_fs.rotate.after_new_segment", "indexed_fs.snapshot.after_write",
            "indexed_fs.snapshot.after_rename", "indexed_fs.compaction.after_copy",
            "indexed_fs.compaction.after_delete", "indexed_fs.hint.after_write",
            "indexed_fs.delta.after_write", "indexed_fs.delta.after_rename"} <= set(POINTS)


@pytest.mark.crash
@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_the_point_keeps_every_acknowledged_write(tmp_path, point):
    path, log = str(tmp_path / "store"), str(tmp_path / "ops.log")
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               **{failpoints.ENV: f"{point}@{HIT.get(point, 2)}"})
    child = subprocess.run([sys.executable, "-c", CHILD, path, log, "7"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == failpoints.EXIT_CODE, \
        f"{point} was not reached (exit {child.returncode}): {child.stderr[-2000:]}"
    acked, pending = _expected(log)
    assert acked, "the child acknowledged nothing before the point"
    # bench verify straight after the crash, before any open repairs anything: no false alarm
    report = verify.verify_path(path)
    assert report.ok, [r.line() for r in report.damaged] + report.bad_snapshots

    with open_backend("indexed_fs", path=path, **OPTS) as s:
        st = s.stats()
        assert st["corrupt_records"] == 0 and st["damaged_segments"] == 0, st["warnings"]
        live = {k for k, _ in s.scan()}
        for key in sorted(set(acked) | set(pending)):
            got = s.get(key)
            got = None if got is None else got.decode()
            allowed = {acked.get(key)}
            if key in pending:
                allowed.add(pending[key])
            assert got in allowed, f"{key}: {got!r}, expected one of {allowed!r}"
            assert (key in live) == (got is not None)
        assert live <= set(acked) | set(pending)
    report = verify.verify_path(path)
    assert report.ok, [r.line() for r in report.damaged] + report.bad_snapshots
