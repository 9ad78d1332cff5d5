"""A keyed count whose keys hold state of a size: a ring of recent events beside every count.

With ``spark.ckptbench.stateBytes`` (:mod:`.state_size`) every key of the keyed count keeps,
besides its count, a ring of ``R`` 8-byte slots (``8 R`` bytes, ``R`` drawn per key id): event
``seq`` of the key lands in slot ``seq % R``, which keeps the highest ``seq + 1`` it was given
(0 = never written).  So the ring holds, per slot, the key's most recent event that hashed there —
a holistic window, rewritten by every event — and its final contents depend only on *which*
events the key saw, not on the order in which a shuffle delivered them.  An event applied twice
leaves the ring as it was, but not the count; an event lost shows in the count, and in the ring
when it was its slot's latest.  The exactly-once check compares both, byte for byte
(:func:`ring_mismatches`).

Layout, compact at millions of keys (numpy arrays, no Python object per key): beside the dense
``counts`` and ``dirty`` of :class:`~.keyed_state.KeyedState`, ``ring_at`` (dense, per key id) is
the offset of the key's ring in one ``arena`` of int64 slots, -1 while the key has none; rings
are allocated when a key first appears, so an instance's arena holds only its own keys.

State that lives and dies (``spark.ckptbench.windowEvents`` = ``W``, :attr:`SizedCountState.WINDOW`):
the keyed count becomes a count per tumbling event-time window — event ``seq`` falls in window
``seq // W``, event time being the source's offset — and a key holds only its latest window.  An
event of a later window than the key's replaces its state (count and ring start afresh), an event
of an earlier one is late and left out, so the state is a function of *which* events a key saw,
whatever order a shuffle or a protocol's log replay applies them in (the latest window wins;
within it counts add and slots keep their maximum).  A key's state is dropped when its window
closes: :meth:`SizedCountState.expire` at the end of every micro-batch, with the driver's
watermark — the first offset of the micro-batch, every event below it applied — so the keys of
every window ending at or before it go.  The dropped keys stay dirty with a count of 0 until the
next checkpoint, whose tombstones they are (:meth:`~.keyed_state.KeyedState.dropped`).  A key's
window is never stored: it is the window of the newest event in its ring (``max(ring) - 1``), kept
per key id in ``window`` (-1: no state) and rebuilt from the rings whenever rings are loaded.  The
final state of a run is then the failure-free one of :func:`~.verify.windowed_counts`: each key's
events of its latest window, for the keys whose latest window had not closed at the last
micro-batch's watermark.  A dropped key's ring keeps its place in the arena (zeroed), so a key that
comes back takes it again and the arena never holds more than the keys ever seen.

Checkpoint blob (:meth:`SizedCountState.encode`): the count pairs of :func:`~.keyed_state.encode_pairs`,
then ``total:int64`` and the rings of those keys in key order (``total`` slots; each key's ring
length follows from its id).  It is self-delimiting, so a protocol may append its own bookkeeping
(CIC does).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .keyed_state import KeyedState, decode_pairs, encode_pairs
from .source import generate
from .state_size import StateSize, parse_state_size
from .verify import in_latest_window, latest_windows


#: ring slots read at a time when the windows of loaded keys are rebuilt (bounds the temporaries)
_NOTE_SLOTS = 4 << 20


class SizedCountState(KeyedState):
    """The keyed count plus a ring per key (see the module doc); bound to one
    :class:`~.state_size.StateSize` by :func:`sized_count_state`."""

    __slots__ = ("ring_at", "arena", "used", "window", "dropped_keys")
    COLUMNS = ("key", "seq")
    SIZE: StateSize = StateSize("fixed", 8.0)
    #: events per tumbling window (``windowEvents``); 0: keys never expire
    WINDOW: int = 0

    def __init__(self, counts: np.ndarray | None = None, version: int = 0) -> None:
        super().__init__(counts, version)
        self.ring_at = np.full(len(self.counts), -1, np.int64)
        self.arena = np.zeros(0, np.int64)
        self.used = 0
        self.window = np.full(len(self.counts), -1, np.int64)
        self.dropped_keys = 0  # keys whose state was dropped since this object was made

    def _grow(self, size: int) -> None:
        old = len(self.counts)
        super()._grow(size)
        if len(self.counts) > old:
            more = np.full(len(self.counts) - old, -1, np.int64)
            self.ring_at = np.concatenate([self.ring_at, more])
            self.window = np.concatenate([self.window, more])

    def _rings(self, keys: np.ndarray) -> None:
        """Give every key of ``keys`` without a ring its ring (zeros) at the end of the arena, in
        the order the keys first appear in ``keys`` (so a full blob loaded into an empty state
        lands in the arena as one run, see :meth:`load`)."""
        without = keys[self.ring_at[keys] < 0]
        if not len(without):
            return
        _, first = np.unique(without, return_index=True)
        new = without[np.sort(first)]
        lens = self.SIZE.slots(new)
        ends = self.used + np.cumsum(lens)
        if ends[-1] > len(self.arena):
            grown = np.zeros(max(int(ends[-1]), len(self.arena) + len(self.arena) // 2), np.int64)
            grown[:self.used] = self.arena[:self.used]
            self.arena = grown
        self.ring_at[new] = ends - lens
        self.used = int(ends[-1])

    def _positions(self, keys: np.ndarray) -> np.ndarray:
        """Arena positions of the rings of ``keys``, one after the other (key order as given)."""
        lens = self.SIZE.slots(keys)
        starts = self.ring_at[keys]
        if not len(keys):
            return np.zeros(0, np.int64)
        return np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))

    def apply_columns(self, cols: list[np.ndarray]) -> None:
        keys, seqs = cols
        if len(keys) == 0:
            return
        if self.WINDOW:
            keys, seqs = self._latest_window(keys, seqs)
        self.apply(keys)
        self._rings(keys)
        slot = self.ring_at[keys] + seqs % self.SIZE.slots(keys)
        np.maximum.at(self.arena, slot, seqs + 1)

    def _latest_window(self, keys: np.ndarray, seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The events that count (module doc): each key moves to the latest window among its
        state's and these events' — a key moved on loses its older state — and only the events
        of that window are kept."""
        self._grow(int(keys.max()) + 1)
        win = seqs // self.WINDOW
        uniq, inverse = np.unique(keys, return_inverse=True)
        held = self.window[uniq]
        latest = held.copy()
        np.maximum.at(latest, inverse, win)
        moved = uniq[(held >= 0) & (latest > held)]
        if len(moved):
            self.forget(moved)
            self.dropped_keys += len(moved)
        self.window[uniq] = latest
        keep = win == latest[inverse]
        return keys[keep], seqs[keep]

    def forget(self, keys: np.ndarray) -> None:
        """Absent keys hold a zeroed ring (if any) and no window, so one that comes back starts
        afresh in its ring's place."""
        keys = keys[keys < len(self.counts)]
        super().forget(keys)
        held = keys[self.ring_at[keys] >= 0]
        self.arena[self._positions(held)] = 0
        self.window[keys] = -1

    def expire(self, watermark: int) -> int:
        """Drop the keys whose window ends at or before ``watermark`` (module doc); they stay
        dirty, as the next checkpoint's tombstones."""
        if not self.WINDOW or watermark < self.WINDOW:
            return 0
        gone = np.flatnonzero((self.window >= 0) & (self.window < watermark // self.WINDOW))
        if len(gone):
            self.forget(gone)
            self.dirty[gone] = True
            self.dropped_keys += len(gone)
        return len(gone)

    def _note_windows(self, keys: np.ndarray) -> None:
        """Each loaded key's window, from the newest event in its ring (module doc); the rings
        are read a bounded number of slots at a time, so a restore of gigabytes of rings does not
        gather them all at once."""
        if not self.WINDOW or not len(keys):
            return
        lens = self.SIZE.slots(keys)
        step = max(1, _NOTE_SLOTS // int(lens.max()))
        for lo in range(0, len(keys), step):
            part, part_lens = keys[lo:lo + step], lens[lo:lo + step]
            newest = np.maximum.reduceat(self.arena[self._positions(part)], np.cumsum(part_lens) - part_lens)
            self.window[part] = (newest - 1) // self.WINDOW

    def encode(self, only_dirty: bool = False) -> bytes:
        """The keys in arena order when every key with a ring is asked for (the whole state, or
        an increment in which every key changed): the rings are then the arena itself, written
        without gathering them."""
        keys, counts = self.items(only_dirty)
        if len(keys) == np.count_nonzero(self.ring_at >= 0):
            order = np.argsort(self.ring_at[keys], kind="stable")
            keys, counts, rings = keys[order], counts[order], self.arena[:self.used]
        else:
            rings = self.arena[self._positions(keys)]
        return b"".join((encode_pairs(keys, counts), np.array([len(rings)], "<i8").tobytes(),
                         rings.astype("<i8", copy=False).tobytes()))

    def load(self, blob: bytes | memoryview) -> int:
        keys, counts = decode_pairs(blob)
        self.set(keys, counts)
        at = 8 + 16 * len(keys)
        total = int(np.frombuffer(blob, "<i8", 1, at)[0])
        rings = np.frombuffer(blob, "<i8", total, at + 8)
        start = self.used
        fresh = not np.any(self.ring_at[keys] >= 0)
        self._rings(keys)
        if fresh and self.used - start == total:  # every key new, allocated in blob order: one run
            self.arena[start:self.used] = rings
        else:
            self.arena[self._positions(keys)] = rings
        self._note_windows(keys)
        return at + 8 + 8 * total

    def row_slots(self, keys: np.ndarray) -> np.ndarray:
        """A key's row is its count, then its ring."""
        return 1 + self.SIZE.slots(keys)

    def _ring_slots(self, keys: np.ndarray) -> tuple[int, np.ndarray]:
        """How the rows of ``keys`` lie in their concatenation: ``(width, counts_at)`` — every
        row ``width`` slots long (then a row is a line of a matrix), or ``width`` 0 and the
        position of every row's count (its ring follows it)."""
        lens = self.row_slots(keys)
        if len(keys) and lens.min() == lens.max():
            return int(lens[0]), np.zeros(0, np.int64)
        return 0, np.cumsum(lens) - lens

    def _ring_rows(self, keys: np.ndarray, ring: int) -> np.ndarray | None:
        """When every ring in the arena is ``ring`` slots long and starts at a multiple of it (a
        fixed state size), the arena is a matrix of rings: the rows of ``keys``' rings in it, so
        they are copied a ring at a time instead of a slot at a time.  None otherwise."""
        starts = self.ring_at[keys]
        if self.used % ring or np.any(starts % ring):
            return None
        return starts // ring

    def encode_rows(self, keys: np.ndarray, out: np.ndarray) -> None:
        width, counts_at = self._ring_slots(keys)
        if width:
            matrix = out.reshape(len(keys), width)
            matrix[:, 0] = self.counts[keys]
            rows = self._ring_rows(keys, width - 1)
            if rows is not None:  # straight into place, no temporary ("clip": rows are valid)
                np.take(self.arena[:self.used].reshape(-1, width - 1), rows, axis=0, out=matrix[:, 1:], mode="clip")
            else:
                matrix[:, 1:] = self.arena[self._positions(keys)].reshape(len(keys), width - 1)
            return
        is_count = np.zeros(len(out), bool)
        is_count[counts_at] = True
        out[is_count], out[~is_count] = self.counts[keys], self.arena[self._positions(keys)]

    def load_rows(self, keys: np.ndarray, rows: np.ndarray) -> None:
        width, counts_at = self._ring_slots(keys)
        if width:
            matrix = rows.reshape(len(keys), width)
            self.set(keys, matrix[:, 0])
            self._rings(keys)
            at = self._ring_rows(keys, width - 1)
            if at is not None:
                self.arena[:self.used].reshape(-1, width - 1)[at] = matrix[:, 1:]
            else:
                self.arena[self._positions(keys)] = matrix[:, 1:].ravel()
        else:
            is_count = np.zeros(len(rows), bool)
            is_count[counts_at] = True
            self.set(keys, rows[is_count])
            self._rings(keys)
            self.arena[self._positions(keys)] = rows[~is_count]
        self._note_windows(keys)

    @classmethod
    def blob_length(cls, blob: bytes | memoryview) -> int:
        at = super().blob_length(blob)
        return at + 8 + 8 * int(np.frombuffer(blob, "<i8", 1, at)[0])

    def encoded_size(self) -> int:
        keys = np.flatnonzero(self.counts)
        return 16 + 16 * len(keys) + 8 * int(self.SIZE.slots(keys).sum())

    def file_arrays(self) -> dict[str, np.ndarray]:
        return {**super().file_arrays(), "ring_at": self.ring_at, "arena": self.arena, "window": self.window}

    def file_scalars(self) -> dict[str, int]:
        return {**super().file_scalars(), "used": self.used}

    @classmethod
    def from_file(cls, arrays: list[np.ndarray], scalars: list[int]) -> "KeyedState":
        state = super().from_file(arrays, scalars)
        state.ring_at, state.arena, state.window, state.used = arrays[2], arrays[3], arrays[4], scalars[2]
        return state


@functools.lru_cache(maxsize=None)
def sized_count_state(size: str, window: int = 0) -> type[SizedCountState]:
    """The sized count state class for per-key state size ``size`` (canonical text) and tumbling
    windows of ``window`` events (0: none); one class per pair, so states are built with no
    arguments, like every other state class."""
    return type("SizedCountState", (SizedCountState,),
                {"__slots__": (), "SIZE": parse_state_size(size), "WINDOW": int(window)})


# ---------------------------------------------------------------------------- ground truth
#: ground-truth ring slots built at a time by :func:`ring_mismatches` (int64: 256 MiB): a
#: gigabyte state is checked a slice of its keys at a time, not beside a copy of itself
TRUTH_SLOTS = 32 << 20


def ring_mismatches(kind: str, seed: int, keys: int, skew: Any, events: int, size: str,
                    state: KeyedState, window: int = 0, watermark: int = 0,
                    chunk: int = 1 << 20) -> tuple[int, int]:
    """(keys whose ring differs, keys compared) between ``state`` and the failure-free rings of
    the keys it holds, computed from the source's events alone (no Spark, no protocol, no
    backend); with windows of ``window`` events closed at ``watermark``, a key's ring holds only
    its latest window's events (module doc).  Which keys an instance should hold is the count
    check's business: it compares every key's count with the ground truth, so a key missing here
    is caught there.  The held keys are checked in slices of :data:`TRUTH_SLOTS` ring slots, the
    source's events read once per slice: memory stays bounded whatever the state's size."""
    if not isinstance(state, SizedCountState):
        return 0, 0
    latest = latest_windows(kind, seed, keys, skew, events, window, chunk) if window else None
    spec = parse_state_size(size)
    held = np.flatnonzero(state.counts)
    lens = spec.slots(held)
    ends = np.cumsum(lens)
    wrong, lo = 0, 0
    while lo < len(held):
        hi = max(lo + 1, int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + TRUTH_SLOTS, side="right")))
        part, part_lens = held[lo:hi], lens[lo:hi]
        where = np.full(max(keys, len(state.counts)), -1, np.int64)
        where[part] = np.cumsum(part_lens) - part_lens  # each key's ring in the truth, in key order
        truth = np.zeros(int(part_lens.sum()), np.int64)
        for start in range(0, events, chunk):
            cols = generate(kind, seed, keys, skew, start, min(events, start + chunk))
            k, seq = cols["key"], cols["seq"]
            mine = where[k] >= 0
            if latest is not None:
                mine &= in_latest_window(latest, window, watermark, k, seq)
            k, seq = k[mine], seq[mine]
            np.maximum.at(truth, where[k] + seq % spec.slots(k), seq + 1)
        got = state.arena[state._positions(part)]
        wrong += int(np.count_nonzero(np.add.reduceat(truth != got, np.cumsum(part_lens) - part_lens)))
        lo = hi
    return wrong, len(held)
