"""Index snapshots ("index flush"): the keydir on disk, searched in place after an open.

File ``snap-NNNNNNNNN.idx`` (N grows by one per flush).  Layout, little-endian, every numeric
section 8-byte aligned::

    header (88 bytes) | off, seq, seg, size: one column each | pad to 8 |
    tombstones:u64[nt*4] | segment table: id, min seq, entries, bytes, reach: u64[ns] each |
    value keys | tombstone keys | crc32c:u32

``seg`` and ``size`` are u32; ``off`` and ``seq`` are u32 where every value fits (as a byte of
the header says), else u64, and the u64 columns come first, so every column lies aligned.

The value entries are sorted by key; keys are one fixed-width utf-8 array (``S<w>``, NUL-padded;
or, if some key itself holds a NUL, a length column and a blob).  An open maps the file
(``mmap``) and adopts the key array and the columns as they lie, so the index *base* is binary
searched in the page cache: nothing is parsed per entry and no Python object is made per key.
The segment table carries, per segment, what the open would otherwise compute from a million
entries: the lowest ``seq`` it holds, the number and bytes of value entries pointing into it (the
GC/compaction accounting) and its *reach* (the highest ``offset + size`` of those entries, so a
truncated segment file is found by one comparison per segment).

The CRC covers the whole file before it and is checked in full at open (one pass over the mapped
file, in C, on a thread beside the rest of the rebuild): a damaged snapshot is never used, the
rebuild falls back to an older one or to the log.  The header records the position
``(segment, offset)`` the snapshot covers: the open reads the log only from there.

Writing (:func:`durable_write`): temp file, sync, rename, directory sync; only then are older
snapshots deleted, so a crash at any point leaves at least one complete snapshot (or none, if
there never was one).  A crash between the sync and the rename leaves a ``*.tmp`` file that the
next open deletes; one between the rename and the directory sync leaves either name, each a
complete file.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .. import failpoints
from .segment import crc, numbered_files

if TYPE_CHECKING:
    from ..media import Medium

AFTER_WRITE = failpoints.declare(
    "indexed_fs.snapshot.after_write",
    "a crash after the snapshot's temp file is written and synced, before its rename: the next "
    "open deletes the temp file and uses the previous snapshot (or the log)")
AFTER_RENAME = failpoints.declare(
    "indexed_fs.snapshot.after_rename",
    "a crash after the snapshot's rename, before the directory sync: the new snapshot or the "
    "previous one is found, each complete")

MAGIC = b"IFSSNAP3"
#: magic, key mode, (pad), n, n_tombs, n_segs, cov seg, cov off, next seq, key width,
#: value-key blob len, tomb-key blob len
_HEAD = struct.Struct("<8sBB6xQQQQQQQQQ")
#: bits of the header's width byte: the offset / seq column is u32 (every value fits), else u64
_OFF32, _SEQ32 = 1, 2
_NAME = re.compile(r"^snap-(\d{9}|[1-9]\d{9,})\.idx$")
#: value keys as one fixed-width array (searched in place), or length-prefixed (a key has a NUL)
KEYS_FIXED, KEYS_LENGTHS = 0, 1


@dataclass
class SegInfo:
    """One row of a snapshot's segment table."""

    min_seq: int
    entries: int  # value entries pointing into the segment
    bytes: int  # their record bytes
    reach: int  # highest offset + size among them (0: none)


@dataclass
class Snapshot:
    number: int
    covered: tuple[int, int]
    next_seq: int
    #: sorted keys: numpy ``S<w>`` array (KEYS_FIXED, over the mapped file) or list of str
    keys: np.ndarray | list[str]
    cols: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # seg, off, size, seq
    tombs: dict[str, tuple[int, int, int, int]]
    segs: dict[int, SegInfo]

    @property
    def seg_min_seq(self) -> dict[int, int]:
        return {sid: info.min_seq for sid, info in self.segs.items()}


def list_numbers(medium: "Medium") -> list[int]:
    """Snapshot numbers present in the medium's directory, newest first."""
    return numbered_files(medium, _NAME)[::-1]


def file_name(number: int) -> str:
    return f"snap-{number:09d}.idx"


def _encode_lengths(keys: list[bytes]) -> bytes:
    lens = np.fromiter((len(k) for k in keys), np.uint32, len(keys))
    return lens.tobytes() + b"".join(keys)


def _decode_lengths(blob: Any, n: int) -> list[str]:
    if n == 0:
        return []
    blob = bytes(blob)
    lens = np.frombuffer(blob, np.uint32, n)
    ends = np.cumsum(lens, dtype=np.int64) + 4 * n
    starts = (ends - lens).tolist()
    return [blob[a:b].decode("utf-8") for a, b in zip(starts, ends.tolist())]


def durable_write(medium: "Medium", name: str, parts: Sequence[bytes], after_write: str,
                  after_rename: str | None, sync: bool = True, sync_dir: bool = True) -> None:
    """Write ``parts`` as file ``name``: temp file, sync, rename, directory sync, with the fail
    points ``after_write`` (temp written and synced, not renamed) and ``after_rename`` (renamed,
    directory not synced).  Without ``sync`` / ``sync_dir`` those syncs are left out (a file
    whose loss or damage costs only time, as a hint's).  A failure before the rename removes the
    temp file."""
    tmp = name + ".tmp"
    medium.delete(tmp)  # a leftover of an earlier failed try: the append below must start empty
    out = medium.open_append(tmp)
    try:
        try:
            for part in parts:
                out.append(part)
            if sync:
                out.sync()
        finally:
            out.close()
        failpoints.hit(after_write)
        medium.rename(tmp, name)
    except BaseException:
        try:
            medium.delete(tmp)
        except OSError:
            pass
        raise
    if after_rename is not None:
        failpoints.hit(after_rename)
    if sync_dir:
        medium.sync_dir()


def seg_table(cols: Sequence[np.ndarray], seg_min_seq: dict[int, int]) -> list[np.ndarray]:
    """The segment table's five columns for value entries ``cols`` (seg, off, size, seq)."""
    seg = np.asarray(cols[0], np.int64)
    size = np.asarray(cols[2], np.uint64)
    used = np.flatnonzero(np.bincount(seg)).tolist() if len(seg) else []
    ids = sorted(set(seg_min_seq) | set(used))
    id_arr = np.array(ids, np.int64)
    at = np.searchsorted(id_arr, seg)
    entries = np.bincount(at, minlength=len(ids)).astype(np.uint64)
    nbytes = np.bincount(at, weights=size.astype(np.float64), minlength=len(ids))
    reach = np.zeros(len(ids), np.uint64)
    if len(seg):
        np.maximum.at(reach, at, np.asarray(cols[1], np.uint64) + size)
    mins = np.array([seg_min_seq.get(i, 0) for i in ids], np.uint64)
    return [id_arr.astype(np.uint64), mins, entries, nbytes.astype(np.uint64), reach]


def _layout(widths: int) -> list[tuple[int, type]]:
    """The value columns in file order as ``(index in seg/off/size/seq, dtype)``: the u64 ones
    first, then the u32 ones, so that every column lies aligned."""
    off = np.uint32 if widths & _OFF32 else np.uint64
    seq = np.uint32 if widths & _SEQ32 else np.uint64
    cols = [(1, off), (3, seq), (0, np.uint32), (2, np.uint32)]
    return [c for c in cols if c[1] is np.uint64] + [c for c in cols if c[1] is np.uint32]


def _pad(widths: int, n: int) -> int:
    """Bytes after the value columns that realign the next section to 8."""
    return sum(np.dtype(dt).itemsize for _, dt in _layout(widths)) * n % 8


def encode(covered: tuple[int, int], next_seq: int, keys: np.ndarray | list[bytes],
           cols: Sequence[np.ndarray], tombs: dict[str, tuple[int, int, int, int]],
           seg_min_seq: dict[int, int], prefix: bytes = b"", narrow: bool = True) -> list[bytes]:
    """The snapshot file as two parts, the body and its CRC (the CRC also covers ``prefix``, a
    header of a file that embeds this layout, a multiple of 8 bytes long).  ``narrow``: offset
    and seq columns as u32 where every value fits; else always u64."""
    if isinstance(keys, np.ndarray):
        mode, width, blob_v = KEYS_FIXED, keys.dtype.itemsize, keys.tobytes()
    else:
        mode, width, blob_v = KEYS_LENGTHS, 0, _encode_lengths(keys)
    tkeys = sorted(tombs)
    blob_t = _encode_lengths([k.encode("utf-8") for k in tkeys])
    t = np.array([tombs[k] for k in tkeys], np.uint64).reshape(-1, 4)
    table = seg_table(cols, seg_min_seq)
    n = len(keys)
    # the offset and seq columns as u32 where every value fits: a smaller file to map and check
    widths = 0
    if narrow and (not n or int(np.max(cols[1])) < 1 << 32):
        widths |= _OFF32
    if narrow and (not n or int(np.max(cols[3])) < 1 << 32):
        widths |= _SEQ32
    parts = [
        prefix,
        _HEAD.pack(MAGIC, mode, widths, n, len(tkeys), len(table[0]), covered[0], covered[1],
                   next_seq, width, len(blob_v), len(blob_t)),
        *(np.ascontiguousarray(cols[i], dt).tobytes() for i, dt in _layout(widths)),
        b"\0" * _pad(widths, n),
        t.tobytes(),
        *(c.tobytes() for c in table),
        blob_v,
        blob_t,
    ]
    return with_crc(parts)


def with_crc(parts: Sequence[bytes]) -> list[bytes]:
    """A file's parts as one body and the CRC-32C of it (little-endian, last).  One buffer, one
    CRC call and (in :func:`durable_write`) one write, not one per part: each call into C or
    the kernel lets another thread take the GIL, and under a busy writer taking it back can
    wait a whole switch interval."""
    body = b"".join(parts)
    return [body, crc(body).to_bytes(4, "little")]


def write(medium: "Medium", number: int, covered: tuple[int, int], next_seq: int,
          keys: np.ndarray | list[bytes], cols: tuple[np.ndarray, ...],
          tombs: dict[str, tuple[int, int, int, int]], seg_min_seq: dict[int, int]) -> str:
    """Write snapshot ``number`` durably and delete older ones; return its file name.
    ``keys`` are sorted utf-8: a fixed-width ``S<w>`` array, or a list of bytes."""
    parts = encode(covered, next_seq, keys, cols, tombs, seg_min_seq)
    name = file_name(number)
    durable_write(medium, name, parts, AFTER_WRITE, AFTER_RENAME)
    for old in list_numbers(medium):
        if old < number:
            try:
                medium.delete(file_name(old))
            except OSError:
                pass
    return name


def map_file(medium: "Medium", name: str) -> Any:
    """The bytes of file ``name``: mapped read-only where the medium is local (the pages stay in
    the page cache, shared, and nothing is copied; the mapping outlives a later delete of the
    file), else read whole.  The pages are not populated up front: the CRC check's one pass
    over the file faults them in, on the thread that runs it (see :mod:`.recovery`)."""
    if medium.kind != "local":
        return medium.read_file(name)
    with open(medium.full(name), "rb") as f:  # type: ignore[attr-defined]
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(f.fileno(), size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)


def read(medium: "Medium", number: int) -> Snapshot:
    """Map and verify one snapshot; ``ValueError`` if it is damaged in any way."""
    return decode(map_file(medium, file_name(number)), number)


def crc_ok(data: Any) -> bool:
    """Whether ``data`` (a whole snapshot, delta or hint file) ends with the CRC of the bytes
    before it.  The one pass over the file releases the GIL, so it can run beside other work."""
    return len(data) >= 4 and crc(memoryview(data)[:-4]) == int.from_bytes(data[-4:], "little")


def decode(data: Any, number: int, start: int = 0, *, check: bool = True) -> Snapshot:
    """Verify the whole of ``data`` (its CRC) and parse the snapshot layout at ``start`` (after
    the header of a file that embeds it); ``ValueError`` if it is damaged in any way.  With
    ``check=False`` the CRC is the caller's to check (:func:`crc_ok`) before it trusts the
    result: only the sizes are checked here, so that every array lies within ``data``."""
    if len(data) < start + _HEAD.size + 4 or data[start : start + 8] != MAGIC:
        raise ValueError("not a snapshot file of this format (bad magic or too short)")
    view = memoryview(data)
    if check and not crc_ok(data):
        raise ValueError("snapshot CRC mismatch")
    _, mode, widths, n, nt, ns, cseg, coff, next_seq, width, lv, lt = \
        _HEAD.unpack_from(data, start)
    if widths > _OFF32 | _SEQ32:
        raise ValueError(f"unknown column widths {widths}")
    pos = start + _HEAD.size
    layout = _layout(widths)
    entry = sum(np.dtype(dt).itemsize for _, dt in layout)
    need = pos + entry * n + _pad(widths, n) + 32 * nt + 40 * ns + lv + lt + 4
    if need != len(data):
        raise ValueError("snapshot sections do not add up to the file size")

    def take(dtype, count):
        nonlocal pos
        arr = np.frombuffer(data, dtype, count, pos)
        pos += arr.nbytes
        return arr

    cols: list = [None] * 4
    for i, dt in layout:
        cols[i] = take(dt, n)
    seg, off, size, seq = cols
    pos += _pad(widths, n)
    t = take(np.uint64, nt * 4).reshape(-1, 4)
    table = [take(np.uint64, ns).tolist() for _ in range(5)]
    if mode == KEYS_FIXED:
        if n and (width == 0 or lv != n * width):
            raise ValueError("key array size does not match the header")
        keys = np.frombuffer(data, f"S{max(width, 1)}", n, pos) if n else np.array([], "S1")
    elif mode == KEYS_LENGTHS:
        keys = _decode_lengths(view[pos : pos + lv], n)
    else:
        raise ValueError(f"unknown key encoding {mode}")
    tkeys = _decode_lengths(view[pos + lv : pos + lv + lt], nt)
    tombs = {k: tuple(row) for k, row in zip(tkeys, t.tolist())}
    segs = {sid: SegInfo(m, e, b, r) for sid, m, e, b, r in zip(*table)}
    return Snapshot(number, (cseg, coff), next_seq, keys, (seg, off, size, seq), tombs, segs)
