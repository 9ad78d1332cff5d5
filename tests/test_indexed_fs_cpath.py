"""indexed_fs's put path in C (``_commit.Putter``) against the reference path in Python.

* The same operations on two stores, ``native_path`` on and off, leave the same bytes in every
  segment file and the same keydir (entries, tombstones, per-segment accounting, counters):
  segments small enough that rotations, and so the C path's declines, happen all the time.
* Durability: a put in C returns only once a completed ``fdatasync`` covered its record, as the
  C library sees it (conftest's ``sync_shim``, in a child process).  The same test run with the
  mutation ``_commit.set_ack_before_sync(True)`` (acknowledge before the sync) fails: the
  check is shown to catch it, and the store's own books (``group_commit.ack_log``) see it too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backends import open_backend
from backends.indexed_fs import group_commit as commit

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not commit.native_available, reason="the C put path was not built")

ALL_KEYS = ["a", "ab", "b", "é", "k/1", "k/2", "zz", "n\x00ul", "x" * 300]
KEYS = st.sampled_from(ALL_KEYS)
VALUES = st.one_of(st.binary(max_size=90), st.just(b"L" * 70_000))  # 70 kB: a gather write
OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), KEYS, VALUES),
    st.tuples(st.just("put_many"), st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=4)),
    st.tuples(st.just("delete"), KEYS),
), min_size=1, max_size=40)


def _books(store) -> dict:
    """What the two paths must agree on besides the files: the keydir and the counters."""
    idx = store._index
    idx.settle()  # the sorted order holds every overlay key, as the dict does
    assert list(idx.d.keys()) == sorted(dict.keys(idx.d))
    return dict(d=dict(idx.d), tombs=dict(idx.tombs), live={k: list(v) for k, v in idx.live.items()},
                next_seq=store._next_seq, written=store._written, nwrites=store._nwrites,
                segments={sid: (s.size, s.min_seq) for sid, s in store._segments.items()},
                gc_pending=set(store._gc_pending))


def _run(path: str, native: bool, ops: list, segment_size: int) -> tuple[dict, dict, int]:
    store = open_backend("indexed_fs", path=path, durability="sync", native_path=native,
                         segment_size=segment_size, index_flush_interval=0)
    for op in ops:
        if op[0] == "put":
            store.put(op[1], op[2])
        elif op[0] == "put_many":  # some values as byte views (Backend.put_many passes them on)
            store.put_many([(k, memoryview(v) if len(v) % 2 else v) for k, v in op[1]])
        else:
            store.delete(op[1])
    books, native_puts = _books(store), store.stats()["native_puts"]
    books["gets"] = {k: store.get(k) for k in ALL_KEYS}
    books["get_many"] = store.get_many(ALL_KEYS + ["absent"])
    store.close()
    with open_backend("indexed_fs", path=path, native_path=native) as again:  # array layers
        books["reopened"] = (again.get_many(ALL_KEYS), {k: again.get(k) for k in ALL_KEYS})
    files = {name: (Path(path) / name).read_bytes() for name in sorted(os.listdir(path))
             if name.endswith(".seg")}
    return books, files, native_puts


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, segment_size=st.sampled_from([256, 4096, 1 << 20]))
def test_the_c_path_writes_what_the_python_path_writes(ops, segment_size):
    with tempfile.TemporaryDirectory(prefix="ifs-cpath-") as tmp:
        c_books, c_files, c_puts = _run(f"{tmp}/c", True, ops, segment_size)
        py_books, py_files, py_puts = _run(f"{tmp}/py", False, ops, segment_size)
    assert py_puts == 0
    assert c_books == py_books
    assert c_files.keys() == py_files.keys()
    for name in c_files:
        assert c_files[name] == py_files[name], name


def test_batches_past_the_zeros_written_ahead_and_past_a_segment_are_done_as_in_python(tmp_path):
    """Segments reserved larger than the zeros written ahead, and batches larger than a
    segment: C writes the zeros ahead as ``Segment.append`` does, a batch is cut where a
    segment ends on either path, and the two leave the same bytes, books and counted writes."""
    from backends.indexed_fs import _commit, segment

    assert _commit.ZERO_AHEAD == segment.ZERO_AHEAD
    big = [(f"big-{i:04d}", (i * 7919).to_bytes(4, "little") * 250) for i in range(2500)]
    seen = {}
    for native in (True, False):
        path = tmp_path / ("c" if native else "py")
        store = open_backend("indexed_fs", path=str(path), durability="sync", native_path=native,
                             segment_size=1 << 20, index_flush_interval=0)
        for b in range(6):  # 300 kB batches, then one of 2.5 MB: more than two segments
            store.put_many([(f"b{b}-{i:04d}", bytes([b]) * 1000) for i in range(300)])
        store.put_many(big)
        writes, puts = store.ledger.as_dict(), store.stats()["native_puts"]
        books = _books(store)
        store.close()
        files = {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.name.endswith(".seg")}
        seen[native] = (books, writes, files, puts)
    (c_books, c_writes, c_files, c_puts), (py_books, py_writes, py_files, _) = seen[True], seen[False]
    assert c_puts > 4000 and len(c_files) >= 4  # past the zeros and across segments, in C
    assert all(len(data) <= 1 << 20 for data in c_files.values())
    assert c_books == py_books and c_files == py_files
    # the same writes, but for the zeros ahead of a first record that Python appends apart
    # from the rest of its part (once a segment): they are written again past the part's end
    extra = c_writes["sent_bytes"] - py_writes["sent_bytes"]
    assert 0 <= extra <= len(c_files) * segment.ZERO_AHEAD, (c_writes, py_writes)


def test_plain_overwrites_take_the_c_path(tmp_path):
    """The benchmark's case (overwrites of loaded keys, one segment) is done in C, not declined,
    and so is a batch; the first record of a segment is left to Python (here the load's first
    record: the rest of the load's batch goes on in C)."""
    with open_backend("indexed_fs", path=str(tmp_path), durability="sync") as store:
        store.put_many([(f"k{i}", b"v") for i in range(10)])
        assert store.stats()["native_puts"] == 9 and store.stats()["syncs"] == 1
        for i in range(200):
            store.put(f"k{i % 10}", b"%d" % i)
        assert store.stats()["native_puts"] == 209
        assert store.get("k3") == b"193"
        store.put_many([(f"k{i}", b"batch %d" % i) for i in range(10)])
        assert store.stats()["native_puts"] == 219  # one record each, in one append
    with open_backend("indexed_fs", path=str(tmp_path), durability="sync",
                      native_path=False) as store:
        store.put("k3", b"again")
        assert store.stats()["native_puts"] == 0
        assert store.get("k3") == b"again" and store.get("k9") == b"batch 9"


# The child: 8 writer threads put distinct keys through the C path (ack_log on); after each put
# returns, the writer reads the shim's durable mark of the segment file and compares it with the
# end of the record the keydir points at (one segment, no reservation: file offset = bytes).
CHILD = """
import ctypes, json, sys, threading
from backends import open_backend
from backends.indexed_fs import _commit, group_commit as commit
path, shim, mutate = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
lib = ctypes.CDLL(shim)
lib.shim_durable.restype = ctypes.c_longlong
commit.ack_log = acks = []
commit.set_sync_delay(0.002)
_commit.set_ack_before_sync(mutate)
store = open_backend("indexed_fs", path=path, durability="sync", preallocate=False)
store.put("first", b"x")  # the segment's first record takes the reference path
fd = store._active.fd
late, done = [], []
def writer(t):
    for i in range(20):
        key = f"t{t}-{i}"
        store.put(key, b"%d" % i * 40)
        sid, off, size, _ = store._index.d[key]
        durable = lib.shim_durable(fd)
        done.append(1)
        if off + size > durable:
            late.append((off + size, durable))
ts = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
for t in ts: t.start()
for t in ts: t.join()
st = store.stats()
_commit.set_ack_before_sync(False)
store.close()
print(json.dumps({"late": late, "puts": len(done), "native_puts": st["native_puts"],
                  "book_late": [a for a in acks if a[0] > a[1]]}))
"""


def _child(tmp_path: Path, shim: Path, mutate: bool) -> dict:
    env = dict(os.environ, LD_PRELOAD=str(shim))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / ("m" if mutate else "s")),
                           str(shim), "1" if mutate else "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["puts"] == 160 and out["native_puts"] == 160  # every put took the C path
    return out


def test_a_c_put_returns_only_after_a_completed_sync_covered_it(sync_shim, tmp_path):
    out = _child(tmp_path, sync_shim, mutate=False)
    assert out["late"] == [], f"{len(out['late'])} puts acknowledged before a sync: {out['late'][:5]}"
    assert out["book_late"] == []


def test_the_sync_check_catches_a_c_put_that_acks_before_the_sync(sync_shim, tmp_path):
    """The mutation (``set_ack_before_sync``): the very check above fails, in the C library's
    view and in the store's own books."""
    out = _child(tmp_path, sync_shim, mutate=True)
    assert len(out["late"]) > 0
    assert len(out["book_late"]) > 0


def test_the_mutation_switch_is_off_by_default_and_reports():
    from backends.indexed_fs import _commit

    assert _commit.set_ack_before_sync(False) is False
    assert _commit.set_ack_before_sync(True) is False
    assert _commit.set_ack_before_sync(False) is True


def test_concurrent_c_puts_keep_every_last_value(tmp_path, slow_sync):
    """16 threads overwriting their own keys in C behind slow syncs: syncs are shared, and a
    reopen (which rebuilds from the files) finds every key's last value."""
    path = str(tmp_path / "store")
    last: dict[str, bytes] = {}
    with open_backend("indexed_fs", path=path, durability="sync") as store:
        store.put_many([(f"t{t}-k{k}", b"-") for t in range(16) for k in range(4)])

        def writer(t: int) -> None:
            for i in range(30):
                key, value = f"t{t}-k{i % 4}", os.urandom(8) * (1 + i)
                store.put(key, value)
                last[key] = value

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        st = store.stats()
        assert st["native_puts"] == 16 * 30 + 63  # and the load's records after its first
        assert st["syncs"] < 16 * 30 // 2
    with open_backend("indexed_fs", path=path) as again:
        assert dict(again.scan()) == last


@pytest.mark.parametrize("native", [True, False])
def test_a_full_disk_fails_a_c_put_cleanly_as_it_fails_a_python_one(small_tmpfs, native):
    """A put that meets ENOSPC in its append leaves no partial record (the file is cut back to
    the records) and is a StorageFullError; every acknowledged put survives a reopen.  No
    reservation, one segment: the puts fill the disk by plain appends, so every one after the
    first is a C put where ``native``."""
    from backends.base import StorageFullError

    path = small_tmpfs / "store"
    opts = dict(path=str(path), durability="sync", preallocate=False, native_path=native,
                index_flush_interval=0)
    acked: dict[str, bytes] = {}
    with open_backend("indexed_fs", **opts) as store:
        with pytest.raises(StorageFullError, match="no space left"):
            for i in range(1000):
                key, value = f"k{i % 50}", os.urandom(30_000)
                store.put(key, value)
                acked[key] = value
        seg = store._active
        assert os.fstat(seg.fd).st_size == seg.size  # cut back: no partial record behind
        assert (store.stats()["native_puts"] > 0) == native
        for key, value in acked.items():
            assert store.get(key) == value
    with open_backend("indexed_fs", **opts) as again:
        st = again.stats()
        assert st["corrupt_records"] == 0 and st["torn_tail_truncated"] == 0
        assert dict(again.scan()) == acked
