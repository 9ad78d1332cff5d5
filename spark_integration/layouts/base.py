"""What every checkpoint layout shares: how one named checkpoint becomes store records, atomically.

A protocol names its checkpoints (``e0000000003``, ``c0000000007``, ``c/b0000000002``) and
decides what each holds — the full state, or the keys changed since the previous one.  A
:class:`Layout` decides how that state becomes *pieces* (:meth:`Layout.encode`: one blob, one
record per key, key-range chunks) and reads them back (:meth:`Layout.load_pieces`).  Everything
else is here, once, for every layout and every protocol:

* **Records.**  The checkpoint ``name`` is one small *commit record* (the manifest) under
  ``name`` itself; its pieces live under ``pieces/<name>/<id>`` — apart from the protocols'
  names, so a protocol that lists its checkpoints by a prefix scan (uncoordinated, cic, logio)
  still sees one record per checkpoint and reads no piece doing so.  A piece longer than the
  backend's ``max_value_bytes`` is split into parts ``<id>.<k>``.  A checkpoint that is one piece
  fitting one record (a ``changelog`` blob, the usual case) is carried *inside* its commit record:
  one put, as a single-blob checkpoint always was.
* **Atomicity.**  The pieces are written first (``put_many``, in batches of the backend's
  ``max_batch_bytes`` when it declares one), with a copy of the commit record beside them
  (``pieces/<name>/index``, what deleting reads), and flushed, and only then the commit record: a
  crash between pieces leaves pieces without a commit record, which every reader takes for *no
  checkpoint* (:meth:`Layout.find` and :meth:`Layout.list` return only records that decode).  The
  commit record carries the piece ids, their count, the total bytes and a CRC-32 of the data in
  piece order, and a CRC-32 of itself: a torn or corrupt commit record is no checkpoint either,
  while a piece missing behind an intact one is data the backend lost — :meth:`Layout.load`
  raises :class:`CheckpointDataLost`, and a piece that is there but not the one written (a stale
  one of an earlier torn write of the same name) fails the CRC the same way, never loaded as
  state.  Deleting removes the commit record first, then the pieces (``delete_many``: the
  backend's batch delete), then their index, so a crash in between leaves only unreachable
  pieces (space, never a wrong checkpoint), still listed by their index; it never reads the
  checkpoint's data (a one-piece checkpoint has no index, and its commit record is all there is).
* **Tombstones.**  An incremental checkpoint also names the keys that went away since the
  previous one (:meth:`~spark_integration.keyed_state.KeyedState.dropped`: a window closed, a
  join's pending auction was matched), as every layout's delta must: their ids travel in the commit
  record, delta-packed like the piece ids, and loading the checkpoint forgets them after loading
  its pieces — so restoring a snapshot and its deltas never brings a dropped key back, whatever
  the layout.  A layout writes live keys only (``chunks`` rewrites every chunk that lost a key,
  without it, and writes no chunk that was left empty); the records of a dropped key go when the
  checkpoints holding them are deleted, which the protocols do once a later full snapshot is
  durable.
* **The protocol's own bytes.**  ``extra`` (CIC's bookkeeping, logio's Input Set record) travels
  in the commit record, beside the piece list, covered by its CRC; so does ``base``, the
  checkpoint an increment goes on from, for a protocol whose increments do not follow a fixed
  schedule (uncoordinated's: :mod:`spark_integration.protocols.uncoordinated.chain`).

Invariant: a checkpoint is readable iff its commit record decodes, and then either every byte
it describes is loaded or an error names what is missing — never a partial state.
"""

from __future__ import annotations

import abc
import contextlib
import json
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterator

import numpy as np

from .. import phases
from ..errors import SparkIntegrationError
from ..keyed_state import KeyedState
from ..store import Scoped
from .registry import layout_class

#: where a checkpoint's pieces live (beside, not under, the protocols' names)
PIECES = "pieces/"
#: the most bytes per ``put_many`` / ``get_many`` call, whatever the backend's own batch limit
#: (:func:`limits`)
DEFAULT_BATCH_BYTES = 64 << 20
#: the most records in one batch call
BATCH_RECORDS = 65536
#: rows encoded at a time (int64 slots): bounds the temporaries of a state's gather
ENCODE_SLOTS = 4 << 20

_MAGIC = b"CKL2"
#: magic, CRC-32 of everything after the header, lengths of: meta JSON, piece ids, tombstone ids,
#: extra, inline data
_HEADER = struct.Struct("<4sIIIIIQ")


class CheckpointDataLost(SparkIntegrationError):
    """A committed checkpoint whose pieces are missing or do not match their commit record."""


@dataclass(frozen=True)
class Encoded:
    """A checkpoint taken from a state, ready to write (so a writer thread may write it while the
    state moves on): piece ``ids[j]`` is ``data[bounds[j]:bounds[j+1]]``."""

    layout: str
    ids: np.ndarray  # int64, ascending
    data: np.ndarray  # uint8, the pieces one after the other
    bounds: np.ndarray  # int64, len(ids) + 1 byte offsets into data
    extra: bytes = b""  # the protocol's own bytes, carried by the commit record
    tombstones: bytes = b""  # the ids of the keys dropped since the previous checkpoint, packed
    #: for a protocol that names the checkpoint an increment goes on from (in its commit record,
    #: so a restore can find the chain): that checkpoint's number; 0: a full one, or not named
    base: int = 0

    @property
    def nbytes(self) -> int:
        """The checkpoint's bytes (pieces, tombstones and the protocol's own), what a report counts."""
        return len(self.data) + len(self.tombstones) + len(self.extra)


@dataclass(frozen=True)
class Manifest:
    """A checkpoint's commit record, decoded."""

    name: str
    layout: str
    ids: np.ndarray  # piece ids, ascending
    parts: dict  # piece index -> parts it was split into (only pieces that were split)
    total: int  # data bytes
    crc: int  # CRC-32 of the data in piece order
    extra: bytes
    inline: bytes | None  # the one piece, when it travels in the commit record
    dropped: np.ndarray  # the keys the checkpoint drops (tombstones), ascending
    base: int = 0  # the checkpoint this one is an increment over, as Encoded.base named it

    def piece_keys(self, j: int) -> list[str]:
        """The record keys of piece ``j`` (its parts when it was split)."""
        base = f"{PIECES}{self.name}/{int(self.ids[j]):012d}"
        parts = self.parts.get(j, 0)
        return [f"{base}.{k:04d}" for k in range(parts)] if parts else [base]


def _pack_ids(ids: np.ndarray) -> bytes:
    """Piece ids, ascending: their deltas compress to about a byte each."""
    return zlib.compress(np.diff(ids, prepend=0).astype("<i8").tobytes(), 1)


def _unpack_ids(blob: bytes) -> np.ndarray:
    return np.cumsum(np.frombuffer(zlib.decompress(blob), "<i8")) if blob else np.zeros(0, np.int64)


def encode_manifest(meta: dict, ids: np.ndarray, extra: bytes, inline: bytes, tombstones: bytes = b"") -> bytes:
    body = json.dumps(meta, separators=(",", ":")).encode()
    packed = _pack_ids(ids)
    rest = b"".join((body, packed, tombstones, extra, inline))
    return _HEADER.pack(_MAGIC, zlib.crc32(rest), len(body), len(packed), len(tombstones), len(extra),
                        len(inline)) + rest


def decode_manifest(name: str, blob: bytes | None) -> Manifest | None:
    """The commit record ``blob`` of checkpoint ``name``; None when absent, torn or corrupt."""
    if blob is None or len(blob) < _HEADER.size:
        return None
    magic, crc, nbody, nids, ndropped, nextra, ninline = _HEADER.unpack_from(blob)
    rest = memoryview(blob)[_HEADER.size:]
    if magic != _MAGIC or len(rest) != nbody + nids + ndropped + nextra + ninline or zlib.crc32(rest) != crc:
        return None
    meta = json.loads(bytes(rest[:nbody]))
    at = nbody + nids + ndropped
    inline = bytes(rest[at + nextra:]) if meta["inline"] else None
    return Manifest(name, meta["layout"], _unpack_ids(bytes(rest[nbody:nbody + nids])),
                    {int(j): n for j, n in meta["parts"]}, meta["bytes"], meta["crc"],
                    bytes(rest[at:at + nextra]), inline, _unpack_ids(bytes(rest[nbody + nids:at])),
                    int(meta.get("base", 0)))


def limits(store: Scoped) -> tuple[int, int]:
    """(longest value, bytes per batch call) of the store's backend: its class's value limit,
    and the smaller of its batch limit and :data:`DEFAULT_BATCH_BYTES` — a server answers one
    call within its client's timeout (a 512 MiB Redis ``MSET`` under ``appendfsync always`` does
    not), and a client that copies a batch holds one batch's copy at a time."""
    cls = type(store.backend)
    return cls.max_value_bytes, min(cls.max_batch_bytes, DEFAULT_BATCH_BYTES)


#: how a layout gets the int64 array it encodes a checkpoint into: ``alloc(slots)``
Alloc = Callable[[int], np.ndarray]


def fresh(slots: int) -> np.ndarray:
    """A new array of ``slots`` int64 (:data:`Alloc` when the checkpoint outlives the call)."""
    return np.empty(slots, "<i8")


class Scratch:
    """One process's buffer for checkpoints encoded and written in the same call
    (:meth:`Layout.encoded`), kept from one checkpoint to the next.

    Why: memory a process touches for the first time costs a page fault per page — on a
    virtual machine often more than the copy into it — so a gigabyte checkpoint encoded into a
    new buffer spends most of its encoding there.  The buffer is lent for one ``with`` block
    and taken back when the block ends; a checkpoint that outlives its call (the uncoordinated
    writer's queue) is encoded into a fresh array instead.  Lending is exclusive: a second
    encoding while the buffer is out (another thread) gets a fresh array.
    """

    def __init__(self) -> None:
        self._buffer = np.zeros(0, "<i8")
        self._lock = threading.Lock()
        self._lent = False

    @contextlib.contextmanager
    def lend(self) -> Iterator[Alloc]:
        with self._lock:
            mine, self._lent = not self._lent, True
        if not mine:
            yield fresh
            return

        def alloc(slots: int) -> np.ndarray:
            if slots > len(self._buffer):  # grown with headroom: the state grows between checkpoints
                self._buffer = np.empty(slots + slots // 8, "<i8")
            return self._buffer[:slots]

        try:
            yield alloc
        finally:
            with self._lock:
                self._lent = False


SCRATCH = Scratch()


def gather_rows(state: KeyedState, keys: np.ndarray, alloc: Alloc = fresh) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``keys`` (:meth:`~spark_integration.keyed_state.KeyedState.encode_rows`) as
    bytes, and each row's byte offset (``len(keys) + 1``), gathered a bounded batch at a time."""
    slots = state.row_slots(keys)
    bounds = np.concatenate([[0], np.cumsum(slots)]).astype(np.int64)
    rows = alloc(int(bounds[-1]))
    cuts = np.unique(np.concatenate(
        [[0], np.searchsorted(bounds, np.arange(ENCODE_SLOTS, bounds[-1], ENCODE_SLOTS)), [len(keys)]]))
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        state.encode_rows(keys[lo:hi], rows[bounds[lo]:bounds[hi]])
    return rows.view(np.uint8), bounds * 8


class Layout(abc.ABC):
    """How a checkpoint's state becomes pieces and comes back; the rest is this class's."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    def __init__(self, chunk_bytes: int) -> None:
        self.chunk_bytes = chunk_bytes

    # -- what a layout defines --------------------------------------------------------------
    @abc.abstractmethod
    def pieces(self, state: KeyedState, only_dirty: bool,
               alloc: Alloc = fresh) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids ascending, data as uint8, byte bounds) of the state (or of its changed keys);
        the data in an array from ``alloc`` where the layout copies the state into one."""

    @abc.abstractmethod
    def load_pieces(self, state: KeyedState, ids: np.ndarray, pieces: list[bytes]) -> None:
        """Apply pieces ``ids`` (in id order, as :meth:`pieces` made them) to ``state``; called
        with the pieces of one checkpoint in batches, in order."""

    # -- the one way protocols write and read checkpoints -------------------------------------
    def encode(self, state: KeyedState, only_dirty: bool = False, extra: bytes = b"",
               alloc: Alloc = fresh) -> Encoded:
        """The checkpoint of ``state``: all of it, or (``only_dirty``) its changed keys and the
        tombstones of the keys it dropped since the last checkpoint (module doc), in arrays of
        its own: it may be written later, while the state moves on."""
        with phases.timed("encode_s"):
            ids, data, bounds = self.pieces(state, only_dirty, alloc)
            dropped = state.dropped() if only_dirty else np.zeros(0, np.int64)
        return Encoded(self.name, np.asarray(ids, np.int64), data, np.asarray(bounds, np.int64), extra,
                       _pack_ids(dropped) if len(dropped) else b"")

    @contextlib.contextmanager
    def encoded(self, state: KeyedState, only_dirty: bool = False, extra: bytes = b"") -> Iterator[Encoded]:
        """:meth:`encode` for a checkpoint written inside the ``with`` block: its data lives in
        the process's :class:`Scratch` buffer, valid until the block ends."""
        with SCRATCH.lend() as alloc:
            yield self.encode(state, only_dirty, extra, alloc)

    def write(self, store: Scoped, name: str, encoded: Encoded) -> int:
        """Write checkpoint ``name``: pieces and their index, flushed, then its commit record
        (module doc); returns the bytes put.  Durable once the caller flushes."""
        max_value, batch_bytes = limits(store)
        data = memoryview(encoded.data)
        ids, bounds = encoded.ids, encoded.bounds
        meta = {"layout": encoded.layout, "bytes": len(data), "crc": zlib.crc32(data)}
        if encoded.base:
            meta["base"] = encoded.base
        if len(ids) == 1:  # one piece: in the commit record itself when it fits
            record = encode_manifest({**meta, "parts": [], "inline": True}, ids, encoded.extra, bytes(data),
                                     encoded.tombstones)
            if len(record) <= max_value:
                store.put(name, record)
                return len(record)
        parts = [(j, -(-int(bounds[j + 1] - bounds[j]) // max_value)) for j in range(len(ids))
                 if bounds[j + 1] - bounds[j] > max_value]
        record = encode_manifest({**meta, "parts": parts, "inline": False}, ids, encoded.extra, b"",
                                 encoded.tombstones)
        if len(record) > max_value:
            raise SparkIntegrationError(
                f"layout {self.name}: the commit record of checkpoint {name!r} lists {len(ids)} "
                f"pieces{' and the dropped keys' if encoded.tombstones else ''} in {len(record)} bytes, "
                f"more than the backend's {max_value}-byte values; use fewer, larger pieces (--layout "
                f"chunks, a larger --chunk-bytes){' or checkpoint more often' if encoded.tombstones else ''}")
        batch: list[tuple[str, bytes]] = []
        for part in _batches(f"{PIECES}{name}/", ids, bounds, data, dict(parts), max_value, batch_bytes):
            if batch:
                store.put_many(batch)
            batch = part
        store.put_many(batch + [(_index_key(name), record)])
        store.flush()  # every piece durable before the record that makes them a checkpoint
        store.put(name, record)
        return len(data) + 2 * len(record)

    def find(self, store: Scoped, name: str) -> Manifest | None:
        """Checkpoint ``name``'s commit record; None when there is none (or only a torn one)."""
        return decode_manifest(name, store.get(name))

    def find_many(self, store: Scoped, names: list[str]) -> dict[str, Manifest]:
        """The commit records of those ``names`` that are checkpoints, in one read."""
        found = {n: decode_manifest(n, blob) for n, blob in store.get_many(names).items()}
        return {n: m for n, m in found.items() if m is not None}

    def list(self, store: Scoped, prefix: str) -> dict[str, Manifest]:
        """Every checkpoint under ``prefix`` whose commit record decodes, by name, in name order."""
        found = {}
        for key, blob in store.scan(prefix):
            if not key.startswith(PIECES):
                manifest = decode_manifest(key, blob)
                if manifest is not None:
                    found[key] = manifest
        return found

    def load(self, store: Scoped, manifest: Manifest, state: KeyedState) -> None:
        """Apply checkpoint ``manifest`` to ``state``: every byte it describes, or an error."""
        layout = layout_class(manifest.layout)(self.chunk_bytes)  # as written, whatever reads it
        if manifest.inline is not None:
            self._check(manifest, zlib.crc32(manifest.inline), len(manifest.inline))
            layout.load_pieces(state, manifest.ids, [manifest.inline])
            state.forget(manifest.dropped)
            return
        _, batch_bytes = limits(store)
        per_batch = max(1, min(BATCH_RECORDS, batch_bytes // max(1, manifest.total // max(1, len(manifest.ids)))))
        crc = total = 0
        for lo in range(0, len(manifest.ids), per_batch):
            hi = min(len(manifest.ids), lo + per_batch)
            keys = [manifest.piece_keys(j) for j in range(lo, hi)]
            found = store.get_many([k for ks in keys for k in ks])
            pieces = []
            for j, ks in zip(range(lo, hi), keys):
                lost = [k for k in ks if k not in found]
                if lost:
                    raise CheckpointDataLost(
                        f"checkpoint {manifest.name!r} is committed but its piece {lost[0]!r} is gone "
                        f"({len(lost)} of piece {j}'s records); the backend lost data")
                piece = b"".join(found[k] for k in ks) if len(ks) > 1 else found[ks[0]]
                crc = zlib.crc32(piece, crc)
                total += len(piece)
                pieces.append(piece)
            layout.load_pieces(state, manifest.ids[lo:hi], pieces)
        self._check(manifest, crc, total)
        state.forget(manifest.dropped)

    @staticmethod
    def _check(manifest: Manifest, crc: int, total: int) -> None:
        if crc != manifest.crc or total != manifest.total:
            raise CheckpointDataLost(
                f"checkpoint {manifest.name!r}: its pieces hold {total} bytes with CRC {crc:#010x}, its "
                f"commit record says {manifest.total} bytes with CRC {manifest.crc:#010x}; the backend "
                f"returned damaged or stale pieces")

    def delete(self, store: Scoped, name: str) -> None:
        """Forget checkpoint ``name``: its commit record first, then its pieces, then their
        index (module doc) — found without reading the checkpoint's data."""
        store.delete(name)
        index = decode_manifest(name, store.get(_index_key(name)))
        if index is not None:
            store.delete_many([key for j in range(len(index.ids)) for key in index.piece_keys(j)])
            store.delete(_index_key(name))


def _batches(base: str, ids: np.ndarray, bounds: np.ndarray, data: memoryview, split: dict[int, int],
             max_value: int, batch_bytes: int) -> Iterator[list[tuple[str, bytes]]]:
    """The records of a checkpoint's pieces (:func:`_records`), in order, as ``put_many``
    batches: each of at most ``batch_bytes`` and :data:`BATCH_RECORDS` records (a longer record
    alone), a record ``(key, bytes)``.

    Values are ``bytes`` copied out of ``data``, not views of it: a million views are a
    million objects the cyclic GC tracks, and its collections over them cost more than the
    copy (docs/performance.md).  The cuts come from the records' bounds at once, and each
    batch's values are sliced from one copy of its bytes."""
    names, edges = _records(base, ids, bounds, split, max_value)
    start, n = 0, len(names)
    while start < n:
        end = int(np.searchsorted(edges, edges[start] + batch_bytes, "right")) - 1
        end = min(max(end, start + 1), start + BATCH_RECORDS)
        lo = int(edges[start])
        raw = bytes(data[lo:int(edges[end])])
        offs = (edges[start:end + 1] - lo).tolist()
        yield list(zip(names[start:end], [raw[a:b] for a, b in zip(offs, offs[1:])]))
        start = end


def _records(base: str, ids: np.ndarray, bounds: np.ndarray, split: dict[int, int],
             max_value: int) -> tuple[list[str], np.ndarray]:
    """The record names of a checkpoint's pieces and their byte bounds in its data (one more
    than the names): a record a piece, a piece longer than ``max_value`` its parts (``split``:
    piece index -> parts), which lie one after the other as the pieces do.  Names come from
    whole arrays at once: a per-key checkpoint has a million pieces."""
    names = [f"{base}{i:012d}" for i in ids.tolist()]
    if not split:
        return names, np.asarray(bounds, np.int64)
    parted, starts = [], []
    edges = bounds.tolist()
    for j, (key, lo, hi) in enumerate(zip(names, edges, edges[1:])):
        if j in split:
            for k, at in enumerate(range(lo, hi, max_value)):
                parted.append(f"{key}.{k:04d}")
                starts.append(at)
        else:
            parted.append(key)
            starts.append(lo)
    return parted, np.asarray(starts + edges[-1:], np.int64)


def _index_key(name: str) -> str:
    """A copy of a many-piece checkpoint's commit record beside its pieces: what deleting reads
    (the commit record of a one-piece checkpoint carries its data; no index is written for it)."""
    return f"{PIECES}{name}/index"
