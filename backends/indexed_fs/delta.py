"""Index deltas: the log records past an index snapshot, resolved, sorted and persisted, so that
an open (clean or after a crash) reads only the short tail past the delta.

A full snapshot (:mod:`.snapshot`) costs the whole index; writing one every few thousand records
would multiply the writes.  A delta holds only what changed since the *base* snapshot: the
winner per key (value entries and tombstones, highest seq; equal seq: the later record) among the
log records from the base's covered position ``C`` to the delta's own covered position ``P``, in
the active segment.  It is exactly what walking ``[C, P)`` at open would compute
(:func:`.segment.resolve_sorted`), computed ahead of time: every change to the index is an append
at the log's end (puts, deletes, compaction's copies), so base + delta + the records past ``P``
give the same index as base + the records past ``C``.  Tombstones hide base entries, as a
walked delete would.

File ``delta-NNNNNNNNN.idx`` (N: the base snapshot's number), rewritten whole each time the
store writes a delta: a 64-byte header (magic, base number, base covered segment and offset,
lowest seq among the records, records walked into it, and the counts of the two sections after
it), the base rows the delta supersedes (u32, ascending, padded to 8) with their accounting per
segment (id, entries, bytes: u64 each), then the snapshot layout (sorted fixed-width keys, one
column each of offset, seq (u64), segment, size (u32), tombstones), whose header holds ``P``
and the next seq, and one CRC over the whole file.  An open maps it and searches it in place
like the snapshot.

Why the superseded rows are stored: adopting the delta must mark dead every base entry a newer
record of the delta replaces.  Found at open, that is a join of the two sorted arrays, a pass
over the whole base (a million entries) that would cost more than the rest of a crash open;
found when the delta is written (:func:`superseded`, in the background), the open only clears
those rows in the base's mask and subtracts their accounting (:meth:`.index.Index.load_layer`).
The rows are a function of the base and the delta's records alone (the highest seq wins, equal:
the delta), so an open that uses them indexes exactly what the join would.  A delta whose base
keys are not a fixed-width array (a key with a NUL) records none (the count is all ones), and
an open joins.

Why one file rewritten rather than chunks: an open then maps one sorted array, one index layer
over the base; chunks would be one layer each for every lookup to search, or merged at open.
Its size is bounded: the store writes a full snapshot instead (and deletes the delta) once the
delta holds more entries than a quarter of the base or ``delta_records``, whichever is more; a
sealed segment gets a snapshot too.  A delta covers one segment (``C`` and ``P`` in the
active segment); past a rotation the next snapshot takes over.

When: the store writes a delta once ``delta_records`` records were appended past the newest one
(a thread woken by the write that reaches the count, so that little piles up while it waits).
The default, 8192, weighs the two costs it trades: a crash open walks about that many records
past the newest delta (plus those appended while it was being written: writers wait for the
delta thread once they are 1.25 times as far past it, see :mod:`.delta_scheduler`), a
small part of a segment's, and joins them with the index layers below, a cache miss or more
per record and layer, which is most of what a crash open costs beyond a clean one; and every
delta rewrites all changes since the snapshot, so a smaller value means more rewrites between
two snapshots, each up to a quarter of the snapshot's size (each joins only its new records
with the snapshot, so the rewrite is mostly a merge and a sequential write, in the
background).

Safety:

* A delta describes only durable records: the store syncs the log up to ``P`` before it walks
  ``[.., P)`` (the walk reads the records back with every CRC checked).
* Written like a snapshot: temp file, sync, rename, directory sync
  (:func:`.snapshot.durable_write`).  A crash before the rename leaves a ``*.tmp`` that the next
  open deletes, and the previous delta (or none) is used; one after the rename finds the new or
  the old file, each complete.  Either way every acknowledged write is in the log past what the
  delta used covers, and the open walks from there.
* An open uses a delta only if its CRC and layout verify, its base number and base position
  are those of the snapshot the open chose, it covers the snapshot's segment and that segment
  is at least ``P`` long; otherwise it is ignored and the log is walked from ``C``, as without
  deltas.  A delta of an older base is stale (that snapshot was replaced) and deleted by the next
  snapshot; a damaged one is never used.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import failpoints
from . import snapshot
from .index import Layer, join
from .segment import Resolved, numbered_files

try:  # the sorted join of two resolved parts (see _scan.c)
    from . import _scan
except ImportError:  # pragma: no cover - machines without a C compiler
    _scan = None

if TYPE_CHECKING:
    from ..media import Medium

AFTER_WRITE = failpoints.declare(
    "indexed_fs.delta.after_write",
    "a crash after the index delta's temp file is written and synced, before its rename: the "
    "next open deletes the temp file and uses the previous delta (or walks the log past the "
    "snapshot)")
AFTER_RENAME = failpoints.declare(
    "indexed_fs.delta.after_rename",
    "a crash after the index delta's rename, before the directory sync: the new delta or the "
    "previous one is found, each complete")

MAGIC = b"IFSDELT2"
#: magic, base snapshot number, base covered segment, base covered offset, min seq, records,
#: superseded base rows (_NO_ROWS: not recorded), segments in their accounting
_HEAD = struct.Struct("<8sQQQQQQQ")
_NAME = re.compile(r"^delta-(\d{9}|[1-9]\d{9,})\.idx$")
_NO_SEQ = (1 << 64) - 1
_NO_ROWS = (1 << 64) - 1


@dataclass
class Delta:
    """A delta file's contents: what it applies to, what it covers, the resolved records."""

    base: int  # the base snapshot's number
    base_covered: tuple[int, int]
    covered: tuple[int, int]  # P: the log position the delta covers up to
    next_seq: int
    min_seq: int  # the lowest seq among the records walked into it (_NO_SEQ: none)
    records: int  # log records walked into it
    res: Resolved
    #: the base rows ``res`` supersedes, ascending (``None``: not recorded, see the module notes)
    dead: np.ndarray | None = None
    #: their accounting: segment id -> (entries, record bytes)
    dead_live: dict[int, tuple[int, int]] | None = None
    #: the accounting of ``res``'s values (its segment table): segment id -> (entries, bytes)
    value_live: dict[int, tuple[int, int]] | None = None


@dataclass
class State:
    """A store's delta in the making: its base snapshot, the log position ``pos`` its records
    reach (in the active segment), those records resolved, their lowest seq, and ``mark``: the
    store's count of appended records as of ``pos`` (records past the delta file that an open
    walked count as appended before it: negative)."""

    base: int
    base_covered: tuple[int, int]
    base_entries: int
    pos: tuple[int, int]
    res: Resolved
    min_seq: int
    mark: int
    #: whether ``res`` holds records past the delta file on disk (or no delta file is there)
    unwritten: bool = True
    #: the base snapshot's sorted keys and columns (seg, off, size, seq), to find the rows a
    #: delta supersedes: the arrays the snapshot was written from, or its mapping after an
    #: open, held until the next snapshot; ``None``: not at hand, the delta records none
    base_keys: np.ndarray | list | None = None
    base_cols: tuple | None = None
    #: the base rows ``res`` supersedes, ascending (the delta file's list); ``None``: not known,
    #: the next delta joins all of ``res`` with the base rather than only the records past it
    dead: np.ndarray | None = None


def file_name(base: int) -> str:
    return f"delta-{base:09d}.idx"


def list_bases(medium: "Medium") -> list[int]:
    """Base numbers of the delta files present, ascending."""
    return numbered_files(medium, _NAME)


def empty() -> Resolved:
    e = np.zeros(0, np.uint64)
    return Resolved(np.zeros(0, "S1"), (e.astype(np.uint32), e, e.astype(np.uint32), e), [])


def entries(res: Resolved) -> int:
    return len(res.keys) + len(res.tombs)


def _find(keys: np.ndarray, key: str) -> int:
    kb = key.encode("utf-8")
    if not len(keys) or len(kb) > keys.dtype.itemsize:
        return -1
    i = int(keys.searchsorted(kb))
    return i if i < len(keys) and keys[i] == kb else -1


def merge(old: Resolved, new: Resolved) -> Resolved:
    """The winners of ``old``'s records followed by ``new``'s (the later part of the log), with
    the rule of :func:`.segment.resolve_all`: the higher seq wins, an equal seq the later
    record.  Neither input is changed (they may lie in a mapped file)."""
    if not entries(old):
        return new
    if not entries(new):
        return old
    w = max(old.keys.dtype.itemsize, new.keys.dtype.itemsize)
    ok = old.keys if old.keys.dtype.itemsize == w else old.keys.astype(f"S{w}")
    nk = new.keys if new.keys.dtype.itemsize == w else new.keys.astype(f"S{w}")
    oseq, nseq = old.cols[3], new.cols[3]
    okeep, nkeep = np.ones(len(ok), bool), np.ones(len(nk), bool)
    if len(ok) and len(nk) and _scan is not None:  # one forward pass over both, in C
        join(np.ascontiguousarray(nk), np.ascontiguousarray(nseq, np.uint64), nkeep,
             Layer(ok, old.cols, okeep))
    elif len(ok) and len(nk):
        at = np.minimum(ok.searchsorted(nk), len(ok) - 1)
        both = ok[at] == nk
        newer = both & (nseq >= oseq[at])
        okeep[at[newer]] = False
        nkeep[both & ~newer] = False
    tombs: dict[str, tuple[int, int, int, int]] = {}
    otombs = dict(old.tombs)
    for key, t in new.tombs:  # (each side holds a key as a value or a tombstone, not both)
        ot = otombs.pop(key, None)
        if ot is not None and ot[3] > t[3]:
            tombs[key] = ot
            continue
        i = _find(ok, key)
        if i >= 0 and okeep[i]:
            if int(oseq[i]) > t[3]:
                continue  # the older part's value has the higher seq
            okeep[i] = False
        tombs[key] = t
    for key, t in otombs.items():
        i = _find(nk, key)
        if i >= 0 and nkeep[i]:
            if int(nseq[i]) >= t[3]:
                continue
            nkeep[i] = False
        tombs[key] = t
    oall, nall = okeep.all(), nkeep.all()
    kk, nn = ok if oall else ok[okeep], nk if nall else nk[nkeep]
    pos = kk.searchsorted(nn)
    keys = np.insert(kk, pos, nn)
    dts = (np.uint32, np.uint64, np.uint32, np.uint64)
    cols = tuple(np.insert(np.asarray(oc if oall else oc[okeep], dt), pos,
                           np.asarray(nc if nall else nc[nkeep], dt))
                 for oc, nc, dt in zip(old.cols, new.cols, dts))
    return Resolved(keys, cols, sorted(tombs.items()))  # type: ignore[arg-type]


def superseded(res: Resolved, base_keys: np.ndarray | list | None, base_cols: tuple | None,
               dead: np.ndarray | None = None) -> tuple[Resolved, np.ndarray] | None:
    """The base rows that ``res`` (a delta's records) supersedes, ascending, and ``res``
    without the values the base outranks (a lower seq than the base entry of their key: they
    would never be the latest, and left in, their key would be live in both).  The rule and
    the join of :meth:`.index.Index.load_delta` (:func:`.index.join`): the higher seq wins, an
    equal one the delta.  ``dead``: rows already superseded by the delta's earlier records,
    carried into the result and not joined again, so that each delta joins only the records
    appended since the one before (their winners then merge with the earlier ones as
    :func:`merge` rules: a record that beats an earlier one beats the base row it beat).
    ``None`` when it cannot be done exactly here (no C join, or base keys not a fixed-width
    array)."""
    if _scan is None or not isinstance(base_keys, np.ndarray) or base_cols is None:
        return None
    alive = None
    if dead is not None and len(dead):
        alive = np.ones(len(base_keys), bool)
        alive[dead] = False
    base = Layer(base_keys, base_cols, alive)
    keep = np.ones(len(res.keys), bool)
    if len(res.keys) and len(base_keys):
        join(np.ascontiguousarray(res.keys), np.ascontiguousarray(res.cols[3], np.uint64), keep,
             base)
    for key, t in res.tombs:
        i = base.row(key)
        if i >= 0 and t[3] >= base.entry(i)[3]:
            base.kill(i)
    if not keep.all():
        res = Resolved(res.keys[keep], tuple(c[keep] for c in res.cols), res.tombs)  # type: ignore
    return res, np.flatnonzero(~base.alive).astype(np.uint32)


def dead_accounting(dead: np.ndarray, base_cols) -> dict[int, tuple[int, int]]:
    """The accounting of base rows ``dead``: segment id -> (entries, record bytes), as a
    snapshot's segment table counts them (:func:`.snapshot.seg_table`)."""
    ids, _, counts, nbytes, _ = snapshot.seg_table([np.asarray(c)[dead] for c in base_cols], {})
    return {int(i): (int(c), int(b)) for i, c, b in zip(ids, counts, nbytes)}


def encode(base: int, base_covered: tuple[int, int], covered: tuple[int, int], next_seq: int,
           min_seq: int, records: int, res: Resolved, dead: np.ndarray | None = None,
           dead_live: dict[int, tuple[int, int]] | None = None) -> list[bytes]:
    """The parts of the delta file of base snapshot ``base`` (see :func:`write`)."""
    if dead is None:
        head = _HEAD.pack(MAGIC, base, base_covered[0], base_covered[1], min(min_seq, _NO_SEQ),
                          records, _NO_ROWS, 0)
        prefix = [head]
    else:
        table = sorted((dead_live or {}).items())
        head = _HEAD.pack(MAGIC, base, base_covered[0], base_covered[1], min(min_seq, _NO_SEQ),
                          records, len(dead), len(table))
        rows = np.ascontiguousarray(dead, np.uint32).tobytes()
        live = np.array([(sid, c, b) for sid, (c, b) in table], np.uint64).tobytes()
        prefix = [head, rows, b"\0" * (-len(rows) % 8), live]
    return snapshot.encode(covered, next_seq, res.keys, res.cols, dict(res.tombs), {},
                           prefix=b"".join(prefix), narrow=False)


def write(medium: "Medium", base: int, base_covered: tuple[int, int], covered: tuple[int, int],
          next_seq: int, min_seq: int, records: int, res: Resolved,
          dead: np.ndarray | None = None,
          dead_live: dict[int, tuple[int, int]] | None = None) -> str:
    """Write the delta of base snapshot ``base`` durably (replacing the previous one); return
    its file name.  ``dead`` (with its accounting ``dead_live``): the base rows ``res``
    supersedes (:func:`superseded`); ``None``, not recorded."""
    parts = encode(base, base_covered, covered, next_seq, min_seq, records, res, dead, dead_live)
    name = file_name(base)
    snapshot.durable_write(medium, name, parts, AFTER_WRITE, AFTER_RENAME)
    return name


def decode(data, base: int, *, check: bool = True) -> Delta:
    """Verify and parse a delta file's bytes; ``ValueError`` if it is damaged in any way.  With
    ``check=False`` its CRC is the caller's to check (see :func:`.snapshot.decode`)."""
    if len(data) < _HEAD.size or data[:8] != MAGIC:
        raise ValueError("not a delta file of this format (bad magic or too short)")
    _, number, bseg, boff, min_seq, records, ndead, nlive = _HEAD.unpack_from(data)
    if number != base:
        raise ValueError(f"names base snapshot {number}, its file name {base}")
    start = _HEAD.size
    if ndead != _NO_ROWS:
        start += -(-4 * ndead // 8) * 8 + 24 * nlive
    if start > len(data):
        raise ValueError("delta sections do not add up to the file size")
    try:
        snap = snapshot.decode(data, base, start, check=check)
    except ValueError as exc:
        raise ValueError(str(exc).replace("snapshot", "delta")) from None
    if not isinstance(snap.keys, np.ndarray):
        raise ValueError("a delta holds fixed-width keys")
    dead = dead_live = None
    if ndead != _NO_ROWS:
        dead = np.frombuffer(data, np.uint32, ndead, _HEAD.size)
        table = np.frombuffer(data, np.uint64, 3 * nlive, start - 24 * nlive).reshape(-1, 3)
        dead_live = {sid: (c, b) for sid, c, b in table.tolist()}
    seg, off, size, seq = snap.cols
    res = Resolved(snap.keys, (seg, off, size, seq), sorted(snap.tombs.items()))
    value_live = {sid: (info.entries, info.bytes) for sid, info in snap.segs.items()}
    return Delta(number, (bseg, boff), snap.covered, snap.next_seq, min_seq, records, res, dead,
                 dead_live, value_live)


def read(medium: "Medium", base: int) -> Delta:
    """Map and verify the delta of base snapshot ``base``; ``ValueError`` if damaged."""
    return decode(snapshot.map_file(medium, file_name(base)), base)


def delete_other(medium: "Medium", keep: int | None, below: int | None = None) -> None:
    """Delete the delta files of every base but ``keep`` (stale: their snapshot was replaced),
    or with ``below`` only those of bases at or above it."""
    for b in list_bases(medium):
        if b != keep and (below is None or b >= below):
            try:
                medium.delete(file_name(b))
            except OSError:
                pass
