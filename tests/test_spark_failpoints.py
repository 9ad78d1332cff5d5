"""Exactly-once at every named Spark fail point: the instance (or the driver) dies at that step.

Each case arms one fail point (``spark.ckptbench.failPoint``, armed by the driver's plan for the
instance of ``failAt`` from that offset on): the instance's Python worker ends with
``os._exit(87)`` exactly there — before its checkpoint, with the checkpoint put but not flushed,
after it but before the driver's commit, in the uncoordinated writer thread before its commit, or
before LOG.io's atomic commit — and the job recovers as it does from any killed instance.  The
final state must equal the failure-free ground truth.

The driver's point (``spark.driver.during_commit``) kills the driver itself, so that run is a
``bench spark`` child process armed through ``CKPTBENCH_FAILPOINT``; the test then takes the job
over in this process with ``JobSpec(resume=True)``, recovering from coordinated's commit records;
the dead driver's Spark query directory, in the job's working state, goes with the resumed run.

Small runs (40,000 events in micro-batches of 10,000), one SparkSession for the module.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from backends import failpoints
from spark_integration.conf import PREFIX, from_conf
from spark_integration.runner import JobSpec, run_job

pytestmark = [pytest.mark.slow, pytest.mark.crash]

SPEC = dict(events=40_000, keys=1_000, max_batch=10_000, verify=True, timeout=150)
#: the instance is armed from this offset on: its second micro-batch
FAIL_AT = "15000"

#: protocol -> the fail points its instances reach (the writer's run in the uncoordinated
#: writer thread, after the task returned: the loss is found by the instance's next task)
CASES = [
    ("coordinated", "spark.worker.before_checkpoint"),
    ("coordinated", "spark.worker.during_checkpoint_write"),
    ("coordinated", "spark.worker.after_checkpoint"),
    ("uncoordinated", "spark.worker.during_checkpoint_write"),
    ("uncoordinated", "spark.uncoordinated.before_commit"),
    ("logio", "spark.logio.before_log_commit"),
    ("logio", "spark.worker.during_checkpoint_write"),
    ("logio", "spark.worker.after_checkpoint"),
    ("cic", "spark.worker.during_checkpoint_write"),
]


def entries(tmp_path, protocol: str, job: str) -> dict[str, str]:
    return {PREFIX + "protocol": protocol, PREFIX + "backend": "indexed_fs", PREFIX + "jobId": job,
            PREFIX + "backend.path": str(tmp_path / "store"), PREFIX + "stateDir": str(tmp_path / "work")}


def test_every_spark_fail_point_is_declared_and_covered():
    import spark_integration.protocols.coordinated  # noqa: F401  (declares its points)
    import spark_integration.protocols.logio  # noqa: F401
    import spark_integration.protocols.uncoordinated.protocol  # noqa: F401

    mine = {n for n in failpoints.DECLARED if n.startswith(("spark.worker.", "spark.driver.",
                                                              "spark.coordinated.", "spark.uncoordinated.",
                                                              "spark.logio.", "spark.sender."))}
    covered = ({point for _, point in CASES} | {"spark.driver.during_commit"}
               | {point for _, point in SENDER_CASES})
    assert mine == covered


@pytest.mark.parametrize("protocol,point", CASES, ids=[f"{p}-{n.split('.', 1)[1]}" for p, n in CASES])
def test_exactly_once_when_an_instance_dies_at(spark, tmp_path, protocol, point):
    conf = {**entries(tmp_path, protocol, f"fp-{protocol[:3]}-{point.rsplit('.', 1)[1]}"),
            PREFIX + "failAt": FAIL_AT, PREFIX + "failInstance": "1", PREFIX + "failPoint": point}
    m = run_job(spark, from_conf(conf), JobSpec(**SPEC))
    # the point is the only failure armed: one failure means the instance died there
    assert m.failures == 1, m.summary()
    assert m.exactly_once, m.verify_detail
    (episode,) = m.recoveries
    assert episode.load_bytes > 0 and episode.total_ms == pytest.approx(m.recovery_ms[0])


#: protocol -> a fail point its senders reach (:mod:`spark_integration.protocols.sender_log`)
SENDER_CASES = [("uncoordinated", "spark.sender.before_log_write"), ("logio", "spark.sender.before_log_write")]


@pytest.mark.parametrize("protocol,point", SENDER_CASES, ids=[p for p, _ in SENDER_CASES])
def test_exactly_once_when_a_sender_dies_after_passing_its_events_on_before_logging_them(
        spark, tmp_path, protocol, point):
    """A sender hands Spark its events before it logs them: dying in between must cost nothing
    but the micro-batch's re-run (its events reached no instance, nothing was acknowledged)."""
    conf = {**entries(tmp_path, protocol, f"fp-{protocol[:3]}-sender"),
            PREFIX + "failAt": FAIL_AT, PREFIX + "failInstance": "1", PREFIX + "failPoint": point}
    m = run_job(spark, from_conf(conf), JobSpec(**SPEC))
    assert m.failures == 1, m.summary()
    assert m.exactly_once, m.verify_detail


def test_exactly_once_when_the_driver_dies_during_coordinated_commit(spark, tmp_path):
    """The driver dies with its second commit record put; a new driver resumes the job."""
    conf = entries(tmp_path, "coordinated", "fp-driver")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", CKPTBENCH_FAILPOINT="spark.driver.during_commit@2")
    r = subprocess.run(
        [sys.executable, "-m", "bench", "spark", "--protocol", "coordinated", "--backend", "indexed_fs",
         "--opt", f"path={tmp_path / 'store'}", "--events", str(SPEC["events"]), "--keys", str(SPEC["keys"]),
         "--batch", str(SPEC["max_batch"]), "--conf", f"{PREFIX}jobId=fp-driver",
         "--conf", f"{PREFIX}stateDir={tmp_path / 'work'}"],
        capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == failpoints.EXIT_CODE, r.stderr[-3000:]
    assert "[FAILPOINT] spark.driver.during_commit hit 2" in r.stderr
    assert "[SPARK], ExactlyOnce" not in r.stdout  # it never finished
    job_dir = tmp_path / "work" / "fp-driver"
    assert len(list(job_dir.glob("sparkq-*"))) == 1  # Spark's query directory, in the job's state
    m = run_job(spark, from_conf(conf), JobSpec(**SPEC, resume=True))
    assert m.exactly_once, m.verify_detail
    assert not job_dir.exists()  # the resumed run took the dead driver's query directory too


def test_resume_is_refused_by_a_protocol_whose_driver_keeps_no_records(spark, tmp_path):
    from spark_integration.errors import SparkIntegrationError

    settings = from_conf(entries(tmp_path, "logio", "fp-noresume"))
    with pytest.raises(SparkIntegrationError, match="cannot be resumed"):
        run_job(spark, settings, JobSpec(**SPEC, resume=True))


def test_a_fail_point_the_instances_never_reach_is_refused():
    from spark_integration.errors import SparkIntegrationError
    from spark_integration.protocols.registry import protocol_class
    from spark_integration.runner import check_fail_point
    from spark_integration.settings import Settings

    protocol_class("coordinated")  # declares its points
    check_fail_point(Settings(protocol="coordinated", fail_point="spark.worker.during_checkpoint_write"))
    with pytest.raises(SparkIntegrationError, match="valid: spark.worker.after_checkpoint"):
        check_fail_point(Settings(protocol="coordinated", fail_point="spark.logio.before_log_commit"))
    with pytest.raises(SparkIntegrationError, match="CKPTBENCH_FAILPOINT=spark.driver.during_commit"):
        check_fail_point(Settings(protocol="coordinated", fail_point="spark.driver.during_commit"))
    # a sender's point, for a protocol whose senders log (and only for one)
    check_fail_point(Settings(protocol="logio", fail_point="spark.sender.before_log_write"))
    with pytest.raises(SparkIntegrationError, match="not one the instances of protocol 'coordinated'"):
        check_fail_point(Settings(protocol="coordinated", fail_point="spark.sender.before_log_write"))
