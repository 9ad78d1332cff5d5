"""Segment files: the record format, its CRC, appends, reads and the recovery scan.

A segment is an append-only file ``NNNNNNNNNN.seg``: its id, zero-padded to ``ID_WIDTH`` (10)
digits, enough for every id the index formats hold (u32, ``MAX_SEGMENT_ID``), so ``ls`` order is
write order.  Stores made with 9-digit names are read as they are (:func:`list_segments`); their
new segments get the wide names.  Each record is::

    crc32c:u32 | seq:u64 | key_len:u32 | value_len:u32 | flags:u8 | key (utf-8) | value

all little-endian; the CRC covers every byte after itself.  ``flags`` bit 0 marks a tombstone
(a delete, empty value).  ``seq`` is a store-wide write number: when several records of one key
exist (an overwrite, or a copy left by compaction) the highest ``seq`` is the truth.

Two implementations behind :func:`open_segment`: :class:`Segment` on a local directory keeps the
hot path a raw ``os.pwrite``/``os.fdatasync`` on one fd; :class:`MediumSegment` goes through the
medium's append/read files (NFS: appends are buffered and one ``sync`` sends them all).

Reading a segment back (:func:`walk`) checks every record's header and CRC; a record that fails
is never returned, and the walk resynchronises on the next record whose header and CRC check out,
so damage costs the records it touched and no more (the rules, and what is not damage: reserved
zeros, writes a crash kept from the disk, a torn tail, are in :func:`walk`).  The record-by-record
pass runs in C (``_scan.c``) where the extension was built, because after a crash it is most of
what an open costs (a whole active segment may lie past the newest snapshot); :func:`_raw_python`
is the reference it is tested against and the fallback.  Both share everything past one pass
(:func:`_assemble`: resynchronisation, reserved zeros, torn tails), so they cannot drift apart
there.  :func:`resolve_sorted` is the C counterpart of :func:`resolve_all`
for the crash rebuild: the winners per key as sorted arrays instead of a dict.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import struct
from itertools import chain, repeat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import crc32c as _crc32c
import numpy as np

from ..base import CorruptDataError
from .group_commit import pwrite_all as _native_pwrite_all

try:  # the C walk and resolution (optional: built where a C compiler was found, see _scan.c)
    from . import _scan as _native
except ImportError:  # pragma: no cover - exercised only on machines without a compiler
    _native = None

#: whether :func:`walk` and :func:`resolve_sorted` run in C by default
NATIVE_WALK = _native is not None
#: one record read and checked in C, the read path's :func:`decode` for a value
#: (``read_value(fd or mapping, offset, size, key) -> value | None``); ``None``: not built
read_value = getattr(_native, "read_value", None)
#: a store's get path in one C call (``Getter(store).get(key, miss)``); ``None``: not built
Getter = getattr(_native, "Getter", None)

if TYPE_CHECKING:
    from ..media import Medium

HEADER = struct.Struct("<IQIIB")
HEADER_SIZE = HEADER.size  # 21
_REST = struct.Struct("<QIIB")  # the header after the CRC
_LENGTHS = struct.Struct("<IIB")  # key_len, value_len, flags (at offset 12)
FLAG_TOMBSTONE = 1
#: sanity bounds used to tell a damaged header from a real one during a scan.  They are also the
#: format's limits: a longer key or value would be written but then skipped (or, in the newest
#: segment, cut off with everything after it) as damage by the next rebuild, so the store refuses
#: them before writing (``IndexedFSBackend.max_value_bytes``, ``store._key_bytes``).
MAX_KEY_LEN = 1 << 16
MAX_VALUE_LEN = 1 << 31

SUFFIX = ".seg"
#: digits of a segment (and hint) file name: every u32 id fits, so names never outgrow the width
ID_WIDTH = 10
#: the highest segment id: snapshots, deltas and the index hold segment ids as u32
MAX_SEGMENT_ID = (1 << 32) - 1
#: a segment file name, new (``ID_WIDTH`` digits) or old (9 digits)
_NAME = re.compile(r"^(\d{9,10})\.seg$")

crc = _crc32c.crc32c


def _os_pwrite_all(fd: int, data: bytes, off: int) -> None:
    """Write all of ``data`` at ``off`` (a short write is rare: no memoryview up front)."""
    done = os.pwrite(fd, data, off)
    if done < len(data):
        view = memoryview(data)
        while done < len(data):
            done += os.pwrite(fd, view[done:], off + done)


#: the append: C's pwrite that keeps the GIL (see group_commit) where built, else os.pwrite
_pwrite_all = _native_pwrite_all or _os_pwrite_all
#: buffers per ``pwritev`` call (Linux's ``IOV_MAX``)
IOV_MAX = 1024


def _pwritev_all(fd: int, parts: Sequence[bytes | memoryview], off: int) -> None:
    """Write the buffers ``parts`` one after the other at ``off`` with gather writes: the
    kernel copies each from where it is (a large value is never copied into one buffer
    first).  A short write resumes inside the buffer it stopped in."""
    views = [memoryview(p) for p in parts]
    i = 0
    while i < len(views):
        done = os.pwritev(fd, views[i:i + IOV_MAX], off)
        off += done
        while i < len(views) and done >= views[i].nbytes:
            done -= views[i].nbytes
            i += 1
        if done:
            views[i] = views[i][done:]


def data_length(data: bytes | Sequence[bytes | memoryview]) -> int:
    """Bytes of an append's ``data``: one buffer, or the buffers of a gather write."""
    return len(data) if isinstance(data, (bytes, bytearray)) else sum(memoryview(p).nbytes for p in data)

#: how far ahead of the appends reserved space is turned into written zeros (Segment.append)
ZERO_AHEAD = 256 << 10
_ZEROS = memoryview(bytes(ZERO_AHEAD))


def segment_name(seg_id: int) -> str:
    """The file name a new segment ``seg_id`` gets."""
    return f"{seg_id:0{ID_WIDTH}d}{SUFFIX}"


def numbered_files(medium: "Medium", pattern: "re.Pattern[str]") -> list[int]:
    """The numbers of the files in the medium's directory whose name ``pattern`` matches (its
    group 1 is the number), ascending, each once: segments, hint files and snapshots are all
    named so."""
    return sorted({int(m.group(1)) for m in map(pattern.match, medium.listdir()) if m})


def list_segments(medium: "Medium", names: list[str] | None = None) -> dict[int, list[str]]:
    """Segment id -> the names of the regular files in the medium's directory (or among
    ``names``) named like that segment (an old store's 9-digit name first), ids ascending.
    More than one name for an id, or an id above ``MAX_SEGMENT_ID``, is not of the store's
    making (it never names a new segment after an id in use): the caller decides (the rebuild
    takes the first name and leaves the other files alone)."""
    out: dict[int, list[str]] = {}
    for name in sorted(medium.list_files() if names is None else names, key=len):
        m = _NAME.match(name)
        if m:
            out.setdefault(int(m.group(1)), []).append(name)
    return dict(sorted(out.items()))


def list_segment_ids(medium: "Medium") -> list[int]:
    """Ids of the segment files in the medium's directory, oldest first."""
    return list(list_segments(medium))


def encode(seq: int, key: bytes, value: bytes, flags: int = 0,
           _pack=HEADER.pack, _rest=_REST.pack, _crc=crc) -> bytes:
    """One record, ready for a single ``write``.  On the put hot path: the CRC is chained over
    the header rest, key and value (no concatenation just for it), then one ``pack``."""
    kl, vl = len(key), len(value)
    c = _crc(value, _crc(key, _crc(_rest(seq, kl, vl, flags))))
    return _pack(c, seq, kl, vl, flags) + key + value


def encode_head(seq: int, key: bytes, value: bytes | memoryview, flags: int = 0) -> bytes:
    """The header and key of a record whose value follows from its own buffer: :func:`encode`
    without copying a large value into the record (the caller writes both with one gather write,
    :meth:`Segment.append`); same bytes on disk, same CRC."""
    kl, vl = len(key), len(value)
    c = crc(value, crc(key, crc(_REST.pack(seq, kl, vl, flags))))
    return HEADER.pack(c, seq, kl, vl, flags) + key


def decode(data: bytes, key: str | None = None) -> tuple[int, str, bytes, int]:
    """Verify and split one record read back from disk: ``(seq, key, value, flags)``.

    Raises :class:`CorruptDataError` on a short read, CRC mismatch or (if ``key`` is given) a
    record that belongs to another key; bad bytes are never returned.
    """
    if len(data) < HEADER_SIZE:
        raise CorruptDataError(f"record truncated: {len(data)} bytes, header needs {HEADER_SIZE}")
    c, seq, klen, vlen, flags = HEADER.unpack_from(data)
    if HEADER_SIZE + klen + vlen != len(data):
        raise CorruptDataError("record length fields do not match the index entry")
    if crc(memoryview(data)[4:]) != c:
        raise CorruptDataError("record CRC mismatch")
    k = data[HEADER_SIZE : HEADER_SIZE + klen].decode("utf-8", "replace")
    if key is not None and k != key:
        raise CorruptDataError(f"record holds key {k!r}, index expected {key!r}")
    return seq, k, data[HEADER_SIZE + klen :], flags


def open_segment(medium: "Medium", seg_id: int, create: bool = False,
                 name: str | None = None) -> "AnySegment":
    """Segment ``seg_id`` of ``medium`` (``create``: a new, empty one), in file ``name``
    (default :func:`segment_name`; an old store's segments keep their 9-digit names)."""
    if create and seg_id > MAX_SEGMENT_ID:
        raise ValueError(f"segment id {seg_id} is past the last one ({MAX_SEGMENT_ID})")
    if medium.kind == "local":
        return Segment(medium, seg_id, create, name)
    return MediumSegment(medium, seg_id, create, name)


def zeros_from(data: bytes, at: int) -> bool:
    """Whether ``data[at:]`` is all zero bytes: space reserved by :meth:`Segment.reserve` that no
    record reached, as opposed to a torn or damaged tail."""
    return not np.frombuffer(data, np.uint8, offset=min(at, len(data))).any()


class Segment:
    """One open local segment file: one fd for ``pwrite`` appends and ``pread`` reads
    (thread-safe).

    ``size`` is where the records end (the next append goes there); the file may be longer when
    space past it was reserved (:meth:`reserve`): zeros, which the recovery scan tells apart from
    a torn tail (:func:`zeros_from`) and :meth:`trim` gives back when the segment is sealed.

    Reserved space is *unwritten* (``fallocate``): the first write into each of its blocks
    converts it, and the sync that makes the write durable must persist that conversion too,
    which makes a sync into unwritten blocks slower than one into written blocks.  So
    :meth:`append` keeps the appends behind ``zeroed``, a watermark of written zeros it moves
    ``ZERO_AHEAD`` bytes at a time: one zero write per ``ZERO_AHEAD`` bytes of records, whose
    conversion one group sync carries, instead of a conversion in nearly every sync.
    """

    def __init__(self, medium: "Medium", seg_id: int, create: bool = False,
                 name: str | None = None) -> None:
        self.id = seg_id
        self.name = name or segment_name(seg_id)
        self.path = medium.full(self.name)  # type: ignore[attr-defined]
        #: the medium's, so the store's: appends (under the store's lock) count unlocked
        self.ledger = medium.ledger
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.ledger.record_shared("open")
        self.fd = os.open(self.path, flags, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.file_size = self.size  # records plus reserved space
        self.zeroed = self.size  # below this the file is written (records or zeros), see append
        #: lowest seq of any record in the file (for the tombstone-drop rule); 0 = unknown
        self.min_seq = 0 if not create else 1 << 63
        #: the file's first bytes mapped read-only, or None: a read inside the mapping is a
        #: slice of the page cache, no system call; any other read is a ``pread``.  A sealed
        #: segment maps its records (:meth:`map_sealed`), the active one the space it reserved
        #: (:meth:`reserve`).  The mapping never reaches past the end of the file, where a read
        #: would be a SIGBUS instead of an error: every cut of the file (:meth:`trim`,
        #: :meth:`truncate`, a failed append, in C too) drops it under the store's lock, which
        #: every read of a mapping holds.
        self.mapped: mmap.mmap | None = None

    def map_sealed(self) -> None:
        """Map the records read-only, once the file takes no more appends.  Safe because a
        sealed file never changes size or bytes while the store holds it (its only writer is
        this process, which appends to the newest segment alone), and the mapping is closed
        with the fd."""
        if self.mapped is None or len(self.mapped) != self.size:
            self._map(self.size)

    def _map(self, length: int) -> None:
        """Map ``[0, length)`` in place of any earlier mapping (``length`` ≤ the file's size)."""
        self.unmap()
        if length > 0:
            try:
                self.mapped = mmap.mmap(self.fd, length, prot=mmap.PROT_READ)
            except (OSError, ValueError):  # no address space left: reads stay on pread
                self.mapped = None

    def unmap(self) -> None:
        """Drop the mapping (reads go back to ``pread``); before any cut of the file."""
        if self.mapped is not None:
            self.mapped.close()
            self.mapped = None

    def mapped_range(self, offset: int, size: int) -> mmap.mmap | None:
        """The mapping, if it holds ``[offset, offset + size)``; else None (``pread`` it): the
        one bound every reader of a mapping checks, here in Python as ``_scan.c`` checks it."""
        m = self.mapped
        return m if m is not None and offset + size <= len(m) else None

    def reserve(self, total: int) -> bool:
        """Allocate the file up to ``total`` bytes now (``fallocate``; the new space reads as
        zeros) and make that durable once.  Why: an ``fdatasync`` after an append that grows the
        file must also journal the new file size; inside allocated space it need not, so each
        sync has less to write — the trick of PostgreSQL's preallocated WAL segments and
        RocksDB's ``allow_fallocate``.  Best effort: where the filesystem cannot
        (no ``fallocate``, no room) the segment keeps growing by plain appends.

        The reserved file is then mapped whole, so that reads of the records appended into it
        take no system call either (what lies past ``size`` is never read: an index entry
        points below it)."""
        if total <= self.file_size:
            if self.mapped is None:
                self._map(self.file_size)
            return True
        try:
            self.ledger.record_shared("fallocate")
            os.posix_fallocate(self.fd, self.file_size, total - self.file_size)
            self.ledger.record_shared("fsync")
            os.fsync(self.fd)
        except OSError:
            try:  # a failed fallocate may leave part of the range allocated: give it back
                os.ftruncate(self.fd, self.file_size)
            except OSError:
                pass
            return False
        self.file_size = total
        self._map(total)
        return True

    def trim(self) -> None:
        """Give back reserved space past the records (sealing or closing the segment)."""
        if self.file_size > self.size:
            self.unmap()
            os.ftruncate(self.fd, self.size)
            self.file_size = self.size

    def append(self, data: bytes | Sequence[bytes | memoryview]) -> int:
        """Write ``data`` (one buffer, or several written by one gather write) at the end;
        return its offset.  On any error (``ENOSPC``) the file is cut back to its previous end
        so no partial record stays behind, and the error re-raised."""
        off = self.size
        end = off + data_length(data)
        try:
            if end > self.zeroed and self.zeroed < self.file_size:
                self._zero_ahead(end)
            self.ledger.record("write", end - off)  # one pwrite or pwritev (its rare rest: not)
            if isinstance(data, (bytes, bytearray)):
                _pwrite_all(self.fd, data, off)
            else:
                _pwritev_all(self.fd, data, off)
        except OSError:
            try:
                self.unmap()
                os.ftruncate(self.fd, off)
                self.file_size = self.zeroed = off
            except OSError:
                pass
            raise
        self.size = end
        if end > self.zeroed:  # appended past the zeros (no reserved space there): keep
            self.zeroed = end  # zeroed >= size, so zeros never land on a record
        if end > self.file_size:
            self.file_size = end
        return off

    def _zero_ahead(self, end: int) -> None:
        """Write zeros from ``zeroed`` past ``end`` (``ZERO_AHEAD`` at least), within the
        reserved space only.  ``zeroed >= size`` always holds (appends move it), so no record
        lies there and nothing is overwritten.  An append longer than ``ZERO_AHEAD`` writes its
        own region anyway: the zeros then start at its end, so its bytes are not written twice."""
        start = self.zeroed if end - self.zeroed <= ZERO_AHEAD else end
        stop = min(max(end, start + ZERO_AHEAD), self.file_size)
        while start < stop:
            k = min(stop - start, ZERO_AHEAD)
            self.ledger.record("write", k)
            _pwrite_all(self.fd, _ZEROS[:k], start)
            start += k
        self.zeroed = stop

    def read(self, offset: int, size: int) -> bytes:
        m = self.mapped_range(offset, size)
        if m is not None:
            return m[offset : offset + size]
        data = os.pread(self.fd, size, offset)
        self.ledger.record_shared("read", 0, len(data))
        if len(data) < size:  # one read stops short of a very large record (Linux caps it)
            data = self._read_rest(data, offset, size)
        return data

    def _read_rest(self, data: bytes, offset: int, size: int) -> bytes:
        """``data`` (the first bytes of ``size`` at ``offset``) completed by further reads; short
        only at the end of the file, which the caller's length check then reports."""
        parts = [data]
        got = len(data)
        while got < size:
            more = os.pread(self.fd, size - got, offset + got)
            self.ledger.record_shared("read", 0, len(more))
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def data_end(self, start: int = 0) -> int:
        """Where the bytes that may be non-zero end, from ``start`` on: the file's size, or the
        start of a hole (space reserved by ``fallocate`` and never written) that runs to the end
        of the file.  A hole reads as zeros, so a reader may stop there and take the rest as
        reserved space; this spares a crash rebuild reading the untouched reservation."""
        size = os.fstat(self.fd).st_size
        try:
            hole = os.lseek(self.fd, start, os.SEEK_HOLE)
            if hole >= size:
                return size
            try:
                os.lseek(self.fd, hole, os.SEEK_DATA)
                return size  # data after the hole: read it all
            except OSError as exc:
                return hole if exc.errno == errno.ENXIO else size
        except OSError:  # no SEEK_HOLE here: read everything
            return size

    def read_all(self, start: int = 0, stop: int | None = None) -> bytes:
        size = os.fstat(self.fd).st_size if stop is None else stop
        chunks = []
        pos = start
        while pos < size:
            chunk = os.pread(self.fd, min(size - pos, 1 << 28), pos)
            self.ledger.record_shared("read", 0, len(chunk))
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def truncate(self, size: int) -> None:
        self.unmap()
        self.ledger.record_shared("truncate")
        os.ftruncate(self.fd, size)
        self.ledger.record_shared("fsync")
        os.fsync(self.fd)
        self.size = self.file_size = self.zeroed = size

    def sync(self) -> None:
        self.ledger.record_shared("fsync")
        os.fdatasync(self.fd)

    def seal(self, durable: bool) -> None:
        """The segment takes no more appends: trim its reserved space (and with ``durable``
        make records and size durable — ``fsync``, since the size changed)."""
        self.trim()
        if durable:
            self.ledger.record_shared("fsync")
            os.fsync(self.fd)

    def close(self) -> None:
        self.unmap()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class MediumSegment:
    """A segment on a non-local medium (NFS): appends go to the medium's append file (buffered
    until :meth:`sync`), reads to its read file (which first pushes pending appends)."""

    def __init__(self, medium: "Medium", seg_id: int, create: bool = False,
                 name: str | None = None) -> None:
        self.id = seg_id
        self.name = self.path = name or segment_name(seg_id)
        self.medium = medium
        if create and medium.exists(self.name):
            raise FileExistsError(f"segment {self.name} already exists in {medium.path}")
        self._out = medium.open_append(self.name)
        self._in = medium.open_read(self.name)
        self.size = self._out.size
        self.min_seq = 0 if not create else 1 << 63
        self.mapped = None  # reads go through the medium
        self.fd = None  # no local descriptor (the group commit and the C read look for one)

    def map_sealed(self) -> None:
        pass

    def unmap(self) -> None:
        pass

    def mapped_range(self, offset: int, size: int) -> None:
        return None

    def append(self, data: bytes | Sequence[bytes | memoryview]) -> int:
        if not isinstance(data, (bytes, bytearray)):
            data = b"".join(data)  # the medium's append file takes one buffer
        off = self._out.append(data)
        self.size = off + len(data)
        return off

    def read(self, offset: int, size: int) -> bytes:
        return self._in.pread(offset, size)

    def data_end(self, start: int = 0) -> int:
        return self.medium.size(self.name)

    def read_all(self, start: int = 0, stop: int | None = None) -> bytes:
        size = self.medium.size(self.name) if stop is None else stop
        return self._in.pread(start, size - start) if size > start else b""

    def truncate(self, size: int) -> None:
        self.medium.truncate(self.name, size)
        self.size = size

    def reserve(self, total: int) -> bool:
        return False  # an NFS COMMIT covers the size with the data anyway

    def trim(self) -> None:
        pass

    def sync(self) -> None:
        self._out.sync()

    def seal(self, durable: bool) -> None:
        if durable:
            self._out.sync()

    def close(self) -> None:
        try:
            self._out.close()
        finally:
            self._in.close()


@dataclass
class ScanResult:
    """What scanning one segment found, besides the records it reported."""

    records: int = 0
    #: damaged ranges (each held at least one record, or bytes no record explains)
    corrupt: int = 0
    #: offset where the newest segment's torn tail starts (None if the file ends cleanly)
    tail_at: int | None = None
    #: offset where reserved, never written space starts (all zeros to the end), if any
    reserved_at: int | None = None
    min_seq: int = 1 << 63
    max_seq: int = 0
    notes: list[str] = field(default_factory=list)
    #: damaged byte ranges ``(start, end)``, file offsets, each skipped to the next intact record
    #: (or the file's end); ``corrupt`` counts them
    damaged: list[tuple[int, int]] = field(default_factory=list)
    #: zero ranges followed by intact records: writes a crash kept from the disk, not damage
    gaps: list[tuple[int, int]] = field(default_factory=list)


#: the header as a packed numpy record, to parse many equal-size records at once
_HEADER_DT = np.dtype([("crc", "<u4"), ("seq", "<u8"), ("klen", "<u4"), ("vlen", "<u4"),
                       ("flags", "u1")])
_RUN_FIRST, _RUN_MAX = 512, 1 << 16  # equal-size records tried at once (then grown to the max)
_RUN_MIN = 256  # shorter runs are walked singly: a chunk has a fixed numpy cost
_RUN_LOOK = 16  # records walked singly before looking for a run again where sizes vary


@dataclass
class KeySpans:
    """Keys back to back in one buffer: key ``i`` is ``blob[at[i] : at[i] + lens[i]]`` (no
    Python object per key).  Only the crash rebuild's walk makes these (``walk(spans=True)``);
    they go to :func:`resolve_sorted` in C, and are sliced into ``bytes`` only where keys are
    needed one at a time."""

    blob: bytes
    at: np.ndarray  # int64
    lens: np.ndarray  # uint32

    def __len__(self) -> int:
        return len(self.at)

    def select(self, keep: np.ndarray) -> "KeySpans":
        return KeySpans(self.blob, self.at[keep], self.lens[keep])

    def tolist(self) -> list[bytes]:
        at = self.at.tolist()
        ends = (self.at + self.lens).tolist()
        return list(map(self.blob.__getitem__, map(slice, at, ends)))


def _chunk_spans(chunk) -> tuple:
    """One key chunk of :class:`Records` as ``(blob, at, lens)`` for :func:`resolve_sorted`."""
    if isinstance(chunk, KeySpans):
        return (chunk.blob, np.ascontiguousarray(chunk.at, np.int64),
                np.ascontiguousarray(chunk.lens, np.uint32))
    if isinstance(chunk, np.ndarray):
        n, w = chunk.shape
        return (np.ascontiguousarray(chunk), np.arange(n, dtype=np.int64) * w,
                np.full(n, w, np.uint32))
    lens = np.fromiter(map(len, chunk), np.uint32, len(chunk))
    at = np.cumsum(lens, dtype=np.int64) - lens
    return b"".join(chunk), at, lens


@dataclass
class Records:
    """The CRC-verified records of one segment, as columns in file order.  ``keys`` is a list
    of chunks, each an ``(n, klen)`` uint8 array (a run of equal-size records), a list of
    ``bytes`` (records walked one by one) or, from the crash rebuild's walk only, a
    :class:`KeySpans` (keys left in the segment's bytes)."""

    seg_id: int
    offsets: np.ndarray  # int64, absolute file offsets
    sizes: np.ndarray  # int64
    seqs: np.ndarray  # uint64
    flags: np.ndarray  # uint8
    keys: list

    def __len__(self) -> int:
        return len(self.offsets)

    def key_bytes(self) -> list[bytes]:
        """The keys as ``bytes`` (exact, NUL bytes included)."""
        out: list[bytes] = []
        for chunk in self.keys:
            if isinstance(chunk, list):
                out += chunk
            elif isinstance(chunk, KeySpans):
                out += chunk.tolist()
            elif len(chunk):
                blob, w = chunk.tobytes(), chunk.shape[1]
                out += [blob[i : i + w] for i in range(0, len(blob), w)]
        return out


def _singles(arr: np.ndarray, data: bytes, starts: list[int]) -> tuple:
    """The columns of records walked singly (varying sizes), their headers gathered in one numpy
    step rather than unpacked into Python objects one record at a time."""
    hdr = arr[np.asarray(starts, np.int64)[:, None] + np.arange(HEADER_SIZE)].view(_HEADER_DT)[:, 0]
    klen = hdr["klen"].astype(np.int64)
    sizes = (HEADER_SIZE + klen + hdr["vlen"]).tolist()
    key_at = np.asarray(starts, np.int64) + HEADER_SIZE
    keys = list(map(data.__getitem__, map(slice, key_at.tolist(), (key_at + klen).tolist())))
    return starts, sizes, hdr["crc"], hdr["seq"], hdr["flags"], keys


def _crc_bounds(starts, sizes) -> tuple:
    """Where the CRC-covered bytes of a chunk's records start and end: ranges for a run of
    equal-size records (no list of a million ints), lists for records walked singly."""
    if isinstance(starts, list):
        at = np.asarray(starts, np.int64)
        return (at + 4).tolist(), (at + np.asarray(sizes, np.int64)).tolist()
    first, size = int(starts[0]), int(sizes[0])
    stop = first + len(starts) * size
    return range(first + 4, stop, size), range(first + size, stop + 1, size)


def walk(data: bytes, seg_id: int, base: int, last: bool, *, spans: bool = False,
         native: bool | None = None) -> tuple[ScanResult, Records]:
    """Find and verify the records in ``data`` (the file from offset ``base``).

    Records are followed by their lengths.  Where that fails (a record whose CRC does not match,
    a header that cannot be real, a record running past the end) the walk *resynchronises*: it
    looks for the next offset where a record's header is sane and its CRC checks out
    (:func:`_next_record`) and goes on from there; the bytes in between are one damaged range.
    A record with a bad CRC directly followed by an intact record is skipped by its own length
    (its length led to a record that checks out, so only its other bytes can be damaged); any
    other failure is resynchronised byte by byte, so a damaged length field cannot hide the
    intact records behind it.  How the bytes between are taken:

    * all zeros to the end: reserved space (``reserved_at``), not damage;
    * all zeros followed by an intact record: space no write reached, in flight at a crash
      (``gaps``), not damage;
    * anything else running to the end of the ``last`` segment: a torn tail (``tail_at``), where
      the caller may cut; in any other segment, or followed by an intact record: damage
      (``damaged``, counted in ``corrupt``, one note each).

    A record that fails its CRC is never among the records returned.  On intact data the walk
    is one pass; resynchronisation costs only where there is damage.

    Two implementations of the pass with the same result: the C walk of ``_scan.c`` (``native``,
    the default where it was built) and :func:`_raw_python`, the reference and fallback; the
    resynchronisation and the rules above are shared (:func:`_assemble`), so they cannot drift
    apart there.  ``spans``: the keys may come as :class:`KeySpans` into ``data`` (the crash
    rebuild, which resolves them in C); otherwise as ``bytes``/matrix chunks, the form hint
    files and compaction take.
    """
    use_c = NATIVE_WALK if native is None else native
    res, pieces = _assemble(data, seg_id, base, last, _raw_native if use_c else _raw_python)
    cols = [np.concatenate([getattr(p, c) for p in pieces]) if len(pieces) != 1
            else getattr(pieces[0], c) for c in ("starts", "sizes", "seqs", "flags")]
    keys: list = []
    for p in pieces:
        for ch in p.keys:
            if not len(ch):
                continue
            keys += [ch] if spans or not isinstance(ch, KeySpans) else _plain_keys(ch)
    return res, Records(seg_id, cols[0] + base, cols[1], cols[2], cols[3], keys)


@dataclass
class _Raw:
    """One pass of a walk from some offset: every record whose header was sane and in bounds,
    in file order (offsets into the walked buffer), ``bad`` where its CRC did not match, and
    where the pass stopped (``stop_at``, -1: at the end)."""

    starts: np.ndarray  # int64
    sizes: np.ndarray  # int64
    seqs: np.ndarray  # uint64
    flags: np.ndarray  # uint8
    bad: np.ndarray  # bool
    keys: list  # chunks, as in Records
    stop_at: int

    def select(self, keep: np.ndarray) -> "_Raw":
        """The records where ``keep`` is set."""
        keys, at = [], 0
        for ch in self.keys:
            m = len(ch)
            sel = keep[at : at + m]
            if isinstance(ch, KeySpans):
                ch = ch.select(sel)
            elif isinstance(ch, np.ndarray):
                ch = ch[sel]
            else:
                ch = [x for x, y in zip(ch, sel.tolist()) if y]
            keys.append(ch)
            at += m
        return _Raw(self.starts[keep], self.sizes[keep], self.seqs[keep], self.flags[keep],
                    self.bad[keep], keys, self.stop_at)


def _assemble(data: bytes, seg_id: int, base: int, last: bool,
              raw_walk) -> tuple[ScanResult, list[_Raw]]:
    """The rules of :func:`walk` over the passes of ``raw_walk`` (C or Python): the intact
    records of each pass, and where a pass breaks, the next intact record found by
    :func:`_next_record` to start the next pass from."""
    res = ScanResult()
    end = len(data)
    pieces: list[_Raw] = []
    pos = 0
    while True:
        raw = raw_walk(data, pos)
        brk = raw.stop_at if raw.stop_at >= 0 else None
        keep = None
        if raw.bad.any():
            keep = ~raw.bad
            starts, n = raw.starts, len(raw.starts)
            for i in np.flatnonzero(raw.bad).tolist():
                if i + 1 < n and keep[i + 1]:  # its length led to an intact record
                    res.damaged.append((int(starts[i]), int(starts[i + 1])))
                else:  # its length is not to be trusted: resynchronise from it
                    brk = int(starts[i])
                    keep[i:] = False
                    break
        pieces.append(raw if keep is None else raw.select(keep))
        if brk is None:
            break
        if zeros_from(data, brk):
            res.reserved_at = brk  # the records end here; the rest is reserved space
            break
        nxt = _next_record(data, brk + 1)
        if nxt < 0:
            if last:
                res.tail_at = brk
            else:
                res.damaged.append((brk, end))
            break
        if not np.frombuffer(data, np.uint8, nxt - brk, brk).any():
            res.gaps.append((brk, nxt))
        else:
            res.damaged.append((brk, nxt))
        pos = nxt
    res.damaged.sort()
    seqs = [p.seqs for p in pieces if len(p.seqs)]
    res.records = sum(map(len, seqs))
    if seqs:
        res.min_seq = min(int(s.min()) for s in seqs)
        res.max_seq = max(int(s.max()) for s in seqs)
    res.corrupt = len(res.damaged)
    for a, b in res.damaged:
        tail = "its end" if b == end else f"the next intact record at offset {base + b}"
        res.notes.append(f"segment {seg_id}: damaged bytes from offset {base + a} to {tail} "
                         f"({b - a} bytes) skipped")
    for a, b in res.gaps:
        res.notes.append(f"segment {seg_id}: {b - a} zero bytes at offset {base + a} before "
                         f"intact records: a write a crash kept from the disk, not damage")
    res.damaged = [(base + a, base + b) for a, b in res.damaged]
    res.gaps = [(base + a, base + b) for a, b in res.gaps]
    if res.tail_at is not None:
        res.tail_at += base
    if res.reserved_at is not None:
        res.reserved_at += base
    return res, pieces


#: the first window :func:`_next_record` searches (it doubles up to the max): the next intact
#: record usually starts within a record or two of the damage
_FIND_FIRST, _FIND_MAX = 1 << 12, 1 << 22


def _next_record(data: bytes, pos: int) -> int:
    """The first offset at or after ``pos`` where an intact record starts (a sane header, the
    record inside ``data``, its CRC matching), or -1.  Offsets are screened a window at a time
    in numpy (header bounds, the record in bounds) and only the candidates left have their CRC
    computed.  Only the damage path comes here."""
    arr = np.frombuffer(data, np.uint8)
    end = len(data)
    H = HEADER_SIZE
    window = _FIND_FIRST
    while pos + H <= end:
        n = min(window, end - H + 1 - pos)

        def u32(at: int) -> np.ndarray:
            b = [arr[pos + at + j : pos + at + j + n].astype(np.uint64) for j in range(4)]
            return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)

        klen, vlen = u32(12), u32(16)
        at = np.arange(pos, pos + n, dtype=np.uint64)
        ok = ((klen >= 1) & (klen <= MAX_KEY_LEN) & (vlen <= MAX_VALUE_LEN)
              & (arr[pos + 20 : pos + 20 + n] <= 1) & (at + H + klen + vlen <= end))
        for i in np.flatnonzero(ok).tolist():
            q = pos + i
            size = H + int(klen[i]) + int(vlen[i])
            if crc(memoryview(data)[q + 4 : q + size]) == _U32.unpack_from(data, q)[0]:
                return q
        pos += n
        window = min(2 * window, _FIND_MAX)
    return -1


_U32 = struct.Struct("<I")


def _raw_native(data: bytes, start: int) -> _Raw:
    """One pass of the C walk (``_scan.walk``) from ``start``: every header and CRC checked."""
    view = memoryview(data)[start:] if start else data
    out = _native.walk(view)  # type: ignore[union-attr]
    st_b, kl_b, sz_b, sq_b, fl_b, bad_b, at_b, blob, stop_at, _kind = out
    starts = np.frombuffer(st_b, np.int64)
    if start:
        starts = starts + start
    keys = KeySpans(blob, np.frombuffer(at_b, np.int64), np.frombuffer(kl_b, np.uint32))
    return _Raw(starts, np.frombuffer(sz_b, np.int64), np.frombuffer(sq_b, np.uint64),
                np.frombuffer(fl_b, np.uint8), np.frombuffer(bad_b, np.bool_), [keys],
                stop_at + start if stop_at >= 0 else -1)


def _plain_keys(ks: KeySpans) -> list:
    """The key chunks of the Python walk for :class:`KeySpans`: one matrix if every key has
    the same length (one numpy gather), else one list of ``bytes``."""
    w = int(ks.lens[0])
    if (ks.lens == w).all():
        arr = np.frombuffer(ks.blob, np.uint8)
        return [arr[ks.at[:, None] + np.arange(w)]]
    return [ks.tolist()]


def _raw_python(data: bytes, start: int) -> _Raw:
    """One pass of :func:`walk` from ``start`` in Python and numpy, in two phases.  Phase 1
    finds the record boundaries exactly as a record-by-record walk would (a record with a bad
    CRC is passed by its length; an insane header, or a header or record running past the end,
    stops the pass), but checks runs of equal-size records (the usual case) in one numpy step;
    phase 2 checks every CRC (one C call per record).  The reference for ``_scan.walk``."""
    arr = np.frombuffer(data, np.uint8)
    end = len(data)
    H = HEADER_SIZE
    unpack = HEADER.unpack_from
    kvf = _LENGTHS.unpack_from
    chunks: list[tuple] = []  # (starts, sizes, crcs, seqs, flags, keys) in file order
    ones: list[int] = []  # starts of records walked singly, not yet in a chunk
    append = ones.append
    pos = start
    stop_at = -1
    try_run_at = 0  # walk singly until this offset after a run attempt that did not pay
    run_cap = _RUN_FIRST  # records tried in the next run attempt (grows while runs pay)
    backoff = _RUN_FIRST  # records walked singly after a failed attempt (doubles while failing)
    while pos < end:
        if pos + H > end:
            stop_at = pos
            break
        c, seq, klen, vlen, flags = unpack(data, pos)
        if klen == 0 or klen > MAX_KEY_LEN or vlen > MAX_VALUE_LEN or flags > 1:
            stop_at = pos
            break
        size = H + klen + vlen
        if pos + size > end:
            stop_at = pos
            break
        if pos >= try_run_at and not (end - pos >= 2 * size
                                      and unpack(data, pos + size)[2:4] == (klen, vlen)):
            try_run_at = pos + _RUN_LOOK * size  # sizes vary here: look again a bit later
        elif pos >= try_run_at:
            n = min((end - pos) // size, run_cap)
            # a run: are the next n records all this size?  (each one's length fixes where
            # the next starts, so equal sizes = exactly the positions a walk would visit)
            block = arr[pos : pos + n * size].reshape(n, size)
            hdr = np.ascontiguousarray(block[:, :H]).view(_HEADER_DT)[:, 0]
            good = (hdr["klen"] == klen) & (hdr["vlen"] == vlen) & (hdr["flags"] <= 1)
            k = n if good.all() else int(good.argmin())
            if k >= _RUN_MIN:
                if ones:
                    chunks.append(_singles(arr, data, ones))
                    ones = []
                    append = ones.append
                hdr = hdr[:k]
                chunks.append((pos + size * np.arange(k, dtype=np.int64),
                               np.full(k, size, np.int64), hdr["crc"], hdr["seq"], hdr["flags"],
                               np.ascontiguousarray(block[:k, H : H + klen])))  # frees `data`
                pos += k * size
                run_cap = _RUN_MAX if k == n else _RUN_FIRST
                backoff = _RUN_FIRST
                continue
            # no run here: walk singly for a while before trying again
            run_cap = _RUN_FIRST
            try_run_at = pos + backoff * size
            backoff = min(2 * backoff, 1024)
        ones.append(pos)
        pos += size
        # the records up to the next run attempt, in a loop that reads only the length fields;
        # anything unusual (a short or insane header, a record past the end) leaves it, and the
        # full checks above look at that position again
        stop = min(try_run_at, end - H)
        while pos < stop:
            klen, vlen, flags = kvf(data, pos + 12)
            size = H + klen + vlen
            if klen == 0 or klen > MAX_KEY_LEN or vlen > MAX_VALUE_LEN or flags > 1 \
                    or pos + size > end:
                break
            append(pos)
            pos += size
    if ones:
        chunks.append(_singles(arr, data, ones))

    # phase 2: every CRC, then the columns of the good records
    if chunks:
        starts = np.concatenate([np.asarray(ch[0], np.int64) for ch in chunks])
        sizes = np.concatenate([np.asarray(ch[1], np.int64) for ch in chunks])
        stored = np.concatenate([np.asarray(ch[2], np.uint32) for ch in chunks])
        seqs = np.concatenate([np.asarray(ch[3], np.uint64) for ch in chunks])
        flags_a = np.concatenate([np.asarray(ch[4], np.uint8) for ch in chunks])
    else:
        starts = sizes = np.zeros(0, np.int64)
        stored, seqs, flags_a = (np.zeros(0, t) for t in (np.uint32, np.uint64, np.uint8))
    # one crc32c call per record, over a memoryview slice (no copy, no Python loop)
    bounds = [_crc_bounds(ch[0], ch[1]) for ch in chunks]
    mv = memoryview(data)
    slices = map(slice, chain.from_iterable(b[0] for b in bounds),
                 chain.from_iterable(b[1] for b in bounds))
    crcs = np.fromiter(map(crc, map(mv.__getitem__, slices)), np.uint32, len(starts))
    return _Raw(starts, sizes, seqs, flags_a, crcs != stored, [ch[5] for ch in chunks], stop_at)


def scan(data: bytes, seg_id: int, base: int, last: bool, values: dict, tombs: dict) -> ScanResult:
    """:func:`walk` the records in ``data`` and resolve them into ``values``/``tombs`` (key ->
    ``(seg_id, offset, size, seq)``): a record replaces what is there if its seq is at least as
    high (equal seq = a compaction copy; the later one wins), and a key sits in at most one of the
    two.  ``values`` may be a SortedDict: it is filled through plain ``dict`` calls and the caller
    rebuilds its key order once.  Walk semantics (CRC, torn tail) as in :func:`walk`."""
    res, recs = walk(data, seg_id, base, last)
    resolve(recs, values, tombs)
    return res


def resolve(recs: Records, values: dict, tombs: dict) -> None:
    """Apply ``recs`` in file order to ``values``/``tombs`` (the rule of :func:`scan`)."""
    vget, vset = dict.get.__get__(values), dict.__setitem__.__get__(values)
    vpop = dict.pop.__get__(values)
    tget, tpop = tombs.get, tombs.pop
    sid = recs.seg_id
    keys = [k.decode("utf-8", "replace") for k in recs.key_bytes()]
    for key, off, size, seq, flags in zip(keys, recs.offsets.tolist(), recs.sizes.tolist(),
                                          recs.seqs.tolist(), recs.flags.tolist()):
        cur = vget(key)
        if cur is None and tombs:
            cur = tget(key)
        if cur is None or seq >= cur[3]:
            if flags:
                tombs[key] = (sid, off, size, seq)
                vpop(key, None)
            else:
                vset(key, (sid, off, size, seq))
                if tombs:
                    tpop(key, None)


def resolve_all(parts: list[Records]) -> tuple[dict, dict]:
    """:func:`resolve` of ``parts`` (in log order) into new ``values`` and ``tombs``.  Where the
    records' ``seq`` never falls in log order (no compaction copy among them: every write takes
    its ``seq`` and its place in the log under one lock), the last record of a key is its
    highest, and the dicts are built in C (``dict(zip(...))``, last one wins) rather than record
    by record."""
    values: dict = {}
    tombs: dict = {}
    if not parts:
        return values, tombs
    seqs = np.concatenate([r.seqs for r in parts])
    if len(seqs) > 1 and (seqs[1:] < seqs[:-1]).any():
        for recs in parts:
            resolve(recs, values, tombs)
        return values, tombs
    keys: list[str] = []
    ents: list[tuple] = []
    for r in parts:
        keys += [k.decode("utf-8", "replace") for k in r.key_bytes()]
        ents += zip(repeat(r.seg_id), r.offsets.tolist(), r.sizes.tolist(), r.seqs.tolist())
    flags = np.concatenate([r.flags for r in parts])
    if not flags.any():
        return dict(zip(keys, ents)), tombs
    latest = dict(zip(keys, zip(ents, flags.tolist())))
    for key, (e, f) in latest.items():
        (tombs if f else values)[key] = e
    return values, tombs


@dataclass
class Resolved:
    """The winners of a log's records per key (:func:`resolve_sorted`): the values as a sorted
    fixed-width key array with columns, laid out like an index snapshot's base, and the
    tombstones one by one (there are few)."""

    keys: np.ndarray  # 'S<w>', sorted, distinct, NUL-padded utf-8
    cols: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # seg u32, off, size, seq u64
    tombs: list[tuple[str, tuple[int, int, int, int]]]  # (key, entry) in key order


def resolve_sorted(parts: list[Records]) -> Resolved | None:
    """:func:`resolve_all`'s result, in C and as sorted columns: no Python object per key.
    ``None`` where it cannot be exact (no C extension; a key with a NUL or a non-ASCII byte,
    or wider than 256 bytes): the caller resolves in Python then."""
    if _native is None:
        return None
    parts = [r for r in parts if len(r)]
    if not parts:
        e = np.zeros(0, np.uint64)
        return Resolved(np.zeros(0, "S1"), (e.astype(np.uint32), e, e.astype(np.uint32), e), [])
    chunks = [ch for r in parts for ch in r.keys if len(ch)]
    spans = [_chunk_spans(ch) for ch in chunks]

    def column(name: str, dtype) -> np.ndarray:  # no copy for one part of the right type
        cols = [getattr(r, name) for r in parts]
        return np.ascontiguousarray(cols[0] if len(cols) == 1 else np.concatenate(cols), dtype)

    seq, flags = column("seqs", np.uint64), column("flags", np.uint8)
    out = _native.resolve(spans, seq, flags)
    if out is None:
        return None
    w, vkeys, vidx_b, tidx_b = out
    vidx, tidx = np.frombuffer(vidx_b, np.int64), np.frombuffer(tidx_b, np.int64)
    off, size = column("offsets", np.int64), column("sizes", np.int64)
    if len(parts) == 1:
        vseg = np.full(len(vidx), parts[0].seg_id, np.uint32)
    else:
        vseg = np.concatenate([np.full(len(r), r.seg_id, np.uint32) for r in parts])[vidx]
    cols = (vseg, off[vidx].astype(np.uint64), size[vidx].astype(np.uint32), seq[vidx])
    keys = np.frombuffer(vkeys, f"S{w}")
    tombs = []
    if len(tidx):
        seg = np.concatenate([np.full(len(r), r.seg_id, np.uint32) for r in parts])
        firsts = np.cumsum([len(sp[1]) for sp in spans]) - [len(sp[1]) for sp in spans]
        which = np.searchsorted(firsts, tidx, side="right") - 1
        for i, c in zip(tidx.tolist(), which.tolist()):
            blob, at, lens = spans[c]
            j = i - int(firsts[c])
            a = int(at[j])
            key = bytes(memoryview(blob).cast("B")[a : a + int(lens[j])]).decode("ascii")
            tombs.append((key, (int(seg[i]), int(off[i]), int(size[i]), int(seq[i]))))
    return Resolved(keys, cols, tombs)


AnySegment = Segment | MediumSegment
