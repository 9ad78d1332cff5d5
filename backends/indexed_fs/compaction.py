"""Compaction ("merge"): rewrite the live records of mostly-dead sealed segments, then delete them.

Compaction works on a store only through :class:`CompactionTarget`, the few operations it
needs, which :class:`~.store.IndexedFSBackend` implements; it knows nothing else of the store.

Safety argument, step by step:

* Only sealed segments are compacted (:meth:`CompactionTarget.sealed_segments`): their bytes never
  change, so they are read without the store lock, and the whole pass holds the store's
  maintenance lock (:meth:`CompactionTarget.maintenance`), so no GC deletes a segment under it.
* A record is copied byte for byte (same ``seq``, same CRC) to the end of the log, and the index
  entry is switched to the copy only if it still points at the original — checked and switched
  under the store lock (:meth:`CompactionTarget.locked_log`), so a newer concurrent write always
  wins (compare-and-swap).
* The source segment is deleted only after the copies are synced (:meth:`CompactionTarget.flush`
  before :meth:`CompactionTarget.delete_dead_segments`), and never with damage in it unless a
  copy of it is in the store's quarantine first (the store's deleter sees to that; damage this
  pass's walk finds is reported to it, :meth:`CompactionTarget.report_damage`).  A damaged
  record is never copied (the walk checks every CRC and resynchronises past damage), so an
  index entry still pointing at one keeps its segment live.  A crash before that leaves both copies
  on disk; the rebuild keeps the one with the highest ``seq`` (equal: the later one, either is
  right).
* A live tombstone is dropped (not copied) only if every *other* segment's lowest ``seq`` is above
  the tombstone's, and so is the newest snapshot's ``next_seq``: then no older value of that key
  exists anywhere that could resurrect, and the snapshot an open may start from holds the
  tombstone, not an older value in a segment GC has deleted since (which the open would report
  as a missing segment).  Else it is copied like a value and dropped by a later compaction.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Iterable, Protocol, Sequence

from .. import failpoints
from .index import Entry
from .segment import FLAG_TOMBSTONE, scan

AFTER_COPY = failpoints.declare(
    "indexed_fs.compaction.after_copy",
    "a crash after compaction's copies are appended and synced, before the source segments are "
    "deleted: both copies are on disk, the rebuild keeps one (same seq, same bytes)")
AFTER_DELETE = failpoints.declare(
    "indexed_fs.compaction.after_delete",
    "a crash right after compaction deleted its source segments (and their hints): every live "
    "record is in its durable copy")

CHUNK = 512  # records checked and copied per lock hold: keeps concurrent writers moving

#: a record to append: ``(key, record size, seq, flags)``
RecordMeta = tuple[str, int, int, int]


class LockedLog(Protocol):
    """The store's log and index while its lock is held: valid only inside
    :meth:`CompactionTarget.locked_log`."""

    def latest(self, key: str) -> tuple[Entry, bool] | None:
        """The entry of ``key``'s latest record and whether it is a tombstone; ``None``: none."""

    def lowest_seq_outside(self, seg_id: int) -> int:
        """The lowest ``seq`` any segment but ``seg_id`` may hold (``2**64`` if there is none),
        or the newest snapshot's ``next_seq`` if lower."""

    def drop_tombstone(self, key: str) -> None:
        """Forget ``key``'s live tombstone (no older record of it exists any more)."""

    def append(self, data: bytes, metas: Sequence[RecordMeta]) -> int:
        """Append ``data`` (whole encoded records, described by ``metas``) and point the index
        at them; not yet durable."""


class CompactionTarget(Protocol):
    """What compaction needs from a store."""

    def maintenance(self) -> AbstractContextManager[object]:
        """Held for a whole pass: excludes GC and other passes (the deleters of segments)."""

    def sealed_segments(self) -> list[tuple[int, int, int]]:
        """``(segment id, size, live bytes)`` of every sealed segment, oldest first."""

    def read_sealed(self, seg_id: int) -> bytes | None:
        """All bytes of sealed segment ``seg_id``; ``None`` if it is gone."""

    def locked_log(self) -> AbstractContextManager[LockedLog]:
        """The store lock, held while the block runs."""

    def flush(self) -> None:
        """Make everything appended so far durable."""

    def delete_dead_segments(self, ids: Iterable[int]) -> list[int]:
        """Delete those of ``ids`` that are sealed and hold no live entry; the ids deleted.
        A segment known to hold damage is copied into the quarantine first, or kept."""

    def report_damage(self, seg_id: int, what: str) -> None:
        """Damage was found in segment ``seg_id``: keep its evidence before deleting it."""


def candidates(store: CompactionTarget, ratio: float) -> list[int]:
    """Sealed segments whose live bytes are below ``ratio`` of their size."""
    return [sid for sid, size, live in store.sealed_segments() if size > 0 and live < ratio * size]


def compact(store: CompactionTarget, ratio: float) -> dict[str, int]:
    """One compaction pass; returns what it did: ``segments`` compacted, records ``copied``,
    ``tombstones_dropped``, segments ``deleted``."""
    done = {"segments": 0, "copied": 0, "tombstones_dropped": 0, "deleted": 0}
    with store.maintenance():
        chosen = candidates(store, ratio)
        if not chosen:
            return done
        for sid in chosen:
            _rewrite(store, sid, done)
        store.flush()  # copies (and whatever superseded the rest) durable before any source goes
        failpoints.hit(AFTER_COPY)
        done["deleted"] = len(store.delete_dead_segments(chosen))
        failpoints.hit(AFTER_DELETE)
        done["segments"] = len(chosen)
    return done


def _rewrite(store: CompactionTarget, sid: int, done: dict[str, int]) -> None:
    data = store.read_sealed(sid)
    if data is None:
        return
    values: dict[str, Entry] = {}
    tombs: dict[str, Entry] = {}
    res = scan(data, sid, 0, False, values, tombs)  # the newest record of each key in it
    if res.corrupt:
        store.report_damage(sid, f"{res.corrupt} damaged range(s) found by compaction's walk")
    records = [(k, off, size, seq, 0) for k, (_s, off, size, seq) in values.items()]
    records += [(k, off, size, seq, FLAG_TOMBSTONE) for k, (_s, off, size, seq) in tombs.items()]
    for i in range(0, len(records), CHUNK):
        with store.locked_log() as log:
            others_min = log.lowest_seq_outside(sid)
            out, metas = [], []
            for key, off, size, seq, flags in records[i : i + CHUNK]:
                cur = log.latest(key)
                if cur is None or cur[0][0] != sid or cur[0][1] != off:
                    continue  # superseded: a newer write won
                if cur[1] and seq < others_min:
                    log.drop_tombstone(key)
                    done["tombstones_dropped"] += 1
                    continue
                out.append(data[off : off + size])
                metas.append((key, size, seq, flags))
            if out:
                log.append(b"".join(out), metas)
                done["copied"] += len(out)
