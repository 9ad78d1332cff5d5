"""S3-like throttling in front of the real MinIO (``backends/minio/throttle.py``) and the
``prefix_entropy`` key layout: the relay answers ``503 SlowDown`` above its rate and forwards
below it with signatures intact, a throttled run retries and loses nothing, entropy keeps every
key findable, listable and deletable, and a closed relay leaves nothing behind."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import threading
import uuid

import boto3
import botocore.exceptions as bex
import pytest
from botocore.config import Config

from backends import BadOptionError, ThrottledError, open_backend
from backends.minio.throttle import ThrottleProxy, TokenBuckets, prefix_of
from conftest import server_options
from experiments.storage.throttle_curve import ThrottleCurve, headline


@pytest.fixture
def opts() -> dict:
    return server_options("minio", f"t{uuid.uuid4().hex[:12]}")


def _upstream(opts: dict) -> tuple[str, int]:
    host, port = opts["endpoint"].removeprefix("http://").split(":")
    return host, int(port)


def _client(opts: dict, endpoint: str, attempts: int = 1):
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=opts["access_key"], aws_secret_access_key=opts["secret_key"],
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                      retries={"total_max_attempts": attempts, "mode": "standard"}))


def _relay_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("s3-throttle")]


# ---------------------------------------------------------------------------- pure logic
def test_a_prefix_is_the_bucket_and_the_name_up_to_its_depth_th_slash():
    assert prefix_of("/b/ckpt/616263", 1) == "b/ckpt/"
    assert prefix_of("/b/ckpt/x3/616263", 2) == "b/ckpt/x3/"
    assert prefix_of("/b/ckpt/x3/616263", 1) == "b/ckpt/"
    assert prefix_of("/b/short", 2) == "b/short"  # fewer slashes: the whole name
    assert prefix_of("/b?list-type=2&prefix=ckpt%2Fx3%2F61", 2) == "b/ckpt/x3/"  # a listing
    assert prefix_of("/b?delete", 1) == "b/"  # a bucket request
    assert prefix_of("/b/ckpt%2Fa/61", 1) == "b/ckpt/"  # an escaped slash is a slash


def test_token_buckets_allow_the_rate_per_prefix_and_refill():
    buckets = TokenBuckets(rate=10, burst=2)
    assert [buckets.take("a", now=0.0) for _ in range(3)] == [True, True, False]
    assert buckets.take("b", now=0.0)  # another prefix has its own bucket
    assert not buckets.take("a", now=0.05)  # half a token since
    assert buckets.take("a", now=0.15) and not buckets.take("a", now=0.15)
    assert TokenBuckets(rate=float("inf")).take("a")
    assert TokenBuckets(rate=5).burst == 1.0  # at least one request


# --------------------------------------------------------------------------- the relay
@pytest.mark.minio
@pytest.mark.server
def test_the_relay_forwards_below_the_rate_and_answers_slowdown_above_it(opts):
    bucket, prefix = opts["bucket"], opts["prefix"]
    with ThrottleProxy(_upstream(opts), rate=4, depth=1) as relay:
        s3 = _client(opts, relay.url)
        s3.put_object(Bucket=bucket, Key=f"{prefix}a", Body=b"signed")  # a token: forwarded
        refused = 0
        for i in range(10):  # far above 4 a second
            try:
                s3.put_object(Bucket=bucket, Key=f"{prefix}b{i}", Body=b"x")
            except bex.ClientError as exc:
                assert exc.response["Error"]["Code"] == "SlowDown"
                assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 503
                refused += 1
        assert refused >= 8 and relay.slowdowns == refused
        # S3's XML body, as a plain HTTP client sees it (the token is spent: refused again)
        conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=5)
        conn.request("GET", f"/{bucket}/{prefix}a")
        answer = conn.getresponse()
        body = answer.read().decode()
        conn.close()
        assert answer.status == 503
        assert "<Code>SlowDown</Code>" in body and f"/{bucket}/{prefix}a" in body
        s3.close()
    direct = _client(opts, opts["endpoint"])
    stored = direct.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    # the signed request reached MinIO unchanged; no refused one did
    assert len(stored) == 10 - refused + 1
    assert direct.get_object(Bucket=bucket, Key=f"{prefix}a")["Body"].read() == b"signed"
    direct.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": o["Key"]} for o in stored]})
    direct.close()


@pytest.mark.minio
@pytest.mark.server
def test_a_closed_relay_leaves_no_thread_socket_or_port(opts):
    relay = ThrottleProxy(_upstream(opts), rate=float("inf"), depth=1)
    s3 = _client(opts, relay.url)
    s3.list_objects_v2(Bucket=opts["bucket"], Prefix=opts["prefix"])  # a kept-alive connection
    assert _relay_threads()
    relay.close()
    relay.close()  # idempotent
    assert _relay_threads() == []
    with pytest.raises(ConnectionRefusedError):  # nothing listens on its port
        socket.create_connection(("127.0.0.1", relay.port), timeout=2).close()
    with socket.socket() as again:  # and it can be listened on again (connections the relay
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # closed wait in TIME_WAIT)
        again.bind(("127.0.0.1", relay.port))
        again.listen()
    s3.close()
    with open_backend("minio", **opts, throttle_rps=1000) as store:
        store.put("k", b"v")
        assert store.stats()["throttle"]["forwarded"] > 0
    assert _relay_threads() == []


@pytest.mark.minio
@pytest.mark.server
def test_a_request_refused_on_every_attempt_is_one_typed_error(opts):
    with open_backend("minio", **opts, throttle_rps=1, retries=2) as store:
        with pytest.raises(ThrottledError) as raised:
            for i in range(10):
                store.put(f"k{i}", b"v")
        text = str(raised.value)
        assert "503 SlowDown on all 2 attempts" in text and "prefix_entropy" in text
        assert "\n" not in text
        assert store.requests().throttled >= 2
    with pytest.raises(BadOptionError, match="http:// endpoint"):
        open_backend("minio", **{**opts, "endpoint": ""}, throttle_rps=10)


@pytest.mark.minio
@pytest.mark.server
def test_a_throttled_write_heavy_run_retries_and_loses_nothing(opts, tmp_path):
    doc = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "bench", "write-heavy", "--backend", "minio",
           "--records", "40", "--ops", "300", "--threads", "4", "--read-proportion", "0",
           "--seed", "1", "--json", str(doc)]
    cmd += [f"--opt={k}={v}" for k, v in opts.items()]
    cmd += ["--opt", "throttle_rps=40", "--opt", "retries=12"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    lines = dict(line.rsplit(", ", 1) for line in done.stdout.splitlines()
                 if line.startswith("[COST]"))
    assert int(lines["[COST], Throttled(503 SlowDown)"]) > 0
    assert int(lines["[COST], Retries"]) > 0
    assert lines["[COST], RetryMode"] == "standard (at most 12 attempts a request)"
    assert "were answered 503 SlowDown" in done.stderr and "failed" not in done.stderr
    run = json.loads(doc.read_text())
    ledger = run["backend_stats"]["ledger_by_phase"]["run"]
    assert ledger["throttled"] > 0 and ledger["retries"] > 0
    with open_backend("minio", **opts) as store:  # every record is there
        assert len(store.keys()) == 40
        store.delete_many(store.keys())


# ------------------------------------------------------------------------ prefix_entropy
@pytest.mark.minio
@pytest.mark.server
def test_prefix_entropy_keeps_keys_findable_listable_and_deletable(opts):
    keys = [f"op{i:03d}/state" for i in range(60)] + ["a", "é", "\udc80", "k" * 300]
    with open_backend("minio", **opts, prefix_entropy=8) as store:
        store.put_many({k: k.encode("utf-8", "surrogatepass") for k in keys})
        assert store.get("op007/state") == b"op007/state" and store.get("absent") is None
        assert [k for k, _ in store.scan()] == sorted(keys)
        assert store.keys("op01") == [f"op01{i}/state" for i in range(10)]
        assert [k for k, _ in store.scan("k")] == ["k" * 300]
        assert store.footprint() == sum(len(k.encode("utf-8", "surrogatepass")) for k in keys)
        store.delete("a")
        store.delete_many([k for k in keys if k.startswith("op")])
        assert store.keys() == ["k" * 300, "é", "\udc80"]
    s3 = _client(opts, opts["endpoint"])
    names = [o["Key"] for o in s3.list_objects_v2(Bucket=opts["bucket"],
                                                  Prefix=opts["prefix"])["Contents"]]
    assert len({n.split("/")[1] for n in names if n.count("/") > 1}) > 1  # spread out
    with pytest.raises(BadOptionError, match="prefix_entropy=8"):
        open_backend("minio", **opts, prefix_entropy=4)  # the layout is recorded
    with open_backend("minio", **opts, prefix_entropy=8) as store:  # reopened: all found
        assert store.get("k" * 300) == b"k" * 300
        store.delete_many(store.keys())
        assert store.keys() == []
    s3.delete_objects(Bucket=opts["bucket"], Delete={"Objects": [
        {"Key": o["Key"]} for o in s3.list_objects_v2(
            Bucket=opts["bucket"], Prefix=opts["prefix"]).get("Contents", [])]})
    s3.close()


@pytest.mark.minio
@pytest.mark.server
def test_prefix_entropy_spreads_the_throttled_prefix(opts):
    """At the same per-prefix rate, N prefixes refuse fewer of the same requests than one."""
    items = {f"k{i:03d}": b"v" for i in range(120)}
    refused = {}
    for entropy in (1, 8):
        with open_backend("minio", **{**opts, "prefix": f"{opts['prefix']}e{entropy}/"},
                          throttle_rps=30, prefix_entropy=entropy, retries=20) as store:
            store.put_many(items)
            refused[entropy] = store.requests().throttled
            assert store.stats()["throttle"]["prefixes"] >= (2 if entropy == 1 else 9)
            assert len(store.keys()) == 120
            store.delete_many(items)
    assert refused[8] < refused[1]


# --------------------------------------------------------------------------- the curve
@pytest.mark.minio
@pytest.mark.server
def test_throttle_curve_measures_every_point_and_writes_its_document(opts, tmp_path):
    doc_path, plot = tmp_path / "curve.json", tmp_path / "curve.png"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "throttle-curve", "--rates", "100", "--entropy", "4",
         "--ops", "40", "--records", "10", "--threads", "2", "--json", str(doc_path),
         "--plot", str(plot), *(f"--opt={k}={v}" for k, v in opts.items())],
        capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "| 100 |" in done.stdout and "| direct (no relay) |" in done.stdout
    doc = ThrottleCurve.from_json(json.loads(doc_path.read_text()))
    assert [(p.label, p.entropy) for p in doc.points] == [
        ("direct", 1), ("unlimited", 1), ("100", 1), ("100", 4)]
    assert all(p.operations == 40 and p.failed == 0 and not p.skipped for p in doc.points)
    assert doc.point(None, 1, relay=False).prefixes is None  # no relay, no prefixes seen
    assert "checkpoint writes/s" in headline(doc) and plot.stat().st_size > 0


def test_throttle_curve_refuses_the_options_it_varies():
    done = subprocess.run([sys.executable, "-m", "bench", "throttle-curve", "--opt",
                           "throttle_rps=5"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "--rates" in done.stderr
