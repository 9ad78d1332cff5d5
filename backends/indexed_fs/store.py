"""``indexed_fs``: the thesis' indexed file-system store, built the Bitcask way.

Writes are appended to the active segment (see :mod:`.segment`) and located by an in-memory
keydir (:mod:`.index`), flushed now and then as a snapshot (:mod:`.snapshot`); dead space is
reclaimed by GC and compaction (:mod:`.compaction`).  This module ties them together: the write
path with group commit, reads, the open-time rebuild, and the background threads.

The data directory is a storage medium (:mod:`backends.media`, opened by
:func:`~backends.fsutil.open_data_dir`): a local path keeps raw-fd segments (``pwrite`` +
``fdatasync``) and an ``flock``; an ``nfs://`` URL uses buffered NFS segments (one WRITE+COMMIT
per group commit) and a lease lock file (:class:`~backends.fsutil.LeaseLock`).

Locking: ``_lock`` guards the index, the segment table and appends (held only for the
``pwrite``, never for an fsync).  Durability waits go to the group committer (:mod:`.commit`):
a writer whose bytes are not yet durable either leads the next sync or queues for one that
covers its bytes, so concurrent writers share one ``fdatasync``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Iterator, Sequence

import numpy as np

from ..base import Backend, BadOptionError, CorruptDataError, Option, StorageFullError
from ..fsutil import lock_dir, open_data_dir, storage_errors
from . import compaction, snapshot
from .group_commit import committer
from .index import Entry, Index
from .segment import (FLAG_TOMBSTONE, MAX_KEY_LEN, AnySegment, decode, encode, list_segment_ids,
                      open_segment, resolve, walk)

MiB = 1 << 20


def _key_bytes(key: str) -> bytes:
    """A key as stored: utf-8, within the record format's key-length bound."""
    try:
        kb = key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"indexed_fs keys must be encodable as utf-8; {key!r} is not") from None
    if len(kb) > MAX_KEY_LEN:
        raise ValueError(f"indexed_fs keys are at most {MAX_KEY_LEN} utf-8 bytes, not {len(kb)}")
    return kb


class IndexedFSBackend(Backend):
    name = "indexed_fs"
    durability_modes = ("sync", "interval", "none")
    options = {
        "path": Option(str, None, "data directory (required)"),
        "segment_size": Option(int, 64 * MiB, "bytes after which the active segment is sealed"),
        "sync_interval_ms": Option(int, 100, "durability=interval: milliseconds between syncs"),
        "index_flush_interval": Option(
            float, 60.0, "seconds between index snapshots; 0 = only on close"
        ),
        "compaction_live_ratio": Option(
            float, 0.5, "sealed segments with live/total bytes below this are compacted"
        ),
        "compaction_interval": Option(
            float, 0.0, "seconds between background compaction runs; 0 = only compact()"
        ),
        "preallocate": Option(
            bool, True, "reserve each segment's space up front (fallocate) so that a sync "
            "need not journal a growing file size; trimmed when sealed"
        ),
    }

    # ------------------------------------------------------------------------------ opening
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        cfg = self.config
        for opt in ("segment_size", "sync_interval_ms"):
            if cfg[opt] <= 0:
                raise BadOptionError(f"backend 'indexed_fs': option {opt}={cfg[opt]} must be > 0")
        for opt in ("index_flush_interval", "compaction_interval"):
            if cfg[opt] < 0:
                raise BadOptionError(f"backend 'indexed_fs': option {opt}={cfg[opt]} must be >= 0")
        if not 0 <= cfg["compaction_live_ratio"] <= 1:
            raise BadOptionError(
                f"backend 'indexed_fs': option compaction_live_ratio="
                f"{cfg['compaction_live_ratio']} must be between 0 and 1"
            )
        self.medium = open_data_dir(self.name, cfg["path"])
        self.path = self.medium.root
        self._errors = storage_errors(self.name, self.path)  # stateless: one for every use
        self._segment_size: int = cfg["segment_size"]
        self._sync_writes = self.durability == "sync"
        self._lock = threading.Lock()
        self._cond = threading.Condition()  # segment pins (see _flush, _delete_segments)
        self._snap_lock = threading.Lock()
        self._maint_lock = threading.Lock()  # one deleter of segments at a time (GC, compaction)
        self._segments: dict[int, AnySegment] = {}
        self._index = Index()
        self._gc_pending: set[int] = set()
        self._gc_due = False
        self._written = 0  # bytes appended since open (all segments): the group-commit clock
        self._nwrites = 0
        self._waiters = 0  # threads in _cond.wait() (see _wait)
        self._pins: Counter[int] = Counter()  # segment id -> _flush fsyncs in flight (under _cond)
        self._unsynced: list[AnySegment] = []  # durability=none: sealed without a sync
        self._snap_number = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.counters: dict[str, Any] = dict(
            corrupt_records=0, torn_tail_truncated=0, snapshots_invalid=0, snapshot_used=None,
            records_scanned=0, unresolved_snapshot_entries=0, open_time_ms=0.0,
            snapshots_written=0, compactions=0,
            segments_compacted=0, records_copied=0, tombstones_dropped=0, segments_deleted=0,
            background_errors=0, last_background_error=None, rebuild_notes=[],
        )
        try:
            self._lockfile = lock_dir(self.name, self.medium)
        except BaseException:
            self.medium.close()
            raise
        try:
            with storage_errors(self.name, self.path):
                self._open()
        except BaseException:
            self._close_files()
            raise
        self._start_threads()

    def _open(self) -> None:
        t0 = time.perf_counter()
        medium = self.medium
        for name in medium.listdir():
            if name.endswith(".tmp"):
                medium.delete(name)
        ids = list_segment_ids(medium)
        for sid in ids:
            self._segments[sid] = open_segment(medium, sid)
        snap = self._load_snapshot(ids)
        c = self.counters
        index = self._index
        next_seq = 1
        gone: list[str] = []
        if snap is not None:
            cseg, coff = snap.covered
            next_seq = snap.next_seq
            known = np.array(ids, np.uint32)
            ok = np.isin(snap.cols[0], known)
            if not ok.all():
                # entries into segments deleted after this snapshot (GC, compaction): the scan
                # below finds what superseded or copied them; any key it does not is reported
                gone = [k if isinstance(k, str) else k.decode("utf-8")
                        for k in (snap.keys[i] for i in np.flatnonzero(~ok).tolist())]
            if isinstance(snap.keys, np.ndarray):
                index.load_base(snap.keys, snap.cols, ok)
            else:  # keys with NUL in them: the slower dict path
                cols = [col.tolist() for col in snap.cols]
                for i in np.flatnonzero(ok).tolist():
                    dict.__setitem__(index.d, snap.keys[i], tuple(col[i] for col in cols))
                index.finish_scan()
            for key, e in snap.tombs.items():
                if e[0] in self._segments:
                    index.set(key, e, tomb=True)
            for sid, seg in self._segments.items():
                seg.min_seq = snap.seg_min_seq.get(sid, 0)
            plan = [(s, coff if s.id == cseg else 0) for s in self._segments.values()
                    if s.id >= cseg or s.id not in snap.seg_min_seq]
            values: dict[str, Entry] = {}  # what the log holds beyond the snapshot
            tombs: dict[str, Entry] = {}
        else:
            plan = [(s, 0) for s in self._segments.values()]
            values, tombs = index.d, index.tombs  # filled in place, sorted once at the end

        last_id = ids[-1] if ids else None
        parts = []  # full rebuild: every segment's records, resolved at once below
        for seg, start in plan:
            res, recs = walk(seg.read_all(start), seg.id, start, seg.id == last_id)
            if res.reserved_at is not None:  # reserved space left untrimmed by a crash
                seg.size = res.reserved_at
                seg.zeroed = seg.size  # past it: written zeros and unwritten space, zero afresh
                if seg.id != last_id:
                    seg.trim()
            if snap is None:
                parts.append(recs)
            else:
                resolve(recs, values, tombs)
            c["records_scanned"] += res.records
            c["corrupt_records"] += res.corrupt
            c["rebuild_notes"].extend(res.notes[:20])
            if res.records:
                seg.min_seq = res.min_seq if start == 0 else min(seg.min_seq, res.min_seq)
                next_seq = max(next_seq, res.max_seq + 1)
            elif start == 0:
                seg.min_seq = res.min_seq
            if res.tail_at is not None:
                if seg.id == last_id:
                    seg.truncate(res.tail_at)
                    c["torn_tail_truncated"] += 1
                    c["rebuild_notes"].append(f"segment {seg.id}: torn tail cut at {res.tail_at}")
                else:
                    c["corrupt_records"] += 1
                    c["rebuild_notes"].append(
                        f"segment {seg.id}: damaged from offset {res.tail_at} to its end, skipped")
        if snap is None:
            if not index.load_log(parts):  # keys numpy cannot hold exactly: record by record
                for recs in parts:
                    resolve(recs, values, tombs)
                index.finish_scan()
        else:
            index.merge(values, tombs)
            unresolved = [k for k in gone if index.latest(k) is None]
            c["unresolved_snapshot_entries"] = len(unresolved)
            if unresolved:
                c["rebuild_notes"].append(
                    f"{len(unresolved)} snapshot entries point into deleted segments and no later "
                    f"record was found (e.g. {unresolved[0]!r}); treated as deleted")
        self._next_seq = next_seq
        # the last segment stays active unless full; fully dead sealed ones await GC
        if ids and self._segments[last_id].size < self._segment_size:
            self._active = self._segments[last_id]
        else:
            self._active = open_segment(medium, (last_id or 0) + 1, create=True)
            self._segments[self._active.id] = self._active
            medium.sync_dir()
        if self.config["preallocate"]:
            self._active.reserve(self._segment_size)
        self._commit, self._handle_of, self._commit_kind = committer(self._active)
        self._gc_pending = {s for s in self._segments if s != self._active.id
                            and index.live.get(s, (0,))[0] == 0}
        self._gc_due = bool(self._gc_pending)
        c["open_time_ms"] = round((time.perf_counter() - t0) * 1000, 2)

    def _load_snapshot(self, ids: list[int]) -> snapshot.Snapshot | None:
        """The newest snapshot that verifies and fits the segment files; damaged ones are
        counted (and kept for inspection until the next successful flush) — never fatal."""
        numbers = snapshot.list_numbers(self.medium)
        self._snap_number = max(numbers, default=0)  # the next flush outnumbers damaged ones too
        for number in numbers:
            try:
                snap = snapshot.read(self.medium, number)
                cseg, coff = snap.covered
                if cseg in self._segments and self._segments[cseg].size < coff:
                    raise ValueError(f"covers segment {cseg} up to {coff}, past its end")
                if not ids or cseg > ids[-1]:
                    raise ValueError(f"covers segment {cseg}, newer than any segment file")
            except (ValueError, OSError, UnicodeDecodeError) as exc:
                self.counters["snapshots_invalid"] += 1
                self.counters["rebuild_notes"].append(
                    f"snapshot {snapshot.file_name(number)} unusable: {exc}")
                continue
            self.counters["snapshot_used"] = snapshot.file_name(number)
            return snap
        return None

    # ------------------------------------------------------------------------------ writing
    def _put(self, key: str, value: bytes) -> None:
        # the single-record fast path of _write (no lists; the common case of a benchmark put)
        kb = _key_bytes(key)
        with self._lock:
            seq = self._next_seq
            rec = encode(seq, kb, value)
            target = self._append_locked(rec, ((key, len(rec), seq, 0),))
            self._next_seq = seq + 1
        if self._sync_writes:
            self._sync_to(target)
        if self._gc_due:
            self._gc()

    def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        self._write(items)

    def _delete(self, key: str) -> None:
        self._write([(key, None)])

    def _write(self, items: list[tuple[str, bytes | None]]) -> None:
        """Append ``items`` (value ``None`` = delete) as one write, then wait per durability."""
        with self._lock:
            seq = self._next_seq
            recs, metas = [], []
            for key, value in items:
                if value is None:
                    if self._index.get(key) is None:
                        continue  # nothing to delete: no older record can exist either
                    rec = encode(seq, _key_bytes(key), b"", FLAG_TOMBSTONE)
                    metas.append((key, len(rec), seq, FLAG_TOMBSTONE))
                else:
                    rec = encode(seq, _key_bytes(key), value)
                    metas.append((key, len(rec), seq, 0))
                recs.append(rec)
                seq += 1
            if not recs:
                return
            target = self._append_locked(recs[0] if len(recs) == 1 else b"".join(recs), metas)
            self._next_seq = seq
        if self._sync_writes:
            self._sync_to(target)
        if self._gc_due:
            self._gc()

    def _append_locked(self, data: bytes, metas: Sequence[tuple[str, int, int, int]]) -> int:
        """Append ``data`` (the records described by ``metas``: key, size, seq, flags) and point
        the index at them; caller holds ``_lock``.  Returns the group-commit target."""
        seg, n = self._active, len(data)
        if seg.size and seg.size + n > self._segment_size:
            seg = self._rotate_locked()
        try:
            off = seg.append(data)
        except OSError:
            with self._errors:  # translated here, not by a `with` around every append
                raise
        index, sid = self._index, seg.id
        for key, size, seq, flags in metas:
            old = index.set(key, (sid, off, size, seq), flags == FLAG_TOMBSTONE)
            if old is not None and old[0] != sid and index.live[old[0]][0] == 0:
                self._gc_pending.add(old[0])
            if seq < seg.min_seq:
                seg.min_seq = seq
            off += size
        self._written = written = self._written + n
        self._nwrites = nwrites = self._nwrites + len(metas)
        self._commit.appended(self._handle_of(seg), written, nwrites)
        return written

    def _rotate_locked(self) -> AnySegment:
        """Seal the active segment (durably, unless durability=none) and start the next one."""
        old = self._active
        with storage_errors(self.name, self.path):
            old.seal(durable=self.durability != "none")
            if self.durability == "none":  # synced by the next flush / GC / compaction / snapshot
                self._unsynced.append(old)
            new = open_segment(self.medium, old.id + 1, create=True)
            try:
                if self.durability != "none":
                    self.medium.sync_dir()
            except OSError:  # leave no unregistered file behind to clash with the next try
                new.close()
                self.medium.delete(new.name)
                raise
            if self.config["preallocate"]:
                new.reserve(self._segment_size)
        self._segments[new.id] = new
        self._active = new
        if self.durability != "none":  # everything written so far is durable now
            self._commit.covered(self._written, self._nwrites)
        self._commit.appended(self._handle_of(new), self._written, self._nwrites)
        if self._index.live.get(old.id, (0,))[0] == 0:
            self._gc_pending.add(old.id)
        if self._gc_pending:
            self._gc_due = True
        return new

    def _sync_to(self, target: int) -> None:
        """Return once the first ``target`` appended bytes are durable (group commit)."""
        try:
            self._commit.wait(target)
        except OSError:
            with self._errors:
                raise

    def _wait(self) -> None:
        """``_cond.wait()`` (caller holds ``_cond``), counted so that notifiers can skip the
        notify when nobody waits."""
        self._waiters += 1
        try:
            self._cond.wait()
        finally:
            self._waiters -= 1

    def _flush(self) -> None:
        """Make everything appended so far durable (sealed segments too, under durability=none)."""
        with self._lock:
            segs = [s for s in self._unsynced if s.id in self._segments]
            self._unsynced, new_files = [], bool(self._unsynced)
            with self._cond:  # pinned: no GC may close them under the fsync
                self._pins.update(s.id for s in segs)
        try:
            with storage_errors(self.name, self.path):
                for seg in segs:
                    seg.sync()
                if new_files:
                    self.medium.sync_dir()
        finally:
            with self._cond:
                self._pins.subtract(s.id for s in segs)
                self._cond.notify_all()
        self._sync_to(self._written)

    # ------------------------------------------------------------------------------ reading
    def _read_locked(self, key: str) -> tuple[bytes, Entry] | None:
        e = self._index.get(key)
        if e is None:
            return None
        return self._segments[e[0]].read(e[1], e[2]), e

    def _verify(self, key: str, found: tuple[bytes, Entry]) -> bytes:
        data, (sid, off, _size, _seq) = found
        try:
            _, _, value, flags = decode(data, key)
            if flags & FLAG_TOMBSTONE:
                raise CorruptDataError("index points at a tombstone")
        except CorruptDataError as exc:
            raise CorruptDataError(
                f"backend 'indexed_fs': checkpoint {key!r} at segment {sid} offset {off} is "
                f"damaged ({exc}); it is not returned — restore it from its source or delete it"
            ) from None
        return value

    def _get(self, key: str) -> bytes | None:
        with self._lock:
            found = self._read_locked(key)
        return None if found is None else self._verify(key, found)

    def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        with self._lock:
            found = [(k, self._read_locked(k)) for k in keys]
        return {k: self._verify(k, f) for k, f in found if f is not None}

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        with self._lock:
            keys = list(self._index.keys_from(prefix))
        for i in range(0, len(keys), 256):
            chunk = keys[i : i + 256]
            values = self._get_many(chunk)
            for key in chunk:
                if key in values:
                    yield key, values[key]

    # ------------------------------------------------------------------ GC, snapshots, compaction
    def _gc(self) -> None:
        """Delete sealed segments without live entries, once what superseded them is durable."""
        if not self._maint_lock.acquire(blocking=False):
            return
        try:
            with self._lock:
                self._gc_due = False
                candidates, self._gc_pending = self._gc_pending, set()
            if candidates:
                self._flush()
                self._delete_segments(candidates)
        finally:
            self._maint_lock.release()

    def _delete_segments(self, ids: set[int] | list[int]) -> list[int]:
        """Remove sealed, fully dead segments (the caller made their successors durable)."""
        with self._lock:
            live = self._index.live
            gone = [self._segments.pop(i) for i in sorted(ids)
                    if i in self._segments and i != self._active.id and live.get(i, (0,))[0] == 0]
            for seg in gone:
                live.pop(seg.id, None)
        if not gone:
            return []
        with self._cond:  # a flush may still be fsync-ing a just-sealed segment
            while any(self._pins[s.id] > 0 for s in gone):
                self._wait()
        for seg in gone:
            self._commit.idle(self._handle_of(seg))  # so may a group-commit leader
            seg.close()
            self.medium.delete(seg.name)
        self.medium.sync_dir()
        self.counters["segments_deleted"] += len(gone)
        return [s.id for s in gone]

    def write_snapshot(self) -> str:
        """Flush the index to a new snapshot now (also done every ``index_flush_interval``)."""
        self._check_open()
        return self._write_snapshot()

    def _write_snapshot(self) -> str:
        with self._snap_lock:
            with self._lock:
                seg = self._active
                covered = (seg.id, seg.size)
                frozen = self._index.freeze()
                seg_min = {s.id: min(s.min_seq, (1 << 64) - 1) for s in self._segments.values()}
                next_seq = self._next_seq
            self._flush()  # the snapshot never points past durable data
            keys, cols = self._index.materialize(frozen)
            with storage_errors(self.name, self.path):
                name = snapshot.write(self.medium, self._snap_number + 1, covered, next_seq, keys,
                                      cols, frozen.tombs, seg_min)
            self._snap_number += 1
            self.counters["snapshots_written"] += 1
            return name

    def compact(self) -> dict[str, int]:
        """Rewrite sealed segments whose live ratio is below ``compaction_live_ratio``."""
        self._check_open()
        return compaction.compact(self, self.config["compaction_live_ratio"])

    # ------------------------------------------------------------------------ background work
    def _start_threads(self) -> None:
        cfg = self.config
        if self.durability == "interval":
            self._spawn("sync", cfg["sync_interval_ms"] / 1000, self._flush)
        if cfg["index_flush_interval"] > 0:
            self._spawn("index-flush", cfg["index_flush_interval"], self._write_snapshot)
        if cfg["compaction_interval"] > 0:
            self._spawn("compaction", cfg["compaction_interval"], lambda: compaction.compact(
                self, cfg["compaction_live_ratio"]))
        self._spawn("gc", 1.0, lambda: self._gc() if self._gc_pending else None)

    def _spawn(self, what: str, every: float, job) -> None:
        def loop() -> None:
            while not self._stop.wait(every):
                try:
                    job()
                except Exception as exc:  # reported in stats; the next round retries
                    self.counters["background_errors"] += 1
                    self.counters["last_background_error"] = f"{what}: {exc}"

        t = threading.Thread(target=loop, name=f"indexed_fs-{what}", daemon=True)
        t.start()
        self._threads.append(t)

    # ------------------------------------------------------------------------------- closing
    def _close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        try:
            self._flush()
            self._gc()
            try:
                self._write_snapshot()
            except StorageFullError as exc:  # data is durable; the next open scans instead
                self.counters["last_background_error"] = f"snapshot on close: {exc}"
        finally:
            self._close_files()

    def _close_files(self) -> None:
        try:
            self._commit.close()  # the C committer's sync thread, before the fds it syncs
            for seg in self._segments.values():
                try:
                    seg.trim()  # a clean directory holds records only
                except OSError:
                    pass  # the next open tells reserved zeros from records anyway
                seg.close()
            self._lockfile.release()
        finally:
            self.medium.close()

    # -------------------------------------------------------------------------------- stats
    def _stats(self) -> dict[str, Any]:
        with self._lock:
            live = self._index.live
            per_seg = {
                sid: {"size": s.size, "live_entries": live.get(sid, (0, 0))[0],
                      "live_bytes": live.get(sid, (0, 0))[1]}
                for sid, s in sorted(self._segments.items())
            }
            out = dict(self.counters)
            gc = self._commit.stats()
            synced_writes = gc.pop("synced_writes")
            out.update(syncs=gc["syncs"], sync_requests=gc["sync_requests"],
                       group_commit_max_batch=gc["group_commit_max_batch"],
                       syncs_by_thread=gc.get("syncs_by_thread", 0),
                       group_commit=self._commit_kind)
            out.update(
                medium=self.medium.kind, keys=len(self._index), tombstones=len(self._index.tombs),
                segments=len(self._segments), active_segment=self._active.id,
                live_bytes=sum(p["live_bytes"] for p in per_seg.values()),
                total_bytes=sum(p["size"] for p in per_seg.values()), per_segment=per_seg,
            )
        out["dead_bytes"] = out["total_bytes"] - out["live_bytes"]
        out["lock_lost"] = getattr(self._lockfile, "lost", False)  # lease lock (NFS) taken over
        out["rebuild_notes"] = list(out["rebuild_notes"])
        syncs = out["syncs"]
        out["group_commit_avg_batch"] = round(synced_writes / syncs, 2) if syncs else 0.0
        return out
