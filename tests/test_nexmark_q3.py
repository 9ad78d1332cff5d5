"""NexMark Q3 end to end: the join's state through every protocol, with killed instances.

Real Spark (local[2]), real backends, real task kills; the final join state (persons kept,
auctions waiting, results emitted per seller) must equal a failure-free relational join.
"""

from __future__ import annotations

import uuid

import pytest

import pyspark  # noqa: E402,F401  (required: a missing Spark extra fails the run, never skips it)

from spark_integration.conf import PREFIX, from_conf  # noqa: E402
from spark_integration.runner import JobSpec, run_job  # noqa: E402

pytestmark = pytest.mark.slow

SPEC = dict(kind="q3", events=150_000, keys=500, max_batch=30_000, verify=True, timeout=150)


@pytest.mark.parametrize("protocol, skew", [("coordinated", "1.0"), ("uncoordinated", "hot:0.3"),
                                            ("logio", "1.0")])
def test_q3_join_exactly_once_after_two_failures(spark, tmp_path, protocol, skew):
    entries = {PREFIX + "protocol": protocol, PREFIX + "backend": "indexed_fs",
               PREFIX + "backend.path": str(tmp_path / "store"), PREFIX + "stateDir": str(tmp_path / "work"),
               PREFIX + "jobId": "q3", PREFIX + "interval": "1", PREFIX + "fullEvery": "2",
               PREFIX + "failAt": "40000,100000", PREFIX + "failInstance": "1"}
    m = run_job(spark, from_conf(entries), JobSpec(**SPEC, skew=skew))
    assert m.failures == 2 and m.exactly_once, (m.verify_detail, m.summary())
    assert m.events > 0 and m.checkpoint_bytes > 0


@pytest.mark.redis
@pytest.mark.server
def test_q3_on_redis_and_none_is_not_exactly_once(spark, tmp_path):
    import services

    services.up(["redis"])
    opts = services.client_options("redis", f"t{uuid.uuid4().hex[:8]}")
    base = {PREFIX + "stateDir": str(tmp_path / "work"), PREFIX + "failAt": "70000"}
    entries = {**base, PREFIX + "protocol": "logio", PREFIX + "backend": "redis", PREFIX + "jobId": "q3r",
               **{PREFIX + "backend." + k: str(v) for k, v in opts.items()}}
    m = run_job(spark, from_conf(entries), JobSpec(**SPEC))
    assert m.failures == 1 and m.exactly_once, m.verify_detail
    # without checkpoints the join forgets persons and waiting auctions: the verification sees it
    m = run_job(spark, from_conf({**base, PREFIX + "protocol": "none", PREFIX + "jobId": "q3n"}), JobSpec(**SPEC))
    assert m.failures == 1 and m.exactly_once is False
