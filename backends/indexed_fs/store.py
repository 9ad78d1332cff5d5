"""``indexed_fs``: the thesis' indexed file-system store, built the Bitcask way.

Writes are appended to the active segment (see :mod:`.segment`) and located by an in-memory
keydir (:mod:`.index`), flushed now and then as a snapshot (:mod:`.snapshot`) with index deltas
in between (:mod:`.delta`, written when :mod:`.delta_scheduler` says: its thread, due mark and
writers' backpressure) and rebuilt on open (:mod:`.recovery`); dead space is reclaimed by GC
and compaction (:mod:`.compaction`, which reaches the store only through the interface it
declares, :class:`.compaction.CompactionTarget`); damaged bytes are copied into the quarantine
(:mod:`.quarantine`) before either may delete them.  This module ties them together: the write
path with group commit, reads, GC, snapshots, deltas and the background threads.

The data directory is a storage medium (:mod:`backends.media`, opened by
:func:`~backends.media.open_data_dir`): a local path keeps raw-fd segments (``pwrite`` +
``fdatasync``) and an ``flock``; an ``nfs://`` URL uses buffered NFS segments (one WRITE+COMMIT
per group commit) and a lease lock file (:class:`~backends.dir_lock.LeaseLock`).

Locking: ``_lock`` guards the index, the segment table and appends (held only for the
``pwrite``, never for an fsync).  Durability waits go to the group committer
(:mod:`.group_commit`): a writer whose bytes are not yet durable either leads the next sync or
queues for one that covers its bytes, so concurrent writers share one ``fdatasync``.
The plain put and the get are one call into C each where built (``_commit.Putter``,
``_scan.Getter``), which take the same ``_lock`` and do what the Python path here does, byte for
byte; they decline whatever needs this module's decisions (rotation, reservation, a layer's key,
damage), and the Python path, the reference, does it.
``_maint_lock`` admits one deleter of segments at a time (GC or a compaction pass).
``_snap_lock`` admits one writer of snapshots and deltas, and is taken before ``_lock``; the
delta scheduler's condition is a leaf below both (see :mod:`.delta_scheduler`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import threading
import time
from collections import Counter
from typing import Any, Iterable, Iterator, Sequence

from .. import failpoints
from ..base import LONGEST_WAIT_S, Backend, Claim, CorruptDataError, Option, StorageFullError
from ..byte_keys import key_bytes
from ..dir_lock import lock_dir
from ..owner import claim
from ..ledger import Ledger
from ..media import open_data_dir, storage_errors
from . import compaction, delta, hint, snapshot
from .compaction import LockedLog, RecordMeta
from .delta_scheduler import DeltaScheduler
from .group_commit import committer, putter
from .index import Entry, Index
from .quarantine import Quarantine
from .recovery import damage_line, init_keydir
from .segment import (
    FLAG_TOMBSTONE,
    Getter,
    HEADER,
    HEADER_SIZE,
    MAX_KEY_LEN,
    MAX_SEGMENT_ID,
    MAX_VALUE_LEN,
    AnySegment,
    data_length,
    decode,
    encode,
    encode_head,
    crc,
    open_segment,
    read_value,
    resolve_sorted,
    walk,
)

MiB = 1 << 20
#: a value at least this long is written from its own buffer by the batch's gather write
#: (:func:`.segment.encode_head`) instead of being copied into one record and then into the batch
GATHER_BYTES = 64 << 10
_unpack_header = HEADER.unpack_from
_dict_get = dict.get
#: what the C get path returns for a key it leaves to Python (a key of an array layer, or a
#: record that failed its check)
_MISS = object()

PUT_AFTER_APPEND = failpoints.declare(
    "indexed_fs.put.after_append",
    "a crash after a write's records are appended, before the sync that acknowledges them: the "
    "write was never acknowledged, so either its old or its new value may survive")
ROTATE_BEFORE_SEAL = failpoints.declare(
    "indexed_fs.rotate.before_seal",
    "a crash when the active segment is full, before it is sealed (trimmed and synced): the "
    "rebuild finds it as the newest segment, reserved zeros and all")
ROTATE_AFTER_NEW_SEGMENT = failpoints.declare(
    "indexed_fs.rotate.after_new_segment",
    "a crash after the next segment file is created (and the directory synced), before any "
    "record is in it: the sealed segment has no hint yet, the new one is empty")


def _key_bytes(key: str) -> bytes:
    """A key as stored: utf-8, within the record format's key-length bound."""
    return key_bytes("indexed_fs", key, MAX_KEY_LEN)


class IndexedFSBackend(Backend):
    name = "indexed_fs"
    kind = "file"
    durability_modes = ("sync", "interval", "none")
    media = ("local", "nfs", "hdfs")
    claims = {
        "sync": Claim("sync", "sync: a put/delete returns after its record is fdatasync'ed "
                      "(group commit); no acknowledged write may be lost",
                      crash_safe=True, power_safe=True),
        "interval": Claim("interval", "interval: records are fdatasync'ed every "
                          "sync_interval_ms; a power cut may lose the writes of the last "
                          "interval", crash_safe=True, power_safe=False),
        "none": Claim("none", "none: no fsync per write; a power cut may lose anything written "
                      "since the last rotation, flush or close", crash_safe=True,
                      power_safe=False),
    }
    audit_mode = "sync"

    @classmethod
    def hazard_options(cls, rnd: random.Random, hazard: bool) -> dict[str, Any]:
        """Small segments, frequent compactions, index flushes and deltas, so that a crash audit
        cuts at rotations, compactions and snapshots often; an armed round gets the smallest."""
        if hazard:
            return {"segment_size": 16384, "compaction_interval": 0.02,
                    "index_flush_interval": 0.05, "compaction_live_ratio": 0.6,
                    "delta_records": 2}
        return {"segment_size": rnd.choice((4096, 16384, 64 * 1024 * 1024)),
                "compaction_interval": rnd.choice((0, 0.02, 0.1)),
                "index_flush_interval": rnd.choice((0, 0.05, 0.3)),
                "compaction_live_ratio": 0.6, "delta_records": rnd.choice((8, 64, 16384))}
    #: the record format's value bound (a rebuild treats a longer value length as damage)
    max_value_bytes = MAX_VALUE_LEN
    takes_buffers = True  # values are written by gather writes (see GATHER_BYTES)
    options = {
        "path": Option(str, None, "data directory (required)", nonempty=True),
        "segment_size": Option(int, 64 * MiB, "bytes after which the active segment is sealed",
                               min=1),
        "sync_interval_ms": Option(int, 100, "durability=interval: milliseconds between syncs",
                                   min=1, max=int(LONGEST_WAIT_S * 1000)),
        "index_flush_interval": Option(
            float, 60.0, "seconds between index snapshots; 0 = only on close",
            min=0, max=LONGEST_WAIT_S,
        ),
        "delta_records": Option(
            int, 8192, "records appended after which the background writes an index delta "
            "(what changed since the last snapshot, sorted), so that an open walks at most about "
            "this many records of the log (writers wait for it at 1.25 times as many); 0 = no "
            "deltas (needs index_flush_interval > 0)", min=0,
        ),
        "compaction_live_ratio": Option(
            float, 0.5, "sealed segments with live/total bytes below this are compacted",
            min=0, max=1,
        ),
        "compaction_interval": Option(
            float, 0.0, "seconds between background compaction runs; 0 = only compact()",
            min=0, max=LONGEST_WAIT_S,
        ),
        "preallocate": Option(
            bool, True, "reserve each segment's space up front (fallocate) so that a sync "
            "need not journal a growing file size; trimmed when sealed"
        ),
        "native_path": Option(
            bool, True, "run a plain put and a get as one call into C (the reference path in "
            "Python does the rest: rotations, reservations, deletes, batches); False: Python "
            "only, the reference the C calls are tested against (byte for byte on disk and in "
            "the index)"
        ),
        "quarantine_bytes": Option(
            int, 1 << 30, "bytes the quarantine/ directory may hold: damaged segments are copied "
            "there before GC or compaction deletes them, a torn tail before the open cuts it; "
            "past this, damaged bytes are left in place (one warning says so)", min=0,
        ),
    }

    # ------------------------------------------------------------------------------ opening
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        cfg = self.config
        self.medium = open_data_dir(self.name, cfg["path"])
        self.path = self.medium.root
        self.ledger = self.medium.ledger  # its system calls (or client calls) are the store's
        self._errors = storage_errors(self.name, self.path)  # stateless: one for every use
        self._segment_size: int = cfg["segment_size"]
        self._sync_writes = self.durability == "sync"
        self._lock = threading.Lock()
        self._cond = threading.Condition()  # segment pins (see _flush, delete_dead_segments)
        self._snap_lock = threading.Lock()
        self._maint_lock = threading.Lock()  # one deleter of segments at a time (GC, compaction)
        self._hint_lock = threading.Lock()  # one writer of hint files at a time
        self._segments: dict[int, AnySegment] = {}
        self._index = Index()
        self._gc_pending: set[int] = set()
        self._hint_pending: set[int] = set()  # sealed segments without a hint file yet
        self._gc_due = False
        self._written = 0  # bytes appended since open (all segments): the group-commit clock
        self._nwrites = 0
        self._waiters = 0  # threads in _cond.wait() (see _wait)
        self._pins: Counter[int] = Counter()  # segment id -> fsyncs, hint walks in flight (_cond)
        self._unsynced: list[AnySegment] = []  # durability=none: sealed without a sync
        self._snap_number = 0
        #: ``_written`` as of the newest snapshot (None: no snapshot describes the index)
        self._snap_written: int | None = None
        #: (records appended since the open, index entries) when the newest snapshot was taken
        self._snap_mark = (0, 0)
        self._keep_snapshot = False  # see _open
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []  # the periodic ones (see _spawn)
        #: when index deltas are written (the delta in the making, its thread, the writers' wait)
        self._deltas = DeltaScheduler(cfg["delta_records"], cfg["index_flush_interval"] > 0,
                                      self._stop, self._write_delta, self._appended,
                                      self._background_error)
        self._commit: Any = None  # the group committer, made once the active segment is known
        #: the put path in C (:class:`._commit.Putter`), where the committer is the C one and
        #: ``native_path`` is on; None: every put takes the reference path in Python
        self._putter: Any = None
        self._acks: list[tuple[int, int]] | None = None  # group_commit.ack_log, if observed
        #: the get path in C (:class:`._scan.Getter`) for local segments (a mapping or an fd)
        #: where built and ``native_path`` is on
        self._getter: Any = (Getter(self) if Getter is not None and cfg["native_path"]
                             and self.medium.kind == "local" else None)
        self._quarantine = Quarantine(self.medium, cfg["quarantine_bytes"])
        #: segments known to hold damage (found by the open, a walk or a read): copied into the
        #: quarantine before they are deleted
        self._damaged: set[int] = set()
        self._next_segment_id = 1  # above every file named like a segment (see recovery)
        #: the ``next_seq`` of the newest snapshot on disk (None: none): compaction drops no
        #: tombstone at or above it (see _LockedLog.lowest_seq_outside)
        self._snap_seq: int | None = None
        self._reserve_pending = False  # the active segment's space is reserved on first append
        self.counters: dict[str, Any] = dict(
            corrupt_records=0, torn_tail_truncated=0, snapshots_invalid=0, snapshot_used=None,
            records_scanned=0, unresolved_snapshot_entries=0, open_time_ms=0.0,
            hints_used=0, segments_scanned=0, hints_written=0, delta_used=None,
            deltas_invalid=0, deltas_written=0,
            snapshots_written=0, compactions=0,
            segments_compacted=0, records_copied=0, tombstones_dropped=0, segments_deleted=0,
            background_errors=0, last_background_error=None, rebuild_notes=[],
            damaged_segments=0, damaged_ranges=[], foreign_files=[], warnings=[],
        )
        try:
            claim(self.name, self.medium)
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
        """Rebuild the keydir (:func:`.recovery.init_keydir`), then choose the active segment,
        start the group committer and queue dead sealed segments for GC."""
        t0 = time.perf_counter()
        kd = init_keydir(self.medium, self._quarantine)
        self._segments, self._index, self._next_seq = kd.segments, kd.index, kd.next_seq
        self._damaged = set(kd.damaged) & set(kd.segments)
        self._next_segment_id = kd.next_segment_id
        self._snap_seq = kd.snapshot_next_seq
        self._snap_number = kd.snapshot_number  # the next flush outnumbers damaged ones too
        # the snapshot on disk is the whole index if the log holds nothing past it
        clean = kd.snapshot_used and not kd.records_scanned and not kd.unresolved_snapshot_entries
        self._snap_written = 0 if clean else None
        self._snap_mark = (0, len(self._index) if kd.snapshot_used else 0)
        self.counters.update(kd.counters())
        # a snapshot that shows damage (entries into missing or truncated segments) is kept:
        # the next one, made from the rebuilt index, would hide it from later opens and verify
        self._keep_snapshot = kd.damage_in_snapshot
        if self._keep_snapshot:
            self.counters["warnings"].append(
                f"index snapshots are held back so that {kd.snapshot_used} keeps showing the "
                f"damage; once it is dealt with, delete the snapshot files (snap-*.idx) and "
                f"reopen")
        # the last segment stays active unless full, or its end is damage left in place
        last = max(self._segments, default=None)
        if last is not None and self._segments[last].size < self._segment_size \
                and last not in kd.keep_sealed:
            self._active = self._segments[last]
        else:
            self._active = self._new_segment()
            self._segments[self._active.id] = self._active
            self.medium.sync_dir()
        # the active segment's space is reserved by the first append, not here: the reservation
        # is made durable by an fsync, which an open that only reads need not wait for
        self._reserve_pending = self.config["preallocate"]
        for seg in self._segments.values():
            if seg is not self._active:
                seg.map_sealed()
        self._commit, self._handle_of, self._commit_kind = committer(self._active)
        if self._commit_kind == "native" and self.config["native_path"]:
            self._putter, self._acks = putter(self, self._commit)
        self._gc_pending = kd.dead_segments(self._active.id)
        hinted = set(hint.list_ids(self.medium))
        self._hint_pending = {s for s in self._segments
                              if s != self._active.id and s not in hinted}
        self._gc_due = bool(self._gc_pending)
        st = kd.delta_state  # deltas go on from the open if the log's end is still active
        if st is not None and st.pos[0] == self._active.id and not self._keep_snapshot:
            self._deltas.reset(st)
        self.counters["open_time_ms"] = round((time.perf_counter() - t0) * 1000, 2)

    # ------------------------------------------------------------------------------ writing
    def _put(self, key: str, value: bytes) -> None:
        """One record.  Where built, one call into C (:class:`._commit.Putter`) encodes, appends,
        indexes and waits; it declines whatever needs this module's decisions (a rotation, a
        reservation, zeros ahead, a refused key), which the reference path below then takes:
        the single-record case of :meth:`_write`, without its lists."""
        if self._putter is not None and self._put_in_c(self._putter.put, key, value):
            return
        kb = _key_bytes(key)
        with self._lock:
            seq = self._next_seq
            rec = encode(seq, kb, value)
            target = self._append_locked(rec, ((key, len(rec), seq, 0),))
            self._next_seq = seq + 1
        self._after_append(target)

    def _put_in_c(self, put: Any, *args: Any) -> bool | None:
        """``put(*args, wait)`` of the C put path: True when it was done; declined, nothing
        written: False when the active segment needs Python (a rotation, the reservation, its
        first record), None when the records do (a key or value the reference path judges).
        Python decides where the wait happens: in C, unless a fail point is armed between the
        append and the wait, which is then hit here, where it is declared."""
        wait = self._sync_writes and not failpoints.is_armed(PUT_AFTER_APPEND)
        try:
            done = put(*args, wait)
        except OSError:
            with self._errors:
                raise
        if done is None or done is False:
            return done
        if not wait:
            self._after_append(done[0])
            return True
        if self._acks is not None:
            self._acks.append(done)
        self._after_sync()
        return True

    def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        """The batch as one append (one ``pwrite``) and one wait per segment it fills: in C
        where it can be (see :meth:`_put`), else :meth:`_write`.

        A batch longer than the active segment's room is cut where the segment ends (the
        next part opens the next segment), so segments are filled, and a large batch — a
        checkpoint's thousands of records — is not moved whole into a segment of its own by
        the reference path.  When C declines a part for the segment's sake, Python takes its
        first record (the rotation, the reservation, a segment's first record come with it) and
        C the rest; one it declines for its records is Python's whole."""
        while items:
            part, items = self._fitting(items)
            done = None if self._putter is None else self._put_in_c(self._putter.put_many, part)
            if done:
                continue
            if done is False and len(part) > 1:  # C took every record: Python judges none
                self._write(part[:1], wait=False)  # the wait of the rest covers it
                if self._put_in_c(self._putter.put_many, part[1:]):
                    continue
                part = part[1:]
            self._write(part)

    def _fitting(self, items: list[tuple[str, bytes]]) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
        """``items`` cut where the active segment would be full: (the records that fit, at
        least one; the rest).  Read without the lock: a concurrent writer may fill the segment
        first, and the append then rotates (Python) or declines (C) as for any batch."""
        room = self._segment_size - self._active.size
        total = 0
        for i, (key, value) in enumerate(items):
            total += HEADER_SIZE + (len(key) if key.isascii() else len(key.encode("utf-8"))) + len(value)
            if total > room:
                cut = max(i, 1)
                return items[:cut], items[cut:]
        return items, []

    def _delete(self, key: str) -> None:
        self._write([(key, None)])

    def _delete_many(self, keys: list[str]) -> None:
        """Every key's tombstone in one write (one append, one wait per durability)."""
        self._write([(key, None) for key in keys])

    def _write(self, items: list[tuple[str, bytes | None]], wait: bool = True) -> None:
        """Append ``items`` (value ``None`` = delete) as one write, then wait per durability
        (``wait`` False: the caller's next write waits, and its wait covers this one)."""
        with self._lock:
            seq = self._next_seq
            recs, metas = [], []
            gather = False  # whether a large value is written from its own buffer
            for key, value in items:
                if value is None:
                    if self._index.get(key) is None:
                        continue  # nothing to delete: no older record can exist either
                    rec = encode(seq, _key_bytes(key), b"", FLAG_TOMBSTONE)
                    metas.append((key, len(rec), seq, FLAG_TOMBSTONE))
                elif len(value) >= GATHER_BYTES:  # bytes, or a flat byte view (Backend.put_many)
                    head = encode_head(seq, _key_bytes(key), value)
                    recs.append(head)
                    rec = value
                    metas.append((key, len(head) + len(value), seq, 0))
                    gather = True
                else:
                    rec = encode(seq, _key_bytes(key), value)
                    metas.append((key, len(rec), seq, 0))
                recs.append(rec)
                seq += 1
            if not recs:
                return
            data = recs if gather else recs[0] if len(recs) == 1 else b"".join(recs)
            target = self._append_locked(data, metas)
            self._next_seq = seq
        if wait:
            self._after_append(target)

    def _after_append(self, target: int) -> None:
        """A writer's steps once its records are appended, outside the lock: wait per
        durability for the group commit to reach ``target``, wait for a lagging index delta
        (:meth:`.DeltaScheduler.wait_if_lagging`), and collect dead segments if any are due."""
        failpoints.hit(PUT_AFTER_APPEND)
        if self._sync_writes:
            self._sync_to(target)
        self._after_sync()

    def _after_sync(self) -> None:
        """The steps of :meth:`_after_append` after the wait (the C put path waits itself)."""
        if self._nwrites >= self._deltas.stall_at:
            self._deltas.wait_if_lagging()
        if self._gc_due:
            self._gc()

    def _appended(self) -> int:
        """The count of records appended since the open (what the delta scheduler counts in)."""
        return self._nwrites

    def _append_locked(self, data: bytes | list[bytes | memoryview], metas: Sequence[RecordMeta]) -> int:
        """Append ``data`` (the records described by ``metas``: key, size, seq, flags; one
        buffer, or the buffers of a gather write) and point the index at them; caller holds
        ``_lock``.  Returns the group-commit target."""
        seg, n = self._active, data_length(data)
        if seg.size and seg.size + n > self._segment_size:
            seg = self._rotate_locked()
        elif self._reserve_pending:
            self._reserve_pending = False
            with self._errors:
                seg.reserve(self._segment_size)
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
        if nwrites >= self._deltas.due_at:
            self._deltas.wake()
        self._commit.appended(self._handle_of(seg), written, nwrites)
        return written

    def _rotate_locked(self) -> AnySegment:
        """Seal the active segment (durably, unless durability=none) and start the next one."""
        old = self._active
        failpoints.hit(ROTATE_BEFORE_SEAL)
        with storage_errors(self.name, self.path):
            old.seal(durable=self.durability != "none")
            if self.durability == "none":  # synced by the next flush / GC / compaction / snapshot
                self._unsynced.append(old)
            new = self._new_segment()
            try:
                if self.durability != "none":
                    self.medium.sync_dir()
            except OSError:  # leave no unregistered file behind to clash with the next try
                new.close()
                self.medium.delete(new.name)
                raise
            failpoints.hit(ROTATE_AFTER_NEW_SEGMENT)
            old.map_sealed()
            if self.config["preallocate"]:
                new.reserve(self._segment_size)
        self._segments[new.id] = new
        self._active = new
        if self.durability != "none":  # everything written so far is durable now
            self._commit.covered(self._written, self._nwrites)
        self._commit.appended(self._handle_of(new), self._written, self._nwrites)
        self._hint_pending.add(old.id)
        if self._index.live.get(old.id, (0,))[0] == 0:
            self._gc_pending.add(old.id)
        if self._gc_pending:
            self._gc_due = True
        return new

    def _new_segment(self) -> AnySegment:
        """Create the next segment file: its id is above every file named like a segment (the
        store's and foreign ones), so no name is ever taken twice."""
        sid = self._next_segment_id
        if sid > MAX_SEGMENT_ID:
            raise StorageFullError(
                f"backend 'indexed_fs': no segment id left under {self.path} (the last is "
                f"{MAX_SEGMENT_ID}); copy the keys into a new store")
        seg = open_segment(self.medium, sid, create=True)
        self._next_segment_id = sid + 1
        return seg

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
            self.report_damage(sid, f"record of {key!r} at offset {off} failed its check on read",
                               (off, off + len(data)))
            raise CorruptDataError(
                f"backend 'indexed_fs': checkpoint {key!r} at segment {sid} offset {off} is "
                f"damaged ({exc}); it is not returned — restore it from its source or delete it"
            ) from None
        return value

    def get(self, key: str) -> bytes | None:
        """The latest checkpoint of ``key``, or ``None``: one ``pread`` of its record (a slice
        of the mapping of a sealed segment), whose CRC, lengths, flags and key are checked
        before the value is returned (any mismatch: :class:`CorruptDataError`, never the
        bytes).  The base's checks and in-flight token (see :meth:`Backend.close`) are inlined
        and, where built, the lookup, the read and the check are one C call
        (:class:`._scan.Getter`): this is the read hot path.  What it leaves to Python (a key of
        an array layer, a record its check refuses) takes the reference path below, which reads
        the record again and names what is wrong."""
        inflight = self._inflight
        inflight.append(None)
        try:
            if self._closed or type(key) is not str or not key:
                self._check_open()
                self._check_key(key)
            if self._getter is not None:
                value = self._getter.get(key, _MISS)
                if value is not _MISS:
                    return value
            with self._lock:
                index = self._index
                e = _dict_get(index.d, key)  # the overlay (a dict underneath); else the base
                if e is None:
                    e = index.get(key)
                    if e is None:
                        return None
                seg = self._segments[e[0]]
                m = seg.mapped_range(e[1], e[2])
                src = m if m is not None else seg.fd
                if read_value is not None and src is not None:
                    value = read_value(src, e[1], e[2], key)
                    if value is not None:
                        return value
                data = seg.read(e[1], e[2])
            if len(data) >= HEADER_SIZE:
                c, _seq, klen, vlen, flags = _unpack_header(data)
                end = HEADER_SIZE + klen
                if (not flags and end + vlen == len(data) and crc(memoryview(data)[4:]) == c
                        and data[HEADER_SIZE:end] == key.encode("utf-8")):
                    return data[end:]
            return self._verify(key, (data, e))  # raises, naming what is wrong
        finally:
            inflight.pop()

    def _get(self, key: str) -> bytes | None:
        with self._lock:
            found = self._read_locked(key)
        return None if found is None else self._verify(key, found)

    def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        """One call into C for the keys it can answer (see :meth:`get`), the reference path
        for the rest."""
        if self._getter is not None:
            found, keys = self._getter.get_many(keys, _MISS)
            if not keys:
                return found
            found.update(self._get_many_python(keys))
            return found
        return self._get_many_python(keys)

    def _get_many_python(self, keys: list[str]) -> dict[str, bytes]:
        with self._lock:
            found = [(k, self._read_locked(k)) for k in keys]
        return {k: self._verify(k, f) for k, f in found if f is not None}

    def _keys(self, prefix: str) -> list[str]:
        with self._lock:
            return list(self._index.keys_from(prefix))

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        keys = self._keys(prefix)
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
                self.delete_dead_segments(candidates)
        finally:
            self._maint_lock.release()

    def report_damage(self, seg_id: int, what: str, where: tuple[int, int] | None = None) -> None:
        """Damage found in segment ``seg_id`` after the open (by a read, a hint's walk or
        compaction's): the segment is copied into the quarantine now (the active one: the
        damaged bytes ``where``, which no append changes) and checked to be there before it is
        ever deleted; one warning per segment says what was found."""
        if seg_id in self._damaged:
            return
        self._damaged.add(seg_id)
        self.counters["damaged_segments"] += 1
        self.counters["warnings"].append(damage_line(seg_id, what))
        seg = self._segments.get(seg_id)
        if seg is None or (seg is self._active and where is None):
            return
        self._keep_evidence(seg.name, *(where if seg is self._active else ()))

    def _keep_evidence(self, name: str, *where: int) -> bool:
        """:meth:`.quarantine.Quarantine.keep`, with its warning (once) among the store's."""
        kept = self._quarantine.keep(name, *where)
        if not kept and self._quarantine.warning not in self.counters["warnings"]:
            self.counters["warnings"].append(self._quarantine.warning)
        return kept

    def delete_dead_segments(self, ids: Iterable[int]) -> list[int]:
        """Delete those of ``ids`` that are sealed and hold no live entry; return their ids.
        The caller made durable whatever superseded their records (GC, compaction).  A segment
        known to hold damage is copied into the quarantine first, and kept where it cannot be
        (the quarantine is full): damaged bytes are evidence, never deleted on their own."""
        with self._lock:
            live = self._index.live
            dead = [i for i in sorted(ids) if i in self._segments and i != self._active.id
                    and live.get(i, (0,))[0] == 0]
            names = {i: self._segments[i].name for i in dead if i in self._damaged}
        # a dead sealed segment stays dead and unchanged (new entries point at the active
        # segment only), so the copy needs no lock; the caller holds maintenance()
        kept = {i for i, name in names.items() if not self._keep_evidence(name)}
        with self._lock:
            gone = [self._segments.pop(i) for i in dead if i not in kept]
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
            for name in hint.names(seg.id):  # first: no hint outlives its segment
                self.medium.delete(name)
            self.medium.delete(seg.name)
            self._damaged.discard(seg.id)
            self._hint_pending.discard(seg.id)
        self.medium.sync_dir()
        self.counters["segments_deleted"] += len(gone)
        return [s.id for s in gone]

    def _after_seal(self) -> None:
        """Background work once segments were sealed: (unless snapshots are off) a snapshot,
        so that a crash rebuild reads the log only from the active segment on, then the sealed
        segments' hint files, which serve a rebuild that has no snapshot this recent.  The
        snapshot first: it saves a crash rebuild more, and a crash may come before both are
        written.

        A snapshot writes every key, so one follows a seal only once the records appended
        since the newest snapshot are as many as it holds (``delta_records`` at least): a bulk
        write of a million keys, sealing a segment every 64 MiB, then writes a few snapshots
        of a doubling index, not one per segment (their sum is about twice the last), and the
        hint files serve a crash rebuild in between."""
        if not self._hint_pending:
            return
        appended, entries = self._snap_mark
        if (self.config["index_flush_interval"] > 0
                and self._nwrites - appended >= max(entries, self.config["delta_records"], 1)):
            self._snapshot_if_changed()
        self._write_hints()

    def _write_hints(self) -> None:
        """Write the hint file of every sealed segment that lacks one (:mod:`.hint`): sync the
        segment (sealing synced it already, unless durability=none, where nothing is synced
        here), walk it with every CRC checked, write the hint.  A segment whose walk finds
        damage gets no hint, so each rebuild walks it and reports the damage.

        The segment is *pinned* meanwhile (as a flush pins the segments it syncs): a deleter
        (GC, compaction) that chose it waits for the pin before it closes the fd and deletes the
        hint and the segment, so no hint outlives its segment, and GC is never held up by hints
        of other segments.  One hint writer at a time (``_hint_lock``)."""
        with self._hint_lock:
            with self._lock:
                todo = sorted(self._hint_pending)
            for sid in todo:
                with self._lock:
                    seg = self._segments.get(sid)
                    self._hint_pending.discard(sid)
                    if seg is None or seg is self._active:
                        continue
                    with self._cond:
                        self._pins[sid] += 1
                try:
                    self._write_hint(seg)
                finally:
                    with self._cond:
                        self._pins[sid] -= 1
                        self._cond.notify_all()

    def _write_hint(self, seg: AnySegment) -> None:
        durable = self.durability != "none"
        with storage_errors(self.name, self.path):
            if durable:  # a hint describes durable records only
                seg.sync()
            data = seg.read_all()
            res, recs = walk(data, seg.id, 0, False)
            del data
            if res.corrupt:
                self.report_damage(seg.id, f"{res.corrupt} damaged range(s) found by a walk")
            if res.corrupt or res.tail_at is not None or res.reserved_at is not None:
                return
            hint.write(self.medium, recs, seg.size, sync=durable)
        self.counters["hints_written"] += 1

    def write_snapshot(self) -> str:
        """Flush the index to a new snapshot now (also done every ``index_flush_interval``)."""
        return self._operation(self._write_snapshot)

    def _write_snapshot(self) -> str:
        with self._snap_lock:
            return self._write_snapshot_locked()

    def _write_snapshot_locked(self) -> str:
        """:meth:`_write_snapshot` with ``_snap_lock`` held; starts the next delta afresh on it
        and deletes the delta files of older snapshots."""
        with self._lock:
            seg = self._active
            covered = (seg.id, seg.size)
            written, nwrites = self._written, self._nwrites
            frozen = self._index.freeze()
            entries = len(self._index)
            seg_min = {s.id: min(s.min_seq, (1 << 64) - 1) for s in self._segments.values()}
            next_seq = self._next_seq
        self._flush()  # the snapshot never points past durable data
        keys, cols = self._index.materialize(frozen)
        with storage_errors(self.name, self.path):
            # a delta file of this number can only be a leftover (of snapshot files deleted by
            # hand): gone before the snapshot it could be mistaken for appears
            delta.delete_other(self.medium, keep=None, below=self._snap_number + 1)
            name = snapshot.write(self.medium, self._snap_number + 1, covered, next_seq, keys,
                                  cols, frozen.tombs, seg_min)
        self._snap_number += 1
        self._snap_written = written
        self._snap_mark = (nwrites, entries)
        self._snap_seq = next_seq
        self._deltas.reset(delta.State(self._snap_number, covered,
                                       len(keys) + len(frozen.tombs), covered, delta.empty(),
                                       1 << 64, nwrites, False, base_keys=keys, base_cols=cols))
        with storage_errors(self.name, self.path):
            delta.delete_other(self.medium, keep=None)
        self.counters["snapshots_written"] += 1
        return name

    def write_delta(self) -> str | None:
        """Write the index delta now (also done in the background every ``delta_records``
        records); see :meth:`_write_delta`."""
        return self._operation(self._write_delta)

    def _write_delta(self) -> str | None:
        """Persist what was appended since the newest snapshot as its index delta (:mod:`.delta`);
        return the file written (a snapshot's when the delta would outgrow a quarter of the
        snapshot, or ``delta_records``, whichever is more), ``None`` when there is nothing to
        do or no delta can be made until the next snapshot (the active segment is not the
        snapshot's, or the records cannot be resolved in C)."""
        with self._snap_lock:
            with self._lock:
                st, seg = self._deltas.state, self._active
                if st is None:
                    return None
                if seg.id != st.pos[0]:
                    self._deltas.reset(None)  # rotated: the snapshot after the seal takes over
                    return None
                start, end = st.pos[1], seg.size
                nwrites, next_seq = self._nwrites, self._next_seq
                if end == start and not st.unwritten:
                    return None
                with self._cond:  # not deleted meanwhile (see _write_hints)
                    self._pins[seg.id] += 1
            try:
                self._flush()  # a delta never points past durable data
                with storage_errors(self.name, self.path):
                    data = seg.read_all(start, end) if end > start else b""
                res, recs = walk(data, seg.id, start, False)
                del data
            finally:
                with self._cond:
                    self._pins[seg.id] -= 1
                    self._cond.notify_all()
            tail = resolve_sorted([recs]) if not (res.corrupt or res.tail_at is not None
                                                  or res.reserved_at is not None) else None
            if tail is None:  # damage (the next open's walk reports it) or keys C cannot hold
                self._deltas.reset(None)
                return None
            # the base rows superseded are recorded, so that an open need not join (see delta);
            # with those of the records before known, only the new records are joined
            known = st.dead is not None or not delta.entries(st.res)
            part = tail if known else delta.merge(st.res, tail)
            found = delta.superseded(part, st.base_keys, st.base_cols, st.dead)
            dead = dead_live = None
            if found is not None:
                part, dead = found
                dead_live = delta.dead_accounting(dead, st.base_cols)
            merged = delta.merge(st.res, part) if known else part
            if delta.entries(merged) > max(st.base_entries // 4, self.config["delta_records"]):
                if self._keep_snapshot:  # snapshots held back (see _open): no more deltas
                    self._deltas.reset(None)
                    return None
                return self._write_snapshot_locked()
            min_seq = min(st.min_seq, res.min_seq) if res.records else st.min_seq
            with storage_errors(self.name, self.path):
                name = delta.write(self.medium, st.base, st.base_covered, (seg.id, end),
                                   next_seq, min_seq, nwrites - st.mark, merged, dead,
                                   dead_live)
            self._deltas.reset(dataclasses.replace(st, pos=(seg.id, end), res=merged,
                                                   min_seq=min_seq, mark=nwrites,
                                                   unwritten=False, dead=dead))
            self.counters["deltas_written"] += 1
            return name

    def _snapshot_if_changed(self) -> None:
        """A snapshot, unless the newest one already holds the whole index: nothing was appended
        since it was written (every change to the index is an append: puts, deletes,
        compaction's copies)."""
        if self._snap_written != self._written and not self._keep_snapshot:
            self._write_snapshot()

    def _index_on_close(self) -> None:
        """What saves the next open a walk of the log: nothing when the newest snapshot holds
        the whole index; else, with deltas on, the delta of what was appended since that
        snapshot, whose cost is those records rather than every key, so that a store opened
        and closed around a small write (a checkpoint increment) is not charged a snapshot of
        all its keys at every close (:meth:`_write_delta` writes a snapshot instead once the
        delta outgrows a quarter of it); a snapshot when no delta can be made."""
        if self._snap_written == self._written or self._keep_snapshot:
            return
        if self._deltas.on:
            self._write_delta()
            st, seg = self._deltas.state, self._active
            if self._snap_written == self._written or (
                    st is not None and not st.unwritten and st.pos == (seg.id, seg.size)):
                return  # a snapshot, or the delta on disk, reaches the log's end
        self._write_snapshot()

    def compact(self) -> dict[str, int]:
        """Rewrite sealed segments whose live ratio is below ``compaction_live_ratio``."""
        return self._operation(self._compact)

    def _compact(self) -> dict[str, int]:
        done = compaction.compact(self, self.config["compaction_live_ratio"])
        if done["segments"]:
            c = self.counters
            c["compactions"] += 1
            c["segments_compacted"] += done["segments"]
            c["records_copied"] += done["copied"]
            c["tombstones_dropped"] += done["tombstones_dropped"]
        return done

    # ------------------------------------------------- compaction's interface (CompactionTarget)
    def maintenance(self) -> threading.Lock:
        """The lock of segment deleters (GC, compaction passes): held, no segment disappears."""
        return self._maint_lock

    def sealed_segments(self) -> list[tuple[int, int, int]]:
        """``(segment id, size, live bytes)`` of every sealed segment, oldest first."""
        with self._lock:
            live = self._index.live
            return [(sid, seg.size, live.get(sid, (0, 0))[1])
                    for sid, seg in sorted(self._segments.items()) if sid != self._active.id]

    def read_sealed(self, seg_id: int) -> bytes | None:
        """All bytes of sealed segment ``seg_id`` (``None`` if it is gone).  Sealed bytes never
        change, so they are read without the lock; the caller holds :meth:`maintenance` so that
        the file is not deleted meanwhile."""
        with self._lock:
            seg = self._segments.get(seg_id)
            if seg is self._active:
                raise ValueError(f"segment {seg_id} is the active segment, not sealed")
        return None if seg is None else seg.read_all()

    @contextlib.contextmanager
    def locked_log(self) -> Iterator[LockedLog]:
        """The store lock held for the block, with the log and index operations compaction's
        compare-and-swap needs (:class:`.compaction.LockedLog`)."""
        with self._lock:
            yield _LockedLog(self)

    # ------------------------------------------------------------------------ background work
    def _start_threads(self) -> None:
        cfg = self.config
        if self.durability == "interval":
            self._spawn("sync", cfg["sync_interval_ms"] / 1000, self._flush)
        if cfg["index_flush_interval"] > 0:
            self._spawn("index-flush", cfg["index_flush_interval"], self._snapshot_if_changed)
        if cfg["compaction_interval"] > 0:
            self._spawn("compaction", cfg["compaction_interval"], self._compact)
        self._spawn("maintenance", 0.2, self._maintain)

    def _maintain(self) -> None:
        """The maintenance thread's round: GC of segments left dead, then the work after a seal
        (one thread for both: every thread an open starts costs it time)."""
        if self._gc_pending:
            self._gc()
        self._after_seal()
        if self.config["index_flush_interval"] > 0 and self._deltas.is_due(self._nwrites):
            self._write_delta()

    def _spawn(self, what: str, every: float, job) -> None:
        def loop() -> None:
            while not self._stop.wait(every):
                try:
                    job()
                except Exception as exc:  # reported in stats; the next round retries
                    self._background_error(what, exc)

        t = threading.Thread(target=loop, name=f"indexed_fs-{what}", daemon=True)
        t.start()
        self._threads.append(t)

    def _background_error(self, what: str, exc: Exception) -> None:
        """Count an exception a background thread met (``what`` names its job) in the stats;
        the thread carries on, and its next round (or the next write past due) retries."""
        self.counters["background_errors"] += 1
        self.counters["last_background_error"] = f"{what}: {exc}"

    def _stop_threads(self) -> None:
        """Stop every background thread and wait for each to end: the periodic ones and the
        delta thread; writers waiting for a delta are released."""
        self._stop.set()
        self._deltas.stop()
        for t in self._threads:
            t.join()

    # ------------------------------------------------------------------------------- closing
    def _close(self) -> None:
        """Stop the background threads, make everything durable, write what saves the next open
        a walk, and release the files and the lock.  No operation is in flight (see
        :meth:`Backend.close`); whatever fails, the files and the lock are released."""
        try:
            self._stop_threads()
            self._flush()
            self._gc()
            try:
                self._write_hints()
            except Exception as exc:  # a hint only saves a walk: the next open walks instead
                self.counters["last_background_error"] = f"hints on close: {exc}"
            try:
                self._index_on_close()
            except StorageFullError as exc:  # data is durable; the next open scans instead
                self.counters["last_background_error"] = f"snapshot on close: {exc}"
        finally:
            self._close_files()

    def _close_files(self) -> None:
        """Close the committer and the segments, then release the lock and the medium; the
        lock and the medium are released even if closing a segment fails.  The C paths hold
        the store: dropped here, so that no cycle keeps a closed (or never opened) store alive."""
        self._putter = self._getter = None
        try:
            if self._commit is not None:  # None: the open failed before it was made
                self._commit.close()  # the C committer's sync thread, before the fds it syncs
            for seg in self._segments.values():
                try:
                    seg.trim()  # a clean directory holds records only
                except OSError:
                    pass  # the next open tells reserved zeros from records anyway
                seg.close()
        finally:
            try:
                self._lockfile.release()
            finally:
                self.medium.close()

    # -------------------------------------------------------------------------------- stats
    def _footprint(self, prefix: str) -> int:
        return self.medium.bytes_held()

    def _reclaim(self) -> None:
        self._compact()

    def _requests(self, counted: Ledger) -> Ledger:
        """The C committer's ``fdatasync`` calls are issued in C (its own thread or the
        waiting writer's), not at a Python call site: its count is added here as ``fsync``."""
        if self._commit_kind == "native":
            counted.requests["fsync"] = counted.requests.get("fsync", 0) + self._commit.stats()["syncs"]
        return counted

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
                       group_commit=self._commit_kind,
                       native_puts=0 if self._putter is None else self._putter.puts)
            out.update(
                medium=self.medium.kind, keys=len(self._index), tombstones=len(self._index.tombs),
                segments=len(self._segments), active_segment=self._active.id,
                live_bytes=sum(p["live_bytes"] for p in per_seg.values()),
                total_bytes=sum(p["size"] for p in per_seg.values()), per_segment=per_seg,
            )
        out["dead_bytes"] = out["total_bytes"] - out["live_bytes"]
        out["lock_lost"] = getattr(self._lockfile, "lost", False)  # lease lock (NFS) taken over
        out["rebuild_notes"] = list(out["rebuild_notes"])
        out["warnings"] = list(out["warnings"])
        syncs = out["syncs"]
        out["group_commit_avg_batch"] = round(synced_writes / syncs, 2) if syncs else 0.0
        return out


class _LockedLog:
    """:class:`.compaction.LockedLog` over a store whose ``_lock`` the holder has taken."""

    __slots__ = ("_store",)

    def __init__(self, store: IndexedFSBackend) -> None:
        self._store = store

    def latest(self, key: str) -> tuple[Entry, bool] | None:
        return self._store._index.latest(key)

    def lowest_seq_outside(self, seg_id: int) -> int:
        """Also at most the newest snapshot's ``next_seq``: that snapshot may hold an older
        value of a key deleted after it, in a segment GC has deleted since; the tombstone must
        outlive it, or an open from the snapshot would find an entry into a missing segment
        with nothing after it."""
        store = self._store
        low = min((s.min_seq for s in store._segments.values() if s.id != seg_id),
                  default=1 << 64)
        return low if store._snap_seq is None else min(low, store._snap_seq)

    def drop_tombstone(self, key: str) -> None:
        self._store._index.drop_tomb(key)

    def append(self, data: bytes, metas: Sequence[RecordMeta]) -> int:
        return self._store._append_locked(data, metas)
