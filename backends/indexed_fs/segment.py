"""Segment files: the record format, its CRC, appends, reads and the recovery scan.

A segment is an append-only file ``NNNNNNNNN.seg`` (zero-padded id, so ``ls`` order is write
order).  Each record is::

    crc32c:u32 | seq:u64 | key_len:u32 | value_len:u32 | flags:u8 | key (utf-8) | value

all little-endian; the CRC covers every byte after itself.  ``flags`` bit 0 marks a tombstone
(a delete, empty value).  ``seq`` is a store-wide write number: when several records of one key
exist (an overwrite, or a copy left by compaction) the highest ``seq`` is the truth.

Two implementations behind :func:`open_segment`: :class:`Segment` on a local directory keeps the
hot path a raw ``os.pwrite``/``os.fdatasync`` on one fd; :class:`MediumSegment` goes through the
medium's append/read files (NFS: appends are buffered and one ``sync`` sends them all).
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import crc32c as _crc32c

from ..base import CorruptDataError

if TYPE_CHECKING:
    from ..media import Medium

HEADER = struct.Struct("<IQIIB")
HEADER_SIZE = HEADER.size  # 21
_REST = struct.Struct("<QIIB")  # the header after the CRC
FLAG_TOMBSTONE = 1
#: sanity bounds used to tell a damaged header from a real one during a scan
MAX_KEY_LEN = 1 << 16
MAX_VALUE_LEN = 1 << 31

SUFFIX = ".seg"
_NAME = re.compile(r"^(\d{9})\.seg$")

crc = _crc32c.crc32c


def segment_name(seg_id: int) -> str:
    return f"{seg_id:09d}{SUFFIX}"


def list_segment_ids(medium: "Medium") -> list[int]:
    """Ids of the segment files in the medium's directory, oldest first."""
    out = []
    for name in medium.listdir():
        m = _NAME.match(name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def encode(seq: int, key: bytes, value: bytes, flags: int = 0) -> bytes:
    """One record, ready for a single ``write``."""
    rest = _REST.pack(seq, len(key), len(value), flags)
    c = crc(value, crc(key, crc(rest)))
    return c.to_bytes(4, "little") + rest + key + value


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


def open_segment(medium: "Medium", seg_id: int, create: bool = False) -> "AnySegment":
    """Segment ``seg_id`` of ``medium`` (``create``: a new, empty one)."""
    if medium.kind == "local":
        return Segment(medium, seg_id, create)
    return MediumSegment(medium, seg_id, create)


class Segment:
    """One open local segment file: one fd for ``pwrite`` appends and ``pread`` reads
    (thread-safe)."""

    def __init__(self, medium: "Medium", seg_id: int, create: bool = False) -> None:
        self.id = seg_id
        self.name = segment_name(seg_id)
        self.path = medium.full(self.name)  # type: ignore[attr-defined]
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(self.path, flags, 0o644)
        self.size = os.fstat(self.fd).st_size
        #: lowest seq of any record in the file (for the tombstone-drop rule); 0 = unknown
        self.min_seq = 0 if not create else 1 << 63

    def append(self, data: bytes) -> int:
        """Write ``data`` at the end; return its offset.  On any error (``ENOSPC``) the file is
        cut back to its previous end so no partial record stays behind, and the error re-raised."""
        off = self.size
        view = memoryview(data)
        done = 0
        try:
            while done < len(data):
                done += os.pwrite(self.fd, view[done:], off + done)
        except OSError:
            try:
                os.ftruncate(self.fd, off)
            except OSError:
                pass
            raise
        self.size = off + len(data)
        return off

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self.fd, size, offset)

    def read_all(self, start: int = 0) -> bytes:
        size = os.fstat(self.fd).st_size
        chunks = []
        pos = start
        while pos < size:
            chunk = os.pread(self.fd, min(size - pos, 1 << 28), pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)
        os.fsync(self.fd)
        self.size = size

    def sync(self) -> None:
        os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class MediumSegment:
    """A segment on a non-local medium (NFS): appends go to the medium's append file (buffered
    until :meth:`sync`), reads to its read file (which first pushes pending appends)."""

    def __init__(self, medium: "Medium", seg_id: int, create: bool = False) -> None:
        self.id = seg_id
        self.name = self.path = segment_name(seg_id)
        self.medium = medium
        if create and medium.exists(self.name):
            raise FileExistsError(f"segment {self.name} already exists in {medium.path}")
        self._out = medium.open_append(self.name)
        self._in = medium.open_read(self.name)
        self.size = self._out.size
        self.min_seq = 0 if not create else 1 << 63

    def append(self, data: bytes) -> int:
        off = self._out.append(data)
        self.size = off + len(data)
        return off

    def read(self, offset: int, size: int) -> bytes:
        return self._in.pread(offset, size)

    def read_all(self, start: int = 0) -> bytes:
        size = self.medium.size(self.name)
        return self._in.pread(start, size - start) if size > start else b""

    def truncate(self, size: int) -> None:
        self.medium.truncate(self.name, size)
        self.size = size

    def sync(self) -> None:
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
    corrupt: int = 0
    #: offset where a torn/damaged tail starts (None if the file ends cleanly)
    tail_at: int | None = None
    min_seq: int = 1 << 63
    max_seq: int = 0
    notes: list[str] = field(default_factory=list)


def scan(data: bytes, seg_id: int, base: int, last: bool, values: dict, tombs: dict) -> ScanResult:
    """Walk the records in ``data`` (the file from offset ``base``) and resolve them into
    ``values``/``tombs`` (key -> ``(seg_id, offset, size, seq)``): a record replaces what is
    there if its seq is at least as high (equal seq = a compaction copy; the later one wins), and
    a key sits in at most one of the two.  ``values`` may be a SortedDict: it is filled through
    plain ``dict`` calls and the caller rebuilds its key order once.

    A record with a sane header but a bad CRC is counted and skipped by its length; a header that
    cannot be real ends the walk.  In the ``last`` segment, damage that runs to the end of the file
    is a torn tail: ``tail_at`` says where to cut.  One tight loop: the crash-rebuild hot path.
    """
    res = ScanResult()
    unpack = HEADER.unpack_from
    vget, vset, vpop = dict.get.__get__(values), dict.__setitem__.__get__(values), dict.pop.__get__(values)
    tget, tpop = tombs.get, tombs.pop
    mv = memoryview(data)
    end = len(data)
    pos = 0
    n = 0
    min_seq = 1 << 63
    max_seq = 0
    H = HEADER_SIZE
    while pos < end:
        if pos + H > end:
            res.tail_at = pos
            break
        c, seq, klen, vlen, flags = unpack(data, pos)
        if klen == 0 or klen > MAX_KEY_LEN or vlen > MAX_VALUE_LEN or flags > 1:
            res.tail_at = pos
            res.notes.append(f"segment {seg_id}: unreadable header at offset {base + pos}")
            break
        rend = pos + H + klen + vlen
        if rend > end:
            res.tail_at = pos
            break
        if crc(mv[pos + 4 : rend]) != c:
            if last and rend == end:
                res.tail_at = pos
                break
            res.corrupt += 1
            res.notes.append(f"segment {seg_id}: bad CRC at offset {base + pos}")
            pos = rend
            continue
        key = data[pos + H : pos + H + klen].decode("utf-8", "replace")
        cur = vget(key)
        if cur is None and tombs:
            cur = tget(key)
        if cur is None or seq >= cur[3]:
            if flags:
                tombs[key] = (seg_id, base + pos, rend - pos, seq)
                vpop(key, None)
            else:
                vset(key, (seg_id, base + pos, rend - pos, seq))
                if tombs:
                    tpop(key, None)
        n += 1
        if seq < min_seq:
            min_seq = seq
        if seq > max_seq:
            max_seq = seq
        pos = rend
    res.records = n
    res.min_seq = min_seq
    res.max_seq = max_seq
    if res.tail_at is not None:
        res.tail_at += base
    return res


AnySegment = Segment | MediumSegment
