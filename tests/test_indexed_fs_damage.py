"""Damage costs only what it touched: the indexed_fs damage matrix.

Each case writes keys with overwrites (acknowledged, ``durability=sync``), crashes the store (a
copy of its files while open) or closes it, damages one record (a byte flipped in one of its
header fields, its key, its value or its CRC) in the newest or a sealed segment, with or without
a snapshot, hints and deltas, or truncates a segment, or drops stray files in; then reopens and
checks that

* every intact acknowledged key reads back with its newest value, and only the damaged record's
  key is lost, rolled back to an older value or refused on read (``CorruptDataError``);
* nothing outside the store's own files changed (stray files are left as they were);
* the damage is in ``stats()`` warnings, and the quarantine holds its bytes.

Small ``segment_size`` and ``delta_records`` keep every case well under a second.  Random flips
anywhere check the same promise beyond the chosen fields, and one case per remote medium (NFS,
HDFS, the shared servers) checks that the quarantine goes through the medium."""

from __future__ import annotations

import random
import shutil
import uuid
from pathlib import Path

import pytest

from backends import open_backend
from backends.base import CorruptDataError
from backends.indexed_fs import segment
from backends.indexed_fs.quarantine import DIR as QDIR
from backends.indexed_fs.segment import HEADER_SIZE, walk
from backends.indexed_fs.verify import verify_path

KEYS = 40
ROUNDS = 5  # each key written this many times: the damaged record's key may roll back


def value(key: int, rnd: int) -> bytes:
    return f"k{key}-r{rnd}-".encode() * 9


def fill(path: Path, **opts) -> dict[str, list[bytes]]:
    """Write up to ``ROUNDS`` values of ``KEYS`` keys (the first keys fewer times, so that
    sealed segments hold newest versions too), crash (copy the open store's files) into
    ``path``; the history of each key, oldest first.  ``snapshot``: one snapshot, then more
    writes; ``hints``: the sealed segments' hint files written before the crash."""
    src = path.with_name(path.name + "-live")
    snap, hints = opts.pop("snapshot", False), opts.pop("hints", False)
    store = open_backend("indexed_fs", path=str(src), durability="sync", **opts)
    hist: dict[str, list[bytes]] = {}
    try:
        for rnd in range(ROUNDS):
            for k in range(rnd * KEYS // ROUNDS, KEYS):  # key k's last write: round k * R // K
                store.put(f"key{k}", value(k, rnd))
                hist.setdefault(f"key{k}", []).append(value(k, rnd))
        if snap:
            store.write_snapshot()
            for k in range(KEYS // 2):  # past the snapshot: some of the log is walked
                store.put(f"key{k}", value(k, ROUNDS))
                hist[f"key{k}"].append(value(k, ROUNDS))
        store._stop_threads()  # no background snapshot, hint or delta while the files are copied
        if hints:
            store._write_hints()
        shutil.copytree(src, path, ignore=shutil.ignore_patterns(
            "LOCK", *(() if hints else ("*.hint",))))
    finally:
        store.close()
        shutil.rmtree(src)
    return hist


def records(path: Path) -> list[tuple[str, int, int, str]]:
    """(segment file, offset, size, key) of every record, in log order."""
    out = []
    for sid, names in segment.list_segments(_Dir(path)).items():
        data = (path / names[0]).read_bytes()
        _res, recs = walk(data, sid, 0, False)
        out += [(names[0], o, s, k.decode()) for o, s, k in
                zip(recs.offsets.tolist(), recs.sizes.tolist(), recs.key_bytes())]
    return out


class _Dir:
    """Just enough of a medium for segment.list_segments."""

    def __init__(self, path: Path):
        self.path = path

    def list_files(self) -> list[str]:
        return [p.name for p in self.path.iterdir() if p.is_file()]


def flip(path: Path, offset: int, mask: int = 0xFF) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ mask]))


def check(path: Path, hist: dict[str, list[bytes]], damaged_key: str | None, **opts) -> dict:
    """Reopen; every key but ``damaged_key`` reads its newest value; return stats()."""
    store = open_backend("indexed_fs", path=str(path), durability="sync", **opts)
    try:
        for key, values in hist.items():
            try:
                got = store.get(key)
            except CorruptDataError:
                assert key == damaged_key, key
                continue
            if key == damaged_key:
                assert got is None or got in values, key
            else:
                assert got == values[-1], key
        return store.stats()
    finally:
        store.close()


#: byte offsets in a record to flip, by what they hit (key and value offsets from the header)
FIELDS = {
    "crc": 0, "seq": 6, "klen-low": 12, "klen-high": 15, "vlen-low": 16, "vlen-byte1": 17,
    "vlen-high": 19, "flags": 20, "key": HEADER_SIZE + 1, "value": HEADER_SIZE + 20,
}
CONFIGS = {
    "log only": dict(index_flush_interval=0, delta_records=0),
    "snapshot": dict(snapshot=True, delta_records=0),
    "snapshot+deltas": dict(snapshot=True, delta_records=16),
    "hints": dict(index_flush_interval=0, delta_records=0, hints=True),
}


@pytest.mark.parametrize("where", ["newest", "sealed"])
@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("field", list(FIELDS))
def test_one_flipped_byte_costs_one_record(tmp_path, field, config, where):
    opts = dict(CONFIGS[config], segment_size=4 << 10)
    store_opts = {k: v for k, v in opts.items() if k not in ("snapshot", "hints")}
    path = tmp_path / "store"
    hist = fill(path, **opts)
    recs = records(path)
    newest = recs[-1][0]
    pool = [r for r in recs if (r[0] == newest) == (where == "newest")]
    # a newest version of its key in the middle of its segment (intact records after it)
    latest = {}
    for r in recs:
        latest[r[3]] = r
    last_of = {r[0]: r for r in recs}
    cands = [r for r in pool if latest[r[3]] is r and last_of[r[0]] is not r]
    assert cands, "the case has no record to damage"
    name, off, size, key = cands[len(cands) // 2]
    before = {p.name: p.stat().st_size for p in path.iterdir() if p.is_file()}
    flip(path / name, off + FIELDS[field])
    rep = verify_path(str(path))  # read-only, before the open: exactly the damaged key
    assert rep.damaged_keys == [key], [r.line() for r in rep.damaged]
    # an older version survives only where GC has not yet deleted its segment: when GC ran
    # before the copy depends on the machine's load, so the files say which outcome is right
    older = any(r[3] == key and (r[0], r[1]) != (name, off) for r in recs)
    assert (rep.lost, rep.rolled_back) == (([], [key]) if older else ([key], []))
    st = check(path, hist, key, **store_opts)
    assert any(f"segment {int(name.split('.')[0])}" in w for w in st["warnings"]), st["warnings"]
    assert (path / QDIR / name).exists() or any(
        p.name.startswith(name) for p in (path / QDIR).iterdir())
    assert (path / name).stat().st_size >= off + size  # nothing after the damage was cut
    assert before[name] == (path / name).stat().st_size or where == "newest"


def test_a_flipped_header_byte_in_record_100_of_5000_loses_one_key(tmp_path):
    """The case the store once lost every key past the damage to: default options, before
    the first snapshot, one byte of record #100's header flipped."""
    src = tmp_path / "live"
    store = open_backend("indexed_fs", path=str(src), durability="sync")
    want = {}
    for i in range(5000):
        want[f"key{i % 1000}"] = v = f"value-{i}-".encode() * 10
        store.put(f"key{i % 1000}", v)
    path = tmp_path / "crashed"
    shutil.copytree(src, path, ignore=shutil.ignore_patterns("LOCK"))
    store.close()
    recs = records(path)
    name, off, _size, key = recs[100]
    records_end = recs[-1][1] + recs[-1][2]
    flip(path / name, off + 16)  # vlen
    store = open_backend("indexed_fs", path=str(path), durability="sync")
    try:
        got = {k: store.get(k) for k in want}
        st = store.stats()
    finally:
        store.close()
    assert {k for k in want if got[k] != want[k]} <= {key}
    assert st["damaged_segments"] == 1 and st["corrupt_records"] == 1, st
    assert st["warnings"] and st["damaged_ranges"] == [(int(name.split(".")[0]), off,
                                                        off + _size)], st["damaged_ranges"]
    assert (path / name).stat().st_size >= records_end and (path / QDIR / name).exists()


def test_a_torn_tail_is_cut_only_past_the_last_intact_record(tmp_path):
    path = tmp_path / "store"
    hist = fill(path, index_flush_interval=0, delta_records=0)
    name, off, size, key = records(path)[-1]
    with open(path / name, "r+b") as f:
        f.truncate(off + size - 3)  # the last record torn: never acknowledged
    hist[key].pop()
    st = check(path, hist, None, index_flush_interval=0, delta_records=0)
    assert st["torn_tail_truncated"] == 1 and not st["warnings"], st["warnings"]
    assert (path / name).stat().st_size >= off
    assert [p.name for p in (path / QDIR).iterdir()] == [f"{name}.{off}-{off + size - 3}"]


def test_zeros_before_intact_records_are_a_crash_gap_not_damage(tmp_path):
    """Group commit: a crash may keep later appends and lose an earlier one (zeros)."""
    path = tmp_path / "store"
    hist = fill(path, index_flush_interval=0, delta_records=0)
    name, off, size, key = records(path)[-5]
    with open(path / name, "r+b") as f:
        f.seek(off)
        f.write(bytes(size))
    st = check(path, hist, key, index_flush_interval=0, delta_records=0)
    assert not st["warnings"] and not st["corrupt_records"], st["warnings"]
    assert not (path / QDIR).exists()


def test_a_garbage_segment_is_left_alone(tmp_path):
    path = tmp_path / "store"
    hist = fill(path, index_flush_interval=0, delta_records=0, segment_size=16 << 10)
    garbage = bytes(range(1, 256)) * 40
    (path / "000000000.seg").write_bytes(garbage)
    newest = max(p.name for p in path.iterdir() if p.name.endswith(".seg"))
    ahead = f"{int(newest.split('.')[0]) + 1:010d}.seg"
    (path / ahead).write_bytes(garbage)  # a garbage "newest segment": never adopted or cut
    rep = verify_path(str(path))  # not the store's files: notes, not damage
    assert rep.ok and sum("not the store's" in n for n in rep.notes) == 2, rep.notes
    st = check(path, hist, None, index_flush_interval=0, delta_records=0)
    assert "000000000.seg" in st["foreign_files"] and ahead in st["foreign_files"]
    st = check(path, hist, None, index_flush_interval=0, delta_records=0)  # and again, after GC
    assert (path / "000000000.seg").read_bytes() == garbage
    assert (path / ahead).read_bytes() == garbage


def test_stray_names_are_left_alone(tmp_path):
    path = tmp_path / "store"
    hist = fill(path, index_flush_interval=0, delta_records=0)
    newest = max(int(p.name.split(".")[0]) for p in path.glob("*.seg"))
    ahead = f"{newest + 1:010d}.seg"  # the name the next segment would take
    (path / "000000007.seg").mkdir()
    (path / ahead).mkdir()
    (path / "foo.tmp").write_bytes(b"mine")
    (path / "notes.txt").write_bytes(b"mine too")
    opts = dict(index_flush_interval=0, delta_records=0, segment_size=4 << 10)
    st = check(path, hist, None, **opts)
    assert {"000000007.seg", ahead} <= set(st["foreign_files"])
    with open_backend("indexed_fs", path=str(path), durability="sync", **opts) as store:
        for k in range(KEYS):  # past a rotation or two: new segments are named past both
            store.put(f"key{k}", value(k, 30))
            hist[f"key{k}"].append(value(k, 30))
    check(path, hist, None, **opts)
    assert (path / "000000007.seg").is_dir() and (path / ahead).is_dir()
    assert (path / "foo.tmp").read_bytes() == b"mine"
    assert (path / "notes.txt").read_bytes() == b"mine too"


def test_segment_ids_past_nine_digits_are_read_back(tmp_path):
    """A store whose newest segment is 999999999 keeps every key across reopens."""
    path = tmp_path / "store"
    hist = fill(path, index_flush_interval=0, delta_records=0)
    for p in sorted(path.glob("*.seg")):
        p.unlink()
    for p in path.glob("*.hint"):
        p.unlink()
    opts = dict(index_flush_interval=0, delta_records=0, segment_size=4 << 10)
    store = open_backend("indexed_fs", path=str(path), durability="sync", **opts)
    store.close()
    (path / "999999999.seg").touch()  # the store's newest (old-width name)
    for p in path.glob("0*.seg"):
        if p.name != "999999999.seg" and p.stat().st_size == 0:
            p.unlink()
    store = open_backend("indexed_fs", path=str(path), durability="sync", **opts)
    try:
        for rnd in range(2):
            for k in range(KEYS):
                store.put(f"key{k}", value(k, 10 + rnd))
                hist[f"key{k}"] = [value(k, 10 + rnd)]
        assert store.stats()["active_segment"] > 999999999
    finally:
        store.close()
    assert any(p.name == "1000000000.seg" for p in path.iterdir())
    check(path, hist, None, **opts)


@pytest.mark.parametrize("room", [True, False])
def test_gc_and_compaction_delete_a_damaged_segment_only_once_it_is_quarantined(tmp_path, room):
    """Every record of a damaged sealed segment superseded, then compaction and GC: with room
    in the quarantine the segment goes there first, else it stays where it is (one warning)."""
    path = tmp_path / "store"
    opts = dict(index_flush_interval=0, delta_records=0, segment_size=4 << 10)
    fill(path, **opts)
    recs = records(path)
    name, off, _size, _key = [r for r in recs if r[0] == recs[0][0]][3]
    flip(path / name, off + HEADER_SIZE + 25)
    data = (path / name).read_bytes()
    store = open_backend("indexed_fs", path=str(path), durability="sync",
                         quarantine_bytes=1 << 20 if room else 0, **opts)
    try:
        for rnd in range(3):  # supersede everything: the damaged segment is dead
            for k in range(KEYS):
                store.put(f"key{k}", value(k, 20 + rnd))
        store.compact()
        store._gc()
        st = store.stats()
    finally:
        store.close()
    if room:
        assert not (path / name).exists()
        assert (path / QDIR / name).read_bytes() == data
        assert not any(p.name.endswith(".tmp") for p in (path / QDIR).iterdir())
    else:
        assert (path / name).read_bytes() == data
        assert any("quarantine" in w and "full" in w for w in st["warnings"]), st["warnings"]


def test_a_truncated_sealed_segment_costs_only_the_records_cut(tmp_path):
    path = tmp_path / "store"
    opts = dict(index_flush_interval=0, delta_records=0, segment_size=4 << 10)
    hist = fill(path, **opts)
    recs = records(path)
    first = recs[0][0]
    mine = [r for r in recs if r[0] == first]
    name, off, size, _key = mine[len(mine) // 2]
    cut = {r[3] for r in mine if r[1] + r[2] > off + 5}
    latest = {r[3]: r for r in recs}
    with open(path / name, "r+b") as f:
        f.truncate(off + 5)
    # bench verify reports the cut, but with no index file (snapshot, delta, hint) nothing is
    # left that names the records cut off: a range without keys, not a clean store
    rep = verify_path(str(path))
    assert [(r.file, r.start, r.keys) for r in rep.damaged] == [(name, off, [])]
    store = open_backend("indexed_fs", path=str(path), durability="sync", **opts)
    try:
        for key, values in hist.items():
            got = store.get(key)
            if latest[key][0] == name and key in cut:
                assert got is None or got in values
            else:
                assert got == values[-1], key
        st = store.stats()
    finally:
        store.close()
    assert st["damaged_ranges"] == [(int(name.split(".")[0]), off, off + 5)]
    assert (path / name).stat().st_size == off + 5  # reported, never cut further


@pytest.mark.parametrize("config", ["log only", "snapshot+deltas"])
@pytest.mark.parametrize("seed", range(6))
def test_random_flips_cost_only_the_records_they_hit(tmp_path, seed, config):
    """Several bytes flipped anywhere in the log: only keys whose newest record holds a flipped
    byte may differ (lost, rolled back or refused on read), and the open reports a damaged
    range over every flipped record it walked."""
    rng = random.Random(seed)
    path = tmp_path / "store"
    opts = dict(CONFIGS[config], segment_size=4 << 10)
    store_opts = {k: v for k, v in opts.items() if k != "snapshot"}
    hist = fill(path, **opts)
    recs = records(path)
    latest = {r[3]: r for r in recs}
    flipped = set()
    for _ in range(rng.randint(1, 4)):
        rec = rng.choice(recs)
        flip(path / rec[0], rec[1] + rng.randrange(rec[2]), rng.randint(1, 255))
        flipped.add(rec)
    # bench verify, before the open: it lists a key only if its newest record was hit, and
    # every such key but one in the newest segment's torn tail (the open cuts that, a write in
    # flight at a crash as far as anyone can tell)
    rep = verify_path(str(path))
    hit_keys = {latest[k][3] for k in latest if latest[k] in flipped}
    assert {k for k in rep.damaged_keys if k in hist} <= hit_keys, rep.damaged_keys
    tail = recs[-1]
    assert hit_keys - set(rep.damaged_keys) <= ({tail[3]} if tail in flipped else set())
    store = open_backend("indexed_fs", path=str(path), durability="sync", **store_opts)
    try:
        st = store.stats()
        for key, values in hist.items():
            try:
                got = store.get(key)
            except CorruptDataError:
                assert latest[key] in flipped, key
                continue
            assert got == values[-1] or latest[key] in flipped, key
            assert got is None or got in values, key
    finally:
        store.close()
    if config == "log only":
        hit = [(f"{sid:010d}.seg", a, b) for sid, a, b in st["damaged_ranges"]]
        for name, off, size, _ in flipped:
            cut = name == recs[-1][0] and st["torn_tail_truncated"]
            assert cut or any(n == name and a <= off and off + size <= b for n, a, b in hit)


@pytest.mark.server
@pytest.mark.parametrize("kind", [pytest.param("nfs", marks=pytest.mark.nfs),
                                  pytest.param("hdfs", marks=pytest.mark.hdfs)])
def test_a_torn_tail_goes_to_quarantine_on_a_remote_medium(kind):
    """The quarantine goes through the medium: it works where the store's directory is remote."""
    import services
    from backends.media import open_medium

    services.up([kind])
    url = services.client_options(kind, f"dmg{uuid.uuid4().hex[:10]}")["path"]
    opts = dict(index_flush_interval=0, delta_records=0)
    with open_backend("indexed_fs", path=url, durability="sync", **opts) as store:
        for k in range(20):
            store.put(f"key{k}", value(k, 0))
    torn = segment.encode(999, b"key3", value(3, 1))[:-7]
    with open_medium(url, "test") as medium:
        name = max(n for n in medium.list_files() if n.endswith(".seg"))
        size = medium.size(name)
        with medium.open_append(name) as f:
            f.append(torn)
            f.sync()
    with open_backend("indexed_fs", path=url, durability="sync", **opts) as store:
        assert [store.get(f"key{k}") for k in range(20)] == [value(k, 0) for k in range(20)]
        assert store.stats()["torn_tail_truncated"] == 1
    with open_medium(url, "test") as medium:
        assert medium.size(name) == size
        held = f"{QDIR}/{name}.{size}-{size + len(torn)}"
        assert medium.list_files(QDIR) == [held.split("/")[1]]
        assert medium.read_file(held) == torn


def test_a_tombstone_newer_than_the_snapshot_is_not_dropped_by_compaction(tmp_path):
    """The snapshot holds a key's value in a segment GC deletes later; compaction must keep the
    key's tombstone until a newer snapshot, or a crash reopen from that snapshot finds an entry
    into a missing segment with nothing after it and warns of damage that is not there."""
    src, path = tmp_path / "live", tmp_path / "crashed"
    opts = dict(index_flush_interval=0, delta_records=0, segment_size=1 << 10)
    store = open_backend("indexed_fs", path=str(src), durability="sync", **opts)
    try:
        store.put("gone", b"x" * 200)
        store.write_snapshot()
        store.delete("gone")
        for rnd in range(4):  # everything else superseded: the old segments are dead
            for k in range(8):
                store.put(f"key{k}", value(k, rnd))
        store._gc()
        store.compact()
        store._gc()
        store._stop_threads()
        shutil.copytree(src, path, ignore=shutil.ignore_patterns("LOCK"))
    finally:
        store.close()
    with open_backend("indexed_fs", path=str(path), durability="sync", **opts) as store:
        st = store.stats()
        assert store.get("gone") is None
        assert [store.get(f"key{k}") for k in range(8)] == [value(k, 3) for k in range(8)]
    assert st["snapshot_used"] and not st["warnings"], st["warnings"]
