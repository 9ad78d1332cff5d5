"""The executor-local working state file (:mod:`spark_integration.state_file`): mapped, changed in
place, rewritten only when an array grew, and never usable after a task died while changing it
(pure logic on real files, no Spark)."""

from __future__ import annotations

import numpy as np

from spark_integration import state_file
from spark_integration.keyed_state import KeyedState
from spark_integration.sized_state import sized_count_state


def _batch(state, lo: int, hi: int, keys: int = 500) -> None:
    seq = np.arange(lo, hi, dtype=np.int64)
    cols = [(seq * 7919) % keys, seq]
    state.apply_columns(cols[:len(state.COLUMNS)])


def test_a_state_round_trips_and_later_tasks_change_the_mapped_file_in_place(tmp_path):
    path = str(tmp_path / "i0.state")
    cls = sized_count_state("uniform:8:256")
    state = cls()
    _batch(state, 0, 5_000)
    state.version, state.last_events = 1, 5_000
    state_file.save(path, state)
    inode = (tmp_path / "i0.state").stat().st_ino
    for b in range(2, 6):  # the keys are all known: every later task maps and changes in place
        mapped = state_file.load(path, cls)
        assert mapped is not None and mapped.version == b - 1 and mapped.mapping is not None
        state_file.begin(mapped)
        _batch(mapped, 5_000 * (b - 1), 5_000 * b)
        _batch(state, 5_000 * (b - 1), 5_000 * b)
        mapped.version = state.version = b
        state_file.save(path, mapped)
        assert (tmp_path / "i0.state").stat().st_ino == inode
    back = state_file.load(path, cls)
    assert back.version == 5 and back.encode() == state.encode()
    assert np.array_equal(back.dirty, state.dirty)


def test_a_grown_state_is_written_anew(tmp_path):
    path = str(tmp_path / "i0.state")
    state = KeyedState()
    state.apply(np.array([1, 2, 3]))
    state_file.save(path, state)
    inode = (tmp_path / "i0.state").stat().st_ino
    mapped = state_file.load(path, KeyedState)
    state_file.begin(mapped)
    mapped.apply(np.array([100_000]))  # past the mapped arrays: the state replaced them
    mapped.version = 2
    state_file.save(path, mapped)
    assert (tmp_path / "i0.state").stat().st_ino != inode
    back = state_file.load(path, KeyedState)
    assert back.version == 2 and back.items()[0].tolist() == [1, 2, 3, 100_000]


def test_a_task_that_died_while_changing_the_state_leaves_none(tmp_path):
    path = str(tmp_path / "i0.state")
    state = KeyedState()
    state.apply(np.array([1, 1]))
    state_file.save(path, state)
    mapped = state_file.load(path, KeyedState)
    state_file.begin(mapped)
    mapped.apply(np.array([1]))  # ... and the task dies here: no save
    assert state_file.load(path, KeyedState) is None


def test_a_dropped_file_is_not_written_through_an_old_mapping(tmp_path):
    path = tmp_path / "i0.state"
    state = KeyedState()
    state.apply(np.array([4]))
    state_file.save(str(path), state)
    mapped = state_file.load(str(path), KeyedState)
    path.unlink()  # the instance's working state was dropped (it failed) meanwhile
    mapped.version = 7
    state_file.save(str(path), mapped)
    assert state_file.load(str(path), KeyedState).version == 7


def test_no_file_and_a_foreign_file_are_no_state(tmp_path):
    assert state_file.load(str(tmp_path / "none"), KeyedState) is None
    (tmp_path / "junk").write_bytes(b"x" * 1000)
    assert state_file.load(str(tmp_path / "junk"), KeyedState) is None
