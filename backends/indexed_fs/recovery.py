"""The rebuild: a data directory's segments and snapshots -> the in-memory keydir.

:func:`init_keydir` is what opening an ``indexed_fs`` store starts with (Bitcask's
``init_keydir``): it needs a medium (:mod:`backends.media`), not a store, so it can be run and
tested on its own.  Given a directory it

1. deletes the store's own temp files (a snapshot's, delta's or hint's name plus ``.tmp``: an
   atomic write interrupted before its rename, never a committed file; any other ``*.tmp`` is
   not the store's and stays) and hint files whose segment is gone;
2. opens every segment file: regular files named ``<id>.seg`` with 10 digits (9 in stores made
   before the names were widened), one per id, the id within u32.  Anything else named like a
   segment (a directory, a second name for an id, an id past ``MAX_SEGMENT_ID``) is not the
   store's: it is left alone, listed in :attr:`Keydir.foreign` and warned about, and new
   segments are numbered above it so that no name is taken twice;
3. chooses the newest snapshot that verifies (magic, sizes, CRC) and fits the segment files (it
   may not cover bytes past a segment's end, nor a segment newer than any file); a damaged or
   unfitting one is counted and noted, and the next older one tried; with none the rebuild is a
   full scan.  The CRC checks of the snapshot and its delta run on threads beside steps 4 and 5
   (:class:`_Checks`): the rebuild waits for them before it changes a file or returns, and
   starts over without a file that failed;
4. reads the log: with a snapshot, from the position it covers in its covered segment, every
   newer segment whole, and any segment the snapshot does not list whole; without one, every
   segment.  A sealed segment with a usable hint file (:mod:`.hint`: it verifies, names the
   segment and was made for the file's present size) is taken from the hint; the newest segment
   and any without a usable hint are walked with :func:`.segment.walk` (every record's header
   and CRC checked, in C where built).  The records past a snapshot are resolved in C into a
   sorted layer over its mapped base (:func:`.segment.resolve_sorted`,
   :meth:`.index.Index.load_delta`): a crash can leave a whole segment past the newest
   snapshot, and a Python object per record would make that open cost many times the clean
   one.  Where C is missing or a key cannot be held exactly (a NUL or non-ASCII byte), they are
   merged in Python instead (:meth:`.index.Index.merge`), with the same result.  With an index
   delta of that snapshot (:mod:`.delta`: it verifies, names the snapshot and its position, and
   covers the snapshot's segment no further than the file reaches), its covered segment is read
   only from the delta's position on, and the delta's mapped records become a layer of their
   own between the base and the walked records (:meth:`.index.Index.load_layer`: the base rows
   it supersedes are in its file, so nothing is joined or copied); a delta that does not fit
   is noted and ignored;
5. handles damage: the walk resynchronises past every damaged record on the next intact one
   (:func:`.segment.walk`), so damage costs the records it touched.  Each damaged range is
   counted, noted and kept in :attr:`Keydir.damaged_ranges`, and its segment copied whole into
   the quarantine (:mod:`.quarantine`); the bytes stay where they are.  Only the newest
   segment's tail is ever cut, and only a torn one: bytes past the last intact record with no
   intact record after them, copied into the quarantine first (where the quarantine is full
   they stay, and the segment takes no more appends: ``keep_sealed``).  A sealed segment that
   ends in damage takes no appends either.  Not damage: reserved space past the records (zeros,
   see :meth:`.segment.Segment.reserve`: the records end where it starts, and a sealed segment
   gives it back) and zeros followed by intact records (a write a crash kept from the disk while
   a later one reached it).  A whole segment file with not one intact record whose first bytes
   are no record header (nor zeros) was not written by the store: it is left alone as foreign,
   never adopted as the active segment, cut or deleted;
6. reports damage it cannot repair, per segment (:attr:`Keydir.damaged`, one warning line each):
   damaged ranges, a segment the snapshot's entries reach past the end of (truncated), and a
   segment that is gone while snapshot entries into it have no later record (missing); and one
   per foreign file.  A segment GC or compaction deleted is not missing: every entry into it was
   superseded by a durable record first.

An ``OSError`` while reading a segment propagates as itself, with the segment's file name.

Invariants of the result (:class:`Keydir`):

* every key's entry is its intact record with the highest ``seq`` (equal ``seq``: the one found
  later in log order, a compaction copy of the same write); a key whose winner is a tombstone is
  in ``index.tombs``, not among the values;
* ``next_seq`` is above every ``seq`` in the snapshot used and in every scanned record;
* every segment's ``min_seq`` is at most the ``seq`` of any record in it (0 = unknown), so the
  tombstone-drop rule of :mod:`.compaction` stays conservative;
* ``index.live`` counts, per segment, exactly the entries (values and live tombstones) pointing
  into it.

Safety argument:

* A snapshot is written only after everything before its covered position is durable, and every
  record appended later lies at or past that position (in the covered segment, or a newer one), so
  the walk from there sees every record the snapshot lacks; the highest ``seq`` wins whichever
  side it comes from.
* A hint lists what a walk of its sealed segment found when the segment was already durable and
  immutable, so taking the hint gives the walk's result; one that does not verify or was made for
  another file size is not taken.
* A segment is deleted (GC, compaction) only after every record that superseded or copied its
  live records is durable.  A snapshot entry into a deleted segment is therefore replaced by a
  record the walk finds; one that is not (counted as ``unresolved_snapshot_entries``) is treated
  as deleted rather than pointed at a missing file.  A snapshot tombstone into a deleted segment
  is dropped: no older value can remain where its own segment is gone.
* Only the newest segment takes appends that may be in flight at a crash; sealed segments were
  synced whole when sealed.  So only the newest segment's tail is cut, and only bytes with no
  intact record after them: a sync makes durable every byte before the position it syncs to, so
  no record after a torn one was acknowledged as durable (its acknowledgement would have covered
  the torn one too), and no intact record is cut whether acknowledged or not.  An intact record
  after a damaged one is kept: it is a complete write (acknowledged, or in flight, which may
  survive), and its CRC covers its key, value and seq.  Damage elsewhere is reported, not
  repaired, and its evidence copied before anything may delete it.
* Resynchronisation never returns a record that fails its CRC; it finds a record only where a
  whole record's CRC checks out.  A damaged record's own length is followed only where it leads
  to an intact record; otherwise every offset after it is tried, so a damaged length field does
  not hide the records behind it.  (Bytes inside a damaged record's value that happen to hold a
  whole intact record image are taken for one only when the header before them is damaged too.)
* A snapshot that fails its checks is never fatal and never deleted here: the next successful
  snapshot gets a higher number than any file present, and deletes the older ones.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from . import delta, hint, snapshot
from .index import Entry, Index
from .quarantine import DIR as QUARANTINE_DIR
from .quarantine import Quarantine
from .segment import (
    HEADER,
    HEADER_SIZE,
    MAX_KEY_LEN,
    MAX_SEGMENT_ID,
    MAX_VALUE_LEN,
    AnySegment,
    Records,
    ScanResult,
    list_segments,
    open_segment,
    resolve,
    resolve_all,
    resolve_sorted,
    walk,
    zeros_from,
)

if TYPE_CHECKING:
    from ..media import Medium

#: notes kept per scanned segment (a badly damaged segment would otherwise flood the stats)
NOTES_PER_SEGMENT = 20
#: the quarantine cap where the caller gives none (the store's ``quarantine_bytes`` default)
QUARANTINE_BYTES = 1 << 30


@dataclass
class Keydir:
    """The rebuilt keydir and the open segments, plus what the rebuild found on the way."""

    index: Index
    #: segment id -> open segment, oldest first; the caller owns (and closes) them
    segments: dict[int, AnySegment]
    #: the ``seq`` of the next write
    next_seq: int = 1
    #: the highest snapshot number present (usable or not): the next snapshot is numbered above it
    snapshot_number: int = 0
    #: file name of the snapshot the rebuild started from; ``None``: a full scan
    snapshot_used: str | None = None
    #: that snapshot's ``next_seq`` (``None``: none used)
    snapshot_next_seq: int | None = None
    snapshots_invalid: int = 0
    temp_files_removed: int = 0
    segments_scanned: int = 0
    #: sealed segments taken from their hint files instead of being walked
    hints_used: int = 0
    records_scanned: int = 0
    corrupt_records: int = 0
    torn_tail_truncated: int = 0
    #: bytes cut off the newest segment's torn tail
    truncated_bytes: int = 0
    unresolved_snapshot_entries: int = 0
    #: file name of the index delta the rebuild used; ``None``: none
    delta_used: str | None = None
    deltas_invalid: int = 0
    #: what the store needs to go on writing deltas of the snapshot used; ``None``: none until
    #: the next snapshot
    delta_state: delta.State | None = None
    notes: list[str] = field(default_factory=list)
    #: segment id -> what is wrong with it (damage the rebuild reports but cannot repair)
    damaged: dict[int, list[str]] = field(default_factory=dict)
    #: damage only the snapshot used shows (segments missing or truncated under its entries): a
    #: newer snapshot, made from the rebuilt index, would no longer show it
    damage_in_snapshot: bool = False
    #: every damaged byte range the walks found: (segment id, start, end)
    damaged_ranges: list[tuple[int, int, int]] = field(default_factory=list)
    #: files named like segments that the store did not write (or cannot tell it did), left alone
    #: and not among ``segments``: name -> why
    foreign: dict[str, str] = field(default_factory=dict)
    #: the id the next new segment gets: above every file named like a segment, foreign included
    next_segment_id: int = 1
    #: segments that take no appends (a damaged tail left in place): the store opens a new one
    keep_sealed: set[int] = field(default_factory=set)
    #: where damaged bytes are copied before they are cut or deleted
    quarantine: Quarantine | None = None

    def damage(self, seg_id: int, what: str, where: tuple[int, int] | None = None) -> None:
        self.damaged.setdefault(seg_id, []).append(what)
        if where is not None:
            self.damaged_ranges.append((seg_id, *where))

    def warnings(self) -> list[str]:
        """One line per damaged segment and per foreign file, for a person: what is wrong and
        what to do."""
        out = [damage_line(sid, "; ".join(whats)) for sid, whats in sorted(self.damaged.items())]
        out += [f"{name}: {why}; left alone — move it out of the store's directory"
                for name, why in sorted(self.foreign.items())]
        if self.quarantine is not None and self.quarantine.warning:
            out.append(self.quarantine.warning)
        return out

    def dead_segments(self, active_id: int) -> set[int]:
        """Segments other than ``active_id`` with no live entry: GC may delete them."""
        live = self.index.live
        return {s for s in self.segments if s != active_id and live.get(s, (0,))[0] == 0}

    def counters(self) -> dict[str, Any]:
        """The rebuild's findings under the names the store's ``stats()`` reports."""
        return dict(corrupt_records=self.corrupt_records,
                    torn_tail_truncated=self.torn_tail_truncated,
                    snapshots_invalid=self.snapshots_invalid, snapshot_used=self.snapshot_used,
                    records_scanned=self.records_scanned, hints_used=self.hints_used,
                    segments_scanned=self.segments_scanned, delta_used=self.delta_used,
                    deltas_invalid=self.deltas_invalid,
                    unresolved_snapshot_entries=self.unresolved_snapshot_entries,
                    damaged_segments=len(self.damaged), damaged_ranges=list(self.damaged_ranges),
                    foreign_files=sorted(self.foreign), warnings=self.warnings(),
                    rebuild_notes=list(self.notes))


def damage_line(seg_id: int, what: str) -> str:
    """The warning line for damage in segment ``seg_id``: what is wrong and what to run."""
    return (f"segment {seg_id}: {what} — run `bench verify --backend indexed_fs --opt path=DIR` "
            f"for the keys affected")


def init_keydir(medium: "Medium", quarantine: Quarantine | None = None) -> Keydir:
    """Rebuild the keydir of the store in ``medium`` (see the module notes for what and why);
    damaged bytes are copied into ``quarantine`` (default: ``QUARANTINE_BYTES`` at most) before
    a torn tail is cut.

    Segment files are opened (and stay open in the result); on any error they are closed again
    before it propagates.  ``OSError`` from the medium is not translated here: the caller knows
    which backend to name.
    """
    quarantine = quarantine or Quarantine(medium, QUARANTINE_BYTES)
    files = medium.list_files()
    removed = 0
    for name in files:
        if is_own_temp(name):
            medium.delete(name)
            removed += 1
    distrusted: set[str] = set()
    while True:
        try:
            kd = _rebuild(medium, _Checks(distrusted), files, quarantine)
        except _Unverified as bad:  # start over, checking that file first (it is then skipped)
            distrusted.add(bad.name)
            continue
        kd.temp_files_removed = removed
        return kd


def is_own_temp(name: str) -> bool:
    """Whether ``name`` is a temp file the store writes: a snapshot, delta or hint file's name
    with ``.tmp`` appended (:func:`.snapshot.durable_write`).  Any other ``*.tmp`` is not the
    store's, and is left alone."""
    base, dot, ext = name.rpartition(".")
    return dot == "." and ext == "tmp" and any(
        kind._NAME.match(base) for kind in (snapshot, delta, hint))


class _Unverified(Exception):
    """A snapshot or delta the rebuild went on with failed its CRC check: start over."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class _Checks:
    """The CRC checks of the snapshot and the delta the rebuild uses, on a thread of their own
    while the rebuild goes on with the files' contents.

    Why: the check reads the whole file, tens of MB for a million keys, and is most of a clean
    open; after a crash the walk of the log past the delta can run beside it on another core
    (crc32c releases the GIL).  One thread takes the files in turn: a second thread started
    while the first holds a core would wait for the GIL to start.  Why it is safe: the
    unchecked contents are only parsed into memory, every array bounds-checked against the
    file's size (:func:`.snapshot.decode`), and :meth:`wait` is called before the rebuild
    changes a file and before it returns.  A file that failed makes :meth:`wait` raise
    :class:`_Unverified`, and the rebuild starts over with that file in ``distrusted``: checked
    before use, where it fails as a damaged file always did (counted, noted, skipped).  Anything
    the rebuild raised meanwhile is put down to the damage.
    """

    def __init__(self, distrusted: set[str]):
        self.distrusted = distrusted
        self._todo: queue.SimpleQueue[tuple[str, Any] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._failed: list[str] = []

    def snapshot(self, medium: "Medium", number: int) -> snapshot.Snapshot:
        return self._read(medium, snapshot, number)

    def delta(self, medium: "Medium", base: int) -> delta.Delta:
        return self._read(medium, delta, base)

    def _read(self, medium: "Medium", kind: Any, number: int) -> Any:
        """File ``number`` of ``kind`` (the :mod:`.snapshot` or :mod:`.delta` module), parsed
        now and checked on the thread, or checked first if it failed before."""
        name = kind.file_name(number)
        data = snapshot.map_file(medium, name)
        if name in self.distrusted:
            return kind.decode(data, number)
        parsed = kind.decode(data, number, check=False)
        self._todo.put((name, data))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name="indexed_fs-open-check")
            self._thread.start()
        return parsed

    def _run(self) -> None:
        while (job := self._todo.get()) is not None:
            name, data = job
            try:
                ok = snapshot.crc_ok(data)
            except Exception:  # noqa: BLE001 - a file that cannot be read through is not trusted
                ok = False
            if not ok:
                self._failed.append(name)

    def wait(self) -> None:
        """Wait for every check asked for so far; :class:`_Unverified` if one failed."""
        if self._thread is not None:
            self._todo.put(None)
            self._thread.join()
            self._thread = None
        if self._failed:
            raise _Unverified(self._failed[0])


def _rebuild(medium: "Medium", checks: _Checks, files: list[str],
             quarantine: Quarantine) -> Keydir:
    """One attempt of :func:`init_keydir`, with the snapshot and delta checked by ``checks``."""
    kd = Keydir(Index(), {}, quarantine=quarantine)
    try:
        found = list_segments(medium, files)
        named = list_segments(medium, medium.listdir())  # directories too: no name is reused
        kd.next_segment_id = max((i for i in named if i <= MAX_SEGMENT_ID), default=0) + 1
        for sid, names in named.items():
            for name in set(names) - set(found.get(sid, ())):
                kd.foreign[name] = "named like a segment, but not a file"
        for sid, names in found.items():
            for name in names[1:]:
                kd.foreign[name] = f"a second file named like segment {sid} (beside {names[0]})"
            if sid > MAX_SEGMENT_ID:
                kd.foreign[names[0]] = f"named like a segment past the last id ({MAX_SEGMENT_ID})"
                continue
            kd.segments[sid] = open_segment(medium, sid, name=names[0])
        ids = list(kd.segments)
        for sid in hint.list_ids(medium):
            if sid not in found:  # left by a crash between deleting it and its segment
                for name in hint.names(sid):
                    medium.delete(name)
        snap = _choose_snapshot(medium, kd, ids, checks)
        _scan(medium, kd, snap, ids, checks)
        checks.wait()
        for sid in sorted({r[0] for r in kd.damaged_ranges}):  # evidence kept as found
            if sid in kd.segments:
                quarantine.keep(kd.segments[sid].name)
    except BaseException as exc:
        for seg in kd.segments.values():
            seg.close()
        if not isinstance(exc, _Unverified):
            checks.wait()  # an unchecked file that fails its CRC explains any error
        raise
    return kd


def _choose_snapshot(medium: "Medium", kd: Keydir, ids: list[int],
                     checks: _Checks) -> snapshot.Snapshot | None:
    """The newest snapshot that verifies and fits the segment files, else ``None``."""
    numbers = snapshot.list_numbers(medium)
    kd.snapshot_number = max(numbers, default=0)
    for number in numbers:
        try:
            snap = checks.snapshot(medium, number)
            cseg, coff = snap.covered
            if cseg in kd.segments and kd.segments[cseg].size < coff:
                kd.damage(cseg, f"truncated: the file ends at {kd.segments[cseg].size}, "
                                f"snapshot {snapshot.file_name(number)} covers it up to {coff}")
                raise ValueError(f"covers segment {cseg} up to {coff}, past its end")
            if not ids or cseg > ids[-1]:
                kd.damage(cseg, f"missing: snapshot {snapshot.file_name(number)} covers it "
                                f"up to {coff}")
                raise ValueError(f"covers segment {cseg}, newer than any segment file")
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            kd.snapshots_invalid += 1
            kd.notes.append(f"snapshot {snapshot.file_name(number)} unusable: {exc}")
            continue
        kd.snapshot_used = snapshot.file_name(number)
        return snap
    return None


def _choose_delta(medium: "Medium", kd: Keydir, snap: snapshot.Snapshot,
                  checks: _Checks) -> delta.Delta | None:
    """The delta of snapshot ``snap`` if there is one that verifies and fits, else ``None``
    (noted unless absent)."""
    if snap.number not in delta.list_bases(medium):
        return None
    try:
        dl = checks.delta(medium, snap.number)
        cseg, coff = snap.covered
        if dl.base_covered != snap.covered:
            raise ValueError(f"made for a snapshot covering {dl.base_covered}, not {snap.covered}")
        dseg, doff = dl.covered
        if dseg != cseg or doff < coff:
            raise ValueError(f"covers {dl.covered}, not past {snap.covered} in one segment")
        if kd.segments[cseg].size < doff:
            raise ValueError(f"covers segment {cseg} up to {doff}, past its end")
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        kd.deltas_invalid += 1
        kd.notes.append(f"delta {delta.file_name(snap.number)} unusable ({exc}); log walked "
                        f"from the snapshot's position")
        return None
    return dl


def _load_base(index: Index, snap: snapshot.Snapshot, ids: list[int]) -> list[tuple[str, int]]:
    """Adopt the snapshot's entries (those into existing segments) as the index base; return
    the keys (and segment ids) of entries into segments that no longer exist.  The segment
    table says whether any entry points into a missing segment: only then are the entries
    themselves looked at."""
    present = set(ids)
    counts = {sid: (info.entries, info.bytes) for sid, info in snap.segs.items()
              if sid in present}
    gone: list[tuple[str, int]] = []
    ok = None
    if any(info.entries and sid not in present for sid, info in snap.segs.items()):
        ok = np.isin(snap.cols[0], np.array(ids, np.uint32))
        where = np.flatnonzero(~ok).tolist()
        gone = [(k if isinstance(k, str) else k.decode("utf-8"), sid)
                for k, sid in zip((snap.keys[i] for i in where), snap.cols[0][where].tolist())]
    if isinstance(snap.keys, np.ndarray):
        index.load_base(snap.keys, snap.cols, ok, counts)
    else:  # keys with NUL in them: the slower dict path
        cols = [col.tolist() for col in snap.cols]
        rows = range(len(snap.keys)) if ok is None else np.flatnonzero(ok).tolist()
        for i in rows:
            dict.__setitem__(index.d, snap.keys[i], tuple(col[i] for col in cols))
        index.finish_scan()
    return gone


def _from_hint(medium: "Medium", kd: Keydir, seg: AnySegment, start: int) -> Records | None:
    """The records of sealed segment ``seg`` from ``start`` on, from its hint file; ``None``
    (noted) if the hint is unusable, and the segment is walked instead."""
    try:
        recs = hint.read(medium, seg.id, seg.size)
    except (ValueError, OSError) as exc:
        kd.notes.append(f"hint {hint.file_name(seg.id)} unusable ({exc}); segment walked")
        return None
    if start:
        keep = recs.offsets >= start
        if not keep.all():
            sel = np.flatnonzero(keep)
            keys = [np.asarray(k)[sel] if isinstance(k, np.ndarray) else
                    [k[i] for i in sel.tolist()] for k in recs.keys]
            recs = Records(recs.seg_id, recs.offsets[sel], recs.sizes[sel], recs.seqs[sel],
                           recs.flags[sel], keys)
    kd.hints_used += 1
    return recs


def _scan(medium: "Medium", kd: Keydir, snap: snapshot.Snapshot | None, ids: list[int],
          checks: _Checks) -> None:
    """Steps 4 and 5: walk the log past the snapshot (or all of it) into ``kd.index``; every
    file change waits for ``checks`` first."""
    index, segments = kd.index, kd.segments
    gone: list[tuple[str, int]] = []
    values: dict[str, Entry]
    tombs: dict[str, Entry]
    dl: delta.Delta | None = None
    if snap is not None:
        cseg, coff = snap.covered
        kd.next_seq = kd.snapshot_next_seq = snap.next_seq
        gone = _load_base(index, snap, ids)
        for key, e in snap.tombs.items():
            if e[0] in segments:
                index.set(key, e, tomb=True)
        for sid, seg in segments.items():
            info = snap.segs.get(sid)
            seg.min_seq = 0 if info is None else info.min_seq
        if index.takes_delta() and cseg in segments:
            dl = _choose_delta(medium, kd, snap, checks)
        if dl is not None:
            coff = dl.covered[1]
            kd.delta_used = delta.file_name(snap.number)
            kd.next_seq = max(kd.next_seq, dl.next_seq)
            seg = segments[cseg]
            seg.min_seq = min(seg.min_seq, dl.min_seq)
        plan = [(s, coff if s.id == cseg else 0) for s in segments.values()
                if s.id >= cseg or s.id not in snap.segs]
    else:
        plan = [(s, 0) for s in segments.values()]
        values, tombs = index.d, index.tombs  # filled in place, sorted once at the end

    last_id = ids[-1] if ids else None
    tail_min = 1 << 64
    hinted = set(hint.list_ids(medium))
    parts: list[Records] = []  # every segment's records read, resolved at once below
    seg = None
    try:
        for seg, start in plan:
            recs = None
            if seg.id != last_id and seg.id in hinted:  # sealed: its hint stands in for it
                recs = _from_hint(medium, kd, seg, start)
            if recs is not None:
                res = ScanResult(records=len(recs))
                end = seg.size
            else:
                stop = seg.data_end(start)
                data = seg.read_all(start, stop)  # read, not mapped: an I/O error is an OSError
                end = start + len(data)
                res, recs = walk(data, seg.id, start, seg.id == last_id, spans=True)
                foreign = start == 0 and _foreign(data, res)
                del data
                kd.segments_scanned += 1
                if foreign:  # not the store's: closed, left alone, never adopted or cut
                    kd.foreign[seg.name] = ("named like a segment, but holds no record of this "
                                            "store (its first bytes are no record header)")
                    del segments[seg.id]
                    seg.close()
                    continue
                if stop < getattr(seg, "file_size", stop) and res.tail_at is None \
                        and res.reserved_at is None:
                    res.reserved_at = end  # a hole to the end of the file: reserved, unwritten
            if res.reserved_at is not None:  # reserved space left untrimmed by a crash
                seg.size = res.reserved_at
                seg.zeroed = seg.size  # past it: written zeros and unwritten space, zero afresh
                if seg.id != last_id:
                    checks.wait()
                    seg.trim()
            parts.append(recs)
            if len(recs) and res.max_seq == 0:  # from a hint: the seq range of its records
                res.min_seq, res.max_seq = int(recs.seqs.min()), int(recs.seqs.max())
            kd.records_scanned += res.records
            kd.corrupt_records += res.corrupt
            kd.notes.extend(res.notes[:NOTES_PER_SEGMENT])
            if res.records:
                seg.min_seq = res.min_seq if start == 0 else min(seg.min_seq, res.min_seq)
                tail_min = min(tail_min, res.min_seq)
                kd.next_seq = max(kd.next_seq, res.max_seq + 1)
            elif start == 0:
                seg.min_seq = res.min_seq
            if res.tail_at is not None:  # the newest segment's torn tail: cut (see _cut_tail)
                checks.wait()
                _cut_tail(kd, seg, res.tail_at, end)
            for a, b in res.damaged:
                kd.damage(seg.id, f"damaged bytes at offsets [{a}, {b})"
                                  + (" to its end" if b == end else ""), (a, b))
            if res.damaged and res.damaged[-1][1] == end:
                kd.keep_sealed.add(seg.id)  # no appends after damage: they would look like it
    except OSError as exc:
        if exc.filename is None and seg is not None:
            exc.filename = seg.path  # propagates as itself, naming the file
        raise

    if snap is None:
        if not index.load_log(parts):  # keys numpy cannot hold exactly: record by record
            for recs in parts:
                resolve(recs, values, tombs)
            index.finish_scan()
    else:
        resolved = resolve_sorted(parts) if index.takes_delta() else None
        adopted = False
        if dl is not None:  # its own layer over the base, never merged at open
            adopted = dl.dead is not None and (
                not len(dl.dead) or int(dl.dead.max()) < index.base_rows())
            if adopted:
                # rows into deleted segments were never counted: their accounting is not taken
                index.load_layer(dl.res, dl.dead,
                                 {sid: v for sid, v in (dl.dead_live or {}).items()
                                  if sid in segments}, dl.value_live or {})
            else:  # no superseded rows recorded, or not of this base: joined with the base
                index.load_delta(dl.res)
        if resolved is not None and snap.covered[0] == last_id and len(plan) == 1:
            # the store goes on writing deltas of this snapshot: from the delta's position with
            # its records (the walked ones are walked again then), else from the log's end
            base = dict(base=snap.number, base_covered=snap.covered,
                        base_entries=len(snap.keys) + len(snap.tombs), mark=-kd.records_scanned,
                        base_keys=snap.keys, base_cols=snap.cols)
            if dl is not None:
                kd.delta_state = delta.State(pos=dl.covered, res=dl.res, min_seq=dl.min_seq,
                                             unwritten=False, dead=dl.dead if adopted else None,
                                             **base)
            else:
                kd.delta_state = delta.State(pos=(last_id, segments[last_id].size),
                                             res=resolved, min_seq=tail_min, **base)
        if resolved is not None:  # in C, no Python object per record (see index.load_delta)
            del parts
            index.load_delta(resolved)
        else:
            values, tombs = resolve_all(parts)
            del parts
            index.merge(values, tombs)
        unresolved = [(k, sid) for k, sid in gone if index.latest(k) is None]
        kd.unresolved_snapshot_entries = len(unresolved)
        if unresolved:
            kd.notes.append(
                f"{len(unresolved)} snapshot entries point into deleted segments and no later "
                f"record was found (e.g. {unresolved[0][0]!r}); treated as deleted")
            lost: dict[int, list[str]] = {}
            for k, sid in unresolved:
                lost.setdefault(sid, []).append(k)
            kd.damage_in_snapshot = True
            for sid, keys in lost.items():
                kd.damage(sid, f"missing, with {len(keys)} key(s) whose latest value it held "
                               f"(e.g. {keys[0]!r})")
        _check_reach(kd, snap)


def _foreign(data: bytes, res: ScanResult) -> bool:
    """Whether a whole segment file's walk says the store did not write it: not one intact
    record, and its first bytes are no sane record header (so not a first record torn by a
    crash either), and not all zeros (a new segment's reserved space)."""
    if res.records or len(data) < HEADER_SIZE or zeros_from(data, 0):
        return False
    _c, _seq, klen, vlen, flags = HEADER.unpack_from(data)
    return not (0 < klen <= MAX_KEY_LEN and vlen <= MAX_VALUE_LEN and flags <= 1)


def _cut_tail(kd: Keydir, seg: AnySegment, at: int, end: int) -> None:
    """Cut the newest segment's torn tail ``[at, end)`` off (durably), once its bytes are in
    the quarantine.  Where they cannot be (full), they stay: the segment then takes no more
    appends (``keep_sealed``) and the tail is reported like damage."""
    assert kd.quarantine is not None
    if not kd.quarantine.keep(seg.name, at, end):
        kd.keep_sealed.add(seg.id)
        kd.damage(seg.id, f"torn tail at offsets [{at}, {end}) left in place (not quarantined)",
                  (at, end))
        return
    seg.truncate(at)
    kd.torn_tail_truncated += 1
    kd.truncated_bytes += end - at
    kd.notes.append(f"segment {seg.id}: torn tail cut at {at} ({end - at} bytes, copied to "
                    f"{QUARANTINE_DIR}/)")


def _check_reach(kd: Keydir, snap: snapshot.Snapshot) -> None:
    """Report segments that the snapshot's entries reach past the end of: truncated files (a
    snapshot only points at bytes made durable before it was written)."""
    seg_col, off, size = snap.cols[0], snap.cols[1], snap.cols[2]
    if not len(seg_col) or not kd.segments:
        return
    if all(info.reach <= kd.segments[sid].size for sid, info in snap.segs.items()
           if sid in kd.segments):
        return  # the segment table's reach: no entry past its file's end
    ids = np.array(sorted(kd.segments), np.int64)
    sizes = np.array([kd.segments[i].size for i in ids.tolist()], np.int64)
    at = np.minimum(np.searchsorted(ids, seg_col.astype(np.int64)), len(ids) - 1)
    present = ids[at] == seg_col
    ends = off.astype(np.int64) + size.astype(np.int64)
    past = present & (ends > sizes[at])
    if not past.any():
        return
    kd.damage_in_snapshot = True
    for sid in np.unique(seg_col[past]).tolist():
        mine = past & (seg_col == sid)
        kd.damage(sid, f"truncated: the file ends at {kd.segments[sid].size}, "
                       f"{int(mine.sum())} snapshot entries reach to {int(ends[mine].max())}")
