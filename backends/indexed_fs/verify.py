"""Verification of an ``indexed_fs`` data directory: every record's CRC and every snapshot, and
which keys the damage holds.

Read-only: unlike opening the store (:mod:`.recovery`), nothing is cut, trimmed or deleted, so a
damaged directory can be inspected before anything is repaired.  :func:`verify` takes a medium and
returns a :class:`Report`; :func:`verify_path` takes the directory and holds the store's lock
meanwhile, so a running writer is refused rather than misread.

The segments are walked record by record here, independently of :func:`.segment.walk` (the
rebuild's fast path), with the same rules: a sane header with a bad CRC is a damaged record,
skipped by its length; a header that cannot be real damages the rest of the file; space of zeros
after the records is reserved space, not damage; and in the newest segment, damage that runs to
the end of the file is a torn tail (a write in flight at a crash, which the next open cuts off),
reported as a note.  Snapshots add what the log alone cannot show: a segment their entries point
into that is gone (missing), or that ends before their entries do (truncated).  Only the newest
snapshot that verifies is held to this, as an open uses only that one; an older one (left by a
crash between a new snapshot's rename and the deletion of the old) may point into segments
deleted since, and is a note.

Hint files (:mod:`.hint`) are checked too: each must verify, be made for its segment's present
size and list exactly the intact records the walk found.

Index deltas (:mod:`.delta`) too: each must verify and cover no more of its segment than the
records reach; a bad one is listed with the damaged snapshots (both are index files).

A key is reported for a damaged range when its newest known version lies there: a snapshot entry
or the damaged record itself (its header read as is, unverified), with no intact record of a
higher ``seq`` anywhere in the log.
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
from .segment import HEADER, HEADER_SIZE, crc, list_segment_ids, segment_name, zeros_from

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

    def line(self) -> str:
        where = "whole file" if self.end is None else f"bytes {self.start}-{self.end}"
        keys = ", ".join(map(repr, self.keys[:KEYS_SHOWN]))
        more = f" and {len(self.keys) - KEYS_SHOWN} more" if len(self.keys) > KEYS_SHOWN else ""
        held = f"{len(self.keys)} key(s): {keys}{more}" if self.keys else "no key's newest version"
        return f"segment {self.segment} ({segment_name(self.segment)}), {where}: {self.what}; " \
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

    @property
    def ok(self) -> bool:
        return not (self.damaged or self.bad_snapshots or self.bad_hints or self.bad_deltas)

    @property
    def damaged_keys(self) -> list[str]:
        return sorted({k for r in self.damaged for k in r.keys})


def _walk(data: bytes, sid: int, newest: bool, report: Report,
          intact: dict[str, int], damaged: list[tuple[DamagedRange, dict[str, int]]],
          found: dict[int, int]) -> int:
    """Check every record of one segment (``found``: offset -> seq of each intact one); return
    where its records end."""
    mv = memoryview(data)
    end, pos = len(data), 0
    bad_records: list[tuple[int, int, str, int]] = []
    tail: int | None = None
    while pos < end:
        if pos + HEADER_SIZE > end:
            tail = pos
            break
        c, seq, klen, vlen, flags = HEADER.unpack_from(data, pos)
        if klen == 0 or klen > segment.MAX_KEY_LEN or vlen > segment.MAX_VALUE_LEN or flags > 1:
            tail = pos
            break
        size = HEADER_SIZE + klen + vlen
        if pos + size > end:
            tail = pos
            break
        key = bytes(mv[pos + HEADER_SIZE: pos + HEADER_SIZE + klen]).decode("utf-8", "replace")
        if crc(mv[pos + 4: pos + size]) == c:
            report.records += 1
            found[pos] = seq
            if seq > intact.get(key, -1):
                intact[key] = seq
        else:
            bad_records.append((pos, size, key, seq))
        pos += size
    records_end = pos if tail is None else tail
    if tail is not None and zeros_from(data, tail):
        if tail < end:
            report.notes.append(f"segment {sid}: {end - tail} bytes of reserved space (zeros) "
                                f"after the records at {tail}")
        tail = None
    if newest and bad_records and tail is None and sum(bad_records[-1][:2]) == records_end \
            and records_end == end:
        tail = bad_records.pop()[0]  # the last record of the newest file, torn
    if tail is not None and newest:
        report.notes.append(f"segment {sid}: torn tail from offset {tail} ({end - tail} bytes): "
                            f"a write in flight at a crash, cut off by the next open")
    elif tail is not None:
        damaged.append((DamagedRange(sid, tail, end, "unreadable from here to the end"), {}))
    for pos, size, key, seq in bad_records:
        damaged.append((DamagedRange(sid, pos, pos + size, "record fails its CRC"), {key: seq}))
    return records_end


def _check_hint(medium: "Medium", sid: int, size: int, found: dict[int, int],
                report: Report) -> None:
    """A hint must verify (CRC, layout), be made for the segment's present size, and list
    exactly the intact records the walk found (offset and seq); else it is a bad hint (the
    rebuild would ignore it and walk the segment, but the mismatch shows the files changed)."""
    name = hint.file_name(sid)
    report.hints += 1
    try:
        recs = hint.decode(medium.read_file(name), sid, size)
    except (ValueError, OSError) as exc:
        report.bad_hints.append(f"{name}: {exc}")
        return
    listed = dict(zip(recs.offsets.tolist(), recs.seqs.tolist()))
    if listed != found:
        wrong = sum(1 for off, seq in listed.items() if found.get(off) != seq)
        report.bad_hints.append(
            f"{name}: lists {len(listed)} records, the segment holds {len(found)} intact ones "
            f"({wrong} listed that do not match one)")


def verify(medium: "Medium") -> Report:
    """Check the store in ``medium`` (see the module notes); nothing is changed."""
    report = Report()
    intact: dict[str, int] = {}  # key -> highest seq of an intact record
    damaged: list[tuple[DamagedRange, dict[str, int]]] = []  # range, claims: key -> seq
    ids = list_segment_ids(medium)
    ends: dict[int, int] = {}  # segment id -> where its intact records end
    hinted = set(hint.list_ids(medium))
    for sid in ids:
        data = medium.read_file(segment_name(sid))
        found: dict[int, int] = {}
        ends[sid] = _walk(data, sid, sid == ids[-1], report, intact, damaged, found)
        report.segments += 1
        if sid in hinted:
            _check_hint(medium, sid, len(data), found, report)
        del data
    for sid in sorted(hinted - set(ids)):
        report.notes.append(f"{hint.file_name(sid)}: a hint whose segment is gone (left by a "
                            f"crash while both were deleted; the next open deletes it)")

    missing: dict[int, DamagedRange] = {}
    truncated: dict[int, DamagedRange] = {}
    claims: dict[int, dict[str, int]] = {}  # id(range) -> key -> seq, for ranges made below
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
        keys = snap.keys if isinstance(snap.keys, list) else \
            [k.decode("utf-8") for k in snap.keys.tolist()]
        seg_col, off_col, size_col, seq_col = (c.tolist() for c in snap.cols)
        for key, sid, off, size, seq in zip(keys, seg_col, off_col, size_col, seq_col):
            if sid not in ends:
                rng = missing.setdefault(sid, DamagedRange(sid, 0, None, "missing"))
            else:
                rng = next((r for r, _ in damaged
                            if r.segment == sid and r.start <= off < (r.end or 0)), None)
                if rng is None and off + size > ends[sid]:
                    rng = truncated.setdefault(sid, DamagedRange(
                        sid, ends[sid], ends[sid], "truncated: snapshot entries reach past the "
                                                   "end of its records"))
                    rng.end = max(rng.end or 0, off + size)
                if rng is None:
                    continue  # an intact record (or what the log replaced later)
            c = claims.setdefault(id(rng), {})
            c[key] = max(c.get(key, -1), seq)
    _check_deltas(medium, ends, report, used)
    for rng, c in damaged:
        for key, seq in claims.get(id(rng), {}).items():
            c[key] = max(c.get(key, -1), seq)
    for rng in list(missing.values()) + list(truncated.values()):
        damaged.append((rng, claims.get(id(rng), {})))

    for rng, c in sorted(damaged, key=lambda rc: (rc[0].segment, rc[0].start)):
        rng.keys = sorted(k for k, seq in c.items() if seq > intact.get(k, -1))
        report.damaged.append(rng)
    return report


def _check_deltas(medium: "Medium", ends: dict[int, int], report: Report,
                  used: str | None) -> None:
    """An index delta must verify (CRC, layout), and the delta of the snapshot an open uses
    (``used``) cover no more of its segment than its records reach.  One of another snapshot
    is stale (left by a crash before the next snapshot deleted it), noted only: an open
    ignores it.  Its entries point at records of the log, which the walk above checked."""
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
        dseg, doff = dl.covered
        if ends.get(dseg, -1) < doff:
            report.bad_deltas.append(f"{name}: covers segment {dseg} up to offset {doff}, past "
                                     f"the end of its records at {ends.get(dseg)}")
    report.bad_snapshots.extend(report.bad_deltas)


def verify_path(path: str) -> Report:
    """:func:`verify` the store at ``path`` (a directory, ``nfs://`` or ``hdfs://`` URL) under its
    lock."""
    if not is_remote_url(path) and not os.path.isdir(os.path.expanduser(path)):
        raise BackendUnavailableError(f"backend 'indexed_fs': there is no store at {path} (not a "
                                      f"directory); give the store's --opt path=DIR")
    medium = open_data_dir("indexed_fs", path)
    try:
        lock = lock_dir("indexed_fs", medium)
        try:
            return verify(medium)
        finally:
            lock.release()
    finally:
        medium.close()
