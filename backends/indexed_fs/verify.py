"""Verification of an ``indexed_fs`` data directory: every record's CRC and every snapshot, and
which keys the damage holds.

Read-only: unlike opening the store (:mod:`.recovery`), nothing is cut, trimmed or deleted, so a
damaged directory can be inspected before anything is repaired.  :func:`verify` takes a medium and
returns a :class:`Report`; :func:`verify_path` takes the directory and holds the store's lock
meanwhile, so a running writer is refused rather than misread.

The segments are walked record by record here, independently of :func:`.segment.walk` (the
rebuild's fast path, in C where built), with the rules the open applies: after damage the walk
goes on at the next intact record (a sane header whose CRC checks out, found by this module's
own search, :func:`_resync`), so one damaged record costs one record here as it does there;
zeros after the records are reserved space and zeros before intact records a write a crash lost
(notes, no damage); in the newest segment, damage that runs to the end of the file is a torn tail
(a write in flight at a crash, which the next open cuts off after copying it to ``quarantine/``),
a note.  Snapshots add what the log alone cannot show: a segment their entries point into that is
gone (missing), or that ends before their entries do (truncated).  Only the newest snapshot that
verifies is held to this, as an open uses only that one; an older one (left by a crash between a
new snapshot's rename and the deletion of the old) may point into segments deleted since, and is
a note.  So is a missing or truncated segment whose every entry was superseded by an intact
record: GC and compaction delete a segment only once that holds, and a crash can leave the
snapshot that still points into it (reporting it would be a false alarm after an ordinary crash).

Hint files (:mod:`.hint`) are checked too: each must verify, be made for its segment's present
size and list exactly the intact records the walk found.

Index deltas (:mod:`.delta`) too: each must verify and cover no more of its segment than the
records reach; a bad one is listed with the damaged snapshots (both are index files).

A key is reported for a damaged range when its newest known version lies there: an entry of the
snapshot an open uses, of its index delta or of the segment's hint file (written before any cut,
so it names what a truncation took), or the damaged record itself, with no intact record of a higher ``seq`` anywhere in the log; it is
*lost* when no intact version of it is left, else *rolled back* to the newest intact one.  The
damaged record's key is read from its header; where one byte of its header or key is damaged,
the CRC finds which (:func:`_repaired`), so the name reported is the one written.  A record whose
key cannot be read is reported with its segment and offset.  Nothing of this is ever returned as
data: it only names what the damage cost.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..base import BackendUnavailableError
from ..dir_lock import lock_dir
from ..media import is_remote_url, open_data_dir
from . import delta, hint, segment, snapshot
from .segment import HEADER, HEADER_SIZE, crc, segment_name, zeros_from

if TYPE_CHECKING:
    from ..media import Medium

#: keys listed per damaged range in a report line (the count is always complete)
KEYS_SHOWN = 20


@dataclass
class DamagedRange:
    """Bytes ``[start, end)`` of one segment that do not hold intact records (``end`` ``None``:
    the whole file is gone), why, and the keys whose newest version lay there."""

    segment: int
    start: int
    end: int | None
    what: str
    keys: list[str] = field(default_factory=list)
    #: the segment's file name (an old store's 9-digit one, or the one a new segment gets)
    file: str = ""

    def line(self) -> str:
        where = "whole file" if self.end is None else f"bytes {self.start}-{self.end}"
        keys = ", ".join(map(repr, self.keys[:KEYS_SHOWN]))
        more = f" and {len(self.keys) - KEYS_SHOWN} more" if len(self.keys) > KEYS_SHOWN else ""
        held = f"{len(self.keys)} key(s): {keys}{more}" if self.keys else "no key's newest version"
        return f"segment {self.segment} ({self.file or segment_name(self.segment)}), {where}: {self.what}; " \
               f"held {held}"


@dataclass
class Report:
    segments: int = 0
    records: int = 0
    snapshots: int = 0
    damaged: list[DamagedRange] = field(default_factory=list)
    #: ``file name: what is wrong`` per snapshot that fails its checks
    bad_snapshots: list[str] = field(default_factory=list)
    #: hint files checked, and ``file name: what is wrong`` per hint that fails its checks
    hints: int = 0
    bad_hints: list[str] = field(default_factory=list)
    #: index deltas checked, and ``file name: what is wrong`` per delta that fails its checks
    #: (listed among the damaged snapshots too: both are index files)
    deltas: int = 0
    bad_deltas: list[str] = field(default_factory=list)
    #: findings that are no damage (a torn tail, reserved space)
    notes: list[str] = field(default_factory=list)
    #: damaged keys with no intact version left (lost), and with an older one (rolled back to it)
    lost: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.damaged or self.bad_snapshots or self.bad_hints or self.bad_deltas)

    @property
    def damaged_keys(self) -> list[str]:
        return sorted({k for r in self.damaged for k in r.keys})


def _intact(data: bytes, mv: memoryview, pos: int) -> tuple[int, int, str] | None:
    """(size, seq, key) of the intact record at ``pos`` (sane header, inside ``data``, CRC
    matching), else None."""
    end = len(data)
    if pos + HEADER_SIZE > end:
        return None
    c, seq, klen, vlen, flags = HEADER.unpack_from(data, pos)
    if klen == 0 or klen > segment.MAX_KEY_LEN or vlen > segment.MAX_VALUE_LEN or flags > 1:
        return None
    size = HEADER_SIZE + klen + vlen
    if pos + size > end or crc(mv[pos + 4: pos + size]) != c:
        return None
    return size, seq, bytes(mv[pos + HEADER_SIZE: pos + HEADER_SIZE + klen]).decode("utf-8", "replace")


def _resync(data: bytes, mv: memoryview, pos: int) -> int:
    """The first offset after ``pos`` where an intact record starts, else ``len(data)``: this
    module's own search, byte by byte (zero runs skipped: a record's ``seq`` is never 0, so
    each record has a nonzero byte among its first 12)."""
    end = len(data)
    nonzero = np.flatnonzero(np.frombuffer(data, np.uint8, end - pos - 1, pos + 1)) + pos + 1 \
        if pos + 1 < end else np.zeros(0, np.int64)
    q, i = pos + 1, 0
    while q + HEADER_SIZE <= end:
        while i < len(nonzero) and nonzero[i] < q:
            i += 1
        if i == len(nonzero):
            return end
        q = max(q, int(nonzero[i]) - 11)
        if _intact(data, mv, q) is not None:
            return q
        q += 1
    return end


#: records up to this size have a damaged byte of their header or key found by their CRC (the
#: name of the key they held is then known for certain); larger ones are named as read
REPAIR_MAX = 64 << 10
#: how far into a damaged record (past its header) a damaged byte is looked for: the key
KEY_REACH = 256


def _damaged_record(data: bytes, start: int, stop: int) -> tuple[str | None, int, bool]:
    """What the damaged bytes ``[start, stop)`` held, as best the record at ``start`` tells:
    (its key or None when none can be read, its seq, whether that is certain).  Certain: the
    record, of its header's size or exactly filling the range, checks out with at most one of
    its header or key bytes changed (a single damaged byte, found by the CRC); otherwise the
    header is read as it is."""
    if start + HEADER_SIZE > stop:
        return None, -1, False
    c, seq, klen, vlen, flags = HEADER.unpack_from(data, start)
    sizes = {HEADER_SIZE + klen + vlen, stop - start}
    for size in sorted(s for s in sizes if HEADER_SIZE < s <= min(stop - start, REPAIR_MAX)):
        rec = bytearray(data[start:start + size])
        got = _repaired(rec, HEADER_SIZE + (klen if 0 < klen <= KEY_REACH else KEY_REACH))
        if got is not None:
            _c, seq, klen, _vlen, _flags = HEADER.unpack_from(got, 0)
            try:
                return bytes(got[HEADER_SIZE:HEADER_SIZE + klen]).decode("utf-8"), seq, True
            except UnicodeDecodeError:
                return None, seq, False
    if 0 < klen <= segment.MAX_KEY_LEN and start + HEADER_SIZE + klen <= stop:
        try:
            return data[start + HEADER_SIZE:start + HEADER_SIZE + klen].decode("utf-8"), seq, False
        except UnicodeDecodeError:
            pass
    return None, seq, False


def _repaired(rec: bytearray, reach: int) -> bytearray | None:
    """``rec`` with at most one byte among its first ``reach`` changed so that it is an intact
    record of exactly ``len(rec)`` bytes (the stored CRC itself may be the damaged byte), else
    None.  Used only to name what damage held, never to return data."""
    def sane(r: bytearray) -> bool:
        _c, _s, klen, vlen, flags = HEADER.unpack_from(r, 0)
        return 0 < klen and HEADER_SIZE + klen + vlen == len(r) and flags <= 1

    stored = int.from_bytes(rec[:4], "little")
    diff = stored ^ crc(bytes(rec[4:]))
    if sane(rec) and sum((diff >> (8 * i)) & 0xFF != 0 for i in range(4)) <= 1:
        return rec  # only (one byte of) the stored CRC is damaged
    for i in range(4, min(reach, len(rec))):
        old = rec[i]
        for v in range(256):
            if v == old:
                continue
            rec[i] = v
            if crc(bytes(rec[4:])) == stored and sane(rec):
                return rec
        rec[i] = old
    return None


def _foreign(data: bytes) -> bool:
    """Whether a file named like a segment was not written by the store: not one intact record,
    and its first bytes neither a sane record header (a first record torn by a crash) nor zeros
    (a new segment's reserved space)."""
    if len(data) < HEADER_SIZE or zeros_from(data, 0):
        return False
    _c, _seq, klen, vlen, flags = HEADER.unpack_from(data, 0)
    if 0 < klen <= segment.MAX_KEY_LEN and vlen <= segment.MAX_VALUE_LEN and flags <= 1:
        return False
    mv = memoryview(data)
    return _intact(data, mv, 0) is None and _resync(data, mv, 0) == len(data)


def _walk(data: bytes, sid: int, newest: bool, report: Report,
          intact: dict[str, int], damaged: list[tuple[DamagedRange, dict[str, int]]],
          found: dict[int, int]) -> int:
    """Check every record of one segment (``found``: offset -> seq of each intact one), going
    on after damage at the next intact record (:func:`_resync`); return where its records end.

    The bytes between two intact records (or after the last) are classed as the open classes
    them: zeros to the end are reserved space and zeros before an intact record a write lost
    in a crash (both notes, no damage); anything else running to the end of the newest segment
    is a torn tail (a note: the open cuts it, after copying it to ``quarantine/``); the rest is
    damage, with what the record at its start held."""
    mv = memoryview(data)
    end, pos, records_end = len(data), 0, 0
    while pos < end:
        rec = _intact(data, mv, pos)
        if rec is not None:
            size, seq, key = rec
            report.records += 1
            found[pos] = seq
            if seq > intact.get(key, -1):
                intact[key] = seq
            pos += size
            records_end = pos
            continue
        nxt = _resync(data, mv, pos)
        if not np.frombuffer(data, np.uint8, nxt - pos, pos).any():  # zeros, read in place
            if nxt == end:
                if pos < end:
                    report.notes.append(f"segment {sid}: {end - pos} bytes of reserved space "
                                        f"(zeros) after the records at {pos}")
            else:
                report.notes.append(f"segment {sid}: {nxt - pos} bytes of zeros at {pos} before "
                                    f"intact records: a write lost in a crash, not damage")
        elif nxt == end and newest:
            report.notes.append(f"segment {sid}: torn tail from offset {pos} ({end - pos} bytes): "
                                f"a write in flight at a crash, cut off by the next open")
        else:
            key, seq, certain = _damaged_record(data, pos, nxt)
            _c, _s, klen, vlen, flags = HEADER.unpack_from(data, pos) if pos + HEADER_SIZE <= end \
                else (0, 0, 0, 0, 0)
            whole = 0 < klen and flags <= 1 and pos + HEADER_SIZE + klen + vlen == nxt
            what = "record fails its CRC" if whole else "unreadable from here to the end" \
                if nxt == end else f"damaged bytes (the walk goes on at {nxt})"
            if key is None:
                what += "; its key cannot be read"
            elif not (certain or whole):
                what += f"; its key read as {key!r} from a damaged header"
            damaged.append((DamagedRange(sid, pos, nxt, what), {key: seq} if key is not None else {}))
        pos = nxt
    return records_end


def _check_hint(medium: "Medium", name: str, sid: int, size: int, found: dict[int, int],
                report: Report) -> "segment.Records | None":
    """A hint must verify (CRC, layout), be made for the segment's present size, and list
    exactly the intact records the walk found (offset and seq); else it is a bad hint (the
    rebuild would ignore it and walk the segment, but the mismatch shows the files changed).
    Returns what it lists when its CRC checks out, made for this size or not: a hint written
    before the segment was cut short still names the records the cut took."""
    report.hints += 1
    try:
        data = medium.read_file(name)
        recs = hint.decode(data, sid, size)
    except (ValueError, OSError) as exc:
        report.bad_hints.append(f"{name}: {exc}")
        try:
            return hint.decode(data, sid)
        except (ValueError, UnboundLocalError):
            return None
    listed = dict(zip(recs.offsets.tolist(), recs.seqs.tolist()))
    if listed != found:
        wrong = sum(1 for off, seq in listed.items() if found.get(off) != seq)
        report.bad_hints.append(
            f"{name}: lists {len(listed)} records, the segment holds {len(found)} intact ones "
            f"({wrong} listed that do not match one)")
    return recs


def verify(medium: "Medium") -> Report:
    """Check the store in ``medium`` (see the module notes); nothing is changed."""
    report = Report()
    intact: dict[str, int] = {}  # key -> highest seq of an intact record
    damaged: list[tuple[DamagedRange, dict[str, int]]] = []  # range, claims: key -> seq
    files = set(medium.list_files())
    segs = segment.list_segments(medium, sorted(files))
    ids = list(segs)
    ends: dict[int, int] = {}  # segment id -> where its intact records end
    hinted = set(hint.list_ids(medium))
    hinted_records: dict[int, "segment.Records"] = {}  # for naming what damage cost
    # the newest segment the store wrote (a foreign file may carry a higher id); what is read
    # to find it is kept for the walk below, so no segment is read twice
    read_ahead: dict[int, bytes] = {}
    newest = None
    for sid in reversed(ids):
        read_ahead[sid] = medium.read_file(segs[sid][0])
        if not _foreign(read_ahead[sid]):
            newest = sid
            break
    for sid, names in segs.items():
        for other in names[1:]:
            report.notes.append(f"{other}: a second file named like segment {sid}; not the "
                                f"store's (it reads {names[0]}), left alone")
        data = read_ahead.pop(sid) if sid in read_ahead else medium.read_file(names[0])
        if _foreign(data):
            report.notes.append(f"{names[0]}: named like a segment, but holds no record of this "
                                f"store (not one intact record, no record header at its start): "
                                f"not the store's, left alone by it")
            continue
        found: dict[int, int] = {}
        first = len(damaged)
        ends[sid] = _walk(data, sid, sid == newest, report, intact, damaged, found)
        for rng, _claims in damaged[first:]:
            rng.file = names[0]
        report.segments += 1
        if sid in hinted:
            name = next((n for n in hint.names(sid) if n in files), None)
            if name is not None:
                listed = _check_hint(medium, name, sid, len(data), found, report)
                if listed is not None:
                    hinted_records[sid] = listed
        del data
    for sid in sorted(hinted - set(ids)):
        name = next((n for n in hint.names(sid) if n in files), hint.file_name(sid))
        report.notes.append(f"{name}: a hint whose segment is gone (left by a "
                            f"crash while both were deleted; the next open deletes it)")

    missing: dict[int, DamagedRange] = {}
    truncated: dict[int, DamagedRange] = {}
    claims: dict[int, dict[str, int]] = {}  # id(range) -> key -> seq, for ranges made below

    def claim(keys, cols, source: str, missing_too: bool = True) -> None:
        """Index entries (keys; segment, offset, size, seq columns) name the keys of what they
        point into: a damaged range, a segment that is gone, or bytes past a segment's records."""
        if not isinstance(keys, list):
            keys = [k.decode("utf-8") for k in keys.tolist()]
        seg_col, off_col, size_col, seq_col = (np.asarray(c).tolist() for c in cols)
        for key, sid, off, size, seq in zip(keys, seg_col, off_col, size_col, seq_col):
            if sid not in ends:
                if not missing_too:
                    continue
                rng = missing.setdefault(sid, DamagedRange(sid, 0, None, "missing"))
            else:
                rng = next((r for r, _ in damaged
                            if r.segment == sid and r.start <= off < (r.end or 0)), None)
                if rng is None and off + size > ends[sid]:
                    rng = truncated.setdefault(sid, DamagedRange(
                        sid, ends[sid], ends[sid], f"truncated: {source} entries reach past the "
                                                   f"end of its records"))
                    rng.end = max(rng.end or 0, off + size)
                if rng is None:
                    continue  # an intact record (or what the log replaced later)
            c = claims.setdefault(id(rng), {})
            c[key] = max(c.get(key, -1), seq)

    used: str | None = None  # the newest snapshot that verifies: the one an open starts from
    for number in snapshot.list_numbers(medium):
        name = snapshot.file_name(number)
        try:
            snap = snapshot.read(medium, number)
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            report.bad_snapshots.append(f"{name}: {exc}")
            continue
        report.snapshots += 1
        if used is not None:  # what the open would use is newer: this one only awaits deletion
            report.notes.append(f"{name}: older than {used}, which an open uses; left by a "
                                f"crash before it was deleted, and deleted by the next snapshot")
            continue
        cseg, coff = snap.covered
        if cseg in ends and ends[cseg] >= coff:
            used = name  # it fits the segment files: the rebuild takes it (else an older one)
        if cseg not in ends:
            rng = missing.setdefault(cseg, DamagedRange(cseg, 0, None, "missing"))
            claims.setdefault(id(rng), {})
            rng.what = f"missing (snapshot {name} covers it up to offset {coff})"
        elif ends[cseg] < coff:
            report.bad_snapshots.append(f"{name}: covers segment {cseg} up to offset {coff}, "
                                        f"past the end of its records at {ends[cseg]}")
        claim(snap.keys, snap.cols, "snapshot")
    used_delta = _check_deltas(medium, ends, report, used)
    if used_delta is not None:
        claim(used_delta.res.keys, used_delta.res.cols, "index delta")
    for sid, recs in hinted_records.items():
        claim([k.decode("utf-8", "replace") for k in recs.key_bytes()],
              (np.full(len(recs), sid), recs.offsets, recs.sizes, recs.seqs), "hint", missing_too=False)
    for rng, c in damaged:
        for key, seq in claims.get(id(rng), {}).items():
            c[key] = max(c.get(key, -1), seq)
    for rng in list(missing.values()) + list(truncated.values()):
        rng.keys = sorted(k for k, seq in claims.get(id(rng), {}).items() if seq > intact.get(k, -1))
        if rng.keys:
            damaged.append((rng, claims.get(id(rng), {})))
        else:  # GC or compaction deleted it once a durable record superseded every entry
            report.notes.append(f"segment {rng.segment}: {rng.what}, but every entry the index "
                                f"files have into it was superseded by an intact record: nothing "
                                f"is lost (a segment GC or compaction removed after the snapshot)")

    for rng, c in sorted(damaged, key=lambda rc: (rc[0].segment, rc[0].start)):
        rng.keys = sorted(k for k, seq in c.items() if seq > intact.get(k, -1))
        report.damaged.append(rng)
    report.lost = sorted(k for k in report.damaged_keys if k not in intact)
    report.rolled_back = sorted(k for k in report.damaged_keys if k in intact)
    return report


def _check_deltas(medium: "Medium", ends: dict[int, int], report: Report,
                  used: str | None) -> "delta.Delta | None":
    """An index delta must verify (CRC, layout), and the delta of the snapshot an open uses
    (``used``) cover no more of its segment than its records reach.  One of another snapshot
    is stale (left by a crash before the next snapshot deleted it), noted only: an open
    ignores it.  Its entries point at records of the log, which the walk above checked."""
    adopted = None  # the delta of the snapshot an open uses, as an open would take it
    for base in delta.list_bases(medium):
        name = delta.file_name(base)
        try:
            dl = delta.read(medium, base)
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            report.bad_deltas.append(f"{name}: {exc}")
            continue
        report.deltas += 1
        if dl.dead is not None and len(dl.dead) > 1 and \
                not (np.diff(dl.dead.astype(np.int64)) > 0).all():
            report.bad_deltas.append(f"{name}: the snapshot rows it supersedes are not "
                                     f"ascending (written wrong; an open would mark others)")
            continue
        if used != snapshot.file_name(base):
            report.notes.append(f"{name}: not of the snapshot an open uses (left by a crash "
                                f"before the next snapshot deleted it; an open ignores it)")
            continue
        adopted = dl  # its entries name durable records, whether an open could still take it
        dseg, doff = dl.covered
        if ends.get(dseg, -1) < doff:
            report.bad_deltas.append(f"{name}: covers segment {dseg} up to offset {doff}, past "
                                     f"the end of its records at {ends.get(dseg)}")
    report.bad_snapshots.extend(report.bad_deltas)
    return adopted


def verify_path(path: str) -> Report:
    """:func:`verify` the store at ``path`` (a directory, ``nfs://`` or ``hdfs://`` URL) under its
    lock."""
    if not is_remote_url(path) and not os.path.isdir(os.path.expanduser(path)):
        raise BackendUnavailableError(f"backend 'indexed_fs': there is no store at {path} (not a "
                                      f"directory); give the store's --opt path=DIR")
    medium = open_data_dir("indexed_fs", path)
    try:
        names = medium.list_files()
        if not segment.list_segments(medium, names) and not any(n.startswith("snap-") for n in names):
            raise BackendUnavailableError(f"backend 'indexed_fs': {path} holds no indexed_fs store "
                                          f"(no segment or snapshot file); give the store's "
                                          f"--opt path=DIR")
        lock = lock_dir("indexed_fs", medium)
        try:
            return verify(medium)
        finally:
            lock.release()
    finally:
        medium.close()
