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


class SizedCountState(KeyedState):
    """The keyed count plus a ring per key (see the module doc); bound to one
    :class:`~.state_size.StateSize` by :func:`sized_count_state`."""

    __slots__ = ("ring_at", "arena", "used")
    COLUMNS = ("key", "seq")
    SIZE: StateSize = StateSize("fixed", 8.0)

    def __init__(self, counts: np.ndarray | None = None, version: int = 0) -> None:
        super().__init__(counts, version)
        self.ring_at = np.full(len(self.counts), -1, np.int64)
        self.arena = np.zeros(0, np.int64)
        self.used = 0

    def _grow(self, size: int) -> None:
        old = len(self.counts)
        super()._grow(size)
        if len(self.counts) > old:
            self.ring_at = np.concatenate([self.ring_at, np.full(len(self.counts) - old, -1, np.int64)])

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
        self.apply(keys)
        self._rings(keys)
        slot = self.ring_at[keys] + seqs % self.SIZE.slots(keys)
        np.maximum.at(self.arena, slot, seqs + 1)

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
            return
        is_count = np.zeros(len(rows), bool)
        is_count[counts_at] = True
        self.set(keys, rows[is_count])
        self._rings(keys)
        self.arena[self._positions(keys)] = rows[~is_count]

    @classmethod
    def blob_length(cls, blob: bytes | memoryview) -> int:
        at = super().blob_length(blob)
        return at + 8 + 8 * int(np.frombuffer(blob, "<i8", 1, at)[0])

    def encoded_size(self) -> int:
        keys = np.flatnonzero(self.counts)
        return 16 + 16 * len(keys) + 8 * int(self.SIZE.slots(keys).sum())

    def file_arrays(self) -> dict[str, np.ndarray]:
        return {**super().file_arrays(), "ring_at": self.ring_at, "arena": self.arena}

    def file_scalars(self) -> dict[str, int]:
        return {**super().file_scalars(), "used": self.used}

    @classmethod
    def from_file(cls, arrays: list[np.ndarray], scalars: list[int]) -> "KeyedState":
        state = super().from_file(arrays, scalars)
        state.ring_at, state.arena, state.used = arrays[2], arrays[3], scalars[2]
        return state


@functools.lru_cache(maxsize=None)
def sized_count_state(size: str) -> type[SizedCountState]:
    """The sized count state class for per-key state size ``size`` (canonical text); one class
    per size, so states are built with no arguments, like every other state class."""
    return type("SizedCountState", (SizedCountState,), {"__slots__": (), "SIZE": parse_state_size(size)})


# ---------------------------------------------------------------------------- ground truth
def ring_mismatches(kind: str, seed: int, keys: int, skew: Any, events: int, size: str,
                    state: KeyedState, chunk: int = 1 << 20) -> tuple[int, int]:
    """(keys whose ring differs, keys compared) between ``state`` and the failure-free rings of
    the keys it holds, computed from the source's events alone (no Spark, no protocol, no
    backend).  Which keys an instance should hold is the count check's business: it compares
    every key's count with the ground truth, so a key missing here is caught there."""
    if not isinstance(state, SizedCountState):
        return 0, 0
    spec = parse_state_size(size)
    held = np.flatnonzero(state.counts)
    lens = spec.slots(held)
    where = np.full(max(keys, len(state.counts)), -1, np.int64)
    where[held] = np.cumsum(lens) - lens  # each held key's ring in the truth, in key order
    truth = np.zeros(int(lens.sum()), np.int64)
    for start in range(0, events, chunk):
        cols = generate(kind, seed, keys, skew, start, min(events, start + chunk))
        k, seq = cols["key"], cols["seq"]
        mine = where[k] >= 0
        k, seq = k[mine], seq[mine]
        np.maximum.at(truth, where[k] + seq % spec.slots(k), seq + 1)
    got = state.arena[state._positions(held)]
    bad = np.add.reduceat(truth != got, np.cumsum(lens) - lens) if len(held) else np.zeros(0)
    return int(np.count_nonzero(bad)), len(held)
