"""NexMark events, --skew and the Q3 join state (pure logic: numpy only, no Spark)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from spark_integration import nexmark, q3
from spark_integration.conf import SparkIntegrationError
from spark_integration.operators import decode_log, decode_pairs, encode_log, encode_pairs
from spark_integration.skew import Skew, parse_skew, skew_arg
from spark_integration.source import generate
from spark_integration.queries import ground_truth
from spark_integration.verify import compare


# ----------------------------------------------------------------------------- --skew
@pytest.mark.parametrize("text, expected", [
    ("1.0", Skew(1.0)), ("0", Skew(0.0)), (1.2, Skew(1.2)),
    ("hot:0.2", Skew(fraction=0.2)), ("HOT:0.5:7", Skew(fraction=0.5, hot_keys=7)),
    ("load+hot:1:20", Skew(fraction=1.0, hot_keys=20, load=True)), ("LOAD+0", Skew(0.0, load=True)),
])
def test_skew_forms(text, expected):
    assert parse_skew(text) == expected
    assert parse_skew(str(expected)) == expected  # canonical text round-trips (source options)


@pytest.mark.parametrize("text, message", [
    ("zipf", "expected a zipfian exponent"), ("-1", "finite number >= 0"), ("nan", "finite number >= 0"),
    ("hot:", "expected a zipfian exponent"), ("hot:1.5", "FRACTION must be in (0, 1]"),
    ("hot:0", "FRACTION must be in (0, 1]"), ("hot:0.2:0", "HOTKEYS must be >= 1"),
    ("hot:0.2:3:4", "expected a zipfian exponent"), ("load+", "expected a zipfian exponent"),
    ("load+load+1", "expected a zipfian exponent"), ("load+hot:2", "FRACTION must be in (0, 1]"),
])
def test_bad_skews_are_clear_errors(text, message):
    with pytest.raises(SparkIntegrationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_skew(text)
    with pytest.raises(argparse.ArgumentTypeError):
        skew_arg(text)


def test_hot_fraction_goes_to_the_hot_set():
    keys = generate("wordcount", 5, 10_000, "hot:0.3", 0, 200_000)["key"]
    hot = keys < 100  # default hot set: 1 % of the keys
    assert abs(hot.mean() - 0.3) < 0.01 and keys.max() < 10_000
    counts = np.bincount(keys[~hot], minlength=10_000)[100:]
    assert counts.min() > 0  # the cold rest is uniform over the other keys
    explicit = generate("wordcount", 5, 1000, "hot:0.9:3", 0, 50_000)["key"]
    assert set(np.unique(explicit[explicit < 3])) == {0, 1, 2} and abs((explicit < 3).mean() - 0.9) < 0.01
    with pytest.raises(SparkIntegrationError, match="5 hot keys but only 4 keys"):
        generate("wordcount", 5, 4, "hot:0.5:5", 0, 10)


def test_a_load_phase_visits_every_key_once_then_the_distribution():
    """``load+``: events [0, keys) are keys 0.. in order (YCSB's load phase); from event ``keys``
    on, exactly the keys the distribution alone gives (a replay of any range agrees)."""
    loaded = generate("wordcount", 5, 1000, "load+hot:1:10", 0, 5000)["key"]
    plain = generate("wordcount", 5, 1000, "hot:1:10", 0, 5000)["key"]
    assert loaded[:1000].tolist() == list(range(1000))
    assert loaded[1000:].tolist() == plain[1000:].tolist() and set(loaded[1000:]) <= set(range(10))
    assert generate("wordcount", 5, 1000, "load+hot:1:10", 990, 1010)["key"].tolist() == loaded[990:1010].tolist()
    assert parse_skew("load+hot:1:10").load_events(1000) == 1000 and parse_skew("1").load_events(1000) == 0
    with pytest.raises(SparkIntegrationError, match="NexMark creates its persons"):
        generate("nexmark", 5, 1000, "load+1", 0, 10)


def test_zipf_values_unchanged_by_the_hot_mode():
    """The zipfian stream is what it was before hot sets existed (saved results stay comparable)."""
    keys = generate("wordcount", 42, 10_000, 1.0, 0, 8)["key"]
    assert keys.tolist() == generate("wordcount", 42, 10_000, "1", 0, 8)["key"].tolist()


# ------------------------------------------------------------------------------ NexMark
def test_nexmark_proportions_ids_and_replay():
    c = generate("nexmark", 7, 500, 1.0, 0, 50_000)
    assert np.bincount(c["etype"]).tolist() == [1_000, 3_000, 46_000]  # 1 : 3 : 46 per 50
    persons, auctions = c["etype"] == nexmark.PERSON, c["etype"] == nexmark.AUCTION
    assert c["id"][persons].tolist() == list(range(1_000))
    assert c["id"][auctions].tolist() == list(range(3_000))
    assert set(np.unique(c["attr"][auctions])) == set(range(10, 15))
    # a few sellers are not created yet (NexMark's lead): those auctions wait for them
    ahead = c["key"][auctions] > c["seq"][auctions] // 50
    assert 0 < ahead.mean() < 0.05 and c["key"].min() >= 0
    part = generate("nexmark", 7, 500, 1.0, 31_337, 50_000)
    for col in part:
        assert np.array_equal(c[col][31_337:], part[col]), col
    assert nexmark.person(c["attr"][0])[2] in nexmark.US_STATES


def test_log_codec_carries_every_column():
    cols = [np.arange(5), np.array([0, 1, 2, 1, 0]), np.arange(5) * 3, np.arange(5) - 2]
    back = decode_log(encode_log(cols), 4)
    assert all(np.array_equal(a, b) for a, b in zip(cols, back))
    assert encode_log([np.arange(3)]) == np.arange(3).astype("<i8").tobytes()  # a count's log = keys


# ------------------------------------------------------------------------------- Q3 join
def _q3_events(events: int, keys: int = 300, skew="1.0"):
    c = generate("nexmark", 42, keys, skew, 0, events)
    k = q3.keep(c["etype"], c["attr"])
    return {col: c[col][k] for col in q3.JoinState.COLUMNS}


@pytest.mark.parametrize("skew", ["1.0", "hot:0.5"])
def test_join_in_any_batching_and_partitioning_equals_the_relational_join(skew):
    """Two instances, random micro-batch cuts, a checkpoint round trip in the middle."""
    events = 60_000
    c = _q3_events(events, skew=skew)
    states = [q3.JoinState(), q3.JoinState()]
    rng, pos, n = np.random.default_rng(3), 0, len(c["key"])
    while pos < n:
        cut = slice(pos, pos + int(rng.integers(1, 400)))
        pos = cut.stop
        for i, st in enumerate(states):
            mine = c["key"][cut] % 2 == i
            st.apply_columns([c[col][cut][mine] for col in q3.JoinState.COLUMNS])
        if pos > n // 2 and not states[0].version:  # restore instance 0 from its full checkpoint
            restored = q3.JoinState()
            restored.set(*decode_pairs(encode_pairs(*states[0].items())))
            restored.version = 1
            states[0] = restored
    slots = np.concatenate([s.items()[0] for s in states])
    values = np.concatenate([s.items()[1] for s in states])
    truth = ground_truth("q3", 42, 300, skew, events)
    assert compare(truth, slots, values).exactly_once
    rows = q3.results(slots, values)
    assert rows and all(r[2] in nexmark.Q3_STATES for r in rows)
    assert len(rows) == int(values[slots % q3.TABLES == q3.EMITTED].sum())
    waiting = slots % q3.TABLES == q3.PENDING
    assert waiting.any()  # auctions whose seller never came (or lives elsewhere) wait


def test_join_applied_twice_is_caught_by_the_emitted_counts():
    c = _q3_events(20_000)
    st = q3.JoinState()
    cols = [c[col] for col in q3.JoinState.COLUMNS]
    st.apply_columns(cols)
    st.apply_columns(cols)  # a duplicate Input Set
    result = compare(ground_truth("q3", 42, 300, "1.0", 20_000), *st.items())
    assert not result.exactly_once and result.wrong_keys > 0


def test_incremental_checkpoint_carries_deletions():
    """An auction that waited and was joined later: its PENDING slot goes to 0 in the delta (a
    changed slot holding 0: one of the delta's tombstones)."""
    st = q3.JoinState()
    auction = [np.array([7]), np.array([nexmark.AUCTION]), np.array([70]), np.array([10])]
    st.apply_columns(auction)  # seller 7 unknown: waits
    base = q3.JoinState()
    base.set(*st.items())
    st.dirty[:] = False
    st.apply_columns([np.array([7]), np.array([nexmark.PERSON]), np.array([7]), np.array([1])])
    base.set(*st.items(only_dirty=True))
    assert q3.slot(np.array([70]), q3.PENDING)[0] in st.dropped()
    base.forget(st.dropped())
    assert base.counts[q3.slot(np.array([70]), q3.PENDING)][0] == 0
    assert base.counts[q3.slot(np.array([70]), q3.JOINED)][0] == 8
    assert base.counts[q3.slot(np.array([7]), q3.EMITTED)][0] == 1


def test_select_keeps_matches_and_one_marker_per_partition():
    import pyarrow as pa

    c = generate("nexmark", 1, 100, 1.0, 0, 5_000)
    batches = [pa.RecordBatch.from_pydict({k: v[a:a + 1000] for k, v in c.items()}) for a in range(0, 5000, 1000)]
    out = pa.Table.from_batches(list(q3.select_partition(iter(batches))))
    etype = out.column("etype").to_numpy()
    assert (etype == q3.MARK).sum() == 1 and out.column("seq").to_numpy()[-1] == 4_999
    assert set(np.unique(etype[:-1])) <= {nexmark.PERSON, nexmark.AUCTION}
    assert len(etype) - 1 == int(q3.keep(c["etype"], c["attr"]).sum())


def test_cli_validates_skew_and_knows_q3(capsys):
    from bench.cli import main
    from bench.spark_cli import JOBS

    assert JOBS["nexmark-q3"] == "q3"
    with pytest.raises(SystemExit) as exc:
        main(["spark", "--protocol", "none", "--skew", "hot:2"])
    assert exc.value.code == 2 and "the hot FRACTION must be in (0, 1]" in capsys.readouterr().err
    assert main(["spark", "--job", "nexmark-q3", "--protocol", "spark-state"]) == 2
    assert "not nexmark-q3" in capsys.readouterr().err
