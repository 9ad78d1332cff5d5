"""Runner: op mixes within statistical bounds, scan order, failures counted, pacing, threads."""

from __future__ import annotations

import math

import pytest

from backends import StorageFullError, backend_class, open_backend
from backends.memory import MemoryBackend
from workloads import core, runner
from workloads.runner import ClientSettings


def _loaded(name: str, seed: int = 1, **overrides):
    spec = core.preset(name, **overrides)
    workload = core.CoreWorkload(spec, seed=seed)
    store = open_backend("memory")
    result = runner.load(store, workload)
    assert result.keys == spec.records
    return workload, store


def _share_ok(count: int, total: int, p: float) -> bool:
    return abs(count / total - p) <= 5 * math.sqrt(p * (1 - p) / total)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("ycsb-a", {"READ": 0.5, "UPDATE": 0.5}),
        ("ycsb-b", {"READ": 0.95, "UPDATE": 0.05}),
        ("ycsb-d", {"READ": 0.95, "INSERT": 0.05}),
        # YCSB's counting: a read-modify-write also counts its READ and its UPDATE
        ("ycsb-f", {"READ-MODIFY-WRITE": 0.5}),
        ("write-heavy", {"READ": 0.1, "UPDATE": 0.9}),
    ],
)
def test_run_proportions_within_bounds(name, expected):
    workload, store = _loaded(name)
    ops = 20_000
    result = runner.run(store, workload, ClientSettings(operations=ops))
    assert result.operations == ops
    m = result.measurements
    for op, p in expected.items():
        s = m.summary(op)
        assert s["errors"] == 0, (op, s["statuses"])  # reads only target inserted keys
        assert _share_ok(s["count"], ops, p), (op, s["count"])
    if name == "ycsb-f":
        rmw = m.summary("READ-MODIFY-WRITE")["count"]
        assert m.summary("READ")["count"] == ops  # plain reads + the reads inside rmw
        assert m.summary("UPDATE")["count"] == rmw
        assert m.summary("READ")["errors"] == m.summary("UPDATE")["errors"] == 0
    else:
        assert sum(m.summary(op)["count"] for op in expected) == ops


def test_inserts_grow_the_store_and_are_read_back():
    workload, store = _loaded("ycsb-d", records=500)
    runner.run(store, workload, ClientSettings(operations=4000))
    inserted = workload.insert_sequence.last() + 1 - 500
    assert inserted > 0
    assert store.stats()["keys"] == 500 + inserted


def test_scan_returns_first_keys_from_start_in_order():
    workload, store = _loaded("ycsb-e", records=3000)
    keys = sorted(workload.load_keys())
    for start_index in (0, 17, 1500, 2990):
        start = keys[start_index]
        got = core.scan_from(store, start, 50, expected_keys=3000)
        assert [k for k, _ in got] == keys[start_index : start_index + 50]
    # a start key between stored keys, and beyond the last one
    got = core.scan_from(store, keys[10] + "0", 5, expected_keys=3000)
    assert [k for k, _ in got] == keys[11:16]
    assert core.scan_from(store, "user99999999999999999999", 5, expected_keys=3000) == []


def test_ycsb_e_runs_scans():
    workload, store = _loaded("ycsb-e", records=1000)
    result = runner.run(store, workload, ClientSettings(operations=500))
    assert result.measurements.summary("SCAN")["count"] > 400
    assert result.measurements.summary("SCAN")["errors"] == 0


class _FlakyMemory(MemoryBackend):
    """Fault injection for the runner's bookkeeping: every 10th put fails like a full disk."""

    name = "flaky-memory"

    def __init__(self, **options):
        super().__init__(**options)
        self.puts = 0

    def _put(self, key, value):
        self.puts += 1
        if self.puts % 10 == 0:
            raise StorageFullError("injected: no space left")
        super()._put(key, value)


def test_failed_ops_are_counted_and_the_run_goes_on():
    spec = core.preset("write-heavy", read=0.0, update=1.0, records=100)
    workload = core.CoreWorkload(spec, seed=3)
    store = _FlakyMemory()
    runner.load(store, workload, batch=1)  # per-key puts: 10 of 100 fail
    result = runner.run(store, workload, ClientSettings(operations=1000))
    s = result.measurements.summary("UPDATE")
    assert result.operations == 1000
    assert s["statuses"] == {"OK": 900, "ERROR": 100}
    assert result.measurements.summary("UPDATE-FAILED")["count"] == 100
    assert any("injected" in text for text in result.errors)


def test_target_rate_records_intended_latencies():
    workload, store = _loaded("ycsb-a", records=100)
    result = runner.run(store, workload, ClientSettings(operations=300, target=3000.0, threads=2))
    m = result.measurements
    assert result.operations == 300
    intended = sum(m.summary(n)["count"] for n in m.names() if n.startswith("Intended-"))
    assert intended == 300


def test_duration_alone_stops_the_run():
    workload, store = _loaded("ycsb-c", records=100)
    result = runner.run(store, workload, ClientSettings(operations=None, duration=0.3))
    assert result.operations > 0
    assert result.measurements.summary("READ")["count"] == result.operations


def test_threads_split_operations_exactly():
    workload, store = _loaded("ycsb-a", records=200)
    done = []
    result = runner.run(store, workload, ClientSettings(operations=1001, threads=3), progress=done.append)
    assert result.operations == 1001
    assert done[-1] == 1001


def test_single_thread_run_is_reproducible():
    def final_state(seed):
        workload, store = _loaded("write-heavy", seed=seed, records=200)
        runner.run(store, workload, ClientSettings(operations=2000))
        return list(store.scan(""))

    assert final_state(5) == final_state(5)
    assert final_state(5) != final_state(6)


def test_verify_counts_missing_and_corrupt():
    store = open_backend("memory")
    keys = [f"k{i}" for i in range(10)]
    value_for = lambda k: core.deterministic_value(k, 100, 7)  # noqa: E731
    for k in keys[:8]:
        store.put(k, value_for(k))
    store.put("k0", b"wrong")
    result = runner.verify(store, keys, value_for)
    assert (result.missing, result.corrupt) == (2, 1)
    assert result.phase.measurements.summary("READ")["ok"] == 7


def test_bad_workload_parameters_are_clear():
    with pytest.raises(core.WorkloadError, match="proportions are 0"):
        core.preset("ycsb-a", read=0.0, update=0.0)
    with pytest.raises(core.WorkloadError, match="unknown request distribution"):
        core.preset("ycsb-a", distribution="pareto")
    with pytest.raises(core.WorkloadError, match="unknown workload"):
        core.preset("ycsb-z")


def test_sequential_distribution_is_shared_across_threads():
    workload, store = _loaded("ycsb-c", records=100, distribution="sequential")
    result = runner.run(store, workload, ClientSettings(operations=150, threads=2))
    assert result.measurements.summary("READ")["ok"] == 150
    # the two threads drew from one counter: 150 draws so far, the next key is number 50
    assert workload.sequential.next() == 50


def test_processes_merge_histograms_exactly_and_split_ops():
    from workloads import parallel

    spec = core.preset("write-heavy", records=200, operations=3001)
    load_phase, result = parallel.run_processes(backend_class("memory"), {}, spec,
                                                ClientSettings(threads=2, seed=4, operations=3001),
                                                processes=2)
    assert result.operations == 3001
    m = result.measurements
    assert m.summary("READ")["count"] + m.summary("UPDATE")["count"] == 3001
    assert load_phase.keys == 400  # memory: each process loads its own store
    assert parallel.split(7, 3) == [3, 2, 2] and parallel.split(None, 2) == [None, None]


def test_processes_refuse_file_backends_with_a_clear_error():
    from backends import BadOptionError, backend_class
    from workloads import parallel

    with pytest.raises(BadOptionError, match=r"locks its data directory.*server backend \(redis"):
        parallel.check_backend(backend_class("indexed_fs"))
    assert parallel.check_backend(backend_class("memory")) == "own"


def test_unsustainable_target_shows_queueing_in_intended_latencies(tmp_path):
    """A target far above what a durable file-per-key store sustains: every op starts late, so its
    intended latency (from the scheduled start) exceeds its service latency — coordinated omission
    made visible, as YCSB's Intended-<OP> lines do."""
    spec = core.preset("write-heavy", read=0.0, update=1.0, records=50)
    workload = core.CoreWorkload(spec, seed=5)
    with open_backend("default_fs", path=str(tmp_path), durability="sync") as store:
        runner.load(store, workload)
        result = runner.run(store, workload, ClientSettings(operations=300, target=1_000_000.0))
    m = result.measurements
    service, intended = m.summary("UPDATE"), m.summary("Intended-UPDATE")
    assert service["count"] == intended["count"] == 300
    assert intended["mean_us"] > 2 * service["mean_us"]
    assert intended["max_us"] >= service["max_us"]
