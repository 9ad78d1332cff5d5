"""indexed_fs index deltas (:mod:`backends.indexed_fs.delta`): the file format, the merge rule,
and an open that maps snapshot + delta and walks only the log past the delta, with a damaged or
stale delta ignored (the log walked from the snapshot instead)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from backends import open_backend
from backends.indexed_fs import delta, verify
from backends.indexed_fs.segment import Resolved, resolve_sorted, walk

ROOT = Path(__file__).resolve().parent.parent
#: snapshots and deltas only when a test asks (no background index flush, no seal)
OPTS = dict(index_flush_interval=1000, delta_records=0)


def _res(values: dict[str, tuple], tombs: dict[str, tuple]) -> Resolved:
    keys = sorted(values)
    w = max([len(k) for k in keys] + [1])
    rows = np.array([values[k] for k in keys], np.uint64).reshape(-1, 4)
    cols = (rows[:, 0].astype(np.uint32), rows[:, 1].copy(), rows[:, 2].astype(np.uint32),
            rows[:, 3].copy())
    return Resolved(np.array([k.encode() for k in keys], f"S{w}"), cols, sorted(tombs.items()))


def _as_dicts(res: Resolved) -> tuple[dict, dict]:
    vals = {k.decode(): tuple(int(c[i]) for c in res.cols) for i, k in enumerate(res.keys.tolist())}
    return vals, dict(res.tombs)


def test_the_file_round_trips(tmp_path):
    from backends.media import open_data_dir
    medium = open_data_dir("indexed_fs", str(tmp_path))
    res = _res({"a": (1, 10, 30, 5), "bb": (1, 40, 31, 7)}, {"c": (1, 71, 25, 6)})
    name = delta.write(medium, 3, (1, 8), (1, 96), 8, 5, 3, res)
    assert name == "delta-000000003.idx" and delta.list_bases(medium) == [3]
    dl = delta.read(medium, 3)
    assert (dl.base, dl.base_covered, dl.covered, dl.next_seq, dl.min_seq, dl.records) == \
        (3, (1, 8), (1, 96), 8, 5, 3)
    assert _as_dicts(dl.res) == _as_dicts(res)
    medium.close()


def test_merge_keeps_the_higher_seq_and_lets_tombstones_hide_values():
    old = _res({"a": (1, 0, 9, 1), "b": (1, 9, 9, 2), "c": (1, 18, 9, 3)}, {"d": (1, 27, 9, 4)})
    new = _res({"a": (1, 36, 9, 5), "d": (1, 45, 9, 6), "e": (1, 54, 9, 7)},
               {"b": (1, 63, 9, 8), "z": (1, 72, 9, 9)})
    vals, tombs = _as_dicts(delta.merge(old, new))
    assert vals == {"a": (1, 36, 9, 5), "c": (1, 18, 9, 3), "d": (1, 45, 9, 6),
                    "e": (1, 54, 9, 7)}
    assert tombs == {"b": (1, 63, 9, 8), "z": (1, 72, 9, 9)}
    # a compaction copy (same seq, later in the log) replaces; a lower seq does not
    vals, _ = _as_dicts(delta.merge(old, _res({"a": (2, 0, 9, 1), "b": (2, 9, 9, 1)}, {})))
    assert vals["a"] == (2, 0, 9, 1) and vals["b"] == (1, 9, 9, 2)


def test_merge_equals_resolving_the_whole_log(tmp_path):
    s = open_backend("indexed_fs", path=str(tmp_path / "s"), **OPTS)
    rng = np.random.default_rng(3)
    for i in range(600):
        k = f"k{int(rng.integers(80)):03d}"
        if rng.random() < 0.2:
            s.delete(k)
        else:
            s.put(k, b"x" * int(rng.integers(1, 50)))
    s._flush()
    seg = s._active
    data = seg.read_all(0, seg.size)
    _, recs = walk(data, seg.id, 0, False)
    cut = int(recs.offsets[len(recs) // 2])
    _, a = walk(data[:cut], seg.id, 0, False)
    _, b = walk(data[cut:], seg.id, cut, False)
    whole = _as_dicts(resolve_sorted([recs]))
    assert _as_dicts(delta.merge(resolve_sorted([a]), resolve_sorted([b]))) == whole
    s.close()


def _crash_copy(src: Path, dst: Path) -> str:
    """The directory of a store as a crash would leave it (the store stays open)."""
    shutil.copytree(src, dst)
    return str(dst)


def _load(path: str):
    """A store with a snapshot, writes past it (overwrites, deletes of snapshot keys, new keys)
    in an index delta, and a short tail past the delta; returns it with every key's value."""
    s = open_backend("indexed_fs", path=path, **OPTS)
    for i in range(400):
        s.put(f"k{i:04d}", b"a%d" % i)
    s.write_snapshot()
    for i in range(0, 400, 7):
        s.put(f"k{i:04d}", b"b%d" % i)
    for i in range(1, 400, 11):
        s.delete(f"k{i:04d}")
    s.put("new1", b"n1")
    assert s.write_delta() == "delta-000000001.idx"
    s.put("k0002", b"tail")
    s.delete("k0003")
    s.delete("k0007")
    s.put("new2", b"n2")
    s._flush()
    keys = [f"k{i:04d}" for i in range(400)] + ["new1", "new2"]
    return s, {k: s.get(k) for k in keys}


def _check(path: str, expect: dict, used: bool, scanned: int | None = None) -> dict:
    with open_backend("indexed_fs", path=path, **OPTS) as t:
        st = t.stats()
        assert bool(st["delta_used"]) is used, st["rebuild_notes"]
        if scanned is not None:
            assert st["records_scanned"] == scanned
        for k, v in expect.items():
            assert t.get(k) == v, k
        assert sorted(k for k, _ in t.scan()) == sorted(k for k, v in expect.items() if v)
        assert st["keys"] == sum(1 for v in expect.values() if v)
    return st


def test_a_crash_reopen_maps_the_delta_and_walks_only_the_tail(tmp_path):
    s, expect = _load(str(tmp_path / "s"))
    try:
        path = _crash_copy(tmp_path / "s", tmp_path / "c")
        assert verify.verify_path(path).ok
        _check(_crash_copy(Path(path), tmp_path / "c0"), expect, used=True, scanned=4)
        # the reopened store goes on from the delta: the next one covers the tail too
        with open_backend("indexed_fs", path=path, **OPTS) as t:
            t.put("k0005", b"after")
            assert t.write_delta() == "delta-000000001.idx"
            path2 = _crash_copy(Path(path), tmp_path / "c2")
        _check(path2, {**expect, "k0005": b"after"}, used=True, scanned=0)
    finally:
        s.close()
    _check(str(tmp_path / "s"), expect, used=False, scanned=0)  # closed: a fresh snapshot


def _crashed(tmp_path: Path) -> tuple[str, dict]:
    """A loaded store's crash image (copied while it was open) and what it must hold."""
    s, expect = _load(str(tmp_path / "s"))
    try:
        return _crash_copy(tmp_path / "s", tmp_path / "c"), expect
    finally:
        s.close()


def _rebuilt(path: str) -> tuple:
    """What an open rebuilds from ``path``: the delta used, the accounting, the tombstones,
    the key count and every key's entry."""
    from backends.indexed_fs import recovery
    from backends.media import open_medium
    medium = open_medium(path, "test")
    try:
        kd = recovery.init_keydir(medium)
        for seg in kd.segments.values():
            seg.close()
        idx = kd.index
        keys = idx.keys_from("")
        return (kd.delta_used, {sid: list(v) for sid, v in idx.live.items() if v != [0, 0]},
                dict(idx.tombs), len(idx), {k: idx.get(k) for k in keys})
    finally:
        medium.close()


def test_the_rows_a_delta_supersedes_give_the_index_a_join_gives(tmp_path):
    """The delta records the snapshot rows it supersedes, so the open adopts it without a join
    of the two; the index is the one the join builds (the same delta without those rows)."""
    path, _ = _crashed(tmp_path)
    from backends.media import open_data_dir
    medium = open_data_dir("indexed_fs", path)
    dl = delta.read(medium, 1)
    assert dl.dead is not None and len(dl.dead) and dl.dead_live
    fast = _rebuilt(path)
    delta.write(medium, 1, dl.base_covered, dl.covered, dl.next_seq, dl.min_seq, dl.records,
                dl.res)  # no superseded rows recorded: joined at open
    medium.close()
    assert fast[0] == "delta-000000001.idx" and fast == _rebuilt(path)


def test_a_damaged_delta_is_ignored_and_reported(tmp_path):
    path, expect = _crashed(tmp_path)
    f = Path(path) / "delta-000000001.idx"
    raw = bytearray(f.read_bytes())
    raw[200] ^= 0xFF
    f.write_bytes(bytes(raw))
    rep = verify.verify_path(path)
    assert not rep.ok and rep.bad_deltas and "CRC" in rep.bad_deltas[0]
    st = _check(path, expect, used=False)
    assert st["deltas_invalid"] == 1 and st["records_scanned"] > 4


def test_a_delta_of_another_snapshot_is_ignored(tmp_path):
    path, expect = _crashed(tmp_path)
    from backends.media import open_data_dir
    medium = open_data_dir("indexed_fs", path)
    dl = delta.read(medium, 1)
    # made for the same number but another position: a snapshot it does not belong to
    delta.write(medium, 1, (dl.base_covered[0], dl.base_covered[1] + 1), dl.covered,
                dl.next_seq, dl.min_seq, dl.records, dl.res)
    medium.close()
    st = _check(path, expect, used=False)
    assert st["deltas_invalid"] == 1
    # a newer snapshot deletes the stale delta
    with open_backend("indexed_fs", path=path, **OPTS) as t:
        t.put("x", b"y")
        t.write_snapshot()
        assert not [n for n in os.listdir(path) if n.startswith("delta-")]


def test_a_delta_that_outgrows_a_quarter_of_the_snapshot_becomes_a_snapshot(tmp_path):
    with open_backend("indexed_fs", path=str(tmp_path / "s"), **OPTS) as s:
        for i in range(40):
            s.put(f"k{i}", b"v")
        s.write_snapshot()
        for i in range(20):
            s.put(f"n{i}", b"v")
        assert s.write_delta() == "snap-000000002.idx"
        assert s.write_delta() is None  # nothing new


def test_a_close_after_a_small_write_leaves_a_delta_not_a_snapshot_of_every_key(tmp_path):
    """A store opened and closed around a few writes (a checkpoint increment) is charged for
    those records, not for a snapshot of all its keys; the next open maps snapshot + delta and
    walks nothing; a close with nothing new writes nothing; and once the deltas outgrow a quarter
    of the snapshot a close writes a snapshot again."""
    path = str(tmp_path / "s")
    opts = dict(index_flush_interval=1000, delta_records=50)
    with open_backend("indexed_fs", path=path, **opts) as s:
        s.put_many([(f"k{i:05d}", b"base") for i in range(400)])
    files = lambda: sorted(f for f in os.listdir(path) if f.endswith(".idx"))  # noqa: E731
    assert files() == ["snap-000000001.idx"]
    for round_ in range(3):
        with open_backend("indexed_fs", path=path, **opts) as s:
            assert s.stats()["records_scanned"] == 0
            s.put_many([(f"k{i:05d}", b"r%d" % round_) for i in range(round_ * 20, round_ * 20 + 20)])
            s.delete(f"k{399 - round_:05d}")
        assert files() == ["delta-000000001.idx", "snap-000000001.idx"]
    mtime = os.stat(os.path.join(path, "delta-000000001.idx")).st_mtime_ns
    with open_backend("indexed_fs", path=path, **opts) as s:
        st = s.stats()
        assert (st["delta_used"], st["records_scanned"]) == ("delta-000000001.idx", 0)
        assert s.get("k00000") == b"r0" and s.get("k00059") == b"r2" and s.get("k00100") == b"base"
        assert s.get("k00399") is None and len(s.keys("")) == 397
    assert os.stat(os.path.join(path, "delta-000000001.idx")).st_mtime_ns == mtime  # nothing new
    with open_backend("indexed_fs", path=path, **opts) as s:
        s.put_many([(f"n{i:05d}", b"new") for i in range(100)])  # the delta past max(a quarter of 400, 50)
    assert files() == ["snap-000000002.idx"]
    with open_backend("indexed_fs", path=path, **opts) as s:
        assert s.stats()["records_scanned"] == 0 and len(s.keys("")) == 497


CHILD = r"""
import os, sys
from backends import open_backend
path, log = sys.argv[1], sys.argv[2]
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
store = open_backend("indexed_fs", path=path, segment_size=1 << 20, index_flush_interval=30,
                     delta_records=200)
i = 0
while True:
    store.put_many([(f"k{(i * 7 + j) % 5000:05d}", b"%d-%d" % (i, j)) for j in range(10)])
    if i % 9 == 4:
        store.delete(f"k{(i * 13) % 5000:05d}")
    os.write(fd, b"%d\n" % i)  # batch i (and its delete) acknowledged
    i += 1
"""


def _expected(upto: int) -> dict[str, bytes | None]:
    want: dict[str, bytes | None] = {}
    for i in range(upto + 1):
        for j in range(10):
            want[f"k{(i * 7 + j) % 5000:05d}"] = b"%d-%d" % (i, j)
        if i % 9 == 4:
            want[f"k{(i * 13) % 5000:05d}"] = None
    return want


@pytest.mark.crash
def test_sigkill_mid_load_keeps_every_acknowledged_key(tmp_path):
    path, log = str(tmp_path / "s"), str(tmp_path / "acked.log")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, "-c", CHILD, path, log], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until deltas were written and a tail follows
            names = os.listdir(path) if os.path.isdir(path) else []
            if any(n.startswith("delta-") for n in names) and \
                    os.path.exists(log) and os.path.getsize(log) > 40_000:
                break
            time.sleep(0.05)
        time.sleep(0.1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    lines = Path(log).read_bytes().split(b"\n")
    done = [int(x) for x in lines if x]
    assert done, "the child acknowledged nothing"
    last = done[-1]
    want, maybe = _expected(last), _expected(last + 1)  # batch last + 1 may be in flight
    with open_backend("indexed_fs", path=path, index_flush_interval=0) as t:
        st = t.stats()
        assert st["corrupt_records"] == 0 and st["damaged_segments"] == 0, st["warnings"]
        for k in sorted(set(want) | set(maybe)):
            assert t.get(k) in (want.get(k), maybe.get(k)), k
    assert st["deltas_invalid"] == 0, st["rebuild_notes"]
    assert verify.verify_path(path).ok


def test_writers_wait_for_a_lagging_delta_so_a_crash_walks_a_bounded_tail(tmp_path, monkeypatch):
    """A delta thread slower than the writer (here: every delta write sleeps) holds the writer
    back once the log past the newest delta reaches 1.25 × delta_records: after every put, no
    more than that lies past it, which is what a crash would leave to walk."""
    slow = delta.write

    def slow_write(*args, **kwargs):
        time.sleep(0.02)
        return slow(*args, **kwargs)

    monkeypatch.setattr(delta, "write", slow_write)
    every = 64
    with open_backend("indexed_fs", path=str(tmp_path / "s"), durability="none",
                      index_flush_interval=1000, delta_records=every) as s:
        s.put_many([(f"k{i}", b"v") for i in range(2000)])
        s.write_snapshot()  # a base large enough that 300 keys stay a delta
        worst = 0
        for i in range(1500):
            s.put(f"k{i % 300}", b"x" * 20)
            worst = max(worst, s._nwrites - s._deltas.state.mark)
        assert s.stats()["deltas_written"] >= 10
        assert worst <= every + every // 4


def test_the_delta_thread_starts_with_the_first_due_write_and_ends_with_close(tmp_path):
    """An open, even one whose deltas go on from what it read, starts no delta thread; the
    first write a delta is due at starts it (and it writes the delta); close() ends it."""
    import threading
    from backends.indexed_fs.delta_scheduler import THREAD_NAME

    def delta_threads() -> int:
        return sum(t.name == THREAD_NAME for t in threading.enumerate())

    path, every = str(tmp_path / "s"), 64
    opts = dict(durability="none", index_flush_interval=1000, delta_records=every)
    before = delta_threads()
    with open_backend("indexed_fs", path=path, **opts) as s:
        s.write_snapshot()
        s.put_many([(f"k{i}", b"v") for i in range(every - 1)])
        assert delta_threads() == before
        s.put("last", b"v")  # the write the delta is due at
        assert delta_threads() == before + 1
        deadline = time.monotonic() + 10
        while s.stats()["deltas_written"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.stats()["deltas_written"] == 1
    assert delta_threads() == before
    with open_backend("indexed_fs", path=path, **opts) as s:
        assert s._deltas.state is not None
        assert delta_threads() == before


@pytest.mark.timeout(60)  # a writer waiting out every bounded wait would take minutes
def test_writers_do_not_wait_for_deltas_that_fail(tmp_path, monkeypatch):
    """A delta thread whose writes fail (reported in stats) never holds writers back: they wait
    only for deltas that can come."""
    def failing_write(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(delta, "write", failing_write)
    every = 64
    with open_backend("indexed_fs", path=str(tmp_path / "s"), durability="none",
                      index_flush_interval=1000, delta_records=every) as s:
        s.put_many([(f"k{i}", b"v") for i in range(2000)])
        s.write_snapshot()
        t0 = time.monotonic()
        for i in range(600):
            s.put(f"k{i % 300}", b"x" * 20)
        assert time.monotonic() - t0 < 1.5  # far below one bounded wait per stall
        st = s.stats()
        assert st["background_errors"] >= 1 and "no space" in st["last_background_error"]


def test_successive_deltas_record_the_rows_one_join_of_all_their_records_finds(tmp_path):
    """Each delta joins only the records appended since the one before and carries the rows the
    earlier ones superseded: after several rounds of overwrites, deletes and puts of deleted
    keys, the rows recorded are those a join of all the delta's records with the snapshot
    finds, and an open from the delta answers like one that joins."""
    from backends.indexed_fs import snapshot
    from backends.media import open_data_dir
    path = str(tmp_path / "s")
    s = open_backend("indexed_fs", path=path, **OPTS)
    for i in range(2000):
        s.put(f"k{i:04d}", b"a%d" % i)
    s.write_snapshot()
    for r, (step, start) in enumerate([(37, 0), (29, 1), (31, 2), (41, 0)]):
        for i in range(start, 2000, step):
            s.put(f"k{i:04d}", b"r%d-%d" % (r, i))
        for i in range(start + 1, 2000, step * 3):
            s.delete(f"k{i:04d}")
        s.put(f"new{r}", b"n")
        assert s.write_delta() == "delta-000000001.idx"
    s._flush()
    keys = [f"k{i:04d}" for i in range(2000)] + [f"new{r}" for r in range(4)]
    expect = {k: s.get(k) for k in keys}
    crashed = _crash_copy(tmp_path / "s", tmp_path / "c")
    s.close()
    medium = open_data_dir("indexed_fs", crashed)
    snap, dl = snapshot.read(medium, 1), delta.read(medium, 1)
    found = delta.superseded(dl.res, snap.keys, snap.cols)
    assert found is not None and found[1].tolist() == dl.dead.tolist() and len(dl.dead)
    assert _as_dicts(found[0]) == _as_dicts(dl.res)
    fast = _rebuilt(crashed)
    delta.write(medium, 1, dl.base_covered, dl.covered, dl.next_seq, dl.min_seq, dl.records,
                dl.res)  # no superseded rows recorded: joined at open
    medium.close()
    assert fast[0] == "delta-000000001.idx" and fast == _rebuilt(crashed)
    _check(crashed, expect, used=True)
