"""Exactly-once evidence: every checkpointing protocol x {indexed_fs, default_fs, redis} x
{1, 3 injected failures} ends with the final state equal to the failure-free ground truth.

Real Spark (local[2], one session for the module), real task kills (the instance's Python worker
``os._exit``s), real backends (Redis: the server of ``bench services``). Small runs — 120,000
events in micro-batches of 30,000 — so the 18 cases stay within a few minutes; ``bench
spark-matrix`` runs the same matrix at full size (docs/results.md, spark-matrix, has the figures).
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

import pyspark  # noqa: E402,F401  (required: a missing Spark extra fails the run, never skips it)

from spark_integration.conf import PREFIX, from_conf  # noqa: E402
from spark_integration.runner import JobSpec, run_job  # noqa: E402

pytestmark = pytest.mark.slow

SPEC = dict(events=120_000, keys=1_000, max_batch=30_000, verify=True, timeout=150)
#: failures in three different micro-batches (the first while Python workers are still fresh)
FAILURES = {1: "45000", 3: "15000,45000,100000"}
PROTOCOLS = ("coordinated", "uncoordinated", "cic", "logio")


def _backend(name: str):
    marks = [pytest.mark.redis, pytest.mark.server] if name == "redis" else []
    return pytest.param(name, marks=marks, id=name)


def backend_entries(backend: str, tmp_path) -> dict[str, str]:
    if backend != "redis":
        return {PREFIX + "backend.path": str(tmp_path / "store")}
    import services

    services.up(["redis"])
    opts = services.client_options("redis", f"t{uuid.uuid4().hex[:8]}")
    return {PREFIX + "backend." + k: str(v) for k, v in opts.items()}


def participants(backend: str, entries: dict[str, str], tmp_path, job: str,
                 expected: set[str]) -> set[str]:
    """Who wrote under the run's namespace (and nothing outside it); cleans Redis up.  Waits up
    to 20 s for ``expected``: uncoordinated checkpoints are written by a background thread in the
    executor's Python worker, which may still be writing when the job has returned."""
    deadline = time.monotonic() + 20
    while True:
        if backend != "redis":
            owners, keys = set(os.listdir(tmp_path / "store" / job)), []
        else:
            import redis

            prefix = entries[PREFIX + "backend.prefix"]
            client = redis.Redis(host=entries[PREFIX + "backend.host"],
                                 port=int(entries[PREFIX + "backend.port"]))
            keys = [k.decode() for k in client.scan_iter(match=prefix + "*", count=1000)]
            assert all(k.startswith(f"{prefix}{job}/") for k in keys)
            owners = {k[len(f"{prefix}{job}/"):].split("/")[0] for k in keys}
        if expected <= owners or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if keys:
        client.delete(*keys)
    return owners


@pytest.mark.parametrize("failures", sorted(FAILURES), ids=lambda n: f"{n}fail")
@pytest.mark.parametrize("backend", [_backend(b) for b in ("indexed_fs", "default_fs", "redis")])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_exactly_once_after_killed_instances(spark, tmp_path, protocol, backend, failures):
    job = f"eo-{protocol[:3]}-{failures}"
    entries = {PREFIX + "protocol": protocol, PREFIX + "backend": backend, PREFIX + "jobId": job,
               PREFIX + "interval": "2" if failures == 1 else "1", PREFIX + "fullEvery": "2",
               PREFIX + "failAt": FAILURES[failures], PREFIX + "failInstance": str(failures % 2),
               PREFIX + "stateDir": str(tmp_path / "work"), PREFIX + "retainCheckpoints": "true",
               **backend_entries(backend, tmp_path)}
    m = run_job(spark, from_conf(entries), JobSpec(**SPEC))
    owners = participants(backend, entries, tmp_path, job, {"i0", "i1"})
    assert m.failures == failures, m.summary()
    assert m.exactly_once, m.verify_detail
    assert m.checkpoints >= 1 and m.replayed_events > 0
    # every failure belongs to one recovery episode, measured in phases that are never negative
    assert sum(r.failures for r in m.recoveries) == failures
    assert all(min(r.detect_ms, r.load_ms, r.restore_ms, r.replay_ms, r.catch_up_ms) >= 0 for r in m.recoveries)
    assert all(r.replay_events > 0 for r in m.recoveries)
    # every participant wrote into its own namespace of the backend named in the Spark conf
    assert {"i0", "i1"} <= owners
    assert ("driver" in owners) == (protocol == "coordinated")
    assert any(o.startswith("log-") for o in owners) == (protocol in ("uncoordinated", "cic", "logio"))


@pytest.mark.redis
@pytest.mark.server
def test_a_finished_run_deletes_its_records_unless_told_to_retain_them(spark, tmp_path):
    """Flink's default: a job's checkpoints go when it ends (after the run measured their
    footprint); ``retainCheckpoints`` keeps them.  Keys of other jobs under the same prefix stay."""
    import redis

    entries = {PREFIX + "protocol": "coordinated", PREFIX + "backend": "redis", PREFIX + "jobId": "eo-drop",
               PREFIX + "stateDir": str(tmp_path / "work"), **backend_entries("redis", tmp_path)}
    prefix = entries[PREFIX + "backend.prefix"]
    client = redis.Redis(host=entries[PREFIX + "backend.host"], port=int(entries[PREFIX + "backend.port"]))
    client.set(f"{prefix}other-job/driver/x", b"kept")
    spec = JobSpec(**{**SPEC, "events": 60_000})
    m = run_job(spark, from_conf(entries), spec)
    assert m.checkpoints >= 1 and m.store_bytes and m.exactly_once
    assert [k.decode() for k in client.scan_iter(match=prefix + "*")] == [f"{prefix}other-job/driver/x"]
    m = run_job(spark, from_conf({**entries, PREFIX + "retainCheckpoints": "true"}), spec)
    left = {k.decode() for k in client.scan_iter(match=prefix + "eo-drop/*")}
    assert m.checkpoints >= 1 and any(k.startswith(f"{prefix}eo-drop/i0/") for k in left)
    client.delete(*left, f"{prefix}other-job/driver/x")


def test_uncoordinated_with_jittered_clocks_after_three_kills(spark, tmp_path):
    """Instances checkpoint every 3 micro-batches +- 1 (CheckMate's interval +- jitter), so kills
    land between checkpoints at different distances; recovery computes each line and replays."""
    job = "eo-unc-jitter"
    entries = {PREFIX + "protocol": "uncoordinated", PREFIX + "backend": "indexed_fs",
               PREFIX + "jobId": job, PREFIX + "interval": "3", PREFIX + "jitter": "1",
               PREFIX + "failAt": "35000,65000,100000", PREFIX + "failInstance": "1",
               PREFIX + "stateDir": str(tmp_path / "work"), **backend_entries("indexed_fs", tmp_path)}
    m = run_job(spark, from_conf(entries), JobSpec(**dict(SPEC, max_batch=10_000)))
    assert m.failures == 3, m.summary()
    assert m.exactly_once, m.verify_detail
    assert m.replayed_events > 0 and m.useless_checkpoints == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sized_state_is_exactly_once_byte_for_byte_after_kills(spark, tmp_path, protocol):
    """Keys holding state of a size (a ring of recent events, 64-512 bytes a key): every protocol
    checkpoints and restores the rings too, and the check compares every byte of them."""
    job = f"eo-sized-{protocol[:3]}"
    entries = {PREFIX + "protocol": protocol, PREFIX + "backend": "indexed_fs", PREFIX + "jobId": job,
               PREFIX + "interval": "1", PREFIX + "fullEvery": "2", PREFIX + "stateBytes": "uniform:64:512",
               PREFIX + "failAt": "15000,100000", PREFIX + "failInstance": "1",
               PREFIX + "stateDir": str(tmp_path / "work"), **backend_entries("indexed_fs", tmp_path)}
    m = run_job(spark, from_conf(entries), JobSpec(**SPEC))
    assert m.failures == 2, m.summary()
    assert m.exactly_once, m.verify_detail
    assert "state bytes" in m.verify_detail and m.replayed_events > 0
    # a full checkpoint carries the rings: about 300 bytes a key, not 16 (uncoordinated and cic
    # report each instance's, which holds about half of the 1,000 keys)
    assert max(m.state_sizes) > 1_000 * 100
