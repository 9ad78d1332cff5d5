"""The crash rebuild's C path (``backends/indexed_fs/_scan.c``) against its Python reference:
the C walk must find exactly what the Python walk finds on the same segment bytes (clean logs,
torn tails, zeroed tails, corrupt CRCs in the middle, unreadable headers, tombstones); the C
resolution must pick the winners ``resolve_all`` picks; and an index whose log records were
applied as a sorted delta layer must answer like one that merged them key by key.  Pure logic
plus small stores on a tmp dir; skipped where the extension was not built."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from segment_logs import DAMAGE, GAP, KEYS, build, damaged, records

from backends import open_backend
from backends.indexed_fs import index as index_mod
from backends.indexed_fs import delta, recovery, segment
from backends.indexed_fs.index import Index
from backends.indexed_fs.segment import (
    FLAG_TOMBSTONE,
    HEADER_SIZE,
    encode,
    resolve_all,
    resolve_sorted,
    walk,
)
from backends.media import open_medium

_scan = pytest.importorskip("backends.indexed_fs._scan")

RECORD = records([*KEYS, "user12345678901234"])
ASCII_KEYS = st.sampled_from(["a", "ab", "b", "k/1", "k/10", "user1", "user10", "user2",
                              "longer-key-0123456789-abcdef", "longer-key-0123456789-abcdeg",
                              "longer-key-0123456789-abcdef-and-more"])


def same_walk(data: bytes, seg_id: int, base: int, last: bool) -> None:
    """The C walk (both key forms) finds what the Python walk finds."""
    want_res, want = walk(data, seg_id, base, last, native=False)
    for spans in (False, True):
        res, got = walk(data, seg_id, base, last, native=True, spans=spans)
        assert res == want_res
        for col in ("offsets", "sizes", "seqs", "flags"):
            assert getattr(got, col).tolist() == getattr(want, col).tolist(), col
        assert got.key_bytes() == want.key_bytes()


def test_the_c_crc_is_crc32c():
    rng = random.Random(1)
    for n in list(range(0, 70)) + [4096, 100_003]:
        data = rng.randbytes(n)
        assert _scan.crc32c(data) == crc32c.crc32c(data)


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, max_size=30), st.integers(1, 40), DAMAGE, st.integers(0, 30),
       st.integers(0, 64), st.booleans(), st.sampled_from([0, 1000]), GAP)
def test_c_walk_matches_the_python_walk(records, runs, damage, cut, zeros, last, base, gap):
    data = damaged(build(records, runs), damage, cut, gap)
    data += bytes(zeros)  # reserved space after the records (or after a torn one)
    same_walk(bytes(data), 7, base, last)


def test_c_walk_on_the_cases_recovery_depends_on():
    recs = [encode(i + 1, f"key{i % 7}".encode(), b"x" * (i % 5),
                   FLAG_TOMBSTONE if i % 4 == 3 else 0) for i in range(50)]
    clean = b"".join(recs)
    first = len(recs[0])
    mid = sum(map(len, recs[:20])) + HEADER_SIZE  # a key byte of record 20
    bad_crc = bytearray(clean)
    bad_crc[mid] ^= 0xFF
    bad_header = bytearray(clean)
    bad_header[sum(map(len, recs[:30])) + 12 : sum(map(len, recs[:30])) + 16] = b"\0\0\0\0"
    torn_crc = bytearray(clean)
    torn_crc[-1] ^= 0xFF  # the last record's last byte: torn in the newest segment
    at20 = sum(map(len, recs[:20]))
    bad_length = bytearray(clean)
    bad_length[at20 + 16] ^= 0x04  # record 20's value length: resynchronised, not followed
    zeroed_mid = bytearray(clean)
    zeroed_mid[at20 : at20 + len(recs[20])] = bytes(len(recs[20]))  # a crash gap
    cases = {
        "clean": clean,
        "torn mid-record": clean[:-3],
        "torn mid-header": clean[: len(clean) - len(recs[-1]) + 5],
        "zeroed tail": clean + bytes(4096),
        "torn then zeros": clean[:-3] + bytes(100),
        "zeroed record": clean[: len(clean) - len(recs[-1])] + bytes(len(recs[-1])),
        "corrupt CRC in the middle": bytes(bad_crc),
        "unreadable header": bytes(bad_header),
        "torn last record (CRC)": bytes(torn_crc),
        "damaged length in the middle": bytes(bad_length),
        "zeroed record in the middle": bytes(zeroed_mid),
        "one record": clean[:first],
        "empty": b"",
        "zeros only": bytes(300),
    }
    for name, data in cases.items():
        for last in (False, True):
            for base in (0, 4096):
                try:
                    same_walk(data, 3, base, last)
                except AssertionError as exc:
                    raise AssertionError(f"{name}, last={last}, base={base}") from exc
    res, recs_c = walk(bytes(bad_crc), 3, 0, True)
    assert res.corrupt == 1 and len(recs_c) == 49  # the corrupt record is not among the records
    assert sum(map(len, recs[:20])) not in recs_c.offsets.tolist()
    res, recs_c = walk(bytes(bad_length), 3, 0, True)
    assert res.damaged == [(at20, at20 + len(recs[20]))] and len(recs_c) == 49
    res, recs_c = walk(bytes(zeroed_mid), 3, 0, True)
    assert res.gaps == [(at20, at20 + len(recs[20]))] and not res.corrupt and len(recs_c) == 49


def test_c_walk_without_the_crc_instruction_matches_too(monkeypatch):
    """The table-driven CRC (machines without SSE 4.2) agrees with the instruction."""
    if not _scan.HW_CRC:
        pytest.skip("no CRC instruction here: the tables ran all along")
    prev = _scan.use_hw_crc(False)
    try:
        test_the_c_crc_is_crc32c()
        test_c_walk_on_the_cases_recovery_depends_on()
    finally:
        _scan.use_hw_crc(prev)


def _resolved_dicts(res) -> tuple[dict, dict]:
    keys = [k.decode("ascii") for k in res.keys.tolist()]
    ents = zip(*(c.tolist() for c in res.cols))
    return dict(zip(keys, ents)), dict(res.tombs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(ASCII_KEYS, st.sampled_from([b"", b"v" * 9]), st.booleans(),
                                   st.integers(0, 3)), max_size=12), min_size=1, max_size=4),
       st.integers(1, 30), st.booleans())
def test_c_resolution_matches_resolve_all(segments, runs, spans):
    parts = [walk(build(recs, runs), sid, 0, False, spans=spans)[1]
             for sid, recs in enumerate(segments, 1)]
    res = resolve_sorted(parts)
    assert res is not None
    keys = res.keys.tolist()
    assert keys == sorted(set(keys))  # sorted, distinct
    assert _resolved_dicts(res) == resolve_all(parts)
    assert list(dict(res.tombs)) == sorted(dict(res.tombs))


def test_c_resolution_sorts_many_keys_with_long_shared_prefixes():
    """Large groups that tie on their first 8 and 16 bytes (the radix sort's deeper levels)."""
    rng = random.Random(5)
    keys = [f"checkpoint/operator-{rng.randrange(3)}/key-{rng.randrange(5000):07d}"
            for _ in range(4000)] + [f"u{rng.randrange(10**9)}" for _ in range(3000)]
    data = b"".join(encode(i + 1, k.encode(), b"v", FLAG_TOMBSTONE if i % 11 == 0 else 0)
                    for i, k in enumerate(keys))
    parts = [walk(data, 1, 0, False, spans=True)[1]]
    res = resolve_sorted(parts)
    assert res is not None and _resolved_dicts(res) == resolve_all(parts)
    assert res.keys.tolist() == sorted(res.keys.tolist())


def test_keys_c_cannot_hold_exactly_are_left_to_python():
    for key in ("n\x00", "é"):
        parts = [walk(encode(1, key.encode(), b"v") + encode(2, b"a", b"w"), 1, 0, False)[1]]
        assert resolve_sorted(parts) is None
    wide = [walk(encode(1, b"k" * 300, b"v"), 1, 0, False)[1]]
    assert resolve_sorted(wide) is None


# ----------------------------------------------------------------- the delta over a base
def _base_index(base: dict[str, tuple], tombs: dict[str, tuple]) -> Index:
    idx = Index()
    keys = sorted(base)
    w = max([len(k) for k in keys] + [1])
    arr = np.array([k.encode() for k in keys], f"S{w}")
    cols = tuple(np.array([base[k][j] for k in keys], dt)
                 for j, dt in enumerate((np.uint32, np.uint32, np.uint32, np.uint32)))
    idx.load_base(arr, cols)
    for k, e in tombs.items():
        idx.set(k, e, tomb=True)
    return idx


def _state(idx: Index) -> tuple:
    keys = sorted(set(idx.keys_from("")) | set(idx.tombs))
    live = {s: list(v) for s, v in idx.live.items() if v != [0, 0]}
    fk, fcols = idx.materialize(idx.freeze())
    snap = (list(fk) if isinstance(fk, list) else fk.tolist(),
            [c.astype(np.uint64).tolist() for c in fcols])
    return ({k: idx.latest(k) for k in keys}, idx.keys_from(""), idx.keys_from("k/"), len(idx),
            live, snap)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(ASCII_KEYS, st.integers(1, 60), max_size=8),
       st.dictionaries(ASCII_KEYS, st.integers(1, 60), max_size=3),
       st.lists(st.tuples(ASCII_KEYS, st.booleans(), st.integers(0, 80)), max_size=40))
def test_delta_layer_answers_like_the_key_by_key_merge(base_seqs, tomb_seqs, log):
    """Snapshot values and tombstones, then log records (with seqs below the snapshot's too, as
    compaction copies have): load_delta == merge, in every lookup, the accounting and the
    materialized snapshot; and later writes over delta keys behave the same."""
    base = {k: (1, 10 * i, 30, s) for i, (k, s) in enumerate(base_seqs.items())}
    tombs = {k: (1, 5000 + i, 21, s) for i, (k, s) in enumerate(tomb_seqs.items())
             if k not in base}
    data = b"".join(encode(s, k.encode(), b"" if t else b"val", FLAG_TOMBSTONE if t else 0)
                    for k, t, s in log)
    parts = [walk(data, 2, 0, True, spans=True)[1]]
    fast, slow = _base_index(base, tombs), _base_index(base, tombs)
    res = resolve_sorted(parts)
    assert res is not None and fast.takes_delta()
    fast.load_delta(res)
    slow.merge(*resolve_all(parts))
    assert _state(fast) == _state(slow)
    for i, k in enumerate(["a", "ab", "user1", "k/10", "zz"]):  # writes after the open
        for idx in (fast, slow):
            idx.set(k, (3, i, 25, 1000 + i), tomb=(i % 2 == 1))
    assert _state(fast) == _state(slow)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(ASCII_KEYS, st.integers(1, 60), max_size=8),
       st.dictionaries(ASCII_KEYS, st.integers(1, 60), max_size=3),
       st.lists(st.tuples(ASCII_KEYS, st.booleans(), st.integers(0, 80)), max_size=30),
       st.lists(st.tuples(ASCII_KEYS, st.booleans(), st.integers(0, 120)), max_size=20))
def test_a_delta_file_adopted_as_a_layer_answers_like_joining_it(base_seqs, tomb_seqs, dlog,
                                                                 tail):
    """A delta file's records adopted with the base rows it supersedes (found when it was
    written, delta.superseded) and then the log past it: the same index as joining both at
    open, and as merging every record key by key — lookups, accounting, the snapshot made
    from it; and later writes behave the same."""
    base = {k: (1, 10 * i, 30, s) for i, (k, s) in enumerate(base_seqs.items())}
    tombs = {k: (1, 5000 + i, 21, s) for i, (k, s) in enumerate(tomb_seqs.items())
             if k not in base}

    def part(log, seg):
        data = b"".join(encode(s, k.encode(), b"" if t else b"val", FLAG_TOMBSTONE if t else 0)
                        for k, t, s in log)
        return walk(data, seg, 0, True, spans=True)[1]

    dpart, tpart = part(dlog, 2), part(tail, 3)
    dres, tres = resolve_sorted([dpart]), resolve_sorted([tpart])
    assert dres is not None and tres is not None
    bkeys = _base_index(base, {})._layers[0]
    found = delta.superseded(dres, bkeys.keys, bkeys.cols)
    assert found is not None
    kept, dead = found
    parts = delta.encode(1, (2, 0), (2, 99), 200, 1, len(dlog), kept, dead,
                         delta.dead_accounting(dead, bkeys.cols))
    dl = delta.decode(b"".join(parts), 1)
    layered, joined, slow = (_base_index(base, tombs) for _ in range(3))
    layered.load_layer(dl.res, dl.dead, dl.dead_live, dl.value_live)
    layered.load_delta(tres)
    joined.load_delta(dres)
    joined.load_delta(tres)
    slow.merge(*resolve_all([dpart]))
    slow.merge(*resolve_all([tpart]))
    assert _state(layered) == _state(joined) == _state(slow)
    for i, k in enumerate(["a", "ab", "user1", "k/10", "zz"]):  # writes after the open
        for idx in (layered, joined, slow):
            idx.set(k, (4, i, 25, 1000 + i), tomb=(i % 2 == 1))
    assert _state(layered) == _state(joined) == _state(slow)


# ------------------------------------------------------------------------- whole stores
def _python_only(monkeypatch) -> None:
    monkeypatch.setattr(segment, "NATIVE_WALK", False)
    monkeypatch.setattr(segment, "_native", None)
    monkeypatch.setattr(index_mod, "_scan", None)


def _rebuild(path: Path) -> tuple[dict, dict]:
    medium = open_medium(str(path), "test")
    try:
        kd = recovery.init_keydir(medium)
        try:
            keys = kd.index.keys_from("")
            values = {}
            for k in keys:
                e = kd.index.get(k)
                values[k] = (e, segment.decode(kd.segments[e[0]].read(e[1], e[2]), k)[2])
            summary = dict(kd.counters(), next_seq=kd.next_seq, tombs=dict(kd.index.tombs),
                           live={s: list(v) for s, v in kd.index.live.items() if v != [0, 0]},
                           sizes={s: seg.size for s, seg in kd.segments.items()})
            return values, summary
        finally:
            for seg in kd.segments.values():
                seg.close()
    finally:
        medium.close()


@pytest.mark.parametrize("damage", ["none", "torn", "zeroed", "corrupt"])
def test_a_crashed_store_rebuilds_the_same_in_c_and_in_python(tmp_path, monkeypatch, damage):
    """A snapshot, then overwrites, deletes and new keys in the active segment, then a crash
    image (with its tail torn, zeroed, or a record in the middle corrupted): the rebuild with
    the C walk and delta gives the same keydir, values and findings as the Python one."""
    rng = random.Random(7)
    src = tmp_path / "src"
    s = open_backend("indexed_fs", path=str(src), index_flush_interval=0)
    try:
        for i in range(3000):
            s.put(f"user{rng.randrange(10**12)}", b"x" * rng.randrange(1, 60))
        s.write_snapshot()
        for i in range(2000):
            k = f"user{rng.randrange(10**12)}" if i % 3 else f"user{i}"
            if i % 7 == 0:
                s.delete(k)
            else:
                s.put(k, b"y" * rng.randrange(1, 60))
        s.flush()
        shutil.copytree(src, tmp_path / "c", ignore=shutil.ignore_patterns("LOCK"))
    finally:
        s.close()
    seg = max((tmp_path / "c").glob("*.seg"))
    data = bytearray(seg.read_bytes())
    end = len(data.rstrip(b"\0"))
    if damage == "torn":
        data = data[: end - 5]
    elif damage == "zeroed":
        data[end - 40 : end] = bytes(40)
    elif damage == "corrupt":
        data[end - 3000] ^= 0x55
    seg.write_bytes(bytes(data))
    shutil.copytree(tmp_path / "c", tmp_path / "py")
    got = _rebuild(tmp_path / "c")
    _python_only(monkeypatch)
    want = _rebuild(tmp_path / "py")
    assert got == want
    assert got[1]["snapshot_used"] and got[1]["records_scanned"] > 0


def test_a_join_split_over_two_threads_marks_what_one_pass_marks(monkeypatch):
    """Many walked keys are joined with a layer below as two halves on two threads: the rows
    marked dead on both sides are those of one pass."""
    rng = np.random.default_rng(7)
    base_keys = np.unique(np.array([b"k%07d" % i for i in rng.choice(10**6, 5000, False)], "S8"))
    walked = np.unique(np.array([b"k%07d" % i for i in rng.choice(10**6, 3000, False)]
                                + base_keys[::3].tolist(), "S8"))
    bseq = rng.integers(1, 100, len(base_keys)).astype(np.uint64)
    wseq = rng.integers(50, 150, len(walked)).astype(np.uint64)
    outcomes = []
    for split in (10**9, 1):
        monkeypatch.setattr(index_mod, "_SPLIT_JOIN", split)
        below = index_mod.Layer(base_keys, (bseq, bseq, bseq, bseq))
        alive = np.ones(len(walked), bool)
        killed = index_mod.join(walked, wseq, alive, below)
        outcomes.append((killed.tolist(), alive.tolist(), below.alive.tolist()))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] and not all(outcomes[0][1])  # some won, some lost


@pytest.mark.parametrize("seed", range(40))
def test_the_c_join_marks_what_a_key_by_key_match_marks(seed):
    """``_scan.join`` (batched, prefetched binary searches under a gallop) against a plain
    dict: keys of different widths on the two sides, keys past either end, batches cut short,
    runs of walked keys between two base keys, dead rows on both sides, either side winning."""
    rnd = random.Random(seed)

    def key() -> bytes:
        return bytes(rnd.choice(b"abc\x7f") for _ in range(rnd.randint(1, 11)))

    base = {key() for _ in range(rnd.choice([1, 40, 300, 2000]))}
    share = rnd.random()  # how many base keys the walked side holds too
    walked = {key() for _ in range(rnd.choice([1, 15, 17, 90, 500]))}
    walked |= {k for k in base if rnd.random() < share}
    bkeys = np.array(sorted(base), f"S{max(map(len, base))}")
    wkeys = np.array(sorted(walked), f"S{max(map(len, walked))}")
    bseq = np.array([rnd.randrange(1, 9) for _ in bkeys], np.uint64)
    wseq = np.array([rnd.randrange(1, 9) for _ in wkeys], np.uint64)
    balive = np.array([rnd.random() < 0.9 for _ in bkeys], bool)
    walive = np.array([rnd.random() < 0.9 for _ in wkeys], bool)
    want_b, want_w, want_killed = balive.copy(), walive.copy(), []
    row = {k: i for i, k in enumerate(bkeys.tolist())}
    for j, k in enumerate(wkeys.tolist()):
        i = row.get(k)
        if i is not None and want_b[i] and want_w[j]:
            if wseq[j] >= bseq[i]:
                want_b[i] = False
                want_killed.append(i)
            else:
                want_w[j] = False
    below = index_mod.Layer(bkeys, (bseq, bseq, bseq, bseq), balive.copy())
    alive = walive.copy()
    killed = index_mod.join(wkeys, wseq, alive, below)
    assert killed.tolist() == sorted(want_killed)
    assert alive.tolist() == want_w.tolist() and below.alive.tolist() == want_b.tolist()
