"""The request ledger and the prices: the arithmetic as pure logic, then what real servers count.

Unit tests (no server): a ledger's counts, differences, sums and JSON form; taps see only their
own thread's requests (and a pool's, when handed over); a retry and its wait are counted;
:func:`backends.ledger.summarize` takes median, mean and total per type; the price table loads,
prices requests by class and storage by GB-month, refuses a malformed table in one line, and
:mod:`experiments.spark.cost` turns a run's ledgers into the ``[COST]`` lines.

Real servers (seconds): a MinIO checkpoint, written by a real layout through the same meter a
Spark task uses, counts one ``PutObject`` per object the bucket then lists; the per-key layout's
PUTs grow with the keys while chunks' stay at the bytes' count; Redis counts the commands its
client sends, a pipeline's one by one; a real Spark job on Redis with a killed instance reports
every checkpoint's and its restore's requests.
"""

from __future__ import annotations

import re
import threading
import uuid

import numpy as np
import pytest

from backends import open_backend
from backends.base import BadOptionError, Retry
from backends.ledger import Ledger, current_taps, summarize, tap, tapped
from experiments.core import prices
from experiments.spark.cost import cost_lines, cost_report
from spark_integration import phases
from spark_integration.job import Metrics, RecoveryPhases
from spark_integration.layouts.registry import layout_class
from spark_integration.store import Scoped
from conftest import server_options
from spark_integration.sized_state import sized_count_state


# ------------------------------------------------------------------------------ the ledger
def test_counts_bytes_and_differences():
    ledger = Ledger()
    ledger.record("PutObject", sent=100)
    ledger.record("PutObject", sent=50)
    earlier = ledger.snapshot()
    ledger.record("GetObject", received=7)
    ledger.retried(0.25)
    assert ledger.requests == {"PutObject": 2, "GetObject": 1} and ledger.total == 3
    assert (ledger.sent, ledger.received, ledger.retries) == (150, 7, 1)
    later = ledger.since(earlier)
    assert later.requests == {"GetObject": 1} and later.sent == 0 and later.received == 7
    assert later.retries == 1 and later.retry_wait_s == pytest.approx(0.25)
    assert Ledger.from_dict(ledger.as_dict()).as_dict() == ledger.as_dict()
    total = Ledger().add(ledger).add(later)
    assert total.requests == {"PutObject": 2, "GetObject": 2} and total.received == 14
    assert not Ledger() and ledger


def test_a_tap_sees_its_own_threads_requests_and_a_pools_it_hands_them_to():
    store = Ledger()
    other_thread = threading.Thread(target=lambda: store.record("SET"))
    with tap() as outer:
        with tap() as inner:
            store.record("GET", received=3)
        store.record("DEL")
        other_thread.start()
        other_thread.join()
        handed = current_taps()
        pool_thread = threading.Thread(target=lambda: _record_in(handed, store))
        pool_thread.start()
        pool_thread.join()
    store.record("MSET")  # after the taps closed
    assert inner.requests == {"GET": 1} and inner.received == 3
    assert outer.requests == {"GET": 1, "DEL": 1, "MGET": 1}
    assert store.requests == {"GET": 1, "DEL": 1, "SET": 1, "MGET": 1, "MSET": 1}


def _record_in(taps, store: Ledger) -> None:
    with tapped(taps):
        store.record_shared("MGET")


def test_retry_counts_each_retry_and_its_wait():
    ledger, slept = Ledger(), []
    calls = iter([ConnectionError("a"), ConnectionError("b"), "ok"])

    def flaky():
        out = next(calls)
        if isinstance(out, Exception):
            raise out
        return out

    retry = Retry(attempts=3, base_delay=0.1, sleep=slept.append, ledger=ledger)
    assert retry.call("x", flaky) == "ok"
    assert ledger.retries == 2 and ledger.retry_wait_s == pytest.approx(sum(slept))


def test_summarize_takes_each_types_median_mean_and_total():
    ledgers = [{"requests": {"PutObject": 2}, "sent_bytes": 10},
               {"requests": {"PutObject": 4, "GetObject": 1}, "sent_bytes": 30},
               {"requests": {"PutObject": 3}, "sent_bytes": 20}]
    s = summarize(ledgers)
    assert s["count"] == 3
    assert s["median"]["requests"] == {"GetObject": 0, "PutObject": 3}
    assert s["mean"]["requests"]["GetObject"] == pytest.approx(1 / 3)
    assert s["total"]["requests"] == {"GetObject": 1, "PutObject": 9}
    assert (s["median"]["sent_bytes"], s["total"]["sent_bytes"]) == (20, 60)
    assert summarize([]) == {"count": 0, "median": {}, "mean": {}, "total": {}}


# ------------------------------------------------------------------------------ prices
def test_the_default_table_prices_s3_requests_by_class_and_storage_by_gb_month():
    table = prices.load()
    assert {p.name for p in table.for_backend("minio")} == {"s3-standard", "gcs-standard",
                                                           "azure-blob-hot"}
    assert [p.name for p in table.for_backend("indexed_fs")] == ["ebs-gp3"]
    assert table.for_backend("redis") == []
    for p in table.providers:  # every price is dated and names where it comes from
        assert p.date and p.source.startswith("https://")
    s3 = next(p for p in table.providers if p.name == "s3-standard")
    dollars, unpriced = s3.request_cost({"PutObject": 1000, "GetObject": 1000, "DeleteObject": 5,
                                         "Mystery": 1})
    assert dollars == pytest.approx(0.005 + 0.0004) and unpriced == ["Mystery"]
    assert s3.storage_cost(table.gb_bytes, prices.MONTH_S, table.gb_bytes) == pytest.approx(0.023)
    ebs = next(p for p in table.providers if p.name == "ebs-gp3")
    assert ebs.request_cost({"fsync": 10, "write": 10}) == (0.0, [])  # gp3 charges no request
    month = prices.monthly(s3, {"PutObject": 3}, 60.0, 2 * table.gb_bytes, table.gb_bytes)
    checkpoints = prices.MONTH_S / 60.0
    assert month["requests"] == pytest.approx(checkpoints * 3 * 0.005 / 1000)
    assert month["storage"] == pytest.approx(2 * 0.023)
    assert month["total"] == pytest.approx(month["requests"] + month["storage"])


def test_a_bad_price_table_is_one_line_naming_the_problem(tmp_path):
    bad = tmp_path / "p.toml"
    for text, words in [("not toml [", "not TOML"), ("x = 1", "no [providers.NAME] table"),
                        ("[providers.a]\nstorage_gb_month = -1", "not a number >= 0"),
                        ("[providers.a]\ntitle = 'x'", "has no storage_gb_month"),
                        ("[providers.a]\nstorage_gb_month = 1\n[providers.a.classes]\nPut = 'w'",
                         "does not price")]:
        bad.write_text(text)
        with pytest.raises(BadOptionError, match=re.escape(words)) as err:
            prices.load(str(bad))
        assert "\n" not in str(err.value)
    with pytest.raises(BadOptionError, match="cannot read it"):
        prices.load(str(tmp_path / "missing.toml"))


def test_cost_lines_price_checkpoints_restores_and_a_month():
    m = Metrics(checkpoints=4, wall_seconds=8.0, store_bytes=1 << 30, live_state_bytes=1 << 29)
    m.checkpoint_requests = [{"requests": {"PutObject": n}, "sent_bytes": 100} for n in (2, 3, 3, 4)]
    m.recoveries = [RecoveryPhases(requests={"requests": {"GetObject": 10, "ListObjectsV2": 1},
                                             "received_bytes": 5000})]
    m.cleanup_requests = {"requests": {"ListObjectsV2": 1, "DeleteObjects": 1}}
    table = prices.load()
    report = cost_report(m, "minio", table)
    s3 = report["prices"]["providers"]["s3-standard"]
    assert s3["per_checkpoint"] == pytest.approx(3 * 0.005 / 1000)  # the median checkpoint
    assert s3["per_restore"] == pytest.approx(10 * 0.0004 / 1000 + 1 * 0.005 / 1000)
    assert report["interval_s"] == 2.0  # wall time / checkpoints
    assert s3["per_month"]["storage"] == pytest.approx(0.023)  # what the store held, a month
    lines = dict(cost_lines(report, "minio"))
    assert lines["Checkpoint.Requests(median)"] == "PutObject=3 (3 in all)"
    assert lines["Checkpoint.Requests(total)"] == "PutObject=12 (12 in all) over 4 checkpoints"
    assert lines["Restore1.Requests"].startswith("GetObject=10 ListObjectsV2=1")
    assert "s3-standard.$/month" in lines and "Cleanup.Requests" in lines
    assert lines["Checkpoint.SentBytes(median)"] == "100"
    m.checkpoint_requests = [{"requests": {"mutateRows": 3}}]  # a store that counts no bytes
    m.recoveries = []
    assert dict(cost_lines(cost_report(m, "hbase", table), "hbase"))[
        "Checkpoint.SentBytes(median)"] == "not counted by this store"
    other = cost_report(m, "redis", table, interval_s=60.0)
    assert dict(cost_lines(other, "redis"))["Price"].startswith("n/a: no provider")
    assert cost_report(Metrics(), "minio", table) is None  # nothing sent: no [COST] lines


# ------------------------------------------------------------------------------ real servers
def _written_by(layout_name: str, store: Scoped, name: str, state) -> tuple[Ledger, int]:
    """A checkpoint of ``state`` in ``layout_name`` under the meter a Spark task uses: its
    requests, and the objects it added to the store."""
    layout = layout_class(layout_name)(chunk_bytes=16384)
    before = set(store.backend.keys(store.prefix))
    with phases.metering() as meter:
        layout.write(store, name, layout.encode(state))
    return meter.requests, len(set(store.backend.keys(store.prefix)) - before)


def _keyed(keys: int):
    """A state of exactly ``keys`` keys, 64 bytes of ring each."""
    state = sized_count_state("64")()
    ids = np.arange(keys, dtype=np.int64) * 2  # every other id: one instance's
    state.apply_columns([ids, np.arange(keys, dtype=np.int64)])
    return state


@pytest.fixture
def minio_store():
    backend = open_backend("minio", **server_options("minio", f"t{uuid.uuid4().hex[:12]}"))
    yield Scoped(backend, "job/i0/")
    backend.delete_many(backend.keys(""))
    backend.close()


@pytest.mark.minio
@pytest.mark.server
def test_a_minio_checkpoint_counts_one_put_per_object_written(minio_store):
    small, large = _keyed(150), _keyed(600)
    puts = {}
    for layout in ("chunks", "per-key"):
        for label, state in (("small", small), ("large", large)):
            requests, objects = _written_by(layout, minio_store, f"{layout}-{label}", state)
            assert requests.requests.get("PutObject") == objects > 0, requests
            assert requests.sent > state.encoded_size() * 0.9  # the state went over the wire
            puts[layout, label] = objects
    keys_small, keys_large = len(small.items()[0]), len(large.items()[0])
    assert keys_large > keys_small
    # per-key: one object a key; chunks: one a chunk of bytes, far fewer at the same state
    assert puts["per-key", "small"] >= keys_small and puts["per-key", "large"] >= keys_large
    assert puts["chunks", "large"] * 10 < puts["per-key", "large"]


@pytest.mark.redis
@pytest.mark.server
def test_redis_counts_the_commands_its_client_sends():
    backend = open_backend("redis", **server_options("redis", f"t{uuid.uuid4().hex[:12]}"))
    try:
        with tap() as sent:
            backend.put("a", b"x" * 100)
            backend.put_many([("b", b"1"), ("c", b"2")])
            assert backend.get("a") == b"x" * 100
            backend.footprint("")  # one pipeline: MEMORY USAGE of each key
            backend.delete_many(["a", "b", "c"])
        assert sent.requests["SET"] == 1 and sent.requests["MSET"] == 1
        assert sent.requests["GET"] == 1 and sent.requests["DEL"] == 1
        assert sent.requests["MEMORY"] == 3 and sent.requests["SCAN"] >= 1
        assert sent.sent > 100 and sent.received >= 100  # the value both ways
        assert backend.requests().requests["SET"] >= 1  # the store's own totals too
    finally:
        backend.close()


def test_bench_spark_refuses_a_bad_price_table_in_one_line_before_spark_starts(tmp_path, capsys):
    from bench.cli import main

    bad = tmp_path / "prices.toml"
    bad.write_text("[providers.x]\ntitle = 'no storage price'\n")
    assert main(["spark", "--backend", "minio", "--prices", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"bench: error: --prices {bad}: providers.x has no storage_gb_month")


@pytest.mark.redis
@pytest.mark.server
@pytest.mark.slow
def test_a_spark_job_reports_each_checkpoints_and_its_restores_requests(spark, tmp_path):
    from spark_integration.conf import PREFIX, from_conf
    from spark_integration.runner import JobSpec, run_job

    namespace = server_options("redis", f"t{uuid.uuid4().hex[:12]}")
    entries = {PREFIX + "protocol": "coordinated", PREFIX + "backend": "redis",
               **{PREFIX + f"backend.{k}": str(v) for k, v in namespace.items()},
               PREFIX + "layout": "per-key",
               PREFIX + "stateBytes": "64", PREFIX + "failAt": "15000",
               PREFIX + "stateDir": str(tmp_path / "work")}
    m = run_job(spark, from_conf(entries), JobSpec(events=30_000, keys=300, max_batch=10_000,
                                                  timeout=120))
    assert m.failures == 1 and m.checkpoints >= 2
    assert len(m.checkpoint_requests) == m.checkpoints  # one commit, one checkpoint, a batch
    for ledger in m.checkpoint_requests:  # the instances' rows and the driver's commit record
        assert ledger["requests"].get("MSET", 0) >= 1 and ledger["requests"].get("SET", 0) >= 1
    restore = m.recoveries[0].requests
    assert restore["requests"].get("SCAN", 0) >= 1 and restore["received_bytes"] > 0
    assert m.cleanup_requests["requests"].get("DEL", 0) >= 1  # the job's records dropped
