"""The real single-node HDFS (``bench services up hdfs``) and the file backends on it (WebHDFS).

The shared HDFS is started if needed (a failure to start fails the tests, never a skip) and
never stopped or killed here: HBase may run on it.  HBase's crash tests on HDFS are in
tests/test_hbase.py (a private HBase on this HDFS).  Conformance of ``default_fs``/``indexed_fs`` on HDFS runs in tests/test_conformance.py
(parameters ``NAME@hdfs``) and the medium's checks in tests/test_media.py (parameter ``hdfs``).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid

import pytest

import services
from backends import open_backend
from backends.base import BackendUnavailableError, BadOptionError
from backends.media import open_medium
from bench import cli
from experiments.storage import crash

pytestmark = [pytest.mark.server, pytest.mark.hdfs]


@pytest.fixture(scope="module")
def hdfs() -> dict:
    st = services.up(["hdfs"])[0]
    assert st["running"], st
    return st


def _dir(prefix: str = "t") -> str:
    return services.client_options("hdfs", f"{prefix}{uuid.uuid4().hex[:12]}")["path"]


def _fsyncs(st: dict) -> int:
    """The DataNode's fsync count (metrics period 1 s: read after one passed)."""
    url = (f"http://127.0.0.1:{st['ports']['dn_http_port']}/jmx?"
           "qry=Hadoop:service=DataNode,name=DataNodeActivity-*")
    with urllib.request.urlopen(url, timeout=5) as resp:
        return int(json.load(resp)["beans"][0]["FsyncCount"])


def test_status_reports_version_ports_url_and_sync_settings(hdfs, capsys):
    assert cli.main(["services", "status", "hdfs", "--json"]) == 0
    (st,) = json.loads(capsys.readouterr().out)
    port = st["ports"]["port"]
    assert st["running"] and st["version"].startswith("3.")
    assert st["url"] == f"hdfs://127.0.0.1:{port}" and st["address"] == f"127.0.0.1:{port}"
    assert set(st["ports"]) == {"port", "http_port", "dn_port", "dn_http_port", "dn_ipc_port"}
    assert st["settings"]["dfs.datanode.synconclose"].startswith("true")
    assert st["settings"]["dfs.datanode.sync.behind.writes"].startswith("false")
    assert st["settings"]["live_datanodes"] == 1
    assert cli.main(["services", "status", "hdfs"]) == 0
    assert f"listening on 127.0.0.1:{port}" in capsys.readouterr().out


def test_bad_urls_are_one_clear_error():
    with pytest.raises(BadOptionError, match="hdfs://HOST:PORT/DIR"):
        open_medium("hdfs://127.0.0.1:8020/", "t")
    with pytest.raises(BadOptionError, match="unknown parameter"):
        open_medium("hdfs://127.0.0.1:8020/x?nope=1", "t")
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError, match="bench services up hdfs"):
        open_medium("hdfs://127.0.0.1:1/x?webhdfs=1&timeout=2", "t")
    assert time.monotonic() - start < 10  # refused at once, never a hang (a bound, not a target)


def test_an_acknowledged_sync_is_an_fsync_on_the_datanode(hdfs):
    with open_medium(_dir(), "t") as m:
        f = m.open_append("log")
        f.append(b"warm")
        f.sync()
        time.sleep(1.2)
        before = _fsyncs(hdfs)
        for i in range(10):
            f.append(b"x" * 100)
            f.sync()
        time.sleep(1.2)
        assert _fsyncs(hdfs) - before >= 10  # synconclose: every APPEND's close fsyncs
        f.close()
        assert m.size("log") == 4 + 1000
        m.remove_tree()


def test_indexed_fs_group_commit_across_writer_threads(hdfs):
    """16 writers with durability=sync: every put acknowledged after an APPEND that carried it,
    and writers waiting during one APPEND share the next (fewer APPENDs than puts)."""
    url = _dir("gc")
    store = open_backend("indexed_fs", path=url, durability="sync")
    try:
        medium = store.medium
        before = medium.appends

        def writer(n: int) -> None:
            for i in range(12):
                store.put(f"w{n}-{i}", f"{n}:{i}".encode() * 20)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        appends = medium.appends - before
        assert 0 < appends < 16 * 12, appends
    finally:
        store.close()
    with open_backend("indexed_fs", path=url) as again:
        assert again.get("w15-11") == b"15:11" * 20
        assert len(list(again.scan("w"))) == 16 * 12
    with open_medium(url, "t") as m:
        m.remove_tree()


def test_indexed_fs_rebuilds_its_index_from_hdfs_after_sigkill(hdfs):
    url = _dir("rb")
    options = {"path": url, "durability": "none", "index_flush_interval": 0.0}
    loaded = crash.load_then_kill("indexed_fs", options, 400, 40)
    assert loaded.load_ms > 0
    with open_backend("indexed_fs", **options) as store:
        stats = store.stats()
        assert stats["keys"] == 400 and not stats.get("snapshot_used")
        assert stats["records_scanned"] >= 400
        assert len(list(store.scan(""))) == 400
    with open_medium(url, "t") as m:  # after close: closing writes the index snapshot there
        m.remove_tree()


def test_bench_write_heavy_on_hdfs(hdfs, capsys):
    url = _dir("wh")
    rc = cli.main(["write-heavy", "--backend", "indexed_fs", "--opt", f"path={url}",
                   "--ops", "60", "--records", "20", "--no-progress", "--seed", "1"])
    out = capsys.readouterr().out
    assert rc == 0 and "[OVERALL], Throughput(ops/sec)" in out
    with open_medium(url, "t") as m:
        m.remove_tree()
