"""The operators' state as the protocols see it: a sparse ``int64 slot -> int64`` map, and its encodings.

:class:`KeyedState` is a keyed count's state (dense counts per key id, a dirty bit per key for
incremental checkpoints, the number of the last micro-batch applied); every other operator state
(the Q3 join, :class:`~spark_integration.q3.JoinState`) subclasses it, so checkpoints, message
logs and restores are the same for every job.  The byte formats here are what the backends hold:
``encode_pairs`` for checkpoints, ``encode_log`` for logged messages.
"""

from __future__ import annotations

import numpy as np


class KeyedState:
    """Counts per key id (dense), the dirty set since the last checkpoint, and a version.

    It is also the protocols' view of *any* operator state: a sparse map ``int64 slot -> int64``
    (0 = absent) over dense arrays, read by ``items``/written by ``set``. An operator with other
    state (the Q3 join, :class:`~.q3.JoinState`) subclasses it, names the input ``COLUMNS`` it
    consumes and overrides :meth:`apply_columns`; checkpoints, logs and restores stay the same.
    """

    __slots__ = ("counts", "dirty", "version", "replayed", "useless", "last_events", "mapping")
    COLUMNS: tuple[str, ...] = ("key",)  # what the operator reads (and senders log), in order

    def __init__(self, counts: np.ndarray | None = None, version: int = 0) -> None:
        self.counts = np.zeros(1024, np.int64) if counts is None else counts
        self.dirty = np.zeros(len(self.counts), bool)
        self.version = version
        self.replayed = 0  # events re-applied from a message log during a restore
        self.useless = 0  # checkpoints past the recovery line of a restore (uncoordinated)
        self.last_events = -1  # events of micro-batch ``version`` this instance applied (-1: unknown)
        self.mapping = None  # the executor-local file this state's arrays are mapped from (:mod:`.state_file`)

    def _grow(self, size: int) -> None:
        if size > len(self.counts):
            new = max(size, 2 * len(self.counts))
            self.counts = np.concatenate([self.counts, np.zeros(new - len(self.counts), np.int64)])
            self.dirty = np.concatenate([self.dirty, np.zeros(new - len(self.dirty), bool)])

    def apply(self, keys: np.ndarray) -> None:
        """Count one batch of events (vectorized)."""
        if len(keys) == 0:
            return
        bc = np.bincount(keys)
        self._grow(len(bc))
        self.counts[: len(bc)] += bc
        self.dirty[: len(bc)] |= bc > 0

    def apply_columns(self, cols: list[np.ndarray]) -> None:
        """One batch of events given as the arrays of :attr:`COLUMNS` (from Arrow or a log)."""
        self.apply(cols[0])

    def set(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Overwrite the given keys (restoring a checkpoint)."""
        if len(keys):
            self._grow(int(keys.max()) + 1)
            self.counts[keys] = values

    def items(self, only_dirty: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The live keys and their values (only those changed since the last checkpoint)."""
        idx = np.flatnonzero(self.dirty & (self.counts != 0) if only_dirty else self.counts)
        return idx.astype(np.int64), self.counts[idx]

    def dropped(self) -> np.ndarray:
        """The keys that went away since the last checkpoint (changed, and now 0 = absent): the
        tombstones an incremental checkpoint carries, so that a restore does not bring them back."""
        return np.flatnonzero(self.dirty & (self.counts == 0)).astype(np.int64)

    def forget(self, keys: np.ndarray) -> None:
        """Make ``keys`` absent (restoring a checkpoint's tombstones)."""
        self.counts[keys[keys < len(self.counts)]] = 0

    def expire(self, watermark: int) -> int:
        """Drop the state whose time has passed once every event below offset ``watermark`` is
        applied; returns the keys dropped.  A plain count keeps its keys forever."""
        return 0

    # -- checkpoint blobs ---------------------------------------------------------------------
    def encode(self, only_dirty: bool = False) -> bytes:
        """The checkpoint blob of the whole state (or of the keys changed since the last
        checkpoint): what every protocol writes and :meth:`load` reads back."""
        return encode_pairs(*self.items(only_dirty))

    def load(self, blob: bytes | memoryview) -> int:
        """Overwrite the keys of checkpoint ``blob`` with what it holds (a full snapshot, or an
        increment over the state restored so far); returns the bytes of ``blob`` it used, so a
        protocol may append its own bookkeeping after it."""
        keys, values = decode_pairs(blob)
        self.set(keys, values)
        return 8 + 16 * len(keys)

    # -- rows: one key's state on its own (:mod:`spark_integration.layouts`) -------------------
    def row_slots(self, keys: np.ndarray) -> np.ndarray:
        """The int64 slots of each key's *row* (its state alone, without the key): the count."""
        return np.ones(len(keys), np.int64)

    def encode_rows(self, keys: np.ndarray, out: np.ndarray) -> None:
        """Write the rows of ``keys`` one after the other (int64, :meth:`row_slots` each) into
        ``out``, so a layout can cut the state into records of any key set, in place, without a
        Python object per key."""
        out[:] = self.counts[keys]

    def load_rows(self, keys: np.ndarray, rows: np.ndarray) -> None:
        """Overwrite ``keys`` with the rows :meth:`encode_rows` gave for them (same order)."""
        self.set(keys, rows)

    def encoded_size(self) -> int:
        """Bytes of :meth:`encode` of the full state, without encoding it."""
        return 8 + 16 * int(np.count_nonzero(self.counts))

    @classmethod
    def blob_length(cls, blob: bytes | memoryview) -> int:
        """Bytes of the checkpoint at the start of ``blob`` (what :meth:`load` would use), read
        from its headers alone: where a protocol's own bookkeeping after it starts."""
        return 8 + 16 * int(np.frombuffer(blob, "<i8", 1)[0])

    # -- the executor-local file (:mod:`.state_file`) ----------------------------------------
    def file_arrays(self) -> dict[str, np.ndarray]:
        """The arrays the executor-local file holds, by name, in file order."""
        return {"counts": self.counts, "dirty": self.dirty}

    def file_scalars(self) -> dict[str, int]:
        """The numbers the file's header holds, in order."""
        return {"version": self.version, "last_events": self.last_events}

    @classmethod
    def from_file(cls, arrays: list[np.ndarray], scalars: list[int]) -> "KeyedState":
        """The state whose :meth:`file_arrays` and :meth:`file_scalars` these are."""
        state = cls(arrays[0], scalars[0])
        state.dirty, state.last_events = arrays[1], scalars[1]
        return state


def encode_pairs(keys: np.ndarray, values: np.ndarray) -> bytes:
    """``n | keys | values`` as little-endian int64 — the checkpoint blob of a key range."""
    return np.array([len(keys)], "<i8").tobytes() + keys.astype("<i8").tobytes() + values.astype("<i8").tobytes()


def decode_pairs(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    n = int(np.frombuffer(blob, "<i8", 1)[0])
    return np.frombuffer(blob, "<i8", n, 8), np.frombuffer(blob, "<i8", n, 8 + 8 * n)


def encode_log(cols: list[np.ndarray]) -> bytes:
    """A logged message: the operator's columns, one after the other, little-endian int64 (one
    column — a keyed count's keys — is just the keys)."""
    return b"".join(np.asarray(c).astype("<i8").tobytes() for c in cols)


def decode_log(blob: bytes, ncols: int) -> list[np.ndarray]:
    return list(np.frombuffer(blob, "<i8").reshape(ncols, -1))


def replay_log(state: KeyedState, blob: bytes) -> int:
    """Apply one logged message to ``state``; returns the events it held."""
    cols = decode_log(blob, len(state.COLUMNS))
    state.apply_columns(cols)
    state.replayed += len(cols[0])
    return len(cols[0])
