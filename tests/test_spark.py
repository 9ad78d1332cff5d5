"""End-to-end Spark runs (local[2], real Python workers, real backend files, real task kills)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("pyspark", reason="install the Spark extra: pip install 'pyspark[sql]' protobuf")

from backends import backend_class  # noqa: E402
from backends.base import CkptError  # noqa: E402
from spark_integration.conf import PREFIX, from_conf  # noqa: E402
from spark_integration.runner import JobSpec, build_session, run_job  # noqa: E402

pytestmark = pytest.mark.slow

SPEC = dict(events=300_000, keys=2_000, max_batch=60_000, verify=True, timeout=150)


def _file_backends() -> list[str]:
    out = []
    for name in ("indexed_fs", "default_fs"):
        try:
            backend_class(name)
            out.append(name)
        except (CkptError, ImportError, AttributeError):
            pass
    return out


@pytest.fixture(scope="module")
def spark():
    session = build_session("local[2]", "ckptbench-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def settings_for(tmp_path, **kv):
    entries = {PREFIX + k: str(v) for k, v in kv.items()}
    if "backend" in kv:
        entries[PREFIX + "backend.path"] = str(tmp_path / "store")
    entries[PREFIX + "stateDir"] = str(tmp_path / "work")
    return from_conf(entries)


CASES = [  # (protocol, backend, fail-at offsets, instance killed)
    ("coordinated", "indexed_fs", "150000", 1),
    ("coordinated", "default_fs", "60000,150000,240000", 0),
    ("uncoordinated", "indexed_fs", "150000", 1),
    ("uncoordinated", "default_fs", "60000,150000,240000", 0),
    ("logio", "indexed_fs", "150000", 1),
    ("logio", "default_fs", "60000,150000,240000", 0),
]


@pytest.mark.parametrize("protocol, backend, fail_at, victim", CASES)
def test_protocol_survives_killed_instances_exactly_once(spark, tmp_path, protocol, backend, fail_at, victim):
    if backend not in _file_backends():
        pytest.fail(f"backend {backend} is not importable")
    settings = settings_for(tmp_path, protocol=protocol, backend=backend, interval=2,
                            fullEvery=2, failAt=fail_at, failInstance=victim, jobId="wc1")
    m = run_job(spark, settings, JobSpec(**SPEC))
    assert m.failures == len(fail_at.split(",")), m.summary()
    assert m.exactly_once, m.verify_detail
    assert m.checkpoints >= 2 and m.replayed_events > 0
    # the checkpoints went to the directory named in the Spark conf, one namespace per participant
    owners = sorted(os.listdir(tmp_path / "store" / "wc1"))
    assert {"i0", "i1"} <= set(owners)
    assert ("driver" in owners) == (protocol == "coordinated")
    assert any(o.startswith("log-") for o in owners) == (protocol in ("uncoordinated", "logio"))


def _redis_options(namespace: str) -> dict:
    import bench.services as services

    services.up(["redis"])
    return services.client_options("redis", namespace)


@pytest.mark.parametrize("protocol", ["coordinated", "logio"])
def test_redis_backend_one_failure_exactly_once(spark, tmp_path, protocol):
    """A server backend: every participant's keys under the run's own prefix, then recovery."""
    import uuid

    ns = f"t{uuid.uuid4().hex[:8]}"
    opts = _redis_options(ns)
    entries = {PREFIX + "protocol": protocol, PREFIX + "backend": "redis", PREFIX + "jobId": "wc-r",
               PREFIX + "stateDir": str(tmp_path / "work"), PREFIX + "failAt": "150000",
               PREFIX + "failInstance": "0", PREFIX + "interval": "1"}
    entries.update({PREFIX + "backend." + k: str(v) for k, v in opts.items()})
    m = run_job(spark, from_conf(entries), JobSpec(**SPEC))
    assert m.failures == 1 and m.exactly_once, m.verify_detail
    import redis

    client = redis.Redis(host=opts["host"], port=int(opts["port"]))
    keys = [k.decode() for k in client.scan_iter(match=opts["prefix"] + "*", count=1000)]
    assert keys and all(k.startswith(opts["prefix"] + "wc-r/") for k in keys)
    if keys:
        client.delete(*keys)


def test_spark_state_baseline_is_exactly_once(spark):
    from spark_integration.spark_state import run_spark_state

    m = run_spark_state(spark, JobSpec(**{**SPEC, "events": 200_000}))
    assert m.exactly_once, m.verify_detail
    assert m.checkpoints >= 1 and m.throughput > 0


def test_none_loses_state_on_failure(spark, tmp_path):
    settings = settings_for(tmp_path, protocol="none", failAt=150_000, jobId="wc0")
    m = run_job(spark, settings, JobSpec(**SPEC))
    assert m.failures == 1 and m.exactly_once is False


REQUIRED_LINES = ("Throughput(events/sec)", "LatencyP50(ms)", "LatencyP99(ms)", "CheckpointTime(ms)",
                  "CheckpointBytes", "BackendOps", "RestartTime(ms)", "RecoveryTime(ms)",
                  "ReplayedEvents", "UselessCheckpoints", "ExactlyOnce")


def _cli(*args, timeout=150):
    import subprocess
    import sys

    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.run([sys.executable, "-m", "spark_integration.cli", "spark", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_cli_prints_spark_lines_and_json(tmp_path):
    import json

    out = tmp_path / "r.json"
    r = _cli("--protocol", "coordinated", "--backend", "default_fs", "--opt", f"path={tmp_path / 's'}",
             "--events", "200000", "--keys", "1000", "--batch", "50000", "--fail-at", "100000",
             "--verify", "--json", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("[SPARK], ")]
    names = {line.split(", ")[1] for line in lines}
    assert set(REQUIRED_LINES) <= names
    assert "[SPARK], ExactlyOnce, true" in lines
    data = json.loads(out.read_text())
    assert data["metrics"]["ExactlyOnce"] is True and data["settings"]["protocol"] == "coordinated"


def test_cli_rejects_bad_settings_before_starting_spark(tmp_path):
    r = _cli("--protocol", "coordinated", "--backend", "floppy", timeout=60)
    assert r.returncode == 2 and "unknown backend 'floppy'; valid backends:" in r.stderr
    r = _cli("--protocol", "coordinated", "--backend", "default_fs", "--opt", "colour=blue", timeout=60)
    assert r.returncode == 2 and "no option 'colour'" in r.stderr
