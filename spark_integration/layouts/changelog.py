"""``changelog``: each checkpoint is one blob, the state's checkpoint encoding.

What the protocol asks for becomes one piece: the keys changed since the previous checkpoint (a
delta, appended to the chain) or the whole state (the snapshot the protocol materialises every
``fullEvery`` checkpoints), as :meth:`~spark_integration.keyed_state.KeyedState.encode` writes
it — Flink's changelog backend and Spark's RocksDB changelog checkpointing.  Recovery loads the
snapshot and replays the deltas after it in order; a delta's tombstones (the keys dropped since
the previous checkpoint, :mod:`.base`) travel in its commit record and are replayed with it.  The blob travels inside the checkpoint's
commit record when it fits one value of the backend (one put per checkpoint); a longer one is
split into parts at the backend's ``max_value_bytes`` (:mod:`.base`).  The default layout.
"""

from __future__ import annotations

import numpy as np

from ..keyed_state import KeyedState
from .base import Alloc, Layout, fresh


class ChangelogLayout(Layout):
    name = "changelog"
    summary = ("one blob per checkpoint (a delta of the changed keys, or the full snapshot every "
               "fullEvery checkpoints); restore loads the snapshot and replays the deltas")

    def pieces(self, state: KeyedState, only_dirty: bool,
               alloc: Alloc = fresh) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        blob = np.frombuffer(state.encode(only_dirty), np.uint8)
        return np.zeros(1, np.int64), blob, np.array([0, len(blob)], np.int64)

    def load_pieces(self, state: KeyedState, ids: np.ndarray, pieces: list[bytes]) -> None:
        for piece in pieces:
            state.load(piece)
