"""Spark clients (``--spark-master``): exact merging, planning, and real local[2] runs on Redis."""

from __future__ import annotations

import json
import random
import uuid

import pytest

from backends import BadOptionError, CkptError
from bench import cli, report
from workloads import core
from workloads import spark_clients as sc
from workloads.measure import Recorder, new_histogram
from workloads.runner import ClientSettings, PhaseResult


# ------------------------------------------------------------------------------- pure logic
def _phase(values: list[int], runtime_ms: float) -> PhaseResult:
    rec = Recorder()
    for v in values:
        rec.ok("UPDATE", v)
    return PhaseResult("run", runtime_ms, len(values), rec.drain())


def test_merged_histograms_equal_histogram_of_concatenated_samples():
    rng = random.Random(7)
    samples = [[int(rng.lognormvariate(6, 1.5)) for _ in range(n)] for n in (5000, 1, 12345)]
    # through the same JSON payload the tasks send to the driver
    parts = [sc.phase_from_payload(json.loads(json.dumps(sc.phase_payload(_phase(s, 10.0 * i), 0))))
             for i, s in enumerate(samples, 1)]
    merged = sc.merge_phases("run", parts)
    whole = new_histogram()
    for s in samples:
        for v in s:
            whole.record_value(v)
    got = merged.measurements.histograms["UPDATE"]
    assert list(got.counts) == list(whole.counts)
    assert got.get_total_count() == whole.get_total_count() == sum(map(len, samples))
    for pct in (0, 50, 90, 99, 99.9, 100):
        assert got.get_value_at_percentile(pct) == whole.get_value_at_percentile(pct)
    assert merged.measurements.statuses["UPDATE"]["OK"] == sum(map(len, samples))
    assert merged.operations == sum(map(len, samples))
    assert merged.runtime_ms == 30.0  # the slowest client


def test_plan_splits_inserts_ops_and_target():
    plans = sc.plan(1003, 4, ClientSettings(threads=3, operations=10, target=100.0), own_store=False)
    assert [p["insertcount"] for p in plans] == [251, 251, 251, 250]
    covered = [k for p in plans for k in range(p["insertstart"], p["insertstart"] + p["insertcount"])]
    assert covered == list(range(1003))  # disjoint slices covering every record, in order
    assert [p["operations"] for p in plans] == [3, 3, 2, 2]
    assert all(p["target"] == 25.0 for p in plans)
    assert [p["client_offset"] for p in plans] == [0, 3, 6, 9]
    own = sc.plan(10, 2, ClientSettings(threads=1), own_store=True)
    assert [(p["insertstart"], p["insertcount"], p["operations"]) for p in own] == [(0, 10, None)] * 2


def test_range_workload_loads_only_its_slice():
    spec = core.preset("write-heavy", records=100)
    w = sc.RangeWorkload(spec, 1, client=2, insertstart=40, insertcount=20)
    assert w.load_keys() == core.CoreWorkload(spec, seed=1).load_keys()[40:60]


def test_local_slots():
    assert sc.local_slots("local") == 1
    assert sc.local_slots("local[2]") == 2
    assert sc.local_slots("local[3, 4]") == 3
    assert sc.local_slots("local[*]") >= 1
    assert sc.local_slots("spark://h:7077") is None


def test_file_backends_and_bad_combinations_are_clear_errors():
    with pytest.raises(BadOptionError, match="locks its data directory"):
        sc.check_backend("indexed_fs")
    spec = core.preset("write-heavy", records=10, operations=10)
    with pytest.raises(BadOptionError, match=r"local\[3\]"):  # before any Spark start
        sc.run_clients("memory", {}, spec, ClientSettings(), master="local[2]", clients=3)

def test_clients_without_a_spark_master_is_one_clear_line(capsys):
    assert cli.main(["write-heavy", "--backend", "memory", "--clients", "2", "--ops", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--clients needs --spark-master" in err[0]


def test_clients_line_follows_throughput():
    lines = ["[OVERALL], RunTime(ms), 5", "[OVERALL], Throughput(ops/sec), 1.0", "[READ], x"]
    assert report.clients_lines(lines, 3)[2] == "[OVERALL], Clients, 3"


# ------------------------------------------------------------------------ real local[2] runs
def _redis_opts(redis_options: dict) -> list[str]:
    return [x for k, v in redis_options.items() for x in ("--opt", f"{k}={v}")]


@pytest.fixture
def redis_options():
    import services

    services.up(["redis"])
    return services.client_options("redis", f"t{uuid.uuid4().hex[:12]}")


@pytest.mark.redis
@pytest.mark.server
@pytest.mark.slow
def test_local2_two_clients_on_redis(tmp_path, redis_options, capsys):
    out = tmp_path / "r.json"
    assert cli.main(["write-heavy", "--backend", "redis", *_redis_opts(redis_options),
                     "--spark-master", "local[2]", "--clients", "2", "--records", "301",
                     "--ops", "2001", "--threads", "2", "--target", "800",  # paced: >= 2.5 s
                     "--json", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "[OVERALL], Clients, 2" in text
    assert "[OVERALL], Throughput(ops/sec)," in text and "[LOAD-OVERALL], Records, 301" in text
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ckptbench.result/1" and doc["spark"]["clients"] == 2
    clients = doc["clients"]
    assert [c["client"] for c in clients] == [0, 1]
    assert len({c["pid"] for c in clients}) == 2  # two real client processes
    run = doc["phases"]["run"]
    assert run["operations_done"] == sum(c["phases"]["run"]["operations_done"] for c in clients) == 2001
    for op, summary in run["operations"].items():
        assert summary["count"] == sum(c["phases"]["run"]["operations"][op]["count"] for c in clients)
    assert [c["plan"]["insertcount"] for c in clients] == [151, 150]
    assert all(c["phases"]["run"]["cpu_s"] > 0 for c in clients)
    assert doc["phases"]["load"]["records"] == 301
    # every client starts its run at the common instant: after the last client finished its
    # slice of the load and reached the barrier, plus START_MARGIN_S (not when Spark's 1 s poll
    # happens to release it), so no client runs before the store is loaded ...
    load_end = max(c["phases"]["load"]["start_unix"] + c["phases"]["load"]["runtime_ms"] / 1e3
                   for c in clients)
    starts = [c["phases"]["run"]["start_unix"] for c in clients]
    ends = [s + c["phases"]["run"]["runtime_ms"] / 1e3 for s, c in zip(starts, clients)]
    assert all(s >= load_end + sc.START_MARGIN_S - 1e-3 for s in starts), (load_end, starts)
    # ... and the measured windows overlap: every client started before any finished (each run
    # is paced to >= 2.5 s by --target, a generous margin for a late wake-up on a busy machine)
    assert max(starts) < min(ends), (starts, ends)
    skew = doc["spark"]["start_skew_ms"]["run"]
    assert skew == pytest.approx((max(starts) - min(starts)) * 1e3, abs=1e-3)


@pytest.mark.redis
@pytest.mark.server
@pytest.mark.slow
def test_one_client_failing_stops_all_with_its_message(redis_options):
    spec = core.preset("write-heavy", records=10, operations=10)
    bad = {**redis_options, "port": 1}  # nothing listens there
    with pytest.raises(CkptError, match=r"client \d: BackendUnavailableError"):
        sc.run_clients("redis", bad, spec, ClientSettings(), master="local[2]", clients=2)
