"""Stateful property test: indexed_fs against a dict model, with tiny segments so that rotation,
GC and compaction happen constantly, and reopen (close + open, sometimes without a snapshot) in
the mix."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from backends import open_backend

KEYS = st.sampled_from(["a", "ab", "abc", "b", "ba", "c", "é", "k/1", "k/2", "zz", "n\x00ul"])
VALUES = st.binary(max_size=120)
OPTS = dict(durability="none", segment_size=200, index_flush_interval=0,
            compaction_live_ratio=0.7)


class IndexedFSMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ifs-props-"))
        self.store = open_backend("indexed_fs", path=str(self.dir), **OPTS)
        self.model: dict[str, bytes] = {}

    @rule(key=KEYS, value=VALUES)
    def put(self, key, value):
        self.store.put(key, value)
        self.model[key] = value

    @rule(items=st.lists(st.tuples(KEYS, VALUES), min_size=1, max_size=5))
    def put_many(self, items):
        self.store.put_many(items)
        self.model.update(items)

    @rule(key=KEYS)
    def delete(self, key):
        self.store.delete(key)
        self.model.pop(key, None)

    @rule(key=KEYS)
    def get(self, key):
        assert self.store.get(key) == self.model.get(key)

    @rule(prefix=st.sampled_from(["", "a", "ab", "k/", "z", "q"]))
    def scan(self, prefix):
        expected = sorted((k, v) for k, v in self.model.items() if k.startswith(prefix))
        assert list(self.store.scan(prefix)) == expected

    @rule()
    def compact(self):
        self.store.compact()

    @rule()
    def gc(self):
        self.store._gc()

    @rule()
    def flush(self):
        self.store.flush()

    @rule(drop_snapshot=st.booleans())
    def reopen(self, drop_snapshot):
        self.store.close()
        if drop_snapshot:
            for p in self.dir.glob("snap-*.idx"):
                p.unlink()
        self.store = open_backend("indexed_fs", path=str(self.dir), **OPTS)
        stats = self.store.stats()
        assert stats["corrupt_records"] == 0 and stats["torn_tail_truncated"] == 0

    @precondition(lambda self: self.model)
    @rule()
    def snapshot_then_crash(self):
        """Close without the closing snapshot, as a crash after a background flush would."""
        self.store.write_snapshot()
        self.store.put("zz", b"after-snapshot")
        self.model["zz"] = b"after-snapshot"
        self.store._stop_threads()
        self.store._close_files()
        self.store._closed = True
        self.store = open_backend("indexed_fs", path=str(self.dir), **OPTS)

    @invariant()
    def accounting_matches(self):
        stats = self.store.stats()
        assert stats["keys"] == len(self.model)
        assert 0 <= stats["live_bytes"] <= stats["total_bytes"]

    def teardown(self):
        try:
            self.store.close()
            self.store = open_backend("indexed_fs", path=str(self.dir), **OPTS)
            assert dict(self.store.scan()) == self.model
            self.store.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


IndexedFSMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40,
                                              deadline=None)
TestIndexedFS = IndexedFSMachine.TestCase
