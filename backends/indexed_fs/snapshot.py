"""Index snapshots ("index flush"): the keydir on disk, for a fast open.

File ``snap-NNNNNNNNN.idx`` (N grows by one per flush).  Layout, little-endian::

    header | value columns | tombstone columns | segment table | key blobs | crc32c:u32

Numeric columns are raw arrays read back with ``numpy.frombuffer`` (no per-entry parsing); keys
are one fixed-width utf-8 array, also adopted as is (or, if some key contains NUL, a length
column and a blob).  The CRC covers the whole file before it.  The header records the position
``(segment, offset)`` the snapshot covers: the open scans the log only from there.

Writing (``Medium.write_atomic``): temp file, sync, atomic rename, directory sync; only then are
older snapshots deleted, so a crash at any point leaves at least one complete snapshot (or none,
if there never was one).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .segment import crc

if TYPE_CHECKING:
    from ..media import Medium

MAGIC = b"IFSSNAP2"
_HEAD = struct.Struct("<8sBQQQQQQQQQ")  # magic, key mode, n, n_tombs, n_segs, cov seg, cov off,
#                                         next seq, key width, value-key blob len, tomb-key blob len
_NAME = re.compile(r"^snap-(\d{9})\.idx$")
#: value keys as one fixed-width array (loaded zero-copy), or length-prefixed (a key has a NUL)
KEYS_FIXED, KEYS_LENGTHS = 0, 1


@dataclass
class Snapshot:
    number: int
    covered: tuple[int, int]
    next_seq: int
    #: sorted keys: numpy ``S<w>`` array (KEYS_FIXED) or list of str (KEYS_LENGTHS)
    keys: np.ndarray | list[str]
    cols: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    tombs: dict[str, tuple[int, int, int, int]]
    seg_min_seq: dict[int, int]


def list_numbers(medium: "Medium") -> list[int]:
    """Snapshot numbers present in the medium's directory, newest first."""
    out = []
    for name in medium.listdir():
        m = _NAME.match(name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out, reverse=True)


def file_name(number: int) -> str:
    return f"snap-{number:09d}.idx"


def _encode_lengths(keys: list[bytes]) -> bytes:
    lens = np.fromiter((len(k) for k in keys), np.uint32, len(keys))
    return lens.tobytes() + b"".join(keys)


def _decode_lengths(blob: bytes, n: int) -> list[str]:
    if n == 0:
        return []
    lens = np.frombuffer(blob, np.uint32, n)
    ends = np.cumsum(lens, dtype=np.int64) + 4 * n
    starts = (ends - lens).tolist()
    return [blob[a:b].decode("utf-8") for a, b in zip(starts, ends.tolist())]


def write(medium: "Medium", number: int, covered: tuple[int, int], next_seq: int,
          keys: np.ndarray | list[bytes], cols: tuple[np.ndarray, ...],
          tombs: dict[str, tuple[int, int, int, int]], seg_min_seq: dict[int, int]) -> str:
    """Write snapshot ``number`` durably and delete older ones; return its file name.
    ``keys`` are sorted utf-8: a fixed-width ``S<w>`` array, or a list of bytes."""
    if isinstance(keys, np.ndarray):
        mode, width, blob_v = KEYS_FIXED, keys.dtype.itemsize, keys.tobytes()
    else:
        mode, width, blob_v = KEYS_LENGTHS, 0, _encode_lengths(keys)
    tkeys = sorted(tombs)
    blob_t = _encode_lengths([k.encode("utf-8") for k in tkeys])
    t = np.array([tombs[k] for k in tkeys], np.uint64).reshape(-1, 4)
    seg_ids = sorted(seg_min_seq)
    parts = [
        _HEAD.pack(MAGIC, mode, len(keys), len(tkeys), len(seg_ids), covered[0], covered[1],
                   next_seq, width, len(blob_v), len(blob_t)),
        np.ascontiguousarray(cols[0], np.uint32).tobytes(),
        np.ascontiguousarray(cols[1], np.uint64).tobytes(),
        np.ascontiguousarray(cols[2], np.uint32).tobytes(),
        np.ascontiguousarray(cols[3], np.uint64).tobytes(),
        t.tobytes(),
        np.array(seg_ids, np.uint64).tobytes(),
        np.array([seg_min_seq[s] for s in seg_ids], np.uint64).tobytes(),
        blob_v,
        blob_t,
    ]
    c = 0
    for p in parts:
        c = crc(p, c)
    parts.append(c.to_bytes(4, "little"))
    name = file_name(number)
    medium.write_atomic(name, parts)
    for old in list_numbers(medium):
        if old < number:
            try:
                medium.delete(file_name(old))
            except OSError:
                pass
    return name


def read(medium: "Medium", number: int) -> Snapshot:
    """Load and verify one snapshot; ``ValueError`` if it is damaged in any way."""
    data = medium.read_file(file_name(number))
    if len(data) < _HEAD.size + 4 or data[:8] != MAGIC:
        raise ValueError("not a snapshot file (bad magic or too short)")
    if crc(memoryview(data)[:-4]) != int.from_bytes(data[-4:], "little"):
        raise ValueError("snapshot CRC mismatch")
    _, mode, n, nt, ns, cseg, coff, next_seq, width, lv, lt = _HEAD.unpack_from(data)
    pos = _HEAD.size

    def take(dtype, count):
        nonlocal pos
        arr = np.frombuffer(data, dtype, count, pos)
        pos += arr.nbytes
        return arr

    seg = take(np.uint32, n)
    off = take(np.uint64, n)
    size = take(np.uint32, n)
    seq = take(np.uint64, n)
    t = take(np.uint64, nt * 4).reshape(-1, 4)
    seg_ids = take(np.uint64, ns)
    seg_min = take(np.uint64, ns)
    blob_t = data[pos + lv : pos + lv + lt]
    if pos + lv + lt + 4 != len(data):
        raise ValueError("snapshot sections do not add up to the file size")
    if mode == KEYS_FIXED:
        if n and (width == 0 or lv != n * width):
            raise ValueError("key array size does not match the header")
        keys = np.frombuffer(data, f"S{max(width, 1)}", n, pos) if n else np.array([], "S1")
    elif mode == KEYS_LENGTHS:
        keys = _decode_lengths(data[pos : pos + lv], n)
    else:
        raise ValueError(f"unknown key encoding {mode}")
    tkeys = _decode_lengths(blob_t, nt)
    tombs = {k: tuple(row) for k, row in zip(tkeys, t.tolist())}
    return Snapshot(number, (cseg, coff), next_seq, keys, (seg, off, size, seq), tombs,
                    dict(zip(seg_ids.tolist(), seg_min.tolist())))
