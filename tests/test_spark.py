"""End-to-end Spark runs (local[2], real Python workers, real backend files, real task kills)."""

from __future__ import annotations

import os

import pytest

import pyspark  # noqa: E402,F401  (required: a missing Spark extra fails the run, never skips it)

from spark_integration.conf import PREFIX, from_conf  # noqa: E402
from spark_integration.runner import JobSpec, run_job  # noqa: E402

pytestmark = pytest.mark.slow

SPEC = dict(events=300_000, keys=2_000, max_batch=60_000, verify=True, timeout=150)


def settings_for(tmp_path, **kv):
    entries = {PREFIX + k: str(v) for k, v in kv.items()}
    if "backend" in kv:
        entries[PREFIX + "backend.path"] = str(tmp_path / "store")
    entries[PREFIX + "stateDir"] = str(tmp_path / "work")
    return from_conf(entries)


# protocol x backend x {1, 3} failures: tests/test_spark_exactly_once.py; NexMark Q3: test_nexmark_q3.py


def test_spark_state_baseline_without_failures_carries_counts_across_micro_batches(spark):
    """What spark-state must get right first is the state carried from one micro-batch to the
    next through Spark's state store.  With the batch cap, the events come in
    at least 4 micro-batches and each of the 2,000 keys is hit in several of them, so a count that
    forgot an earlier batch (update mode emits the running count) fails the ground-truth check."""
    from spark_integration.spark_state import run_spark_state

    spec = JobSpec(**{**SPEC, "events": 200_000})
    m = run_spark_state(spark, spec)
    assert m.exactly_once is True, m.verify_detail
    assert m.failures == 0
    assert m.batches >= -(-spec.events // spec.max_batch) == 4
    # a state-store commit per micro-batch, as Spark's progress reports it; the last batch's
    # report comes after its sink returned, which ends the run, so it may be missing
    assert m.checkpoints >= m.batches - 1
    assert 0 < m.events < spec.events and m.throughput > 0  # steady state: after the first batch


def test_spark_state_keeps_sized_state_exactly_once_across_an_injected_failure(spark, tmp_path):
    """spark-state with the protocols' sized state (a count and a ring of 8 slots per key, in
    Spark's store through transformWithState) and one failure: the micro-batch passing the
    offset fails in the sink after delivering half its output, the query restarts from its
    checkpoint location and Spark re-runs that batch.  The counts the sink delivered and the
    rings read back from Spark's store match the failure-free run; the recovery is reported by
    phase, and what Spark does not expose as n/a, never as a measured 0."""
    from spark_integration.job import PHASE_LINES
    from spark_integration.spark_state import run_spark_state

    where = tmp_path / "ckpt"
    settings = from_conf({PREFIX + "protocol": "spark-state", PREFIX + "stateBytes": "64",
                          PREFIX + "failAt": "2500", PREFIX + "coldRestore": "true",
                          PREFIX + "checkpointLocation": str(where)})
    spec = JobSpec(events=5_000, keys=400, skew="load+hot:1:4", max_batch=1_000, verify=True, timeout=150)
    m = run_spark_state(spark, spec, settings)
    assert m.exactly_once is True, m.verify_detail
    assert "400 keys' state bytes match" in m.verify_detail  # the rings, from Spark's store
    assert m.failures == 1 and len(m.recoveries) == 1 and m.restore_cache == "cold"
    s = m.summary()
    assert s["Recovery.ReplayEvents"] == 1_000 and s["Recovery.LoadBytes"] > 0  # the changelogs read
    assert s["RecoveryTime(ms)"] == pytest.approx(sum(s[line] for line in PHASE_LINES.values()), abs=1)
    assert s["RecoveryTime(ms)"] > 0 and s["Recovery.Detect(ms)"] > 0 and s["Recovery.Replay(ms)"] > 0
    # no state store is left loaded to upload a snapshot into the removed location a maintenance
    # interval later (which made it again)
    assert not spark._jvm.org.apache.spark.sql.execution.streaming.state.StateStore.isMaintenanceRunning()
    assert s["StateBytes"] == 2 * 16 + 400 * (16 + 64)  # the protocols' rule, two instances
    assert s["Checkpoints"] == m.batches == 5 and s["CheckpointP50(ms)"] > 0 and s["CheckpointBytes"] > 0
    assert s["StoreBytes"] > 0 and s["SpaceAmplification"] > 0
    assert s["BackendOps"].startswith("n/a (") and s["Checkpoint.Encode(ms)"].startswith("n/a (")
    assert list(where.iterdir()) == []  # the run's checkpoint location is removed after it


def test_none_loses_state_on_failure(spark, tmp_path):
    settings = settings_for(tmp_path, protocol="none", failAt=150_000, jobId="wc0")
    m = run_job(spark, settings, JobSpec(**SPEC))
    assert m.failures == 1 and m.exactly_once is False


@pytest.mark.server
def test_a_run_the_store_fails_leaves_no_working_state_behind(spark, tmp_path):
    """The instances' working state lives in memory (tmpfs): a run that ends in an error — here
    Redis refuses the first checkpoint's writes (``maxmemory`` 1 byte), after the instances had
    saved a micro-batch of state — must not leave it there."""
    import redis as redis_py

    settings = from_conf({PREFIX + "protocol": "coordinated", PREFIX + "backend": "redis",
                          PREFIX + "interval": "2", PREFIX + "jobId": "failing",
                          PREFIX + "stateDir": str(tmp_path / "work"), PREFIX + "stateBytes": "64"})
    admin = redis_py.Redis(host="127.0.0.1", port=6379)
    admin.config_set("maxmemory", "1")  # noeviction (the default): every write gets an OOM reply
    try:
        with pytest.raises(Exception, match="StorageFullError"):
            run_job(spark, settings, JobSpec(**{**SPEC, "verify": False}))
    finally:
        admin.config_set("maxmemory", "0")
    job = tmp_path / "work" / "failing"
    assert (job / "i0.lock").exists()  # the instances ran; their state is gone, not never made
    assert [p.name for p in job.rglob("*.state")] == []


PHASE_LINES = ("Recovery.Detect(ms)", "Recovery.Load(ms)", "Recovery.Restore(ms)", "Recovery.Replay(ms)",
               "Recovery.CatchUp(ms)")
REQUIRED_LINES = ("Throughput(events/sec)", "LatencyP50(ms)", "LatencyP99(ms)", "CheckpointTime(ms)",
                  "CheckpointP50(ms)", "CheckpointP99(ms)", "CheckpointMax(ms)", "CheckpointMB/s", "StateBytes",
                  "CheckpointBytes", "BackendOps", "RestartTime(ms)", "RecoveryTime(ms)",
                  "ReplayedEvents", "UselessCheckpoints", "ExactlyOnce", "Recovery.LoadBytes",
                  "Recovery.ReplayEvents", *PHASE_LINES)


def _cli(*args, timeout=150):
    import subprocess
    import sys

    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.run([sys.executable, "-m", "bench", "spark", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_cli_prints_spark_lines_and_json(tmp_path):
    import json

    out = tmp_path / "r.json"
    r = _cli("--protocol", "coordinated", "--backend", "default_fs", "--opt", f"path={tmp_path / 's'}",
             "--events", "200000", "--keys", "1000", "--batch", "50000", "--fail-at", "100000",
             "--state-bytes", "256", "--layout", "chunks", "--chunk-bytes", "65536", "--disk-baseline",
             "--verify", "--json", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("[SPARK], ")]
    names = {line.split(", ")[1] for line in lines}
    assert set(REQUIRED_LINES) <= names
    assert "[SPARK], ExactlyOnce, true" in lines
    data = json.loads(out.read_text())
    assert data["metrics"]["ExactlyOnce"] is True and data["settings"]["protocol"] == "coordinated"
    assert "[SPARK], Layout, chunks" in lines and data["settings"]["layout"] == "chunks"
    # the phases are consecutive slices of the recovery: they add up to RecoveryTime
    values = {name: float(value) for _, name, value in (line.split(", ", 2) for line in lines)
              if value.replace(".", "", 1).isdigit()}
    assert values["RecoveryTime(ms)"] > 0 and values["Recovery.LoadBytes"] > 0
    assert sum(values[p] for p in PHASE_LINES) == pytest.approx(values["RecoveryTime(ms)"], rel=0.05)
    assert values["Recovery.ReplayEvents"] > 0
    (episode,) = data["recovery_phases"]
    assert episode["total_ms"] == pytest.approx(values["RecoveryTime(ms)"], abs=0.2)
    # every micro-batch's wall time holds its slowest operator task and the driver's commit
    assert all(0 < b["task_ms"] and b["task_ms"] + b["commit_ms"] <= b["ms"] for b in data["timeline"])
    # checkpoints as Flink's REST API names them
    summary = data["checkpoints"]["summary"]
    assert summary["end_to_end_duration"]["max"] > 0 and summary["checkpointed_size"]["min"] > 0
    assert summary["state_size"]["max"] >= summary["checkpointed_size"]["max"] * 0.5
    assert data["checkpoints"]["counts"]["completed"] == data["metrics"]["Checkpoints"]
    # state of a size: 256 bytes a key beside the count, its checkpoint tail and the disk beside it
    assert values["StateBytes"] > 1000 * 256 and values["CheckpointP99(ms)"] >= values["CheckpointP50(ms)"] > 0
    base = data["disk_baseline"]
    assert base["DiskBaselineBytes"] >= values["StateBytes"] and base["DiskWrite(MB/s)"] > 0
    assert base["CheckpointDiskRatio"] > 0 and base["RestoreDiskRatio"] > 0
    assert f"[SPARK], CheckpointDiskRatio, {base['CheckpointDiskRatio']}" in lines


def test_cli_rejects_bad_settings_before_starting_spark(tmp_path):
    r = _cli("--protocol", "coordinated", "--backend", "floppy", timeout=60)
    assert r.returncode == 2 and "unknown backend 'floppy'; valid backends:" in r.stderr
    r = _cli("--protocol", "coordinated", "--backend", "default_fs", "--opt", "colour=blue", timeout=60)
    assert r.returncode == 2 and "no option 'colour'" in r.stderr


def test_a_paced_run_records_latency_per_second_and_recovery_by_latency(tmp_path):
    """A paced run with a failure: p50/p99 per second of event creation over its whole input, the
    failure on the same clock, its recovery by latency, and the phases beside it as before."""
    import json

    out = tmp_path / "paced.json"
    rate, events, fail_at = 2000, 32_000, 20_000
    r = _cli("--job", "nexmark-q12", "--protocol", "coordinated", "--backend", "indexed_fs",
             "--opt", f"path={tmp_path / 's'}", "--events", str(events), "--rate", str(rate), "--keys", "500",
             "--batch", str(events), "--fail-at", str(fail_at), "--json", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(", ", 2)[1:] for line in r.stdout.splitlines() if line.startswith("[SPARK], "))
    assert "RecoveryByLatency(ms)" in lines and float(lines["RecoveryTime(ms)"]) > 0
    data = json.loads(out.read_text())
    latency = data["latency"]
    assert latency["rate"] == rate
    seconds = [s["second"] for s in latency["per_second"]]
    assert seconds == [float(i) for i in range(events // rate)]  # every second of the input
    assert sum(s["events"] for s in latency["per_second"]) == pytest.approx(events, abs=len(seconds))
    assert all(s["p99_ms"] >= s["p50_ms"] > 0 for s in latency["per_second"])
    (failure,) = latency["failure_s"]
    assert fail_at / rate <= failure < events / rate + 60  # the kill happens once its event is due
    (recovery,) = latency["recovery_by_latency_ms"]
    assert recovery is None or recovery >= 0
    committed = [c[1] - c[0] for c in latency["commits"]]
    assert sum(committed) == events  # each event made final once, replays not counted again
