"""``bench services up nfs`` against the real nfs-ganesha: status, RPC cost, crash and restart.

Crash tests use a private server (own state dir and ports) so the shared one is never disturbed.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest

import services
from backends.base import BackendUnavailableError
from backends.media import open_medium
from services import nfs

pytestmark = [pytest.mark.server, pytest.mark.nfs]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_status_reports_the_server():
    st = services.up(["nfs"], rtt=0)[0]
    assert st["running"] and st["pid"] and st["version"]
    assert st["settings"]["protocols"] == "NFSv3,NFSv4.1"
    assert st["settings"]["graceless"] is True
    assert "private network namespace" in st["settings"]["rpcbind"] or \
        st["settings"]["rpcbind"] == "host rpcbind"
    path = services.client_options("nfs", "ns1")["path"]
    assert path.startswith("nfs://127.0.0.1/") and "/ns1?version=3" in path


@pytest.mark.parametrize("version", ["3", "4.1"])
def test_both_protocol_versions(version):
    services.up(["nfs"], rtt=0)
    ctx = services.context("nfs")
    with open_medium(nfs.url(ctx, f"v{uuid.uuid4().hex[:8]}", version=version), "test") as m:
        m.write_atomic("k", b"v")
        assert m.read_file("k") == b"v"


def test_rpc_count_per_durable_append_and_atomic_write():
    """Counts ONC RPC calls through an in-process proxy; prints them (no assertion on speed)."""
    services.up(["nfs"], rtt=0)
    ctx = services.context("nfs")
    opts = services.status(["nfs"])[0]["settings"]
    pn, pm = free_port(), free_port()
    proxy = nfs.DelayProxy([(pn, opts["server_port"]), (pm, opts["mount_port"])]).start_in_thread()
    url = nfs.url(ctx, f"rpc{uuid.uuid4().hex[:8]}").replace(
        f"nfsport={opts['server_port']}", f"nfsport={pn}").replace(
        f"mountport={opts['mount_port']}", f"mountport={pm}")
    with open_medium(url, "test") as m:
        f = m.open_append("log")
        f.append(b"x")
        f.sync()
        before = proxy.calls
        for _ in range(20):
            f.append(b"x" * 1024)
            f.sync()
        per_append = (proxy.calls - before) / 20
        before = proxy.calls
        for i in range(20):
            m.write_atomic(f"k{i}", b"y" * 1024)
        per_file = (proxy.calls - before) / 20
        f.close()
    print(f"\nRPCs per durable 1 KiB append: {per_append:.1f}; per atomic file write: {per_file:.1f}")
    assert 1 <= per_append <= 3
    assert 2 <= per_file <= 12


def test_rtt_proxy_adds_delay():
    services.up(["nfs"], rtt=0)
    ctx = services.context("nfs")
    opts = services.status(["nfs"])[0]["settings"]
    pn, pm = free_port(), free_port()
    nfs.DelayProxy([(pn, opts["server_port"]), (pm, opts["mount_port"])], rtt_ms=20).start_in_thread()
    url = nfs.url(ctx, "rtt").replace(f"nfsport={opts['server_port']}", f"nfsport={pn}").replace(
        f"mountport={opts['mount_port']}", f"mountport={pm}")
    with open_medium(url, "test") as m:
        t = time.perf_counter()
        m.exists("nothing")
        assert time.perf_counter() - t >= 0.018  # at least one delayed round trip


def private_server(tmp_path, name: str) -> tuple:
    """A private ganesha (own state dir and ports, so the shared one is never disturbed) and a
    URL on it whose client gives up after 3 s."""
    state = tmp_path / "state"
    services.up(["nfs"], state_dir=state, port=free_port(), mount_port=free_port())
    url = nfs.url(services.context("nfs", state), name).replace("version=3", "version=3&timeout=3")
    return state, url


def kill_while_writing(state, write_one) -> None:
    """``write_one(i)`` in a thread until it raises; the server is SIGKILLed once 20 writes
    returned, and the writer must stop with one clear error naming the fix (no hang: a
    generous 60 s bound; the client's timeout is 3 s)."""
    errors: list[BaseException] = []
    stop = threading.Event()
    done = [0]

    def writer() -> None:
        i = 0
        try:
            while not stop.is_set():
                write_one(i)
                i += 1
                done[0] = i
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while done[0] < 20 and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert done[0] >= 20, f"only {done[0]} writes before the kill: {errors}"
        services.kill("nfs", state_dir=state)
        thread.join(60)
        assert not thread.is_alive(), "the writer hung after the server was killed"
        assert errors and isinstance(errors[0], BackendUnavailableError), errors
        assert "bench services up nfs" in str(errors[0])
    finally:
        stop.set()
        thread.join(30)


@pytest.mark.crash
def test_kill_mid_run_then_restart_keeps_acknowledged_data(tmp_path):
    state, url = private_server(tmp_path, "crash")
    acked: list[int] = []
    medium = open_medium(url, "test")
    log = medium.open_append("log")

    def write_one(i: int) -> None:
        log.append(i.to_bytes(8, "big") + b"z" * 1016)
        log.sync()
        acked.append(i)
        medium.write_atomic(f"key-{i % 50}", i.to_bytes(8, "big"))

    try:
        kill_while_writing(state, write_one)
        assert acked, "nothing was acknowledged before the kill"

        services.restart("nfs", state_dir=state)
        with open_medium(url, "test") as again:
            data = again.read_file("log")
            found = {int.from_bytes(data[o:o + 8], "big") for o in range(0, len(data) - 1023, 1024)}
            assert set(acked) <= found
            again.write_atomic("after", b"ok")  # works after the restart
            assert again.read_file("after") == b"ok"
        # the medium that saw the crash reconnects by itself
        medium.write_atomic("same-medium", b"ok")
        assert medium.read_file("same-medium") == b"ok"
    finally:
        medium._appenders.clear()
        medium.close()
        services.down(["nfs"], state_dir=state)


def test_services_up_fails_loudly_on_a_taken_port(tmp_path):
    services.up(["nfs"], rtt=0)
    taken = services.status(["nfs"])[0]["settings"]["server_port"]
    with pytest.raises(services.ServiceError, match="already taken"):
        services.up(["nfs"], state_dir=tmp_path / "s", port=taken, mount_port=free_port())


@pytest.mark.crash
@pytest.mark.parametrize("backend", ["indexed_fs", "default_fs"])
def test_file_backend_survives_a_killed_nfs_server(tmp_path, backend):
    """The file backends over nfs:// while the server is SIGKILLed: a clear error within the
    timeout (no hang), and after the restart every acknowledged durable write is there."""
    from backends import open_backend

    state, url = private_server(tmp_path, f"kill-{backend}")
    acked: dict[str, bytes] = {}
    failed: dict[str, bytes] = {}  # the put that raised: its outcome is unknown, either is right
    store = open_backend(backend, path=url, durability="sync")

    def write_one(i: int) -> None:
        key, value = f"pe-{i % 40}", i.to_bytes(8, "big") * 16
        failed[key] = value
        store.put(key, value)
        del failed[key]
        acked[key] = value

    try:
        kill_while_writing(state, write_one)
        assert acked, "nothing was acknowledged before the kill"

        services.restart("nfs", state_dir=state)
        store.close()
        with open_backend(backend, path=url) as again:
            for key, value in acked.items():
                assert again.get(key) in (value, failed.get(key)), key
    finally:
        if not store.closed:
            try:
                store.close()
            except Exception:
                pass
        services.down(["nfs"], state_dir=state)
