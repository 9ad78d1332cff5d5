"""NexMark Q1, Q8 and Q12 (spark_integration.nexmark_queries) without Spark: each query's stage
before the shuffle, applied chunk by chunk into its operator state, ends where the ground truth
computed from the whole input says; windows and the Q1 map behave as documented."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from spark_integration import nexmark_queries as nq
from spark_integration.keyed_state import KeyedState
from spark_integration.q3 import JoinState
from spark_integration.queries import query
from spark_integration.source import SCHEMAS, generate

EVENTS, KEYS = 60_000, 200


def _batches(kind: str, skew, chunk: int = 7_000):
    names = [f.split()[0] for f in SCHEMAS[kind].split(", ")]
    for start in range(0, EVENTS, chunk):
        cols = generate(kind, 7, KEYS, skew, start, min(EVENTS, start + chunk))
        yield pa.RecordBatch.from_arrays([pa.array(cols[n]) for n in names], names=names)


def _dense(state: KeyedState) -> np.ndarray:
    keys, values = state.items()
    out = np.zeros(int(keys.max()) + 1 if len(keys) else 0, np.int64)
    out[keys] = values
    return out


@pytest.mark.parametrize("skew", [0.0, "hot:0.2"])
@pytest.mark.parametrize("name", ["q1", "q8", "q12"])
def test_select_then_operator_matches_the_truth(name, skew):
    q = query(name)
    state = JoinState() if q.operator == "join" else KeyedState()
    for rb in q.select(_batches(q.source, skew)):
        state.apply_columns([rb.column(c).to_numpy() for c in state.COLUMNS])
    got, truth = _dense(state), q.ground_truth(7, KEYS, skew, EVENTS)
    size = max(len(got), len(truth))
    assert np.array_equal(np.pad(got, (0, size - len(got))), np.pad(truth, (0, size - len(truth))))
    assert truth.sum() > 0


def test_q1_maps_prices_and_keeps_a_tiny_state():
    seq = np.arange(10, dtype=np.int64)
    channel, euros = nq.q1_columns(seq, np.full(10, 1000, np.int64))
    assert euros.tolist() == [908] * 10 and channel.tolist() == list(range(10))
    assert len(query("q1").ground_truth(7, KEYS, 0.0, EVENTS)) == nq.SINK_CHANNELS


def test_windows_tumble_over_event_numbers_and_fold_at_the_last():
    seq = np.array([0, nq.WINDOW_EVENTS - 1, nq.WINDOW_EVENTS, 10**9], np.int64)
    assert nq.window(seq).tolist() == [0, 0, 1, nq.MAX_WINDOWS - 1]


def test_q8_joins_only_within_a_window():
    # a person in window 0 and an auction of theirs in window 1 do not join
    c = {"seq": np.array([5, nq.WINDOW_EVENTS + 1]), "etype": np.array([0, 1]), "key": np.array([3, 3]),
         "id": np.array([3, 77]), "attr": np.array([1, 10])}
    out = nq.q8_columns(c)
    state = JoinState()
    state.apply_columns([out[n] for n in JoinState.COLUMNS])
    assert out["key"].tolist() == [3 * nq.MAX_WINDOWS, 3 * nq.MAX_WINDOWS + 1]
    assert not np.any(state.counts[3::4])  # JOINED table empty
