"""The ``hbase`` backend against a real standalone HBase + Thrift gateways (no mocks).

The ``ctx`` fixture starts the shared service through ``services.hbase`` (reusing a running one)
and fails loudly if it cannot; it is left running for the other tests.  The crash tests and the
HDFS durability checks use a PRIVATE HBase of this module (``private``: its own state directory
and ports, its root and WAL on the shared HDFS, started once and stopped at the end), so killing
it never disturbs the shared server other tests and users rely on.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.request
import uuid

import happybase
import pytest

from backends.base import BackendUnavailableError, BadOptionError
from backends.registry import open_backend
import services
from services import hbase as service
from services.common import ServiceContext, kill_pid, log

pytestmark = [pytest.mark.server, pytest.mark.hbase]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ctx() -> ServiceContext:
    ctx = ServiceContext.for_service("hbase")
    service.install(log)
    status = service.start(ctx)  # idempotent; raises ServiceError (test error) if it cannot start
    assert status["running"], status
    return ctx


@pytest.fixture(scope="module")
def hdfs_status() -> dict:
    """The shared HDFS (started if needed; a failure to start fails the tests)."""
    st = services.up(["hdfs"])[0]
    assert st["running"], st
    return st


@pytest.fixture(scope="module")
def private(tmp_path_factory, hdfs_status):
    """A private HBase on the shared HDFS: ``(ctx, start)``, where ``start()`` (re)starts it
    with its own ports and root.  Stopped, and its root deleted from HDFS, at the end."""
    ctx = ServiceContext.for_service("hbase", tmp_path_factory.mktemp("hbase-private"))
    kwargs = {"zk_port": _free_port(), "thrift_port": _free_port(),
              "thrift2_port": _free_port(), "hbase_root": hdfs_status["url"], "heap": "512m"}

    def start() -> dict:
        return service.start(ctx, **kwargs)

    st = start()
    assert st["running"] and st["settings"]["fs"] == "hdfs", st
    yield ctx, start
    service.stop(ctx)
    from backends.media.hdfs import HdfsMedium

    root = st["settings"]["rootdir"]
    with HdfsMedium(f"{root}?webhdfs={hdfs_status['ports']['http_port']}", "test") as m:
        m.remove_tree()


def _table_options(ctx: ServiceContext, request) -> dict:
    return service.client_options(ctx, f"test_{request.node.name}_{uuid.uuid4().hex[:8]}")


def _drop_table(ctx: ServiceContext, options: dict) -> None:
    if service.status(ctx)["running"]:
        conn = happybase.Connection(options["host"], options["port"], timeout=20000)
        try:
            if options["table"].encode() in conn.tables():
                conn.delete_table(options["table"], disable=True)
        finally:
            conn.close()


@pytest.fixture
def opts(ctx, request):
    """Options for a fresh table of this test on the shared server; dropped afterwards."""
    options = _table_options(ctx, request)
    yield options
    _drop_table(ctx, options)


@pytest.fixture
def popts(private, request):
    """Options for a fresh table of this test on the private server; dropped afterwards."""
    options = _table_options(private[0], request)
    yield options
    _drop_table(private[0], options)


@pytest.fixture
def store(opts):
    with open_backend("hbase", **opts) as backend:
        yield backend


def _wait_readable(opts: dict, key: str, deadline: float = 120.0) -> None:
    """After a restart HBase replays the dead server's WAL before the region serves again."""
    end = time.monotonic() + deadline
    while True:
        try:
            with open_backend("hbase", **opts, timeout=5000, retries=0) as b:
                b.get(key)
                return
        except BackendUnavailableError:
            if time.monotonic() > end:
                raise
            time.sleep(1)


def test_status_and_client_options(ctx):
    status = service.status(ctx)
    assert status["running"] and status["address"] == "127.0.0.1:9090"
    settings = status["settings"]
    if settings["fs"] == "local":
        assert "page cache" in settings["wal_durability"]
    else:
        assert settings["wal_dir"].startswith("hdfs://")
        assert "hsync" in settings["wal_durability"]["wal_hsync"]
    opts = service.client_options(ctx, "a/b c")
    assert opts["table"] == "ckptbench_a_b_c" and opts["port"] == 9090
    assert opts["thrift2_port"] == 9091


def test_hbase_root_choice_is_checked_with_the_fix(tmp_path):
    """--hbase-root hdfs without an HDFS in that state directory, or a bogus value: one error
    naming the fix; auto without HDFS means local, an hdfs:// URL means that HDFS."""
    from services.common import ServiceError

    ctx = ServiceContext.for_service("hbase", tmp_path / "state")
    with pytest.raises(ServiceError, match="bench services up hdfs hbase"):
        service._resolve_root(ctx, "hdfs")
    with pytest.raises(ServiceError, match="auto\\|local\\|hdfs"):
        service._resolve_root(ctx, "bogus")
    assert service._resolve_root(ctx, "auto") == ("local", f"file://{ctx.data_dir}/root")
    base, root = service._resolve_root(ctx, "hdfs://127.0.0.1:8020/")
    assert base == "hdfs://127.0.0.1:8020" and root.startswith("hdfs://127.0.0.1:8020/hbase-")


def _datanode_fsyncs(hdfs_status: dict) -> int:
    """The DataNode's count of fsyncs (its metrics period is 1 s: read after it passed)."""
    url = (f"http://127.0.0.1:{hdfs_status['ports']['dn_http_port']}/jmx?"
           "qry=Hadoop:service=DataNode,name=DataNodeActivity-*")
    with urllib.request.urlopen(url, timeout=5) as resp:
        return int(json.load(resp)["beans"][0]["FsyncCount"])


@pytest.mark.hdfs
def test_on_hdfs_wal_hsync_fsyncs_on_the_datanode_and_wal_does_not(private, popts,
                                                                    hdfs_status):
    """status puts the root and the WAL on hdfs:// and says what an acknowledgement means;
    every wal_hsync put is an fsync on the DataNode (FSYNC_WAL through Thrift2), wal puts are
    not (SYNC_WAL: hflush)."""
    ctx, _ = private
    settings = service.status(ctx)["settings"]
    assert settings["fs"] == "hdfs" and settings["wal_dir"].startswith(hdfs_status["url"])
    assert settings["hbase.unsafe.stream.capability.enforce"] == "true"
    assert "hflush" in settings["wal_durability"]["wal"]
    counts = {}
    for mode in ("wal", "wal_hsync"):
        with open_backend("hbase", **popts, durability=mode) as store:
            store.put("warm", b"up")  # table regions open before counting
            time.sleep(1.2)
            before = _datanode_fsyncs(hdfs_status)
            for i in range(20):
                store.put(f"{mode}-{i}", b"v" * 100)
            assert store.get(f"{mode}-19") == b"v" * 100
            time.sleep(1.2)
            counts[mode] = _datanode_fsyncs(hdfs_status) - before
            assert store.stats()["wal"].startswith("on")
    assert counts["wal_hsync"] >= 20, counts
    assert counts["wal"] < 10, counts  # only files HBase or others close meanwhile


def test_put_get_delete(store):
    assert store.get("pe-1") is None
    store.put("pe-1", b"v1")
    store.put("pe-1", b"v2")  # only the latest checkpoint matters
    assert store.get("pe-1") == b"v2"
    store.put("pe-2", b"")
    assert store.get("pe-2") == b""
    store.delete("pe-1")
    store.delete("absent")
    assert store.get("pe-1") is None
    stats = store.stats()
    assert stats["backend"] == "hbase" and stats["wal"].startswith("on")
    assert stats["server"] == "127.0.0.1:9090" and stats["table"].startswith("ckptbench_test_")


def test_many_and_threads(store):
    items = {f"pe-{i:04d}": os.urandom(100) for i in range(2500)}  # > batch_size: several calls
    store.put_many(items)
    got = store.get_many(list(items) + ["missing"])
    assert got == items

    def writer(n: int) -> None:
        for i in range(50):
            store.put(f"t{n}-{i}", str(i).encode())

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.get_many([f"t{n}-49" for n in range(6)]) == {f"t{n}-49": b"49" for n in range(6)}


@pytest.mark.parametrize("mode", ["wal", "wal_hsync"])
def test_delete_many_goes_in_batches(opts, mode):
    """Batch deletes through happybase's batch (``wal``) and Thrift2's ``deleteMultiple``
    (``wal_hsync``), several calls of ``batch_size`` rows each."""
    keys = [f"d-{i:03d}" for i in range(30)]
    with open_backend("hbase", **opts, durability=mode, batch_size=7) as store:
        store.put_many([(k, b"v") for k in keys])
        store.delete_many(keys[:25] + ["absent"])
        assert sorted(store.get_many(keys)) == keys[25:]


def test_scan_order_prefix_and_paging(opts):
    keys = ["b", "a/2", "a/10", "a/1", "a", "é", "z", "a\U0001F600", "ab"]
    with open_backend("hbase", **opts, batch_size=2) as store:  # tiny pages: paging is exercised
        store.put_many({k: k.encode() for k in keys})
        assert [k for k, _ in store.scan()] == sorted(keys)
        assert list(store.scan("a/")) == [(k, k.encode()) for k in sorted(keys) if k.startswith("a/")]
        assert [k for k, _ in store.scan("a")] == sorted(k for k in keys if k.startswith("a"))
        assert list(store.scan("nothing")) == []


def test_skip_wal_and_bad_options(opts):
    with open_backend("hbase", **opts, durability="skip_wal") as store:
        store.put("k", b"v")
        store.flush()  # disable/enable: the memstore goes to an HFile
        assert store.get("k") == b"v"
        assert store.stats()["wal"].startswith("off")
    with pytest.raises(BadOptionError):
        open_backend("hbase", **opts, durability="fsync")
    with pytest.raises(BadOptionError):
        open_backend("hbase", **opts, timeout=0)


def test_dead_port_fails_fast_with_clear_error():
    start = time.monotonic()
    with pytest.raises(BackendUnavailableError) as err:
        open_backend("hbase", port=1, timeout=1000, retries=2)
    assert time.monotonic() - start < 15  # no hang (a bound, not a speed target)
    assert "127.0.0.1:1" in str(err.value) and "bench services up hbase" in str(err.value)


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.hdfs
def test_wal_survives_sigkill(private, popts):
    """Every put acknowledged with the WAL on (SYNC_WAL: hflushed to the DataNode) is there
    after the private HBase JVM is SIGKILLed and restarted (lease recovery, WAL replay)."""
    ctx, start = private
    opts = popts
    acked: dict[str, bytes] = {}
    errors: list[BaseException] = []
    stop, enough = threading.Event(), threading.Event()
    # the table is created first, with a bound for a busy machine: the writer's short timeout
    # is for noticing the kill, not for a fresh server's first DDL
    open_backend("hbase", **opts, timeout=30000).close()

    def writer() -> None:
        try:
            with open_backend("hbase", **opts, timeout=2000, retries=1) as store:
                i = 0
                while not stop.is_set():
                    key, value = f"pe-{i:06d}", os.urandom(1024)
                    try:
                        store.put(key, value)
                    except BackendUnavailableError as exc:
                        errors.append(exc)
                        return
                    acked[key] = value
                    i += 1
                    if i == 300:
                        enough.set()
        except BaseException as exc:  # noqa: BLE001 - shown by the assertion below
            errors.append(exc)
        finally:
            enough.set()  # a writer that ended early must not leave the wait below to its bound

    thread = threading.Thread(target=writer)
    thread.start()
    # the kill comes once 300 puts were acknowledged, however slow the machine (a bound, not a
    # speed target: it only keeps a stuck server from hanging the run)
    enough.wait(timeout=120)
    if len(acked) < 300 or errors:
        stop.set()
        thread.join(timeout=60)
        pytest.fail(f"{len(acked)} puts acknowledged before the kill, not 300: {errors[:1]}")
    kill_pid(ctx)  # SIGKILL the master/region server JVM in the middle of the run
    thread.join(timeout=60)
    stop.set()
    assert not thread.is_alive(), "writer hung after the server was killed"
    assert errors and len(acked) >= 300, (len(acked), errors)

    start()  # restarts master (WAL replay) and gateways
    _wait_readable(opts, "pe-000000")
    with open_backend("hbase", **opts, timeout=20000) as store:
        got = store.get_many(list(acked))
    missing = sorted(set(acked) - set(got))
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
    assert all(got[k] == v for k, v in acked.items())


@pytest.mark.crash
@pytest.mark.slow
def test_server_stopped_mid_run_then_back(private, popts):
    """Stopping the server mid-run turns ops into BackendUnavailableError (no hang); the same
    store works again once the server is back."""
    ctx, start = private
    opts = popts
    open_backend("hbase", **opts, timeout=30000).close()  # the table, with a bound for a busy machine
    store = open_backend("hbase", **opts, timeout=2000, retries=2)
    failure: list[BaseException] = []
    done, running = threading.Event(), threading.Event()

    def writer() -> None:
        i = 0
        while True:
            try:
                store.put(f"k{i}", b"x")
            except BackendUnavailableError as exc:
                failure.append(exc)
                done.set()
                running.set()
                return
            i += 1
            if i == 20:
                running.set()

    thread = threading.Thread(target=writer)
    thread.start()
    running.wait(timeout=120)  # stopped mid-run: once 20 puts were acknowledged (k0 among them)
    assert not failure, failure[:1]
    service.stop(ctx)
    assert done.wait(timeout=30), "ops hung after the server stopped"
    thread.join(timeout=5)
    assert f"127.0.0.1:{opts['port']}" in str(failure[0])
    assert "bench services up hbase" in str(failure[0])
    begin = time.monotonic()
    with pytest.raises(BackendUnavailableError):
        store.get("k0")
    assert time.monotonic() - begin < 15

    start()
    _wait_readable(opts, "k0")
    store.put("after", b"restart")
    assert store.get("after") == b"restart" and store.get("k0") == b"x"
    store.close()
