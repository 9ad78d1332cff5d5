"""The in-memory keydir: key -> (segment, offset, size, seq), ordered, with per-segment accounting.

Two layers, so that opening a store with a million keys does not have to build a million-entry
Python dict (one Python object per key is what dominates a large open):

* the **base**: the entries loaded from an index snapshot, kept as the snapshot's own sorted
  numpy arrays (fixed-width utf-8 keys, searched with ``searchsorted``; utf-8 byte order is code
  point order, i.e. ``str`` order) plus an ``alive`` mask — or the same arrays built by a full
  log rebuild (:meth:`Index.load_log`);
* the **overlay**: a :class:`sortedcontainers.SortedDict` holding every entry written (or
  rebuilt by a log scan) since the open.  Writing a base key moves it to the overlay.

``scan`` merges the two in key order.  Keys whose latest write is a delete are kept apart in
``tombs``: compaction needs to know where live tombstones are.  Not thread-safe: the store
serialises access.
"""

from __future__ import annotations

import heapq
from itertools import chain
from dataclasses import dataclass
from operator import itemgetter

import numpy as np
from sortedcontainers import SortedDict

from .segment import Records

#: widest key (bytes, padded to 8) a full rebuild resolves in numpy; wider keys take the dict path
_MAX_BULK_KEY = 256

Entry = tuple[int, int, int, int]  # (segment id, offset, record size, seq)
Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # seg, off, size, seq


@dataclass
class Frozen:
    """A point-in-time copy of the index, cheap to take under the store lock."""

    over_keys: list[str]
    over_vals: list[Entry]
    alive: np.ndarray | None
    tombs: dict[str, Entry]


class Index:
    def __init__(self) -> None:
        self.d: SortedDict = SortedDict()
        self.tombs: dict[str, Entry] = {}
        #: segment id -> [live entries (values + live tombstones), live bytes]
        self.live: dict[int, list[int]] = {}
        self._base: np.ndarray | None = None  # sorted fixed-width utf-8 keys ('S<w>')
        self._alive: np.ndarray | None = None
        self._cols: Columns | None = None
        self._nbase = 0

    # -- bulk loading -------------------------------------------------------------------------
    def load_base(self, keys: np.ndarray, cols: Columns, alive: np.ndarray | None = None,
                  counts: dict[int, tuple[int, int]] | None = None) -> None:
        """Adopt a snapshot's sorted key array and columns as the base layer (no copy: they may
        lie in a mapped file).  ``counts`` (segment id -> entries, bytes of the alive rows), when
        the caller knows them (a snapshot's segment table), spares a pass over every entry."""
        self._base, self._cols = keys, cols
        self._q = np.empty(1, keys.dtype)  # the query key of _base_row
        self._alive = np.ones(len(keys), bool) if alive is None else alive
        if counts is None:
            self._nbase = int(self._alive.sum())
            self._count(cols[0][self._alive], cols[2][self._alive])
        else:
            self._nbase = len(keys) if alive is None else int(alive.sum())
            for sid, (c, b) in counts.items():
                if c:
                    self._add_bulk(sid, c, b)

    def _count(self, seg: np.ndarray, size: np.ndarray) -> None:
        """Add entries (their segment ids and record sizes) to the per-segment accounting."""
        if len(seg):
            ids, where = np.unique(seg, return_inverse=True)
            counts = np.bincount(where, minlength=len(ids))
            sums = np.bincount(where, weights=size, minlength=len(ids))
            for i, c, b in zip(ids.tolist(), counts.tolist(), sums.tolist()):
                self._add_bulk(i, c, int(b))

    def load_log(self, parts: list[Records]) -> bool:
        """A full rebuild (no snapshot) into an empty index: resolve all records of the log at
        once in numpy (highest seq wins, equal seq: the later record) and adopt the winning
        values as the base layer, as if loaded from a snapshot — no per-key Python objects.
        Only exact for keys that are ASCII without NUL (fixed-width bytes, str == bytes): returns
        False, having changed nothing, for any other log; the caller then resolves record by
        record (:func:`.segment.resolve`)."""
        n = sum(len(r) for r in parts)
        chunks = [ch for r in parts for ch in r.keys if len(ch)]
        if not n or self._base is not None or self.d or self.tombs:
            return False
        w = max(ch.shape[1] if isinstance(ch, np.ndarray) else max(map(len, ch)) for ch in chunks)
        w8 = -(-w // 8) * 8  # compared as big-endian u64 columns: padded to whole words
        if w8 > _MAX_BULK_KEY:
            return False
        mat = np.zeros((n, w8), np.uint8)
        at = 0
        for ch in chunks:
            m = len(ch)
            if isinstance(ch, list):
                blob = b"".join(ch)
                if b"\0" in blob or not blob.isascii():
                    return False
                mat[at : at + m] = np.array(ch, f"S{w8}").view(np.uint8).reshape(m, w8)
            else:
                if not ch.all() or (ch >= 0x80).any():
                    return False
                mat[at : at + m, : ch.shape[1]] = ch
            at += m
        seg = np.concatenate([np.full(len(r), r.seg_id, np.uint32) for r in parts])
        off = np.concatenate([r.offsets for r in parts]).astype(np.uint64)
        size = np.concatenate([r.sizes for r in parts]).astype(np.uint32)
        seq = np.concatenate([r.seqs for r in parts])
        flags = np.concatenate([r.flags for r in parts])
        words = mat.view(">u8")
        # lexsort is stable: within one key and seq the file order (= scan order) stays
        order = np.lexsort((seq,) + tuple(words[:, j] for j in range(words.shape[1] - 1, -1, -1)))
        sorted_words = words[order]
        last = np.ones(n, bool)
        last[:-1] = (sorted_words[1:] != sorted_words[:-1]).any(axis=1)
        win = order[last]
        tomb = flags[win] != 0
        vals = win[~tomb]
        keys = np.ascontiguousarray(mat[vals, :w]).view(f"S{w}").ravel()
        self.load_base(keys, (seg[vals], off[vals], size[vals], seq[vals]))
        for i in win[tomb].tolist():
            key = mat[i, :w].tobytes().rstrip(b"\0").decode("ascii")
            self.set(key, (int(seg[i]), int(off[i]), int(size[i]), int(seq[i])), tomb=True)
        return True

    def finish_scan(self) -> None:
        """After :func:`.segment.resolve` filled ``d`` (as a plain dict) and ``tombs`` of an empty
        index: sort the keys once and count the per-segment accounting (in numpy, not a Python
        loop over every entry)."""
        self.d._list.update(dict.keys(self.d))
        entries = list(dict.values(self.d)) + list(self.tombs.values())
        seg = np.fromiter(map(itemgetter(0), entries), np.int64, len(entries))
        size = np.fromiter(map(itemgetter(2), entries), np.int64, len(entries))
        self._count(seg, size)

    def _add_bulk(self, sid: int, count: int, size: int) -> None:
        acc = self.live.get(sid)
        if acc is None:
            self.live[sid] = [count, size]
        else:
            acc[0] += count
            acc[1] += size

    # -- lookups ------------------------------------------------------------------------------
    def _base_row(self, key: str) -> int:
        """Row of ``key`` in the base if it is still the latest entry there, else -1."""
        base = self._base
        if base is None or not self._nbase:
            return -1
        kb = key.encode("utf-8")
        q = self._q
        if len(kb) > q.itemsize:
            return -1  # longer than every base key
        q[0] = kb  # a reused one-element array: searchsorted converts a bytes key each call
        i = base.searchsorted(q).item(0)
        if i < len(base) and base.item(i) == kb and self._alive.item(i):  # type: ignore[union-attr]
            return i
        return -1

    def _row(self, i: int) -> Entry:
        seg, off, size, seq = self._cols  # type: ignore[misc]
        return (seg.item(i), off.item(i), size.item(i), seq.item(i))

    def get(self, key: str) -> Entry | None:
        e = self.d.get(key)
        if e is not None or self._base is None:
            return e
        i = self._base_row(key)
        return None if i < 0 else self._row(i)

    def latest(self, key: str) -> tuple[Entry, bool] | None:
        """The latest record of ``key`` (value or live tombstone) and whether it is a tombstone."""
        e = self.get(key)
        if e is not None:
            return e, False
        t = self.tombs.get(key)
        return (t, True) if t is not None else None

    def __len__(self) -> int:
        return len(self.d) + self._nbase

    def keys_from(self, prefix: str) -> list[str]:
        """Every live key starting with ``prefix``, in order."""
        over = []
        for key in self.d.irange(minimum=prefix):
            if not key.startswith(prefix):
                break
            over.append(key)
        if self._base is None or not self._nbase:
            return over
        pb = prefix.encode("utf-8")
        lo = int(self._base.searchsorted(pb)) if pb else 0
        # 0xFF never occurs in utf-8: prefix + FF sorts after every key with that prefix
        hi = int(self._base.searchsorted(pb + b"\xff")) if pb else len(self._base)
        rows = lo + np.flatnonzero(self._alive[lo:hi])  # type: ignore[index]
        base = [b.decode("utf-8") for b in self._base[rows].tolist()]
        return list(heapq.merge(over, base)) if over else base

    # -- updates (each keeps the per-segment accounting right) --------------------------------
    def _sub(self, e: Entry) -> None:
        acc = self.live[e[0]]
        acc[0] -= 1
        acc[1] -= e[2]

    def set(self, key: str, entry: Entry, tomb: bool = False) -> Entry | None:
        """Make ``entry`` the latest record of ``key``; return the superseded one, if any.
        On the put hot path: the accounting is inlined and an overwrite of an overlay key skips
        ``SortedDict.__setitem__`` (the key is already in the sorted order)."""
        d = self.d
        old = dict.get(d, key)
        if old is not None:
            if tomb:
                del d[key]
            else:
                dict.__setitem__(d, key, entry)
        else:
            i = self._base_row(key)
            if i >= 0:
                old = self._row(i)
                self._alive[i] = False  # type: ignore[index]
                self._nbase -= 1
            else:
                old = self.tombs.get(key)
                if old is not None and not tomb:
                    del self.tombs[key]
            if not tomb:
                d[key] = entry
        if tomb:
            self.tombs[key] = entry
        live = self.live
        if old is not None:
            acc = live[old[0]]
            acc[0] -= 1
            acc[1] -= old[2]
        acc = live.get(entry[0])
        if acc is None:
            live[entry[0]] = [1, entry[2]]
        else:
            acc[0] += 1
            acc[1] += entry[2]
        return old

    def drop_tomb(self, key: str) -> None:
        """Forget a live tombstone that no older record can outlive any more."""
        self._sub(self.tombs.pop(key))

    def merge(self, values: dict[str, Entry], tombs: dict[str, Entry]) -> None:
        """Apply a log scan's resolved records on top of the index (highest seq wins; the rule
        of :meth:`apply`).  Onto a base with an empty overlay (the open after a snapshot) this
        is done in bulk: one ``searchsorted`` for all keys, the accounting in numpy, the overlay
        filled in one sorted update."""
        if (self.d or self._base is None or not self._nbase or not (values or tombs)
                or any("\0" in k for k in chain(values, tombs))):
            for key, e in values.items():
                self.apply(key, e, False)
            for key, e in tombs.items():
                self.apply(key, e, True)
            return
        keys = list(values) + list(tombs)
        ents = list(values.values()) + list(tombs.values())
        nv = len(values)
        ent = np.array(ents, np.uint64).reshape(-1, 4)
        base, alive, bcols = self._base, self._alive, self._cols
        kb = [k.encode("utf-8") for k in keys]
        qb = np.array(kb, f"S{max(map(len, kb))}")
        order = np.argsort(qb)  # sorted queries walk the base in order: far fewer cache misses
        at = np.empty(len(qb), np.int64)
        at[order] = base.searchsorted(qb[order])
        atc = np.minimum(at, len(base) - 1)
        found = (at < len(base)) & (base[atc] == qb) & alive[atc]  # type: ignore[index]
        win = ~found | (ent[:, 3] >= bcols[3][atc])  # type: ignore[index]
        if self.tombs:  # a snapshot tombstone of a key not in the base: the higher seq wins
            tget = self.tombs.get
            for i in np.flatnonzero(~found).tolist():
                t = tget(keys[i])
                if t is not None:
                    if ents[i][3] >= t[3]:
                        del self.tombs[keys[i]]
                        self._sub(t)
                    else:
                        win[i] = False
        rows = atc[found & win]
        alive[rows] = False  # type: ignore[index]
        self._nbase -= len(rows)
        self._count_signed(bcols[0][rows], bcols[2][rows], -1)  # type: ignore[index]
        w = np.flatnonzero(win)
        self._count_signed(ent[w, 0], ent[w, 2], 1)
        wl = w.tolist()
        cut = int(np.searchsorted(w, nv))
        self.d.update({keys[i]: ents[i] for i in wl[:cut]})
        for i in wl[cut:]:
            self.tombs[keys[i]] = ents[i]

    def _count_signed(self, seg: np.ndarray, size: np.ndarray, sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) entries from the per-segment accounting."""
        if len(seg):
            ids, where = np.unique(seg, return_inverse=True)
            counts = np.bincount(where, minlength=len(ids))
            sums = np.bincount(where, weights=size.astype(np.float64), minlength=len(ids))
            for i, c, b in zip(ids.tolist(), counts.tolist(), sums.tolist()):
                self._add_bulk(i, sign * c, sign * int(b))

    def apply(self, key: str, entry: Entry, tomb: bool) -> None:
        """Rebuild rule: a record replaces the current one if its seq is at least as high (equal
        seq = a compaction copy of the same write, the later copy wins)."""
        cur = self.latest(key)
        if cur is None or entry[3] >= cur[0][3]:
            self.set(key, entry, tomb)

    # -- snapshot export ----------------------------------------------------------------------
    def freeze(self) -> Frozen:
        keys = list(self.d.keys())
        get = dict.__getitem__
        return Frozen(keys, [get(self.d, k) for k in keys],
                      None if self._alive is None else self._alive.copy(), dict(self.tombs))

    def materialize(self, fz: Frozen) -> tuple[np.ndarray | list[bytes], Columns]:
        """Sorted utf-8 keys and their columns for a frozen index (outside the store lock; the
        base arrays never change).  Keys come as a fixed-width array when that is exact (no
        key contains NUL), else as a list of bytes."""
        over_b = [k.encode("utf-8") for k in fz.over_keys]
        over_c = np.array(fz.over_vals, np.uint64).reshape(-1, 4)
        if self._base is not None:
            rows = np.flatnonzero(fz.alive)
            bkeys = self._base[rows]
            bcols = [c[rows] for c in self._cols]  # type: ignore[union-attr]
        else:
            bkeys, bcols = np.array([], "S1"), [np.array([], np.uint64)] * 4
        if any(b"\0" in k for k in over_b):
            keys = bkeys.tolist() + over_b
            order = sorted(range(len(keys)), key=keys.__getitem__)
            allc = [np.concatenate([bc.astype(np.uint64), over_c[:, j]]) for j, bc in enumerate(bcols)]
            return [keys[i] for i in order], tuple(c[order] for c in allc)  # type: ignore
        width = max([bkeys.dtype.itemsize] + [len(k) for k in over_b] + [1])
        okeys = np.array(over_b, f"S{width}") if over_b else np.array([], f"S{width}")
        bkeys = bkeys.astype(f"S{width}")
        pos = np.searchsorted(bkeys, okeys)
        keys_arr = np.insert(bkeys, pos, okeys)
        cols = tuple(np.insert(bc.astype(np.uint64), pos, over_c[:, j])
                     for j, bc in enumerate(bcols))
        return keys_arr, cols  # type: ignore[return-value]
