"""Measurements: bulk recording and merging are exact; YCSB names and status counts."""

from __future__ import annotations

import random

from workloads.measure import HIGHEST_US, Measurements, Recorder, new_histogram, record_bulk


def _samples(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [int(rng.lognormvariate(5, 2)) for _ in range(n)]


def _counts(hist) -> list[int]:
    return list(hist.counts)


def test_bulk_record_equals_one_by_one():
    values = _samples(1, 20_000) + [0, 1, HIGHEST_US]
    one = new_histogram()
    for v in values:
        one.record_value(v)
    bulk = new_histogram()
    record_bulk(bulk, values)
    assert _counts(bulk) == _counts(one)
    assert bulk.get_total_count() == len(values)
    assert bulk.get_max_value() == one.get_max_value()
    assert bulk.get_min_value() == one.get_min_value()


def test_merge_equals_histogram_of_concatenated_samples():
    parts = [_samples(seed, 7_000) for seed in range(4)]
    recorders = []
    for part in parts:
        rec = Recorder()
        for v in part:
            rec.ok("READ", v)
        recorders.append(rec.drain())
    merged = Measurements()
    for m in recorders:
        merged.merge(m)
    whole = new_histogram()
    for v in (v for part in parts for v in part):
        whole.record_value(v)
    assert _counts(merged.histograms["READ"]) == _counts(whole)
    summary = merged.summary("READ")
    assert summary["count"] == summary["ok"] == 28_000
    assert summary["p99_us"] == whole.get_value_at_percentile(99)
    assert summary["mean_us"] == whole.get_mean_value()


def test_encode_decode_roundtrip_across_processes():
    rec = Recorder()
    for v in _samples(3, 5000):
        rec.ok("UPDATE", v)
    rec.failed("UPDATE", "ERROR", 12)
    m = rec.drain()
    back = Measurements.decode(m.encode())
    assert _counts(back.histograms["UPDATE"]) == _counts(m.histograms["UPDATE"])
    assert back.summary("UPDATE") == m.summary("UPDATE")
    assert back.summary("UPDATE-FAILED")["count"] == 1


def test_failed_ops_and_status_counts():
    rec = Recorder()
    rec.ok("READ", 5)
    rec.ok("READ", 7)
    rec.failed("READ", "NOT_FOUND", 3)
    rec.failed("READ", "ERROR", 4)
    rec.record("Intended-READ", 9)
    m = rec.drain()
    s = m.summary("READ")
    assert (s["count"], s["ok"], s["errors"]) == (2, 2, 2)
    assert s["statuses"] == {"OK": 2, "NOT_FOUND": 1, "ERROR": 1}
    assert m.summary("READ-FAILED")["count"] == 2
    assert m.summary("Intended-READ")["count"] == 1
    assert m.names() == ["READ", "READ-FAILED", "Intended-READ"]


def test_recorder_drains_in_batches_without_loss():
    from workloads import measure

    rec = Recorder()
    n = measure.BATCH * 2 + 17
    for i in range(n):
        rec.ok("UPDATE", i % 100)
    m = rec.drain()
    assert m.summary("UPDATE")["count"] == n
    assert m.summary("UPDATE")["ok"] == n
    # a second drain adds nothing
    assert rec.drain().summary("UPDATE")["ok"] == n


def test_out_of_range_values_are_clamped_not_lost():
    m = Recorder()
    m.ok("SCAN", HIGHEST_US * 10)
    m.ok("SCAN", -5)
    s = m.drain().summary("SCAN")
    assert s["count"] == 2
