"""`bench peer redis`: our backend and redis-benchmark against the same real server, one invocation."""

from __future__ import annotations

import json
import os
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
