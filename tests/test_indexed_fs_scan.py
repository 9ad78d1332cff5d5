"""The two-phase segment scan (runs of equal-size records parsed in numpy) must resolve exactly
what a plain record-by-record walk does, on clean logs and on damaged ones (flipped bytes, bad
lengths, torn tails, zeroed records: resynchronised on the next intact record); and a full
rebuild resolved in numpy must equal the dict resolution.
Pure logic: the reference walk below is the plain loop."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from segment_logs import DAMAGE, GAP, RECORD, build, damaged

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
    """The record-by-record walk with resynchronisation: (records, corrupt, tail_at, min_seq,
    max_seq, notes).

    A record that fails (bad CRC, a header that cannot be real, past the end) is skipped by its
    length only where an intact record follows there; else the walk goes on at the next offset
    where an intact record starts.  The bytes skipped are damage, unless they are all zeros
    (then: space no write reached, or reserved space when nothing follows), or run to the end
    of the ``last`` segment (a torn tail)."""
    end = len(data)

    def sane(p):  # the record's size if its header is sane and it fits, else None
        if p + HEADER_SIZE > end:
            return None
        _c, _seq, klen, vlen, flags = HEADER.unpack_from(data, p)
        if klen == 0 or klen > MAX_KEY_LEN or vlen > MAX_VALUE_LEN or flags > 1:
            return None
        size = HEADER_SIZE + klen + vlen
        return size if p + size <= end else None

    def intact(p):
        size = sane(p)
        if size is None or crc(data[p + 4 : p + size]) != HEADER.unpack_from(data, p)[0]:
            return None
        return size

    pos, n, tail_at = 0, 0, None
    damaged, gaps = [], []
    min_seq, max_seq = 1 << 63, 0
    while pos < end:
        size = intact(pos)
        if size is not None:
            _c, seq, klen, _vlen, flags = HEADER.unpack_from(data, pos)
            key = data[pos + HEADER_SIZE : pos + HEADER_SIZE + klen].decode("utf-8", "replace")
            cur = values.get(key) or tombs.get(key)
            if cur is None or seq >= cur[3]:
                entry = (seg_id, base + pos, size, seq)
                (tombs if flags else values)[key] = entry
                (values if flags else tombs).pop(key, None)
            n += 1
            min_seq, max_seq = min(min_seq, seq), max(max_seq, seq)
            pos += size
            continue
        size = sane(pos)
        if size is not None and intact(pos + size) is not None:
            damaged.append((pos, pos + size))
            pos += size
            continue
        if not any(data[pos:]):
            break  # reserved space
        nxt = next((q for q in range(pos + 1, end) if intact(q) is not None), None)
        if nxt is None:
            if last:
                tail_at = pos
            else:
                damaged.append((pos, end))
            break
        (damaged if any(data[pos:nxt]) else gaps).append((pos, nxt))
        pos = nxt
    notes = []
    for a, b in damaged:
        to = "its end" if b == end else f"the next intact record at offset {base + b}"
        notes.append(f"segment {seg_id}: damaged bytes from offset {base + a} to {to} "
                     f"({b - a} bytes) skipped")
    for a, b in gaps:
        notes.append(f"segment {seg_id}: {b - a} zero bytes at offset {base + a} before "
                     f"intact records: a write a crash kept from the disk, not damage")
    return n, len(damaged), None if tail_at is None else tail_at + base, min_seq, max_seq, notes


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, max_size=30), st.integers(1, 80), DAMAGE, st.integers(0, 30),
       st.booleans(), st.sampled_from([0, 1000]), GAP)
def test_scan_matches_the_record_by_record_walk(records, runs, damage, cut, last, base, gap):
    data = damaged(build(records, runs), damage, cut, gap)
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


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["set", "tomb", "scan", "freeze"]),
                              st.sampled_from(["a", "b", "c", "d", "e", "ab", "b/1", "b/2"])), max_size=40))
def test_new_keys_sorted_in_later_read_as_if_sorted_in_at_once(ops):
    """The overlay's new keys join its sorted order at the next read of that order or removal
    from it (``Index.settle``): every scan, snapshot and tombstone sees the order a model has."""
    idx, model, n = Index(), {}, 0
    for op, key in ops:
        n += 1
        if op == "set":
            idx.set(key, (1, n, 10, n))
            model[key] = (1, n, 10, n)
        elif op == "tomb":
            idx.set(key, (1, n, 10, n), tomb=True)
            model.pop(key, None)
        elif op == "scan":
            assert idx.keys_from("b") == sorted(k for k in model if k.startswith("b"))
        else:
            fz = idx.freeze()
            assert fz.over_keys == sorted(model) and fz.over_vals == [model[k] for k in sorted(model)]
        assert {k: idx.get(k) for k in model} == model and len(idx) == len(model)
    assert idx.keys_from("") == sorted(model)
