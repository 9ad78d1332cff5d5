"""Checkpoint layouts (:mod:`spark_integration.layouts`) against a real indexed_fs store, no Spark.

Every layout writes a full checkpoint and a delta of a keyed state (counts only, and a ring of a
fixed or varying size per key) and reads the chain back to the same state; a checkpoint whose
commit record is missing or torn is no checkpoint, a piece missing or stale behind an intact one
is data loss, a piece longer than the backend's values is split into parts, and deleting leaves
nothing behind.
"""

from __future__ import annotations

import numpy as np
import pytest

from backends import backend_class, open_backend
from spark_integration.conf import PREFIX, from_conf
from spark_integration.errors import SparkIntegrationError
from spark_integration.keyed_state import KeyedState
from spark_integration.layouts.base import PIECES, CheckpointDataLost, gather_rows
from spark_integration.layouts.registry import layout_class, layout_names
from spark_integration.sized_state import sized_count_state
from spark_integration.store import Scoped

SIZES = ["0", "64", "uniform:16:256"]


@pytest.fixture
def store(tmp_path):
    backend = open_backend("indexed_fs", path=str(tmp_path / "store"))
    yield Scoped(backend, "")
    backend.close()


def state_of(size: str, events: int, seed: int, state: KeyedState | None = None) -> KeyedState:
    cls = sized_count_state(size) if size != "0" else KeyedState
    state = state if state is not None else cls()
    rng = np.random.default_rng(seed)
    keys = (rng.integers(0, 2000, events) * 2).astype(np.int64)  # every other id: one instance's
    seqs = np.arange(seed * events, (seed + 1) * events, dtype=np.int64)
    state.apply_columns([keys, seqs][:len(cls.COLUMNS)])
    return state


def restored(layout, store, names, size) -> KeyedState:
    back = (sized_count_state(size) if size != "0" else KeyedState)()
    found = layout.find_many(store, names)
    for name in names:
        layout.load(store, found[name], back)
    return back


def same(a: KeyedState, b: KeyedState) -> bool:
    """The same keys with the same rows (a ring's place in the arena may differ)."""
    keys, counts = a.items()
    other, other_counts = b.items()
    return (np.array_equal(keys, other) and np.array_equal(counts, other_counts)
            and np.array_equal(gather_rows(a, keys)[0], gather_rows(b, keys)[0]))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", layout_names())
def test_full_then_delta_reads_back_the_state(store, name, size):
    layout = layout_class(name)(chunk_bytes=4096)
    state = state_of(size, 3000, 1)
    layout.write(store, "e1", layout.encode(state))
    state.dirty[:] = False
    state_of(size, 200, 2, state)  # a few keys change
    delta = layout.encode(state, only_dirty=True, extra=b"meta")
    layout.write(store, "e2", delta)
    assert same(restored(layout, store, ["e1", "e2"], size), state)
    assert layout.find(store, "e2").extra == b"meta"
    assert list(layout.list(store, "e")) == ["e1", "e2"]  # the pieces are not checkpoints


def test_chunks_rewrite_only_the_chunks_holding_a_changed_key(store):
    layout = layout_class("chunks")(chunk_bytes=2048)
    state = state_of("64", 5000, 1)
    full = layout.encode(state)
    state.dirty[:] = False
    state.apply_columns([np.array([10, 12]), np.array([10**6, 10**6 + 1])])
    delta = layout.encode(state, only_dirty=True)
    assert len(full.ids) > 10 and len(delta.ids) == 1 and delta.nbytes <= 2 * 2048


@pytest.mark.parametrize("name", ["per-key", "chunks"])
def test_pieces_without_a_commit_record_are_no_checkpoint(store, name, monkeypatch):
    layout = layout_class(name)(chunk_bytes=4096)
    encoded = layout.encode(state_of("64", 1000, 1))
    real_put = Scoped.put

    def crash_at_commit(self, key, value):
        if key == "c1":
            raise OSError("killed before the commit record")
        real_put(self, key, value)

    monkeypatch.setattr(Scoped, "put", crash_at_commit)
    with pytest.raises(OSError):
        layout.write(store, "c1", encoded)
    monkeypatch.undo()
    assert any(k.startswith(PIECES) for k, _ in store.scan(""))  # the pieces were written
    assert layout.find(store, "c1") is None and layout.list(store, "c") == {}
    layout.delete(store, "c1")  # what a torn write left is found by its index, and removed
    assert list(store.scan("")) == []


@pytest.mark.parametrize("name", layout_names())
def test_torn_commit_record_is_no_checkpoint(store, name):
    layout = layout_class(name)(chunk_bytes=4096)
    layout.write(store, "c1", layout.encode(state_of("64", 1000, 1)))
    record = store.get("c1")
    store.put("c1", record[:-2])
    assert layout.find(store, "c1") is None and layout.list(store, "c") == {}


@pytest.mark.parametrize("name", ["per-key", "chunks"])
def test_missing_or_stale_piece_is_data_loss(store, name):
    layout = layout_class(name)(chunk_bytes=4096)
    layout.write(store, "c1", layout.encode(state_of("64", 1000, 1)))
    pieces = [k for k, _ in store.scan(PIECES)]
    value = store.get(pieces[1])
    store.put(pieces[1], value[:-1] + bytes([value[-1] ^ 1]))  # a piece that is not the one written
    with pytest.raises(CheckpointDataLost, match="damaged or stale"):
        restored(layout, store, ["c1"], "64")
    store.delete(pieces[1])
    with pytest.raises(CheckpointDataLost, match="the backend lost data"):
        restored(layout, store, ["c1"], "64")


@pytest.mark.parametrize("name", layout_names())
def test_pieces_longer_than_a_value_are_split_into_parts(store, name, monkeypatch):
    monkeypatch.setattr(type(store.backend), "max_value_bytes", 512)
    layout = layout_class(name)(chunk_bytes=1000)
    state = state_of("uniform:256:2048", 12, 1)
    layout.write(store, "e1", layout.encode(state))
    records = list(store.scan(""))
    assert all(len(v) <= 512 for _, v in records)
    assert any(k.endswith(".0001") for k, _ in records)
    assert same(restored(layout, store, ["e1"], "uniform:256:2048"), state)


def test_batches_follow_the_backends_batch_limit(store, monkeypatch):
    monkeypatch.setattr(type(store.backend), "max_batch_bytes", 4096, raising=False)
    layout = layout_class("per-key")(chunk_bytes=4096)
    encoded = layout.encode(state_of("64", 2000, 1))
    before = store.ops
    layout.write(store, "c1", encoded)
    # pieces in put_many calls of at most 4 KiB (72-byte rows), then the commit record
    assert store.ops - before >= encoded.nbytes // 4096 + 1


@pytest.mark.parametrize("name", layout_names())
def test_delete_leaves_nothing(store, name):
    layout = layout_class(name)(chunk_bytes=4096)
    layout.write(store, "c1", layout.encode(state_of("64", 1000, 1)))
    layout.delete(store, "c1")
    assert list(store.scan("")) == []
    layout.delete(store, "c1")  # absent: nothing to do


def test_conf_names_the_layout_and_refuses_bad_values():
    s = from_conf({PREFIX + "layout": "Per-Key", PREFIX + "chunkBytes": "65536"})
    assert (s.layout, s.chunk_bytes) == ("per-key", 65536)
    assert from_conf({}).layout == "changelog"
    with pytest.raises(SparkIntegrationError, match="valid layouts: changelog, per-key, chunks"):
        from_conf({PREFIX + "layout": "rows"})
    with pytest.raises(SparkIntegrationError, match="chunkBytes"):
        from_conf({PREFIX + "chunkBytes": "8"})


def test_every_backend_declares_a_value_limit():
    """The limit the layouts split at is a class attribute of every backend (no name tests)."""
    from backends import backend_names

    assert all(backend_class(n).max_value_bytes > 0 for n in backend_names())
