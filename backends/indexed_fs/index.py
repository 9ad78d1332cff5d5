"""The in-memory keydir: key -> (segment, offset, size, seq), ordered, with per-segment accounting.

Two layers, so that opening a store with a million keys does not have to build a million-entry
Python dict (one Python object per key is what dominates a large open):

* the **base**: the entries loaded from an index snapshot, kept as the snapshot's own sorted
  numpy arrays (fixed-width utf-8 keys, searched with ``searchsorted``; utf-8 byte order is code
  point order, i.e. ``str`` order) plus an ``alive`` mask — or the same arrays built by a full
  log rebuild (:meth:`Index.load_log`);
* the **delta** (only after an open that read records past the snapshot, :meth:`load_delta`):
  those records' winners, resolved in C (:func:`.segment.resolve_sorted`) into arrays of the
  same layout and searched the same way.  Why not the overlay: a crash can leave a whole
  segment of records past the snapshot, and a dict entry and tuple per key would make that
  open cost many times the open after a clean close;
* the **overlay**: a :class:`sortedcontainers.SortedDict` holding every entry written since the
  open.  Writing a base or delta key moves it to the overlay.

A key is live in at most one of the three (a layer's row is marked dead when a newer entry of its
key lands elsewhere), so a lookup may take the first it finds.  ``scan`` merges them in key
order.  Keys whose latest write is a delete are kept apart in
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

from .segment import Records, Resolved, resolve_sorted

try:  # the sorted join of load_delta (built with the segment walk, see _scan.c)
    from . import _scan
except ImportError:  # pragma: no cover - machines without a C compiler
    _scan = None

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
    delta_alive: np.ndarray | None = None


def _find(keys: np.ndarray, q: np.ndarray, key: str) -> int:
    """Row of ``key`` in the sorted fixed-width array ``keys`` (``q``: a reused one-element
    array of its dtype), else -1."""
    kb = key.encode("utf-8")
    if len(kb) > q.itemsize:
        return -1  # longer than every key there
    q[0] = kb
    i = keys.searchsorted(q).item(0)
    return i if i < len(keys) and keys.item(i) == kb else -1


def _prefixed(keys: np.ndarray, alive: np.ndarray, prefix: str) -> list[str]:
    """The live keys of a sorted fixed-width layer that start with ``prefix``, in order."""
    pb = prefix.encode("utf-8")
    lo = int(keys.searchsorted(pb)) if pb else 0
    # 0xFF never occurs in utf-8: prefix + FF sorts after every key with that prefix
    hi = int(keys.searchsorted(pb + b"\xff")) if pb else len(keys)
    rows = lo + np.flatnonzero(alive[lo:hi])
    return [b.decode("utf-8") for b in keys[rows].tolist()]


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
        #: the delta layer (load_delta): sorted keys, columns, alive mask, live rows
        self._dkeys: np.ndarray | None = None
        self._dcols: Columns | None = None
        self._dalive: np.ndarray | None = None
        self._ndelta = 0

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
        self._count_signed(seg, size, 1)

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
        res = resolve_sorted(parts)  # in C where built and exact
        if res is not None:
            self.load_base(res.keys, res.cols)
            for key, e in res.tombs:
                self.set(key, e, tomb=True)
            return True
        chunks = [ch.tolist() if not isinstance(ch, (list, np.ndarray)) else ch for ch in chunks]
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

    def takes_delta(self) -> bool:
        """Whether :meth:`load_delta` can apply a log scan now: a base from a snapshot (as
        arrays), nothing written since, no delta yet, and the C join built."""
        return (_scan is not None and self._base is not None and not self.d
                and self._dkeys is None)

    def load_delta(self, res: Resolved) -> None:
        """Apply a log scan's winners (:func:`.segment.resolve_sorted`) on top of the base as
        the delta layer, with the rule of :meth:`apply` (the higher seq wins; equal: the log
        record).  The keys found in both are matched in C in one pass over the two sorted
        arrays (``_scan.join``), which marks the loser of each pair dead; only the snapshot's
        tombstones and the scan's own tombstones (few) are handled one by one.  Call only when
        :meth:`takes_delta`."""
        keys, cols = res.keys, res.cols
        alive = np.ones(len(keys), bool)
        base = self._base
        if len(keys) and len(base) and self._nbase:  # type: ignore[arg-type]
            bseq = np.ascontiguousarray(self._cols[3])  # type: ignore[index]
            killed = np.frombuffer(_scan.join(  # type: ignore[union-attr]
                keys, keys.itemsize, cols[3], alive, np.ascontiguousarray(base),
                base.itemsize, self._alive, bseq, bseq.itemsize), np.int64)  # type: ignore
            if len(killed):
                self._nbase -= len(killed)
                self._count_signed(self._cols[0][killed], self._cols[2][killed], -1)  # type: ignore
        # snapshot tombstones of keys the scan wrote again (searched all at once; a key the
        # delta cannot hold is not in it)
        tk = [k for k in self.tombs if k.isascii() and "\0" not in k and len(k) <= keys.itemsize]
        if tk and len(keys):
            q = np.array([k.encode() for k in tk], keys.dtype)
            at = np.minimum(keys.searchsorted(q), len(keys) - 1)
            for j in np.flatnonzero((keys[at] == q) & alive[at]).tolist():
                i, t = int(at[j]), self.tombs[tk[j]]
                if int(cols[3][i]) >= t[3]:
                    del self.tombs[tk[j]]
                    self._sub(t)
                else:
                    alive[i] = False
        self._dkeys, self._dcols, self._dalive = keys, cols, alive
        self._dq = np.empty(1, keys.dtype)
        self._ndelta = int(alive.sum())
        self._count_signed(cols[0][alive], cols[2][alive], 1)
        for key, e in res.tombs:
            self.apply(key, e, True)

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

    def _delta_row(self, key: str) -> int:
        """Row of ``key`` in the delta if it is the latest entry there, else -1."""
        if not self._ndelta:
            return -1
        i = _find(self._dkeys, self._dq, key)  # type: ignore[arg-type]
        return i if i >= 0 and self._dalive.item(i) else -1  # type: ignore[union-attr]

    def _drow(self, i: int) -> Entry:
        seg, off, size, seq = self._dcols  # type: ignore[misc]
        return (seg.item(i), off.item(i), size.item(i), seq.item(i))

    def get(self, key: str) -> Entry | None:
        e = self.d.get(key)
        if e is not None or self._base is None:
            return e
        i = self._base_row(key)
        if i >= 0:
            return self._row(i)
        if self._ndelta:
            i = self._delta_row(key)
            if i >= 0:
                return self._drow(i)
        return None

    def latest(self, key: str) -> tuple[Entry, bool] | None:
        """The latest record of ``key`` (value or live tombstone) and whether it is a tombstone."""
        e = self.get(key)
        if e is not None:
            return e, False
        t = self.tombs.get(key)
        return (t, True) if t is not None else None

    def __len__(self) -> int:
        return len(self.d) + self._nbase + self._ndelta

    def keys_from(self, prefix: str) -> list[str]:
        """Every live key starting with ``prefix``, in order."""
        over = []
        for key in self.d.irange(minimum=prefix):
            if not key.startswith(prefix):
                break
            over.append(key)
        layers = [_prefixed(keys, alive, prefix) for keys, alive, n in
                  ((self._base, self._alive, self._nbase),
                   (self._dkeys, self._dalive, self._ndelta)) if keys is not None and n]
        layers = [x for x in layers if x]
        if over:
            layers.append(over)
        if len(layers) <= 1:
            return layers[0] if layers else []
        return list(heapq.merge(*layers))

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
            elif self._ndelta and (i := self._delta_row(key)) >= 0:
                old = self._drow(i)
                self._dalive[i] = False  # type: ignore[index]
                self._ndelta -= 1
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
                or self._dkeys is not None or any("\0" in k for k in chain(values, tombs))):
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
        """Add (``sign`` 1) or remove (-1) entries from the per-segment accounting.  Segment
        ids lie close together: counted with ``bincount`` over their range (no sort)."""
        if not len(seg):
            return
        lo, hi = int(seg.min()), int(seg.max())
        if hi - lo < 1 << 20:
            where = seg.astype(np.int64) - lo
            ids = range(lo, hi + 1)
        else:
            uids, where = np.unique(seg, return_inverse=True)
            ids = uids.tolist()
        counts = np.bincount(where, minlength=len(ids))
        sums = np.bincount(where, weights=size.astype(np.float64), minlength=len(ids))
        for i, c, b in zip(ids, counts.tolist(), sums.tolist()):
            if c:
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
                      None if self._alive is None else self._alive.copy(), dict(self.tombs),
                      None if self._dalive is None else self._dalive.copy())

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
        if self._dkeys is not None:  # the delta's live rows merged into the base's
            rows = np.flatnonzero(fz.delta_alive)
            dkeys = self._dkeys[rows]
            width = max(bkeys.dtype.itemsize, dkeys.dtype.itemsize)
            bkeys, dkeys = bkeys.astype(f"S{width}"), dkeys.astype(f"S{width}")
            pos = np.searchsorted(bkeys, dkeys)
            bkeys = np.insert(bkeys, pos, dkeys)
            bcols = [np.insert(bc.astype(np.uint64), pos, dc[rows].astype(np.uint64))
                     for bc, dc in zip(bcols, self._dcols)]  # type: ignore[arg-type]
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
