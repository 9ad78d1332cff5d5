"""The two-phase segment scan (runs of equal-size records parsed in numpy) must resolve exactly
what a plain record-by-record walk does, on clean logs and on damaged ones (flipped bytes, bad
lengths, torn tails); and a full rebuild resolved in numpy must equal the dict resolution.
Pure logic: the reference walk below is the original scan loop."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from segment_logs import DAMAGE, RECORD, build, damaged

from backends.indexed_fs.index import Index
from backends.indexed_fs.segment import (
    HEADER,
    HEADER_SIZE,
    MAX_KEY_LEN,
    MAX_VALUE_LEN,
    crc,
    resolve,
    resolve_all,
    scan,
    walk,
)


def reference_scan(data, seg_id, base, last, values, tombs):
    """The record-by-record walk: (records, corrupt, tail_at, min_seq, max_seq, notes).

    Where the walk stops at a header or a length that cannot be read and every byte from there
    on is zero, that is space reserved by preallocation (``segment.zeros_from``), not a torn
    tail: no ``tail_at``, no note.  (A torn record cut down to zero bytes alone reads the same
    way, and either way the next append goes where the records end.)"""
    pos, n, corrupt, tail_at, notes = 0, 0, 0, None, []
    by_crc = False  # the tail is a last record with a bad CRC (never read as reserved space)
    min_seq, max_seq = 1 << 63, 0
    end = len(data)
    while pos < end:
        if pos + HEADER_SIZE > end:
            tail_at = pos
            break
        c, seq, klen, vlen, flags = HEADER.unpack_from(data, pos)
        if klen == 0 or klen > MAX_KEY_LEN or vlen > MAX_VALUE_LEN or flags > 1:
            tail_at = pos
            notes.append(f"segment {seg_id}: unreadable header at offset {base + pos}")
            break
        rend = pos + HEADER_SIZE + klen + vlen
        if rend > end:
            tail_at = pos
            break
        if crc(data[pos + 4 : rend]) != c:
            if last and rend == end:
                tail_at, by_crc = pos, True
                break
            corrupt += 1
            notes.append(f"segment {seg_id}: bad CRC at offset {base + pos}")
            pos = rend
            continue
        key = data[pos + HEADER_SIZE : pos + HEADER_SIZE + klen].decode("utf-8", "replace")
        cur = values.get(key) or tombs.get(key)
        if cur is None or seq >= cur[3]:
            entry = (seg_id, base + pos, rend - pos, seq)
            (tombs if flags else values)[key] = entry
            (values if flags else tombs).pop(key, None)
        n += 1
        min_seq, max_seq = min(min_seq, seq), max(max_seq, seq)
        pos = rend
    if tail_at is not None and not by_crc and not any(data[tail_at:]):
        tail_at = None
        if notes and notes[-1].startswith(f"segment {seg_id}: unreadable header"):
            notes.pop()
    return n, corrupt, None if tail_at is None else tail_at + base, min_seq, max_seq, notes


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, max_size=30), st.integers(1, 80), DAMAGE, st.integers(0, 30),
       st.booleans(), st.sampled_from([0, 1000]))
def test_scan_matches_the_record_by_record_walk(records, runs, damage, cut, last, base):
    data = damaged(build(records, runs), damage, cut)
    data = bytes(data)
    prior = {"a": (0, 0, 30, 5)}  # an entry from an earlier segment, to be overridden or not
    want_v, want_t = dict(prior), {}
    want = reference_scan(data, 7, base, last, want_v, want_t)
    got_v, got_t = dict(prior), {}
    res = scan(data, 7, base, last, got_v, got_t)
    assert (res.records, res.corrupt, res.tail_at, res.min_seq, res.max_seq, res.notes) == want
    assert got_v == want_v and got_t == want_t


ASCII_KEYS = st.sampled_from(["a", "ab", "b", "k/1", "k/10", "longer-key-0123456789-abcdef"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(ASCII_KEYS, st.sampled_from([b"", b"v" * 9]), st.booleans(),
                                   st.integers(0, 3)), max_size=12), min_size=1, max_size=4),
       st.integers(1, 40))
def test_bulk_rebuild_matches_record_by_record_resolution(segments, runs):
    """Index.load_log (numpy, base layer) == resolve + finish_scan (dicts) on the same log."""
    parts = [walk(build(recs, runs), sid, 0, sid == len(segments))[1]
             for sid, recs in enumerate(segments, 1)]
    bulk, slow = Index(), Index()
    for recs in parts:
        resolve(recs, slow.d, slow.tombs)
    slow.finish_scan()
    if not bulk.load_log(parts):
        assert not any(len(r) for r in parts)  # only an empty log is refused
        return
    keys = sorted(set(slow.d) | set(slow.tombs))
    assert len(bulk) == len(slow)
    assert bulk.keys_from("") == list(slow.d.keys())
    assert {k: bulk.latest(k) for k in keys} == {k: slow.latest(k) for k in keys}
    assert bulk.live == slow.live


def test_scan_matches_the_walk_with_short_runs_taken_as_runs(monkeypatch):
    """The run path proper (numpy over equal-size records) at run lengths the property test
    generates: shrink the run thresholds so runs of 4+ records are parsed as runs."""
    from backends.indexed_fs import segment

    monkeypatch.setattr(segment, "_RUN_FIRST", 4)
    monkeypatch.setattr(segment, "_RUN_MIN", 4)
    test_scan_matches_the_record_by_record_walk()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(RECORD, max_size=12), min_size=1, max_size=4), st.integers(1, 5))
def test_resolving_all_parts_at_once_matches_record_by_record(segments, runs):
    """resolve_all (dicts built in C where seqs never fall) == resolve per part, also with
    compaction copies (seqs going back), tombstones and keys holding NUL."""
    parts = [walk(build(recs, runs), sid, 0, False)[1] for sid, recs in enumerate(segments, 1)]
    values, tombs = {}, {}
    for recs in parts:
        resolve(recs, values, tombs)
    assert resolve_all(parts) == (values, tombs)
