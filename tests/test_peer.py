"""`bench peer redis`: our backend and redis-benchmark against the same real server, one invocation."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.redis, pytest.mark.server]


def test_peer_prints_both_throughputs_and_their_ratio(tmp_path):
    import services

    services.up(["redis"])
    opts = services.client_options("redis", "peer-test")
    out = tmp_path / "peer.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "peer", "redis", "--clients", "2", "--pipeline", "8",
         "--ops", "4000", "--rounds", "3", "--opt", f"host={opts['host']}", "--opt", f"port={opts['port']}",
         "--opt", f"prefix={opts['prefix']}", "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.rsplit(", ", 1) for line in proc.stdout.splitlines() if line.startswith("[PEER]"))
    peer = float(lines["[PEER], redis-benchmark Throughput(ops/sec)"])
    ours = [float(lines[f"[PEER], ckptbench round {i} Throughput(ops/sec)"]) for i in (1, 2, 3)]
    assert peer > 0 and min(ours) > 0
    doc = json.loads(out.read_text())
    assert doc["clients"] == 2 and doc["pipeline"] == 8 and len(doc["peer_throughput"]) == 4
    # how rounds make the ratio is checked on known numbers below; here, that the run reports it
    assert len(doc["round_ratios"]) == 3 and doc["ratio"] in doc["round_ratios"]
    assert float(lines["[PEER], Ratio"]) == pytest.approx(doc["ratio"])
    # both clients ran under one placement, and the server got its CPUs back afterwards
    from experiments.storage.peers import redis_server_pid

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        assert lines["[PEER], Placement"].startswith(f"cross (server on CPU {cpus[0]}")
        assert doc["placement"] == lines["[PEER], Placement"]
    assert os.sched_getaffinity(redis_server_pid(opts)) == set(cpus)
    # every key our clients wrote is really on the server, under the namespace
    from backends import open_backend

    with open_backend("redis", **opts) as store:
        assert len(store.get_many([f"user{i}" for i in range(4000)])) == 4000


def test_peer_ratio_from_known_throughputs():
    """Each of our rounds against the mean of the peer runs before and after it; the median
    round decides, so one disturbed round does not."""
    from experiments.storage.peers import PeerResult

    r = PeerResult(peer_throughput=[100.0, 300.0, 200.0, 200.0], ours_rounds=[100.0, 500.0, 50.0])
    assert r.ratios == [0.5, 2.0, 0.25]
    assert r.ratio == 0.5
    assert PeerResult().ratio == 0.0


def test_peer_with_no_server_is_one_clear_error():
    proc = subprocess.run([sys.executable, "-m", "bench", "peer", "redis", "--opt", "port=1",
                           "--opt", "timeout=1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "bench: error:" in proc.stderr


def test_placement_pins_a_local_server_apart_from_its_clients_or_leaves_both_alone():
    from experiments.storage.peers import placement

    cpus = sorted(os.sched_getaffinity(0))
    me = os.getpid()  # any live local process stands in for the server here
    server, clients, text = placement("cross", me)
    if len(cpus) > 1:
        assert server == {cpus[0]} and clients == set(cpus[1:]) and text.startswith("cross")
        assert placement("same", me)[:2] == ({cpus[0]}, {cpus[0]})
    assert placement("any", me)[:2] == (None, None)
    assert placement("cross", None)[:2] == (None, None)  # a remote server: nothing to pin
    with pytest.raises(ValueError, match="valid: cross, same, any"):
        placement("diagonal", me)


def test_peer_against_ycsbs_binding_interleaves_both_per_thread_count(tmp_path):
    """`bench peer redis --against ycsb-binding`: bench run's workload A and the binding-like
    client on the same records, warm-up pairs first, the binding around every round of ours,
    a [RATIO] line and a JSON entry per thread count; the records are gone afterwards."""
    import uuid

    import services
    from backends import open_backend

    services.up(["redis"])
    opts = services.client_options("redis", f"peer-ycsb-{uuid.uuid4().hex[:8]}")
    out = tmp_path / "binding.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "peer", "redis", "--against", "ycsb-binding",
         "--records", "300", "--ops", "600", "--threads", "1,2", "--rounds", "2", "--warmup",
         "1", "--placement", "any", "--opt", f"host={opts['host']}", "--opt",
         f"port={opts['port']}", "--opt", f"prefix={opts['prefix']}", "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ckptbench.peer-ycsb/1" and doc["workload"] == "workloada"
    assert (doc["records"], doc["ops"], doc["field_count"], doc["field_length"]) == (300, 600, 10, 100)
    assert [e["threads"] for e in doc["by_threads"]] == [1, 2]
    ratios = [line for line in proc.stdout.splitlines() if line.startswith("[RATIO]")]
    for entry, line in zip(doc["by_threads"], ratios):
        assert len(entry["binding_throughput"]) == 3 and len(entry["ours_throughput"]) == 2
        assert len(entry["warmup_binding"]) == len(entry["warmup_ours"]) == 1
        assert len(entry["binding_cpu_us"]) == 3 and len(entry["ours_cpu_us"]) == 2
        assert min(entry["binding_cpu_us"] + entry["ours_cpu_us"]) > 0
        assert entry["ratio"] > 0
        assert entry["ratio"] == pytest.approx(statistics.median(entry["round_ratios"]))
        assert line.startswith(f"[RATIO], ckptbench / binding, {entry['threads']} thread")
        assert f", {entry['ratio']:.2f}, median of 2 rounds" in line
    with open_backend("redis", **opts) as store:
        assert store.keys() == []


def test_binding_like_client_sets_the_given_fields_and_reads_the_record():
    """The plain client stands in for YCSB's binding: HMSET of the given fields keeps the
    others, HGETALL reads all of them, HMGET the asked ones."""
    import uuid

    import services
    from backends import backend_class
    from experiments.storage.binding_peer import BindingLike

    services.up(["redis"])
    opts = services.client_options("redis", f"binding-{uuid.uuid4().hex[:8]}")
    client = BindingLike(backend_class("redis").parse_options(opts))
    try:
        client.put_fields("k", {"field0": b"a", "field1": b"b"})
        client.put_fields("k", {"field1": b"B"})
        assert client.get_fields("k") == {b"field0": b"a", b"field1": b"B"}
        assert client.get_fields("k", ["field1", "x"]) == {"field1": b"B"}
        assert client.get_fields("absent") is None
    finally:
        client._client().delete(opts["prefix"] + "k")
        client.close()


def test_a_peer_run_stopped_by_sigterm_gives_the_server_its_cpus_back():
    """The server is shared: a `timeout` around `bench peer` (SIGTERM) must not leave it
    pinned to the placement's CPU, and the records under the prefix are removed."""
    import signal
    import time
    import uuid

    import services
    from backends import open_backend
    from experiments.storage.peers import redis_server_pid

    cpus = set(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: nothing is pinned")
    services.up(["redis"])
    opts = services.client_options("redis", f"peer-term-{uuid.uuid4().hex[:8]}")
    pid = redis_server_pid(opts)
    assert os.sched_getaffinity(pid) == cpus
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "peer", "redis", "--against", "ycsb-binding",
         "--records", "200", "--ops", "10000000", "--threads", "1", "--opt",
         f"host={opts['host']}", "--opt", f"port={opts['port']}", "--opt",
         f"prefix={opts['prefix']}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while os.sched_getaffinity(pid) == cpus and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.sched_getaffinity(pid) != cpus, "the run never pinned the server"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert os.sched_getaffinity(pid) == cpus
    with open_backend("redis", **opts) as store:
        assert store.keys() == []
