"""Compaction ("merge"): rewrite the live records of mostly-dead sealed segments, then delete them.

Safety argument, step by step:

* A record is copied byte for byte (same ``seq``, same CRC) to the end of the log, and the index
  entry is switched to the copy only if it still points at the original — checked and switched
  under the store lock, so a newer concurrent write always wins (compare-and-swap).
* The source segment is deleted only after the copies are synced.  A crash before that leaves
  both copies on disk; the rebuild keeps the one with the highest ``seq`` (equal: either).
* A live tombstone is dropped (not copied) only if every *other* segment's lowest ``seq`` is above
  the tombstone's: then no older value of that key exists anywhere that could resurrect.  Else it
  is copied like a value and dropped by a later compaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .segment import FLAG_TOMBSTONE, scan

if TYPE_CHECKING:
    from .store import IndexedFSBackend

CHUNK = 512  # records checked and copied per lock hold: keeps concurrent writers moving


def candidates(store: "IndexedFSBackend", ratio: float) -> list[int]:
    """Sealed segments whose live bytes are below ``ratio`` of their size."""
    with store._lock:
        live = store._index.live
        return [
            sid for sid, seg in sorted(store._segments.items())
            if sid != store._active.id and seg.size > 0
            and live.get(sid, (0, 0))[1] < ratio * seg.size
        ]


def compact(store: "IndexedFSBackend", ratio: float) -> dict[str, int]:
    """One compaction pass; returns what it did."""
    done = {"segments": 0, "copied": 0, "tombstones_dropped": 0, "deleted": 0}
    with store._maint_lock:
        chosen = candidates(store, ratio)
        if not chosen:
            return done
        for sid in chosen:
            _rewrite(store, sid, done)
        store._flush()  # copies (and whatever superseded the rest) durable before any source disappears
        done["deleted"] = len(store._delete_segments(chosen))
        done["segments"] = len(chosen)
    c = store.counters
    c["compactions"] += 1
    c["segments_compacted"] += done["segments"]
    c["records_copied"] += done["copied"]
    c["tombstones_dropped"] += done["tombstones_dropped"]
    return done


def _rewrite(store: "IndexedFSBackend", sid: int, done: dict[str, int]) -> None:
    with store._lock:
        seg = store._segments.get(sid)
    if seg is None:
        return
    data = seg.read_all()  # sealed: immutable, safe to read without the lock
    values: dict[str, tuple[int, int, int, int]] = {}
    tombs: dict[str, tuple[int, int, int, int]] = {}
    scan(data, sid, 0, False, values, tombs)  # the newest record of each key in this segment
    records = [(k, off, size, seq, 0) for k, (_s, off, size, seq) in values.items()]
    records += [(k, off, size, seq, FLAG_TOMBSTONE) for k, (_s, off, size, seq) in tombs.items()]
    index = store._index
    for i in range(0, len(records), CHUNK):
        with store._lock:
            others_min = min((s.min_seq for s in store._segments.values() if s.id != sid),
                             default=1 << 64)
            out, metas = [], []
            for key, off, size, seq, flags in records[i : i + CHUNK]:
                cur = index.latest(key)
                if cur is None or cur[0][0] != sid or cur[0][1] != off:
                    continue  # superseded: a newer write won
                if cur[1] and seq < others_min:
                    index.drop_tomb(key)
                    done["tombstones_dropped"] += 1
                    continue
                out.append(data[off : off + size])
                metas.append((key, size, seq, flags))
            if out:
                store._append_locked(b"".join(out), metas)
                done["copied"] += len(out)
