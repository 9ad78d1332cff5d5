"""``bench services up cluster``: worker hosts in network namespaces, and the loss of one.

One private cluster (own state directory, namespace tag and subnet; 3 hosts) serves the module:
the shared servers of ``bench services up`` are never touched.  The tests run in file order:
status, then a host's loss (an HDFS file written before it reads back from the other replicas),
then ``down``, which must leave no namespace, veth, bridge, process or mount of ours behind.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import services
from backends.media.hdfs import HdfsMedium
from bench.cli import main as bench_main
from bench.services_cli import main as cli_main
from services import cluster, hdfs
from services.common import default_state_root, pid_alive

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.crash,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

WORKERS = 3


def _free_subnet() -> str:
    """A 10.77.X.0/24 no interface of this machine uses (another cluster's, say)."""
    taken = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    for x in random.sample(range(100, 250), 150):
        if f" 10.77.{x}." not in taken:
            return f"10.77.{x}.0/24"
    raise RuntimeError("no free 10.77.X.0/24 subnet")


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    """A private 3-host cluster; ``down`` at the end whatever the tests did."""
    state_dir = tmp_path_factory.mktemp("cluster-state")
    netns = os.listdir("/run/netns") if os.path.isdir("/run/netns") else []
    tag = random.choice([t for t in (f"t{n:03d}" for n in range(1000))
                         if not any(n.startswith(f"{cluster.NETNS_PREFIX}{t}h") for n in netns)])
    try:
        # the shared servers of the default state directory are relayed to the hosts
        st = services.up(["cluster"], state_dir=state_dir, workers=WORKERS,
                         subnet=_free_subnet(), tag=tag, stores=str(default_state_root()))[0]
        assert st["running"], st
        yield state_dir
    finally:
        services.down(["cluster"], state_dir=state_dir)


def _opts(state_dir) -> dict:
    return cluster._options(services.context("cluster", state_dir))


def _leftovers(state_dir) -> list[str]:
    """Whatever of this cluster is still on the machine: namespaces, links, mounts, processes."""
    opts = _opts(state_dir)
    prefix = f"{cluster.NETNS_PREFIX}{opts['tag']}h"
    out = [f"netns {n}" for n in os.listdir("/run/netns") if n.startswith(prefix)] \
        if os.path.isdir("/run/netns") else []
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    out += [f"link {line.split(':')[1].strip()}" for line in links.splitlines()
            if line.split(":")[1].strip().split("@")[0].startswith(f"ckb{opts['tag']}")]
    out += [f"mount {line}" for line in Path("/proc/mounts").read_text().splitlines()
            if prefix in line]
    out += [f"/etc/netns/{n}" for n in (os.listdir("/etc/netns") if os.path.isdir("/etc/netns")
                                         else ()) if n.startswith(prefix)]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(state_dir).encode() in cmd:
            out.append(f"process {pid} {cmd[:120]!r}")
    return out


def test_up_starts_every_host_and_status_shows_them(state, capsys):
    st = services.status(["cluster"], state_dir=state)[0]
    opts = _opts(state)
    assert st["running"], st
    assert st["settings"]["replication"] == 3 and st["settings"]["live_datanodes"] == WORKERS
    service, *workers = st["hosts"]
    assert service["address"] == cluster.service_address(opts) and service["netns"] is None
    relayed = cluster._relayed(services.context("cluster", state), opts)
    assert {p["role"] for p in service["processes"]} == (
        {"spark-master", "namenode"} | ({"relay"} if relayed else set()))
    assert [h["address"] for h in workers] == [cluster.host_address(opts, i)
                                               for i in range(1, WORKERS + 1)]
    for h in workers:
        assert h["up"] and os.path.exists(f"/run/netns/{h['netns']}")
        assert {"spark-worker", "datanode"} <= {p["role"] for p in h["processes"]}, h
        # every process of the host really is in the host's own network namespace
        for p in h["processes"]:
            assert os.readlink(f"/proc/{p['pid']}/ns/net") == os.readlink(
                f"/proc/{h['processes'][0]['pid']}/ns/net") != os.readlink("/proc/self/ns/net")
    # up again changes nothing; the command line lists every host with its processes
    assert services.up(["cluster"], state_dir=state)[0]["pid"] == st["pid"]
    capsys.readouterr()
    assert cli_main(["status", "cluster", "--state-dir", str(state)]) == 0
    out = capsys.readouterr().out
    for h in workers:
        assert f"{h['host']} {h['address']} (netns {h['netns']}): " in out, out
    assert "replication=3" in out


def test_a_worker_host_reaches_the_shared_servers_at_the_service_address(state):
    """Redis (when the shared one runs) answers a worker host at the service address, through
    the relay; the host's loopback is its own, so 127.0.0.1 there reaches nothing."""
    opts = _opts(state)
    relays = services.client_options("cluster", "relay", state_dir=state)["relays"]
    if "redis" not in relays:
        pytest.skip("no shared Redis runs in the default state directory to relay")
    probe = ("import socket, sys\n"
             "s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)\n"
             "s.sendall(b'PING\\r\\n'); print(s.recv(16))")
    done = subprocess.run(["ip", "netns", "exec", cluster.netns_name(opts, 1), sys.executable,
                           "-c", probe, cluster.service_address(opts),
                           str(relays["redis"]["port"])], capture_output=True, text=True,
                          timeout=30)
    assert "+PONG" in done.stdout, done.stderr
    # a name for every address: a lookup inside a host never waits on an unreachable DNS server
    t = time.monotonic()
    subprocess.run(["ip", "netns", "exec", cluster.netns_name(opts, 1), "getent", "hosts",
                    cluster.host_address(opts, 2)], capture_output=True, timeout=30)
    assert time.monotonic() - t < 3


@pytest.mark.parametrize("argv, needle", [
    (["--backend", "indexed_fs"], "--backend indexed_fs keeps its store in a directory local to "
                                  "each host, and the cluster has 3: give it a shared one"),
    (["--backend", "redis", "--opt", "host=127.0.0.1"],
     "--opt host=127.0.0.1 is this machine's loopback, which the cluster's hosts do not reach"),
])
def test_a_store_the_hosts_do_not_share_is_refused(state, argv, needle, monkeypatch, capsys):
    monkeypatch.setenv("CKPTBENCH_STATE", str(state))
    assert bench_main(["spark", "--master", "cluster", "--protocol", "coordinated", *argv,
                       "--events", "1000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def _block_hosts(opts: dict, rel: str) -> list[set[str]]:
    url = (f"http://{cluster.service_address(opts)}:{opts['http_port']}/webhdfs/v1/ckptbench/"
           f"{rel}?op=GETFILEBLOCKLOCATIONS&user.name=root")
    with urllib.request.urlopen(url, timeout=30) as resp:
        blocks = json.load(resp)["BlockLocations"]["BlockLocation"]
    return [set(b["hosts"]) for b in blocks]


def test_a_block_lost_with_a_host_is_served_from_another_replica(state, capsys):
    opts = _opts(state)
    medium = HdfsMedium(services.client_options("cluster", "blocks", state_dir=state)["path"])
    data = os.urandom(3 * cluster.BLOCKSIZE + 4096)  # four blocks
    medium.makedirs("")
    medium.write_atomic("before-the-kill.bin", data)
    victim = 2
    lost = cluster.host_address(opts, victim)
    blocks = _block_hosts(opts, "blocks/before-the-kill.bin")
    assert len(blocks) == 4 and all(lost in b and len(b) == 3 for b in blocks), blocks
    before = services.status(["cluster"], state_dir=state)[0]["hosts"][victim]["processes"]

    capsys.readouterr()
    assert cli_main(["kill", "cluster", "--host", str(victim), "--state-dir", str(state)]) == 0
    assert f"host h{victim} ({lost}) killed: " in capsys.readouterr().out
    assert not any(pid_alive(p["pid"]) for p in before)  # all SIGKILLed (a zombie counts as dead)
    assert not cluster.host_dir(services.context("cluster", state), victim).exists()
    assert not os.path.exists(f"/run/netns/{cluster.netns_name(opts, victim)}")
    st = services.status(["cluster"], state_dir=state)[0]
    assert not st["running"] and not st["hosts"][victim]["up"]

    # the NameNode notices the silent DataNode (stale after three missed heartbeats) and sends
    # readers to a live replica from then on
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        nn = hdfs.cluster_state(opts["http_port"], cluster.service_address(opts))
        if nn.get("NumStaleDataNodes", 0) + nn.get("NumDeadDataNodes", 0) >= 1:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the NameNode never noticed host {victim}'s loss: {nn}")
    assert medium.read_file("before-the-kill.bin") == data
    medium.close()

    # the Spark master drops the lost host's worker (no heartbeat for WORKER_TIMEOUT s), and only
    # that one: the others heartbeat in time
    master_log = services.context("cluster", state).log_dir / "cluster.log"
    deadline = time.monotonic() + 3 * cluster.WORKER_TIMEOUT
    while f"-{lost}-" not in _removed_workers(master_log) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert {f"-{lost}-"} == {w for w in _removed_workers(master_log)}, master_log.read_text()[-2000:]


def _removed_workers(log: Path) -> set[str]:
    """``-ADDRESS-`` of every worker the master's log says it removed."""
    return {f"-{addr}-" for addr in re.findall(r"Removing (?:worker )?worker-\d+-([\d.]+)-",
                                               log.read_text(errors="replace"))}


def test_down_leaves_nothing_behind(state, capsys):
    assert _leftovers(state)  # the cluster (what is left of it) runs
    # a crash of all of it first: down cleans up after SIGKILLed processes as well
    assert cli_main(["kill", "cluster", "--state-dir", str(state)]) == 0
    assert not services.status(["cluster"], state_dir=state)[0]["running"]
    assert cli_main(["down", "cluster", "--state-dir", str(state)]) == 0
    assert _leftovers(state) == []
    st = services.status(["cluster"], state_dir=state)[0]
    assert not st["running"] and not any(h["up"] or h["processes"] for h in st["hosts"])


@pytest.mark.parametrize("argv, needle", [
    (["up", "cluster", "--workers", "0"], "--workers 0 must be between 1 and 200"),
    (["up", "cluster", "--subnet", "8.8.8.0/24"], "is not a private /24 network"),
    (["kill", "cluster", "--host", "9"], "there is no host 9; the cluster has hosts 1..3"),
])
def test_bad_cluster_options_are_one_line_errors(argv, needle, tmp_path, capsys):
    assert cli_main([*argv, "--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "cluster" / "options.json").exists()  # nothing was made


def test_a_job_on_a_cluster_that_is_not_running_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CKPTBENCH_STATE", str(tmp_path))
    assert bench_main(["spark", "--master", "cluster", "--protocol", "coordinated",
                       "--backend", "redis", "--events", "1000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the cluster is not running" in err[0] \
        and "bench services up cluster" in err[0], err
