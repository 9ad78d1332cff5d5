"""The ``minio`` backend against the real MinIO server (no mocks).

Everyday operations use the shared server (``bench services up minio``, left running); crash and
fault tests start a private server on free ports under ``tmp_path``.
"""

from __future__ import annotations

import socket
import time
import uuid

import boto3
import pytest

import services
from backends import BackendUnavailableError, open_backend
from backends.minio import decode_key, encode_key
from conftest import server_options

pytestmark = [pytest.mark.minio, pytest.mark.server]


def free_port_pair() -> int:
    """A port P with P+1 also free (S3 API and console)."""
    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise RuntimeError("no two adjacent free ports")


@pytest.fixture(scope="module")
def shared() -> None:
    services.up(["minio"])


@pytest.fixture
def opts(shared) -> dict:
    return server_options("minio", f"t{uuid.uuid4().hex[:12]}")


@pytest.fixture
def private(tmp_path):
    """A private MinIO in ``tmp_path`` on free ports; yields its state dir."""
    state = str(tmp_path / "state")
    services.up(["minio"], state_dir=state, port=free_port_pair())
    yield state
    services.down(["minio"], state_dir=state)


def test_put_get_delete_and_batches(opts):
    with open_backend("minio", **opts) as s:
        assert s.get("a") is None
        s.put("a", b"1")
        s.put("a", b"2")
        assert s.get("a") == b"2"
        s.put_many([("b", b"x"), ("c", b""), ("b", b"y")])
        assert s.get_many(["a", "b", "c", "zz", "a"]) == {"a": b"2", "b": b"y", "c": b""}
        s.delete("a")
        s.delete("a")
        assert s.get("a") is None


@pytest.mark.parametrize("durability", ["server", "sync"])
def test_delete_many_names_up_to_1000_objects_a_request(opts, durability):
    keys = [f"k{i:04d}" for i in range(1003)]  # one full DeleteObjects request, and a short one
    with open_backend("minio", **{**opts, "durability": durability}) as s:
        s.put_many([(k, b"v") for k in keys])
        s.delete_many(keys[:1001] + ["absent"])
        assert [k for k, _ in s.scan("k")] == keys[1001:]


def test_awkward_keys_round_trip_in_order(opts):
    keys = ["b", "a/../x", "/lead", "trail/", "a//b", ".", "..", "a\\", "sp ace", "é",
            "\udc80", "\x00nul", "a*", "ab", "a"]
    with open_backend("minio", **opts) as s:
        s.put_many({k: k.encode("utf-8", "surrogatepass") for k in keys})
        assert [k for k, _ in s.scan()] == sorted(keys)
        assert [k for k, _ in s.scan("a")] == sorted(k for k in keys if k.startswith("a"))
        assert s.get("..") == b".."


def test_key_encoding_keeps_order_and_prefixes():
    long = "k" * 100  # exactly one 200-digit chunk
    keys = sorted(["", "a", "ab", "b", "é", "\uffff", "\U0001f600", "\udc80", long,
                   long + "a", long + "\x00", "k" * 99 + "l", "k" * 350])
    assert sorted(encode_key(k) for k in keys) == [encode_key(k) for k in keys]
    assert encode_key("ab").startswith(encode_key("a"))
    assert encode_key(long + "a").startswith(encode_key(long))
    assert max(len(part) for part in encode_key("k" * 350).split("/")) <= 255
    assert all(decode_key(encode_key(k)) == k for k in keys)


def test_too_long_key_is_a_clear_error(opts):
    with open_backend("minio", **opts) as s:
        with pytest.raises(ValueError, match="too long"):
            s.put("k" * 600, b"v")
        s.put("k" * 400, b"long")  # several name segments
        assert s.get("k" * 400) == b"long"
        assert list(s.scan("k" * 150)) == [("k" * 400, b"long")]


def test_scan_many_pages(opts):
    with open_backend("minio", **opts) as s:
        items = {f"k{i:05d}": str(i).encode() for i in range(1100)}  # > one 1,000-key page
        s.put_many(items)
        assert list(s.scan()) == sorted(items.items())


def test_namespaces_are_isolated(shared):
    one = open_backend("minio", **server_options("minio", f"n{uuid.uuid4().hex[:8]}"))
    two = open_backend("minio", **server_options("minio", f"n{uuid.uuid4().hex[:8]}"))
    with one, two:
        one.put("k", b"1")
        assert two.get("k") is None and list(two.scan()) == []
        assert list(one.scan()) == [("k", b"1")]


def test_missing_bucket_is_created(opts):
    bucket = f"ckpt-{uuid.uuid4().hex[:12]}"
    with open_backend("minio", **{**opts, "bucket": bucket}) as s:
        s.put("k", b"v")
        assert s.stats()["bucket"] == bucket and s.stats()["server"] == "MinIO"
        s.delete("k")
    s3 = boto3.client("s3", endpoint_url=opts["endpoint"], aws_access_key_id=opts["access_key"],
                      aws_secret_access_key=opts["secret_key"], region_name="us-east-1")
    for obj in s3.list_objects_v2(Bucket=bucket).get("Contents", []):  # a layout's marker
        s3.delete_object(Bucket=bucket, Key=obj["Key"])
    s3.delete_bucket(Bucket=bucket)


def test_wrong_credentials_are_a_clear_error(opts):
    with pytest.raises(BackendUnavailableError, match="secret_key"):
        open_backend("minio", **{**opts, "secret_key": "wrong-secret"})


def test_nothing_listening_is_unavailable_with_the_fix():
    with pytest.raises(BackendUnavailableError, match="bench services up minio"):
        open_backend("minio", endpoint=f"http://127.0.0.1:{free_port_pair()}", timeout=0.5,
                     retries=1)


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigkill_loses_no_acknowledged_object(private):
    opts = services.client_options("minio", "audit", state_dir=private)
    report = services.crash_audit(
        "minio", lambda: open_backend("minio", retries=1, timeout=2, **opts), state_dir=private)
    print(f"minio crash audit: {report}")
    assert report["acknowledged"] > 0
    assert report["writer_error"] is not None  # the kill really hit the writer
    assert report["lost"] == 0, report


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_stopped_server_fails_fast_and_recovers(private):
    opts = services.client_options("minio", "fault", state_dir=private)
    with open_backend("minio", timeout=1.0, retries=2, **opts) as s:
        s.put("k", b"1")
        services.down(["minio"], state_dir=private)
        for op in (lambda: s.put("k", b"2"), lambda: s.get("k"), lambda: list(s.scan()),
                   lambda: s.put_many({"x": b"1", "y": b"2"})):
            began = time.monotonic()
            with pytest.raises(BackendUnavailableError, match="bench services up minio"):
                op()
            assert time.monotonic() - began < 60  # a generous bound: no hang
        services.restart("minio", state_dir=private)
        assert s.get("k") == b"1"  # the same store object reconnects
        s.put("k", b"3")
        assert s.get("k") == b"3"
