"""The ``redis`` backend against the real Redis server (no mocks).

Everyday operations use the shared server (``bench services up redis``, left running); crash and
fault tests start a private server on a free port under ``tmp_path`` so they never disturb other
tests that share the default one.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid

import pytest

import services
from backends import BackendUnavailableError, BadOptionError, open_backend
from backends.base import StorageFullError
from backends.redis import glob_escape

pytestmark = [pytest.mark.redis, pytest.mark.server]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def shared() -> None:
    """The shared server is up (started if needed); a start failure fails the test loudly."""
    services.up(["redis"])


@pytest.fixture
def opts(shared) -> dict:
    return services.client_options("redis", f"t{uuid.uuid4().hex[:12]}")


@pytest.fixture
def private(tmp_path):
    """A private Redis in ``tmp_path`` on a free port: ``private(durability=...)`` -> state dir."""
    started = []

    def start(durability: str = "everysec") -> str:
        state = str(tmp_path / "state")
        services.up(["redis"], state_dir=state, port=free_port(), durability=durability)
        started.append(state)
        return state

    yield start
    for state in started:
        services.down(["redis"], state_dir=state)


def test_put_get_delete_and_batches(opts):
    with open_backend("redis", **opts) as s:
        assert s.get("a") is None
        s.put("a", b"1")
        s.put("a", b"2")
        assert s.get("a") == b"2"
        s.put_many([("b", b"x"), ("c", b""), ("b", b"y")])
        assert s.get_many(["a", "b", "c", "zz"]) == {"a": b"2", "b": b"y", "c": b""}
        s.delete("a")
        s.delete("a")
        assert s.get("a") is None


def test_scan_is_sorted_and_escapes_glob_characters(opts):
    keys = ["b", "a*", "a?x", "a[1]", "a\\", "a", "é", "\udc80", "a/..", "ab"]
    with open_backend("redis", **opts) as s:
        s.put_many({k: k.encode("utf-8", "surrogatepass") for k in keys})
        assert [k for k, _ in s.scan()] == sorted(keys)
        assert [k for k, _ in s.scan("a*")] == ["a*"]
        assert [k for k, _ in s.scan("a[")] == ["a[1]"]
        assert [k for k, _ in s.scan("a")] == sorted(k for k in keys if k.startswith("a"))
        assert dict(s.scan())["é"] == "é".encode()


def test_glob_escape():
    assert glob_escape(b"a*b?[c]\\") == b"a\\*b\\?\\[c\\]\\\\"


def test_namespaces_are_isolated(shared):
    one = open_backend("redis", **services.client_options("redis", f"n{uuid.uuid4().hex[:8]}"))
    two = open_backend("redis", **services.client_options("redis", f"n{uuid.uuid4().hex[:8]}"))
    with one, two:
        one.put("k", b"1")
        assert two.get("k") is None and list(two.scan()) == []
        assert list(one.scan()) == [("k", b"1")]


def test_stats_report_the_servers_real_aof_policy(opts):
    with open_backend("redis", **opts) as s:
        stats = s.stats()
    assert stats["durability"] == "server"
    assert stats["server_appendonly"] == "yes"
    assert stats["server_appendfsync"] in ("always", "everysec", "no")


def test_require_appendfsync_mismatch_is_a_clear_error(opts):
    with open_backend("redis", **opts) as s:
        actual = s.stats()["server_appendfsync"]
    other = "no" if actual != "no" else "always"
    with pytest.raises(BackendUnavailableError, match=f"--durability {other}"):
        open_backend("redis", require_appendfsync=other, **opts)
    open_backend("redis", require_appendfsync=actual, **opts).close()


def test_flush_is_a_barrier_under_everysec(opts):
    # on Redis < 7.2 this runs BGREWRITEAOF and waits for it; it must return, not hang
    with open_backend("redis", **opts) as s:
        s.put("f", b"v")
        s.flush()
        assert s.get("f") == b"v"


def test_wait_replicas_without_replicas_fails_within_timeout(opts):
    with open_backend("redis", wait_replicas=1, timeout=0.5, **opts) as s:
        with pytest.raises(BackendUnavailableError, match="replicas"):
            s.put("w", b"v")


def test_bad_options_are_clear(opts):
    with pytest.raises(BadOptionError, match="timeout"):
        open_backend("redis", **{**opts, "timeout": 0})


def test_nothing_listening_is_unavailable_with_the_fix():
    with pytest.raises(BackendUnavailableError, match="bench services up redis"):
        open_backend("redis", port=free_port(), timeout=0.5, retries=1)


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_appendfsync_always_loses_no_acknowledged_write(private):
    state = private("always")
    opts = services.client_options("redis", "audit", state_dir=state)
    report = services.crash_audit(
        "redis", lambda: open_backend("redis", retries=0, **opts), state_dir=state)
    print(f"redis appendfsync=always crash audit: {report}")
    assert report["acknowledged"] > 0
    assert report["writer_error"] is not None  # the kill really hit the writer
    assert report["lost"] == 0, report


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_appendfsync_no_loses_nothing_to_a_process_kill(private):
    """Redis writes the AOF before it replies, even with ``appendfsync no``; a SIGKILL of the
    server keeps the kernel's page cache, so no acknowledged write is lost (a power cut is
    another matter: the power-loss audit)."""
    state = private("no")
    opts = services.client_options("redis", "audit", state_dir=state)
    report = services.crash_audit(
        "redis", lambda: open_backend("redis", retries=0, **opts), state_dir=state)
    print(f"redis appendfsync=no crash audit: {report}")
    assert report["acknowledged"] > 0
    assert report["writer_error"] is not None  # the kill really hit the writer
    assert report["lost"] == 0, report


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_crash_audit_counts_exactly_the_writes_that_are_gone_or_wrong(private):
    """The audit's count checked with known losses: after the restart, and before the audit reads
    back, every 7th audit key is deleted and every 11th overwritten with another value; the audit
    must report exactly the acknowledged ones among them, first ones first."""
    state = private("always")
    opts = services.client_options("redis", "audit", state_dir=state)
    opened: list = []
    damaged: set[int] = set()

    def open_store():
        store = open_backend("redis", retries=0, **opts)
        if opened:  # the second open: the audit is about to read back
            for key, _ in list(store.scan("audit-")):
                i = int(key.split("-")[1])
                if i % 7 == 0:
                    store.delete(key)
                elif i % 11 == 0:
                    store.put(key, b"a stale or foreign value")
                else:
                    continue
                damaged.add(i)
        opened.append(store)
        return store

    report = services.crash_audit("redis", open_store, state_dir=state)
    acknowledged = report["acknowledged"]
    assert acknowledged > 22 and report["writer_error"] is not None
    expected = sorted(i for i in damaged if i < acknowledged)
    assert expected == [i for i in range(acknowledged) if i % 7 == 0 or i % 11 == 0]
    assert report["lost"] == len(expected)
    assert report["lost_keys"] == [f"audit-{i:08d}" for i in expected[:20]]


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_stopped_or_frozen_server_fails_fast_and_recovers(private):
    state = private("everysec")
    opts = services.client_options("redis", "fault", state_dir=state)
    with open_backend("redis", timeout=1.0, retries=2, **opts) as s:
        s.put("k", b"1")
        services.down(["redis"], state_dir=state)
        for op in (lambda: s.put("k", b"2"), lambda: s.get("k"), lambda: list(s.scan())):
            began = time.monotonic()
            with pytest.raises(BackendUnavailableError, match="bench services up redis"):
                op()
            assert time.monotonic() - began < 60  # a generous bound: no hang
        services.restart("redis", state_dir=state)
        assert s.get("k") == b"1"  # the same store object reconnects
        s.put("k", b"3")

        pid = services.status(["redis"], state_dir=state)[0]["pid"]
        os.kill(pid, signal.SIGSTOP)  # alive but silent: only the socket timeout saves us
        try:
            began = time.monotonic()
            with pytest.raises(BackendUnavailableError):
                s.get("k")
            assert time.monotonic() - began < 60  # no hang
        finally:
            os.kill(pid, signal.SIGCONT)
        assert s.get("k") == b"3"


@pytest.mark.crash
@pytest.mark.timeout(300)
def test_retries_zero_gives_typed_errors_for_a_full_and_a_dead_server(private):
    """With no retry budget (``retries=0``) a failed first attempt is still a typed error naming
    the problem: a server out of memory -> StorageFullError, a killed server ->
    BackendUnavailableError; after a restart the same store object works again."""
    import redis as redis_py

    state = private("everysec")
    opts = services.client_options("redis", "zero", state_dir=state)
    store = open_backend("redis", retries=0, timeout=2, **opts)
    admin = redis_py.Redis(host=opts["host"], port=opts["port"])
    try:
        store.put("k", b"v")
        admin.config_set("maxmemory", "1")  # noeviction (the default): writes get an OOM reply
        with pytest.raises(StorageFullError, match="OOM"):
            store.put("k2", b"x" * 1024)
        admin.config_set("maxmemory", "0")
        services.kill("redis", state_dir=state)
        with pytest.raises(BackendUnavailableError, match="redis SET at .* failed after 1 attempts"):
            store.put("k3", b"v")
        services.restart("redis", state_dir=state)
        store.put("k3", b"v")
        assert store.get("k3") == b"v" and store.get("k") == b"v"
    finally:
        admin.close()
        store.close()
