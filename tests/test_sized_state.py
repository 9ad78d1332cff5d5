"""State with a size (``spark.ckptbench.stateBytes``): the size forms, the ring per key, its
checkpoint blob and its ground truth (pure logic, no Spark: the Spark runs are in
tests/test_spark_exactly_once.py)."""

from __future__ import annotations

import numpy as np
import pytest

from spark_integration.conf import PREFIX, SparkIntegrationError, from_conf
from spark_integration.keyed_state import KeyedState
from spark_integration.operators import state_class
from spark_integration.sized_state import ring_mismatches, sized_count_state
from spark_integration.source import generate
from spark_integration.state_size import parse_state_size


@pytest.mark.parametrize("text, canonical, sized", [
    ("0", "0", False), ("1024", "1024", True), ("uniform:64:4096", "uniform:64:4096", True),
    ("LogNormal:1024:1", "lognormal:1024:1", True),
])
def test_sizes_parse_to_canonical_text(text, canonical, sized):
    size = parse_state_size(text)
    assert str(size) == canonical and size.sized == sized
    assert parse_state_size(str(size)) == size


@pytest.mark.parametrize("text", ["-1", "4", "abc", "uniform:10", "uniform:4096:64", "lognormal:1024:9",
                                  "zipf:1:2", "uniform:a:b", str(1 << 30)])
def test_bad_sizes_are_one_clear_error(text):
    with pytest.raises(SparkIntegrationError, match="state size"):
        parse_state_size(text)


def test_sizes_are_whole_slots_drawn_per_key_id():
    keys = np.arange(20_000)
    assert set(parse_state_size("1030").slots(keys)) == {128}
    u = parse_state_size("uniform:64:4096").slots(keys)
    assert u.min() >= 8 and u.max() <= 512 and abs(u.mean() * 8 - 2080) < 60
    ln = parse_state_size("lognormal:1024:1").slots(keys)
    assert abs(np.median(ln) * 8 - 1024) < 40 and ln.max() > 4 * np.median(ln)  # the long tail
    assert np.array_equal(ln, parse_state_size("lognormal:1024:1").slots(keys))  # a pure function of the id


def test_conf_carries_the_size_and_refuses_a_bad_one(tmp_path):
    s = from_conf({PREFIX + "stateBytes": "uniform:64:128", PREFIX + "stateDir": str(tmp_path)})
    assert s.state_bytes == "uniform:64:128" and state_class(s).SIZE == parse_state_size("uniform:64:128")
    assert state_class(from_conf({})) is KeyedState
    with pytest.raises(SparkIntegrationError, match="stateBytes"):
        from_conf({PREFIX + "stateBytes": "lots"})


def canonical(state) -> tuple[list[int], list[int], list[int]]:
    """The state's keys, counts and rings in key order, whatever order its arena holds them in."""
    keys, counts = state.items()
    return keys.tolist(), counts.tolist(), state.arena[state._positions(keys)].tolist()


def _events(n: int, keys: int = 300, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    cols = generate("wordcount", seed, keys, 1.0, 0, n)
    return cols["key"], cols["seq"]


def test_rings_do_not_depend_on_the_order_events_arrive_in():
    cls = sized_count_state("uniform:8:256")
    keys, seqs = _events(20_000)
    a, b = cls(), cls()
    a.apply_columns([keys, seqs])
    order = np.random.default_rng(1).permutation(len(keys))
    for part in np.array_split(order, 7):  # shuffled, in uneven batches
        b.apply_columns([keys[part], seqs[part]])
    assert canonical(a) == canonical(b)


def test_full_and_incremental_blobs_restore_the_state():
    cls = sized_count_state("lognormal:256:1")
    keys, seqs = _events(30_000)
    live = cls()
    live.apply_columns([keys[:10_000], seqs[:10_000]])
    full = live.encode()
    live.dirty[:] = False
    live.apply_columns([keys[10_000:], seqs[10_000:]])
    increment = live.encode(only_dirty=True)
    back = cls()
    assert back.load(full) == len(full) == cls.blob_length(full + b"trailer")
    back.load(increment)
    assert canonical(back) == canonical(live)
    assert live.encoded_size() == len(live.encode())
    # a full blob lists the keys in arena order, so its rings are the arena as it lies
    assert cls.blob_length(full) == len(full) and canonical(cls()) == ([], [], [])


def test_ground_truth_matches_a_failure_free_state_and_catches_a_lost_or_doubled_event():
    size = "uniform:16:512"
    cls = sized_count_state(size)
    keys, seqs = _events(25_000)
    state = cls()
    state.apply_columns([keys, seqs])
    assert ring_mismatches("wordcount", 7, 300, 1.0, 25_000, size, state) == (0, len(np.unique(keys)))
    lost = cls()  # the key's latest event missing: its ring shows it
    last = len(keys) - 1
    lost.apply_columns([keys[:last], seqs[:last]])
    lost.counts[keys[last]] += 1  # even with the count patched up
    assert ring_mismatches("wordcount", 7, 300, 1.0, 25_000, size, lost)[0] == 1


def test_a_blob_of_plain_counts_is_what_it_was():
    state = KeyedState()
    state.apply(np.array([3, 3, 7]))
    blob = state.encode()
    assert len(blob) == 8 + 16 * 2 == state.encoded_size() == KeyedState.blob_length(blob + b"x")
    back = KeyedState()
    assert back.load(blob) == len(blob) and back.items()[1].tolist() == [2, 1]


def test_ground_truth_checked_in_slices_finds_the_same(monkeypatch):
    """A state checked a few keys at a time (the slices a gigabyte state is checked in) gives
    the same answer as one pass, a wrong ring in a later slice included."""
    from spark_integration import sized_state

    size = "uniform:16:512"
    cls = sized_count_state(size)
    keys, seqs = _events(25_000)
    state = cls()
    state.apply_columns([keys, seqs])
    state.arena[state._positions(np.array([int(np.max(keys))]))[0]] += 1  # the last key's ring
    whole = ring_mismatches("wordcount", 7, 300, 1.0, 25_000, size, state)
    monkeypatch.setattr(sized_state, "TRUTH_SLOTS", 200)
    assert ring_mismatches("wordcount", 7, 300, 1.0, 25_000, size, state) == whole == (1, len(np.unique(keys)))
