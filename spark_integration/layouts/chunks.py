"""``chunks``: key ranges packed into objects of about ``chunkBytes`` — as Flink and Spark write files.

Chunk ``c`` holds the keys with ids in ``[c K, (c + 1) K)``: ``n | keys | rows`` (int64; a row is
:meth:`~spark_integration.keyed_state.KeyedState.encode_rows`'s).  ``K`` is a power of two chosen
from the state when the checkpoint is taken — the id range whose live keys fill about
``chunkBytes`` — so it stays put while the state's density and row size do.  An incremental
checkpoint rewrites every chunk that holds a changed key, *whole* (all its live keys and its
changed ones), so loading a chain in order leaves every key at its last written row whatever
``K`` each checkpoint used: a chunk never holds a key without its current row.  A chunk that lost
keys (dropped since the last checkpoint) is rewritten without them, and one left without a live
key is not written at all: the checkpoint's tombstones (:mod:`.base`) drop them on restore.
"""

from __future__ import annotations

import numpy as np

from ..keyed_state import KeyedState
from .base import Alloc, Layout, fresh


class ChunksLayout(Layout):
    name = "chunks"
    summary = ("key ranges packed into objects of about chunkBytes (Flink, Spark); an incremental "
               "checkpoint rewrites only the chunks holding a changed key")

    def span(self, state: KeyedState, live: np.ndarray) -> int:
        """Key ids per chunk: a power of two whose range holds about ``chunkBytes`` of rows."""
        if not len(live):
            return 1
        row_bytes = 8.0 * float(state.row_slots(live).mean()) + 8  # its row and its key
        density = len(live) / float(live[-1] + 1)
        ideal = max(1.0, self.chunk_bytes / (row_bytes * density))
        return 1 << int(round(np.log2(ideal)))

    def pieces(self, state: KeyedState, only_dirty: bool,
               alloc: Alloc = fresh) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        live, _ = state.items()
        span = self.span(state, live)
        if only_dirty:  # the chunks holding a changed key or one that went away, live keys only
            changed = np.union1d(state.items(only_dirty=True)[0], state.dropped())
            keys = live[np.isin(live // span, np.unique(changed // span))]
        else:
            keys = live
        ids, starts = np.unique(keys // span, return_index=True)
        ends = np.append(starts[1:], len(keys)).astype(np.int64)
        row_at = np.concatenate([[0], np.cumsum(state.row_slots(keys))])
        bounds = np.concatenate([[0], np.cumsum(1 + (ends - starts) + row_at[ends] - row_at[starts])])
        data = alloc(int(bounds[-1]))
        for c, (lo, hi) in enumerate(zip(starts, ends)):  # each chunk encoded in its place
            at = int(bounds[c])
            data[at] = hi - lo
            data[at + 1:at + 1 + hi - lo] = keys[lo:hi]
            state.encode_rows(keys[lo:hi], data[at + 1 + hi - lo:int(bounds[c + 1])])
        return ids, data.view(np.uint8), (bounds * 8).astype(np.int64)

    def load_pieces(self, state: KeyedState, ids: np.ndarray, pieces: list[bytes]) -> None:
        for piece in pieces:
            n = int(np.frombuffer(piece, "<i8", 1)[0])
            keys = np.frombuffer(piece, "<i8", n, 8)
            state.load_rows(keys, np.frombuffer(piece, "<i8", offset=8 + 8 * n))
