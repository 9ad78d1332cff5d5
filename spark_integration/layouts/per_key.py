"""``per-key``: one record per key, ``pieces/<checkpoint>/<key id>`` — as S4's SafeKeeper writes.

A key's record is its *row* (its count, then the rest of its state: the ring of a sized state,
:meth:`~spark_integration.keyed_state.KeyedState.encode_rows`); its id is in the record's name.
A delta holds the changed keys only, so loading a chain in order leaves every key at its last
written row; a key dropped since the previous checkpoint gets no record but a tombstone in the
commit record (:mod:`.base`), and its older records go with the checkpoints that hold them.  Rows are cut from one gathered buffer and loaded back a batch at a time, so a
million keys cost no Python object per key beyond the record itself.
"""

from __future__ import annotations

import numpy as np

from ..keyed_state import KeyedState
from .base import Alloc, Layout, fresh, gather_rows


class PerKeyLayout(Layout):
    name = "per-key"
    summary = "one record per key (S4's SafeKeeper); an incremental checkpoint writes the changed keys"

    def pieces(self, state: KeyedState, only_dirty: bool,
               alloc: Alloc = fresh) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        keys, _ = state.items(only_dirty)
        data, bounds = gather_rows(state, keys, alloc)
        return keys, data, bounds

    def load_pieces(self, state: KeyedState, ids: np.ndarray, pieces: list[bytes]) -> None:
        state.load_rows(np.asarray(ids, np.int64), np.frombuffer(b"".join(pieces), "<i8"))
