"""Hint files: a sealed segment's records without their values, for a crash rebuild that does not
read the segment (Bitcask's hint files).

File ``NNNNNNNNNN.hint`` beside segment ``NNNNNNNNNN.seg`` (the segment id, ``ID_WIDTH`` digits;
a hint of an old store may have 9, as its segments do), written once the segment is sealed and
durable.  Layout, little-endian, numeric sections 8-byte aligned::

    header (64 bytes) | off:u64[n] | seq:u64[n] | size:u32[n] | flags:u8[n] | pad |
    keys | crc32c:u32

It lists every intact record of the segment in file order: offset, ``seq``, record size, flags
(tombstone) and key.  Keys are one ``n x w`` byte matrix when all have the same length (the
usual case), else a length column and a blob.  The header holds the segment id and the segment's
size when the hint was made.

Why a hint can stand in for its segment: a sealed segment never changes (appends go to the
newest one), and the hint is written from a CRC-checked walk of the whole file after the segment
was synced.  So the rebuild takes a hint as the walk of its segment would have come out, and uses
it only when the hint verifies (magic, sizes, CRC), names its segment and matches the file's size
now.  Any other hint (missing, damaged, from a longer or shorter file) is ignored and that one
segment is walked instead.  Damage to a segment's bytes after its hint was written is not seen
by a rebuild from the hint; every read still checks its record's CRC and key, so such damage is
reported when read, never returned as data, and ``bench verify`` walks every record anyway.

Writing: temp file, sync, rename (fail point ``indexed_fs.hint.after_write`` between the sync and
the rename).  The directory is not synced for it, and under ``durability=none`` neither is the
file: a hint lost or torn by a power cut fails its checks and costs one walk, nothing else.  A hint is deleted before its segment (GC, compaction), so no hint
outlives its segment; one left by a crash in between is deleted by the next open.
"""

from __future__ import annotations

import re
import struct
from typing import TYPE_CHECKING

import numpy as np

from .. import failpoints
from .segment import ID_WIDTH, Records, numbered_files
from .snapshot import crc_ok, durable_write, map_file, with_crc

if TYPE_CHECKING:
    from ..media import Medium

AFTER_WRITE = failpoints.declare(
    "indexed_fs.hint.after_write",
    "a crash after a hint file's temp file is written and synced, before its rename: the next "
    "open deletes the temp file and walks that segment instead")

MAGIC = b"IFSHINT1"
#: magic, key mode, (pad), segment id, n, segment size, key width, key section length, (spare)
_HEAD = struct.Struct("<8sB7xQQQQQQ")
_NAME = re.compile(r"^(\d{9,10})\.hint$")
KEYS_MATRIX, KEYS_LENGTHS = 0, 1


def file_name(seg_id: int) -> str:
    """The name a new hint of segment ``seg_id`` gets."""
    return f"{seg_id:0{ID_WIDTH}d}.hint"


def names(seg_id: int) -> list[str]:
    """Every name a hint of segment ``seg_id`` may have: the new one, then an old store's."""
    return [file_name(seg_id), f"{seg_id:09d}.hint"]


def list_ids(medium: "Medium") -> list[int]:
    """Segment ids that have a hint file, oldest first."""
    return numbered_files(medium, _NAME)


def encode(recs: Records, seg_size: int) -> list[bytes]:
    """The file's parts for the records ``recs`` of a segment of ``seg_size`` bytes."""
    n = len(recs)
    mats = [ch for ch in recs.keys if isinstance(ch, np.ndarray) and len(ch)]
    lists = [ch for ch in recs.keys if isinstance(ch, list) and ch]
    widths = {m.shape[1] for m in mats} | {len(k) for ch in lists for k in ch}
    if len(widths) <= 1:
        w = widths.pop() if widths else 0
        keys = b"".join(m.tobytes() if isinstance(m, np.ndarray) else b"".join(m)
                        for m in recs.keys if len(m))
        mode = KEYS_MATRIX
    else:
        kb = recs.key_bytes()
        w = 0
        keys = np.fromiter(map(len, kb), np.uint32, n).tobytes() + b"".join(kb)
        mode = KEYS_LENGTHS
    pad = b"\0" * (-n % 8)
    return [
        _HEAD.pack(MAGIC, mode, recs.seg_id, n, seg_size, w, len(keys), 0),
        np.ascontiguousarray(recs.offsets, np.uint64).tobytes(),
        np.ascontiguousarray(recs.seqs, np.uint64).tobytes(),
        np.ascontiguousarray(recs.sizes, np.uint32).tobytes(),
        np.ascontiguousarray(recs.flags, np.uint8).tobytes(),
        pad,
        keys,
    ]


def write(medium: "Medium", recs: Records, seg_size: int, sync: bool = True) -> str:
    """Write the hint of segment ``recs.seg_id`` (its data synced if ``sync``; the directory
    never: a hint lost with its directory entry costs a walk, nothing else); return its file
    name."""
    parts = with_crc(encode(recs, seg_size))
    name = file_name(recs.seg_id)
    durable_write(medium, name, parts, AFTER_WRITE, None, sync=sync, sync_dir=False)
    return name


def read(medium: "Medium", seg_id: int, seg_size: int | None = None) -> Records:
    """The records of segment ``seg_id`` from its hint; ``ValueError`` if the hint is damaged,
    names another segment, or (``seg_size`` given) was made for a file of another size."""
    for name in names(seg_id):
        try:
            data = map_file(medium, name)
        except FileNotFoundError:
            continue
        return decode(data, seg_id, seg_size)
    raise FileNotFoundError(f"no hint file of segment {seg_id}")


def decode(data, seg_id: int, seg_size: int | None = None) -> Records:
    """:func:`read` on bytes already in memory."""
    if len(data) < _HEAD.size + 4 or data[:8] != MAGIC:
        raise ValueError("not a hint file (bad magic or too short)")
    view = memoryview(data)
    if not crc_ok(data):
        raise ValueError("hint CRC mismatch")
    _, mode, sid, n, size, w, lk, _ = _HEAD.unpack_from(data)
    if sid != seg_id:
        raise ValueError(f"hint names segment {sid}, not {seg_id}")
    if seg_size is not None and size != seg_size:
        raise ValueError(f"hint made for {size} bytes of the segment, the file has {seg_size}")
    pos = _HEAD.size
    if pos + 21 * n + (-n % 8) + lk + 4 != len(data):
        raise ValueError("hint sections do not add up to the file size")
    off = np.frombuffer(data, np.uint64, n, pos).astype(np.int64)
    seq = np.frombuffer(data, np.uint64, n, pos + 8 * n).copy()
    sizes = np.frombuffer(data, np.uint32, n, pos + 16 * n).astype(np.int64)
    flags = np.frombuffer(data, np.uint8, n, pos + 20 * n).copy()
    pos += 21 * n + (-n % 8)
    if n and ((off + sizes).max() > size or flags.max() > 1):
        raise ValueError("hint entries reach past the segment or carry unknown flags")
    if mode == KEYS_MATRIX:
        if lk != n * w or (n and w == 0):
            raise ValueError("hint key matrix does not match the header")
        keys = [np.frombuffer(data, np.uint8, n * w, pos).reshape(n, w).copy()] if n else []
    elif mode == KEYS_LENGTHS:
        blob = bytes(view[pos : pos + lk])
        lens = np.frombuffer(blob, np.uint32, n)
        ends = np.cumsum(lens, dtype=np.int64) + 4 * n
        if n and ends[-1] != lk:
            raise ValueError("hint key lengths do not match the header")
        starts = (ends - lens).tolist()
        keys = [[blob[a:b] for a, b in zip(starts, ends.tolist())]]
    else:
        raise ValueError(f"unknown key encoding {mode}")
    return Records(seg_id, off, sizes, seq, flags, keys)
