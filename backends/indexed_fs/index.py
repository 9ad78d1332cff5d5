"""The in-memory keydir: key -> (segment, offset, size, seq), ordered, with per-segment accounting.

Two kinds of layer, so that opening a store with a million keys does not have to build a
million-entry Python dict (one Python object per key is what dominates a large open):

* **array layers** (:class:`Layer`): sorted fixed-width utf-8 keys (searched with
  ``searchsorted``; utf-8 byte order is code point order, i.e. ``str`` order), one column each
  of segment, offset, size and seq, and an ``alive`` mask.  The first is the **base**: the
  entries of an index snapshot, kept as the snapshot's own arrays in the mapped file (or the
  same arrays built by a full log rebuild, :meth:`Index.load_log`).  Above it, after an open
  that read records past the snapshot: an index delta's records as they lie in their mapped
  file (:meth:`Index.load_layer`), and the winners of the log walked past it, resolved in C
  (:func:`.segment.resolve_sorted`, :meth:`Index.load_delta`).  Each is adopted as it is,
  never merged into another: a crash can leave a whole segment of records past the snapshot,
  and copying or joining the big layers at open would cost many times the clean open;
* the **overlay**: a :class:`sortedcontainers.SortedDict` holding every entry written since the
  open.  Writing a key of an array layer moves it to the overlay.  A new key goes into the
  overlay's dict at once and into its sorted order when an ordered read or a removal next needs
  it (:meth:`Index.settle`): a checkpoint's hundred thousand new keys are then sorted in one
  ``update`` (a merge of sorted runs) instead of one bisect-and-insert each.  Lookups use the
  dict and never wait for that.

A key is live in at most one place (a layer's row is marked dead when a newer entry of its key
lands elsewhere), so a lookup may take the first it finds.  The rows a delta's records
supersede in the base are known from its file (:mod:`.delta` stores them), so adopting a delta
costs a scatter into the base's mask, not a join of the two.  ``scan`` merges the layers in key
order.  Keys whose latest write is a delete are kept apart in ``tombs``: compaction needs to know
where live tombstones are.  Not thread-safe: the store serialises access.
"""

from __future__ import annotations

import heapq
import threading
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
    #: each array layer's alive mask, base first
    alives: list[np.ndarray]
    tombs: dict[str, Entry]


class Layer:
    """One sorted array layer: fixed-width keys (no copy: they may lie in a mapped file), the
    four columns, an alive mask and the count of live rows."""

    __slots__ = ("keys", "cols", "alive", "n", "q")

    def __init__(self, keys: np.ndarray, cols: Columns, alive: np.ndarray | None = None) -> None:
        self.keys, self.cols = keys, cols
        self.alive = np.ones(len(keys), bool) if alive is None else alive
        self.n = len(keys) if alive is None else int(alive.sum())
        self.q = np.empty(1, keys.dtype)  # the query key of row(): reused, no array per call

    def row(self, key: str) -> int:
        """Row of ``key`` if it is the latest entry of its key here, else -1."""
        if not self.n:
            return -1
        kb = key.encode("utf-8")
        q = self.q
        if len(kb) > q.itemsize:
            return -1  # longer than every key here
        q[0] = kb  # a reused one-element array: searchsorted converts a bytes key each call
        keys = self.keys
        i = keys.searchsorted(q).item(0)
        if i < len(keys) and keys.item(i) == kb and self.alive.item(i):
            return i
        return -1

    def entry(self, i: int) -> Entry:
        seg, off, size, seq = self.cols
        return (seg.item(i), off.item(i), size.item(i), seq.item(i))

    def kill(self, i: int) -> None:
        self.alive[i] = False
        self.n -= 1

    def seq_col(self) -> np.ndarray:
        """The seq column contiguous, as the C join reads it."""
        return np.ascontiguousarray(self.cols[3])

    def prefixed(self, prefix: str) -> list[str]:
        """The live keys that start with ``prefix``, in order."""
        keys = self.keys
        pb = prefix.encode("utf-8")
        lo = int(keys.searchsorted(pb)) if pb else 0
        # 0xFF never occurs in utf-8: prefix + FF sorts after every key with that prefix
        hi = int(keys.searchsorted(pb + b"\xff")) if pb else len(keys)
        rows = lo + np.flatnonzero(self.alive[lo:hi])
        return [b.decode("utf-8") for b in keys[rows].tolist()]


#: walked keys from which a join with a layer below runs as two halves on two threads
_SPLIT_JOIN = 8192


def join(keys: np.ndarray, seq: np.ndarray, alive: np.ndarray, below: Layer) -> np.ndarray:
    """``_scan.join`` of sorted keys (with their seq column and alive mask, cleared where they
    lose) against layer ``below``: the rows of ``below`` marked dead, ascending.  Many keys
    are joined as two halves on two threads: the C join releases the GIL, the halves touch
    disjoint rows on both sides, and each probe into a large layer is a cache miss, so the
    two cores halve the wait."""
    bkeys, bseq = np.ascontiguousarray(below.keys), below.seq_col()

    def run(lo: int, hi: int) -> bytes:
        return _scan.join(keys[lo:hi], keys.itemsize, seq[lo:hi], alive[lo:hi],  # type: ignore
                          bkeys, bkeys.itemsize, below.alive, bseq, bseq.itemsize)

    n = len(keys)
    if n < _SPLIT_JOIN:
        return np.frombuffer(run(0, n), np.int64)
    half: list[bytes] = []
    t = threading.Thread(target=lambda: half.append(run(n // 2, n)), name="indexed_fs-join")
    t.start()
    first = run(0, n // 2)
    t.join()
    if not half:
        raise RuntimeError("the second half of a join failed")
    return np.frombuffer(first + half[0], np.int64)


class Index:
    def __init__(self) -> None:
        self.d: SortedDict = SortedDict()
        #: keys in ``d``'s dict that are not yet in its sorted order (:meth:`settle`)
        self._unsorted: list[str] = []
        self.tombs: dict[str, Entry] = {}
        #: segment id -> [live entries (values + live tombstones), live bytes]
        self.live: dict[int, list[int]] = {}
        #: the array layers, base first (see the module notes)
        self._layers: list[Layer] = []

    # -- bulk loading -------------------------------------------------------------------------
    def load_base(self, keys: np.ndarray, cols: Columns, alive: np.ndarray | None = None,
                  counts: dict[int, tuple[int, int]] | None = None) -> None:
        """Adopt a snapshot's sorted key array and columns as the base layer (no copy: they may
        lie in a mapped file).  ``counts`` (segment id -> entries, bytes of the alive rows), when
        the caller knows them (a snapshot's segment table), spares a pass over every entry."""
        base = Layer(keys, cols, alive)
        self._layers = [base]
        if counts is None:
            self._count(cols[0][base.alive], cols[2][base.alive])
        else:
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
        if not n or self._layers or self.d or self.tombs:
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
        """Whether :meth:`load_delta` and :meth:`load_layer` can apply resolved records now: a
        base as arrays, nothing written since the open, and the C join built."""
        return _scan is not None and bool(self._layers) and not self.d

    def base_rows(self) -> int:
        """Rows of the base layer (0: none)."""
        return len(self._layers[0].keys) if self._layers else 0

    def load_layer(self, res: Resolved, dead: np.ndarray,
                   dead_live: dict[int, tuple[int, int]],
                   value_live: dict[int, tuple[int, int]]) -> None:
        """Adopt an index delta's records (:mod:`.delta`) as a layer over the base, without a
        join: ``dead`` are the base rows they supersede and ``dead_live`` those rows'
        accounting (segment id -> entries, bytes; only segments the base counted), both found
        when the delta was written; ``value_live`` is the accounting of ``res``'s values (the
        delta's segment table).  Only right onto the base alone, loaded from the snapshot the
        delta was made for; call only when :meth:`takes_delta`."""
        base = self._layers[0]
        base.alive[dead] = False
        base.n = int(np.count_nonzero(base.alive))
        layer = Layer(res.keys, res.cols)
        for sid, (c, b) in dead_live.items():
            self._add_bulk(sid, -c, -b)
        for sid, (c, b) in value_live.items():
            self._add_bulk(sid, c, b)
        for i in self._drop_tombs_rewritten(layer):
            self._sub(layer.entry(i))  # counted just above among the delta's values
        self._layers.append(layer)
        for key, e in res.tombs:
            self.apply(key, e, True)

    def load_delta(self, res: Resolved) -> None:
        """Apply a log scan's winners (:func:`.segment.resolve_sorted`) on top of the array layers
        as a new layer, with the rule of :meth:`apply` (the higher seq wins; equal: the log
        record).  The keys found in a layer below are matched in C in one galloping pass over
        the two sorted arrays per layer (``_scan.join``), which marks the loser of each pair
        dead; only the tombstones (few) are handled one by one.  Call only when
        :meth:`takes_delta`."""
        layer = Layer(res.keys, res.cols)
        if len(layer.keys):
            keys, seq = np.ascontiguousarray(layer.keys), layer.seq_col()
            for below in self._layers:
                if not below.n:
                    continue
                killed = join(keys, seq, layer.alive, below)
                if len(killed):
                    below.n -= len(killed)
                    self._count_signed(below.cols[0][killed], below.cols[2][killed], -1)
            layer.n = int(layer.alive.sum())
        self._drop_tombs_rewritten(layer)  # (before the accounting below: it counts the alive)
        self._layers.append(layer)
        self._count_signed(layer.cols[0][layer.alive], layer.cols[2][layer.alive], 1)
        for key, e in res.tombs:
            self.apply(key, e, True)

    def _drop_tombs_rewritten(self, layer: Layer) -> list[int]:
        """Tombstones of keys that ``layer`` (being added) holds again: the higher seq wins (the
        tombstone is forgotten, or the layer's row marked dead).  Searched all at once; a key
        the layer cannot hold is not in it.  Returns the rows marked dead."""
        keys, cols, alive = layer.keys, layer.cols, layer.alive
        tk = [k for k in self.tombs if k.isascii() and "\0" not in k and len(k) <= keys.itemsize]
        if not tk or not len(keys):
            return []
        q = np.array([k.encode() for k in tk], keys.dtype)
        at = np.minimum(keys.searchsorted(q), len(keys) - 1)
        killed = []
        for j in np.flatnonzero((keys[at] == q) & alive[at]).tolist():
            i, t = int(at[j]), self.tombs[tk[j]]
            if int(cols[3][i]) >= t[3]:
                del self.tombs[tk[j]]
                self._sub(t)
            else:
                layer.kill(i)
                killed.append(i)
        return killed

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
    def get(self, key: str) -> Entry | None:
        e = self.d.get(key)
        if e is not None:
            return e
        for layer in self._layers:
            i = layer.row(key)
            if i >= 0:
                return layer.entry(i)
        return None

    def latest(self, key: str) -> tuple[Entry, bool] | None:
        """The latest record of ``key`` (value or live tombstone) and whether it is a tombstone."""
        e = self.get(key)
        if e is not None:
            return e, False
        t = self.tombs.get(key)
        return (t, True) if t is not None else None

    def settle(self) -> None:
        """Put the overlay's keys stored since the last call into its sorted order: before
        anything reads that order (``keys_from``, ``freeze``, ``merge``) or removes from it."""
        if self._unsorted:
            self.d._list.update(self._unsorted)
            self._unsorted = []

    def __len__(self) -> int:
        return len(self.d) + sum(layer.n for layer in self._layers)

    def keys_from(self, prefix: str) -> list[str]:
        """Every live key starting with ``prefix``, in order."""
        over = []
        self.settle()
        for key in self.d.irange(minimum=prefix):
            if not key.startswith(prefix):
                break
            over.append(key)
        layers = [x for x in (layer.prefixed(prefix) for layer in self._layers if layer.n) if x]
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
        On the put hot path: the accounting is inlined, and no key goes through
        ``SortedDict.__setitem__``: an overwrite of an overlay key is in the sorted order
        already, a new one is sorted in by the next :meth:`settle`."""
        d = self.d
        old = dict.get(d, key)
        if old is not None:
            if tomb:
                self.settle()
                del d[key]
            else:
                dict.__setitem__(d, key, entry)
        else:
            for layer in self._layers:
                i = layer.row(key)
                if i >= 0:
                    old = layer.entry(i)
                    layer.kill(i)
                    break
            else:
                old = self.tombs.get(key)
                if old is not None and not tomb:
                    del self.tombs[key]
            if not tomb:
                dict.__setitem__(d, key, entry)  # sorted in by the next settle()
                self._unsorted.append(key)
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
        of :meth:`apply`).  Onto a base alone with an empty overlay (the open after a snapshot)
        this is done in bulk: one ``searchsorted`` for all keys, the accounting in numpy, the
        overlay filled in one sorted update."""
        self.settle()
        if (self.d or len(self._layers) != 1 or not self._layers[0].n or not (values or tombs)
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
        layer = self._layers[0]
        base, alive, bcols = layer.keys, layer.alive, layer.cols
        kb = [k.encode("utf-8") for k in keys]
        qb = np.array(kb, f"S{max(map(len, kb))}")
        order = np.argsort(qb)  # sorted queries walk the base in order: far fewer cache misses
        at = np.empty(len(qb), np.int64)
        at[order] = base.searchsorted(qb[order])
        atc = np.minimum(at, len(base) - 1)
        found = (at < len(base)) & (base[atc] == qb) & alive[atc]
        win = ~found | (ent[:, 3] >= bcols[3][atc])
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
        alive[rows] = False
        layer.n -= len(rows)
        self._count_signed(bcols[0][rows], bcols[2][rows], -1)
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
        self.settle()
        keys = list(self.d.keys())
        get = dict.__getitem__
        return Frozen(keys, [get(self.d, k) for k in keys],
                      [layer.alive.copy() for layer in self._layers], dict(self.tombs))

    def materialize(self, fz: Frozen) -> tuple[np.ndarray | list[bytes], Columns]:
        """Sorted utf-8 keys and their columns for a frozen index (outside the store lock; the
        layers' arrays never change).  Keys come as a fixed-width array when that is exact (no
        key contains NUL), else as a list of bytes."""
        over_b = [k.encode("utf-8") for k in fz.over_keys]
        over_c = np.array(fz.over_vals, np.uint64).reshape(-1, 4)
        bkeys, bcols = np.array([], "S1"), [np.array([], np.uint64)] * 4
        for n, (layer, alive) in enumerate(zip(self._layers, fz.alives)):
            rows = np.flatnonzero(alive)  # live keys of different layers are distinct
            lkeys = layer.keys[rows]
            lcols = [c[rows].astype(np.uint64) for c in layer.cols]
            if n == 0:
                bkeys, bcols = lkeys, lcols
                continue
            width = max(bkeys.dtype.itemsize, lkeys.dtype.itemsize)
            bkeys, lkeys = bkeys.astype(f"S{width}"), lkeys.astype(f"S{width}")
            pos = np.searchsorted(bkeys, lkeys)
            bkeys = np.insert(bkeys, pos, lkeys)
            bcols = [np.insert(bc, pos, lc) for bc, lc in zip(bcols, lcols)]
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
