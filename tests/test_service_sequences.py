"""``bench services up/down/kill`` in sequence over one state directory: every server serves at
the end, or one line said what to do.

The servers run in a private network namespace made by the ``ns`` fixture (loopback only, its
own ports 6379, 8020, 9090 ... ) with a private state directory, so the shared servers other tests
use, on the same fixed ports of the host's namespace, are never seen, stopped or killed.  Every
command is the real CLI (``python -m bench.services_cli`` run with ``ip netns exec``), and the
HBase checks are happybase puts and gets from inside the namespace.  At the end the fixture stops
the servers and SIGKILLs whatever still runs in the namespace (by the namespace's own pid list)
before it deletes it.

Needs root (``ip netns``), as CI and ``./dev test`` have.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.server, pytest.mark.crash]

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ("redis", "hdfs", "hbase", "minio", "nfs")


@dataclass
class Namespace:
    """A private network namespace and state directory; runs commands inside them."""

    name: str
    state: Path

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ip", "netns", "exec", self.name, "env", f"CKPTBENCH_STATE={self.state}", *argv],
            capture_output=True, text=True, timeout=timeout, cwd=ROOT)

    def services(self, *args: str) -> subprocess.CompletedProcess:
        """``bench services ARGS`` inside the namespace."""
        return self.run(sys.executable, "-m", "bench.services_cli", *args)

    def ok(self, *args: str) -> str:
        """``bench services ARGS`` that must succeed; its stderr (the ``[services]`` lines)."""
        done = self.services(*args)
        assert done.returncode == 0, f"bench services {' '.join(args)}: {done.stderr[-3000:]}"
        return done.stderr

    def status(self, name: str) -> dict:
        done = self.services("status", name, "--json")
        return json.loads(done.stdout)[0]

    def hbase(self, op: str, key: str) -> str:
        """``put`` KEY or ``get`` KEY (its value or ``-``) in table ``seq`` through Thrift1."""
        done = self.run(sys.executable, "-c", HBASE_CLIENT, op, key, timeout=120)
        assert done.returncode == 0, f"hbase {op} {key}: {done.stderr[-2000:]}"
        return done.stdout.strip()


HBASE_CLIENT = """
import sys, happybase
op, key = sys.argv[1], sys.argv[2]
conn = happybase.Connection("127.0.0.1", 9090, timeout=60000)
if b"seq" not in conn.tables():
    conn.create_table("seq", {"f": {}})
table = conn.table("seq")
if op == "put":
    table.put(key.encode(), {b"f:v": key.encode()})
    print("ok")
else:
    print((table.row(key.encode()).get(b"f:v") or b"-").decode())
"""


def _notes(stderr: str) -> list[str]:
    """The lines about HBase a command printed on stderr."""
    return [line for line in stderr.splitlines() if line.startswith("[services] hbase: ")]


@pytest.fixture(scope="module")
def ns(tmp_path_factory):
    name = f"ckptbench-seq-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a private network namespace (needs root): "
                    f"{made.stderr.strip()}")
    space = Namespace(name, tmp_path_factory.mktemp("seq-state"))
    try:
        # loopback, plus a second loopback address: getaddrinfo(AI_ADDRCONFIG), which
        # nfs-ganesha uses for its Bind_Addr, finds no IPv4 while 127.0.0.1 is the only one
        for cmd in (["ip", "link", "set", "lo", "up"],
                    ["ip", "addr", "add", "127.0.0.2/32", "dev", "lo"]):
            subprocess.run(["ip", "netns", "exec", name, *cmd], check=True)
        yield space
    finally:
        space.services("down", *SERVERS)
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True,
                              text=True).stdout.split()
        for pid in pids:
            subprocess.run(["kill", "-KILL", pid], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.mark.parametrize("name", [pytest.param(n, marks=getattr(pytest.mark, n))
                                  for n in ("redis", "minio", "nfs")])
def test_sigkill_then_up_serves_again(ns, name):
    ns.ok("up", name)
    before = ns.status(name)
    assert before["running"], before
    ns.ok("kill", name)
    assert not ns.status(name)["running"]
    ns.ok("up", name)
    after = ns.status(name)
    assert after["running"] and after["pid"] != before["pid"], after
    assert after["address"] == before["address"]
    ns.ok("down", name)


@pytest.mark.slow
@pytest.mark.hdfs
@pytest.mark.hbase
def test_hbase_root_moves_and_crashes_end_serving(ns):
    """The sequence of the report that HBase never came back after its root moved, then
    SIGKILLs of HDFS under HBase and of HBase, then a move back: every step ends serving (a
    put and a get through Thrift) or says in one line what the user did not ask for."""
    # a local root: HDFS does not run
    ns.ok("up", "hbase")
    assert ns.status("hbase")["settings"]["fs"] == "local"
    assert ns.hbase("put", "on-local") == "ok"

    # HDFS comes up beside it: a running HBase keeps its root, and one line says how to move
    notes = _notes(ns.ok("up", "hdfs", "hbase"))
    assert len(notes) == 1 and "keeps running on its root file://" in notes[0], notes
    assert "--hbase-root hdfs` moves it there" in notes[0]
    assert ns.status("hbase")["settings"]["fs"] == "local"

    # stopped and started again with `auto`: a new root on HDFS, its own ZooKeeper state
    ns.ok("down", "hbase")
    notes = _notes(ns.ok("up", "hbase"))
    assert len(notes) == 1 and notes[0].startswith("[services] hbase: root hdfs://"), notes
    st = ns.status("hbase")
    assert st["running"] and st["settings"]["fs"] == "hdfs", st
    assert ns.hbase("get", "on-local") == "-"  # another root: the local one keeps it
    assert ns.hbase("put", "on-hdfs") == "ok"

    # HDFS SIGKILLed under it: one line each time, and `up hbase` restarts the stale master
    notes = _notes(ns.ok("kill", "hdfs"))
    assert len(notes) == 1 and "cannot write without it" in notes[0], notes
    done = ns.services("up", "hbase")  # without HDFS: one line naming the fix
    assert done.returncode == 1
    assert _notes(done.stderr)[-1].endswith("`bench services up hdfs hbase` starts both")
    # (the master is stale, or has exited by now: a region server that loses its WAL aborts)
    notes = _notes(ns.ok("up", "hdfs"))
    assert len(notes) == 1 and "`bench services up hbase` brings it back" in notes[0], notes
    ns.ok("up", "hbase")
    assert ns.hbase("get", "on-hdfs") == "on-hdfs"

    # HBase SIGKILLed: `up` brings it back on the same root, the acknowledged put there
    pid = ns.status("hbase")["pid"]
    ns.ok("kill", "hbase")
    assert not ns.status("hbase")["running"]
    ns.ok("up", "hbase")
    st = ns.status("hbase")
    assert st["running"] and st["pid"] != pid and st["settings"]["fs"] == "hdfs", st
    assert ns.hbase("get", "on-hdfs") == "on-hdfs"

    # asked by name for the local root while running on HDFS: moved, and the data is there
    notes = _notes(ns.ok("up", "hbase", "--hbase-root", "local"))
    assert any("stopping to move from root hdfs://" in n for n in notes), notes
    assert ns.status("hbase")["settings"]["fs"] == "local"
    assert ns.hbase("get", "on-local") == "on-local"
    assert ns.hbase("get", "on-hdfs") == "-"
    ns.ok("down", "hbase", "hdfs")
