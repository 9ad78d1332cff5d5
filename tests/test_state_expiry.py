"""State that lives and dies: tumbling windows of the keyed count (:mod:`spark_integration.sized_state`)
and the tombstones every checkpoint layout carries for the keys dropped (:mod:`spark_integration.layouts`).

No Spark: the state is driven as an operator instance drives it, checkpointed to a real indexed_fs
store through each layout, and restored from the snapshot and its increments; the ground truth
(:func:`spark_integration.verify.windowed_counts`) is computed from the source's events alone.
"""

from __future__ import annotations

import numpy as np
import pytest

from backends import open_backend
from spark_integration.conf import PREFIX, from_conf
from spark_integration.errors import SparkIntegrationError
from spark_integration.layouts.base import PIECES, gather_rows
from spark_integration.layouts.registry import layout_class, layout_names
from spark_integration import sized_state
from spark_integration.sized_state import ring_mismatches, sized_count_state
from spark_integration.source import generate
from spark_integration.store import Scoped
from spark_integration.verify import windowed_counts

WINDOW = 1000
SIZES = ["64", "uniform:16:256"]


@pytest.fixture
def store(tmp_path):
    backend = open_backend("indexed_fs", path=str(tmp_path / "store"))
    yield Scoped(backend, "")
    backend.close()


def batch(start: int, end: int, keys: int = 300) -> list[np.ndarray]:
    cols = generate("wordcount", 7, keys, 0.8, start, end)
    return [cols["key"], cols["seq"]]


def same(a, b) -> bool:
    """The same live keys with the same rows (a ring's place in the arena may differ)."""
    keys, counts = a.items()
    other, other_counts = b.items()
    return (np.array_equal(keys, other) and np.array_equal(counts, other_counts)
            and np.array_equal(gather_rows(a, keys)[0], gather_rows(b, keys)[0]))


@pytest.mark.parametrize("size", SIZES)
def test_the_latest_window_wins_in_any_order(size):
    """Events applied in any order (a shuffle, a log replayed sender by sender) leave the same
    state: each key's latest window, its older state dropped; late events are left out."""
    cls = sized_count_state(size, WINDOW)
    keys, seqs = batch(0, 5500)
    ordered, shuffled = cls(), cls()
    ordered.apply_columns([keys, seqs])
    order = np.random.default_rng(3).permutation(len(keys))
    for part in np.array_split(order, 7):
        shuffled.apply_columns([keys[part], seqs[part]])
    assert same(ordered, shuffled)
    truth = windowed_counts("wordcount", 7, 300, 0.8, 5500, WINDOW, 0)
    assert np.array_equal(ordered.counts[:len(truth)], truth[:len(ordered.counts)])
    held = len(ordered.items()[0])
    assert ring_mismatches("wordcount", 7, 300, 0.8, 5500, size, ordered, WINDOW, 0) == (0, held)
    assert shuffled.dropped_keys > 0  # keys moved on to a later window


def test_expire_drops_the_closed_windows_and_leaves_tombstones():
    state = sized_count_state("64", WINDOW)()
    state.apply_columns(batch(0, 2500))
    state.dirty[:] = False
    live_before = set(state.items()[0].tolist())
    gone = state.expire(2000)  # windows 0 and 1 closed
    assert gone > 0 and state.dropped_keys == gone
    assert set(np.flatnonzero(state.window >= 0).tolist()) == set(state.items()[0].tolist())
    assert np.all(state.window[state.items()[0]] == 2)
    assert set(state.dropped().tolist()) == live_before - set(state.items()[0].tolist())
    assert not np.any(state.arena[state._positions(state.dropped())])  # rings zeroed
    assert state.expire(2000) == 0  # nothing more closes at the same watermark
    truth = windowed_counts("wordcount", 7, 300, 0.8, 2500, WINDOW, 2000)
    assert np.array_equal(state.counts[:len(truth)], truth[:len(state.counts)])


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", layout_names())
def test_a_restore_from_snapshot_and_increments_never_resurrects_a_dropped_key(store, name, size,
                                                                              monkeypatch):
    """Micro-batches with expiry, a full checkpoint then increments: restoring any prefix of the
    chain gives the state as it was checkpointed — no dropped key back, the others byte for byte
    (and each key's window rebuilt from its ring, a few rings at a time)."""
    monkeypatch.setattr(sized_state, "_NOTE_SLOTS", 100)
    layout = layout_class(name)(chunk_bytes=512)
    cls = sized_count_state(size, WINDOW)
    state, names, dropped = cls(), [], 0
    for b, start in enumerate(range(0, 9000, 600)):
        state.apply_columns(batch(start, start + 600))
        state.expire(start)  # the micro-batch's first offset
        name_b = f"e{b:04d}"
        layout.write(store, name_b, layout.encode(state, only_dirty=b > 0))
        dropped += len(state.dropped())
        state.dirty[:] = False
        names.append(name_b)
        back = cls()
        found = layout.find_many(store, names)
        for n in names:
            layout.load(store, found[n], back)
        assert same(back, state), f"{name}: the restore of {name_b} differs"
        assert np.array_equal(back.window[back.items()[0]], state.window[state.items()[0]])
    assert dropped > 0  # the chain did carry tombstones


def test_chunks_rewrite_a_chunk_that_lost_keys_and_skip_one_left_empty(store):
    layout = layout_class("chunks")(chunk_bytes=256)
    state = sized_count_state("64", WINDOW)()
    state.apply_columns([np.array([1, 2, 40, 41, 900]), np.array([10, 11, 12, 13, 14])])
    state.apply_columns([np.array([1, 900]), np.array([1010, 1011])])  # keys 1, 900 move to window 1
    layout.write(store, "e1", layout.encode(state))
    span = layout.span(state, state.items()[0])
    state.dirty[:] = False
    state.expire(1000)  # window 0 closes: 2, 40, 41 go
    assert sorted(state.dropped().tolist()) == [2, 40, 41]
    delta = layout.encode(state, only_dirty=True)
    live = state.items()[0]
    lost = {k // span for k in (2, 40, 41)}
    assert set(delta.ids.tolist()) == lost & {k // span for k in live.tolist()}  # no empty chunk
    layout.write(store, "e2", delta)
    back = sized_count_state("64", WINDOW)()
    for n in ("e1", "e2"):
        layout.load(store, layout.find(store, n), back)
    assert same(back, state)


def test_deleting_a_chain_removes_every_piece_in_batches(store):
    layout = layout_class("per-key")(chunk_bytes=4096)
    state = sized_count_state("64", WINDOW)()
    state.apply_columns(batch(0, 3000))
    layout.write(store, "e1", layout.encode(state))
    assert any(k.startswith(PIECES) for k, _ in store.scan(""))
    ops = store.ops
    layout.delete(store, "e1")
    assert store.ops - ops <= 4  # the record, the index read, one batch of pieces, the index
    assert list(store.scan("")) == []


def test_windows_need_state_bytes():
    with pytest.raises(SparkIntegrationError, match="stateBytes"):
        from_conf({PREFIX + "windowEvents": "100"})
    with pytest.raises(SparkIntegrationError, match="windowEvents"):
        from_conf({PREFIX + "windowEvents": "-1", PREFIX + "stateBytes": "64"})
    assert from_conf({PREFIX + "windowEvents": "100", PREFIX + "stateBytes": "64"}).window_events == 100
