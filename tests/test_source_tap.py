"""The source's tap: what runs before the shuffle, run where the events are made.

Pure logic and a real store (no Spark): a tap sees each source partition's batches with its
sender index and its output is what the partition yields; a query's select and a protocol's
stage chain; the senders' log written from the tap puts each event under the instance Spark's
``repartition(P, "key")`` sends it to, once the read has ended.  With Spark (one session): our
Murmur3 partitioning equals Spark's own ``pmod(hash(key), P)`` on keys of every size and sign.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from spark_integration import source
from spark_integration.conf import PREFIX, from_conf
from spark_integration.keyed_state import decode_log
from spark_integration.protocols.sender_log import LogPlan, count_logged, log_key, log_tap, logged_bytes, sender_owner
from spark_integration.spark_hash import destinations, murmur3_long
from spark_integration.store import drop_job, participant_store


def _tagged(sender, batches):
    for rb in batches:
        yield rb.append_column("tag", pa.array(np.full(rb.num_rows, sender)))


def _evens(batches):
    for rb in batches:
        yield rb.filter(pa.array(rb.column("seq").to_numpy() % 2 == 0))


class _Part:
    def __init__(self, value):
        self.value = value


def test_a_tap_gets_each_partitions_batches_and_its_sender():
    params = source._Params({"kind": "wordcount", "events": "100", "keys": "10", "numPartitions": "2",
                             "tap": source.tap_option(source.chain(_evens, _tagged))})
    parts = params.split(0, 100)
    assert [p.value for p in parts] == [(0, 50, 0), (50, 100, 1)]
    out = [rb for p in parts for rb in params.read(p)]
    seqs = np.concatenate([rb.column("seq").to_numpy() for rb in out])
    tags = np.concatenate([rb.column("tag").to_numpy() for rb in out])
    assert seqs.tolist() == list(range(0, 100, 2)) and tags.tolist() == [0] * 25 + [1] * 25
    # no tap, or nothing to chain: the events as made
    plain = source._Params({"kind": "wordcount", "events": "100", "keys": "10"})
    assert sum(rb.num_rows for rb in plain.read(_Part((0, 30, 0)))) == 30
    assert source.chain(None, None) is None


def test_murmur3_matches_the_reference_values():
    # Spark: SELECT hash(CAST(1 AS BIGINT)) = -1712319331, hash(0L) = -1670924195
    assert murmur3_long(np.array([1, 0], np.int64)).tolist() == [-1712319331, -1670924195]
    d = destinations(np.arange(-1000, 1000, dtype=np.int64), 3)
    assert d.min() == 0 and d.max() == 2


def test_the_senders_log_from_the_tap_holds_each_instance_its_own_events(tmp_path):
    settings = from_conf({PREFIX + "backend": "indexed_fs", PREFIX + "backend.path": str(tmp_path),
                          PREFIX + "protocol": "uncoordinated", PREFIX + "jobId": "tap-log",
                          PREFIX + "stateDir": str(tmp_path / "work")})
    try:
        params = source._Params({"kind": "wordcount", "events": "5000", "keys": "300", "numPartitions": "2",
                                 "tap": source.tap_option(log_tap(settings, LogPlan(7, ()), 3))})
        part = params.split(0, 5000)[1]
        passed = np.concatenate([rb.column("key").to_numpy() for rb in params.read(part)])
        assert len(passed) == 2500
        with participant_store(settings, sender_owner(1)) as store:
            logged = {d: decode_log(store.get(log_key(d, 7)), 1)[0] for d in range(3)}
        assert sum(len(k) for k in logged.values()) == 2500
        for d, keys in logged.items():
            assert (destinations(keys, 3) == d).all()
        before = logged_bytes("tap-log")
        count_logged(settings, 2500)
        assert logged_bytes("tap-log") - before == 8 * 2500  # a keyed count logs one column
    finally:
        drop_job(settings)


def test_our_partitioning_is_sparks(spark):
    rng = np.random.default_rng(5)
    keys = np.concatenate([np.arange(-50, 50), rng.integers(-2**63, 2**63 - 1, 2000, dtype=np.int64),
                           rng.integers(0, 10**6, 2000)]).astype(np.int64)
    df = spark.createDataFrame([(int(k),) for k in keys], "key long")
    for p in (2, 3, 4, 7):
        theirs = [r[0] for r in df.selectExpr(f"pmod(hash(key), {p})").collect()]
        assert destinations(keys, p).tolist() == theirs, p


@pytest.mark.parametrize("name", ["wordcount", "q1", "q3"])
def test_the_drivers_count_per_instance_is_what_sparks_shuffle_delivers(spark, name):
    """Recovery's expected events per instance, counted in the driver by
    :func:`source.events_per_instance` (no job), equal Spark's count of the same read through the
    query's select (q3's progress markers included) grouped as ``repartition(P, "key")`` groups it."""
    from pyspark.sql import functions as F

    from spark_integration.queries import query

    spark.dataSource.register(source.CkptSource)
    q = query(name)
    opts = source.source_options(q.source, 20_000, 500, 1.0, partitions=3)
    tap = source.chain(q.select)
    ours = source.events_per_instance(opts, 1_000, 17_000, tap, 4)
    read = spark.read.format("ckptbench").options(**dict(opts, start="1000", end="17000"))
    df = (read.option("tap", source.tap_option(tap)) if tap else read).load()
    rows = df.groupBy(F.expr("pmod(hash(key), 4)").alias("d")).count().collect()
    theirs = {r["d"]: r["count"] for r in rows}
    assert ours == theirs and sum(ours.values()) > 0
