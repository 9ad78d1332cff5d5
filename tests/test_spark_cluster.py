"""A real Spark standalone cluster (``bench services up spark``): master + worker on 127.0.0.1.

The job script runs unchanged through ``spark-submit --master spark://...``: the driver, the
executor JVM the worker launches and its Python workers are separate processes talking over TCP,
and the executors reach the Redis backend over the network. Failures are injected (an instance's
Python worker exits) and the final state is verified against the failure-free truth.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import pyspark  # noqa: E402,F401  (required: a missing Spark extra fails the run, never skips it)

import services  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.server, pytest.mark.redis]
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A private cluster (own state dir and port), stopped afterwards."""
    state = tmp_path_factory.mktemp("spark-service")
    st = services.up(["spark"], state_dir=state, port=free_port())[0]
    assert st["running"], st
    try:
        yield services.client_options("spark", "-", state_dir=state)["master"], state
    finally:
        services.down(["spark"], state_dir=state)
        assert not services.status(["spark"], state_dir=state)[0]["running"]


def test_q3_job_on_standalone_cluster_with_redis_and_failures(cluster, tmp_path):
    master, state = cluster
    services.up(["redis"])
    redis_opts = services.client_options("redis", f"t{uuid.uuid4().hex[:8]}")
    conf = {"spark.ckptbench.protocol": "logio", "spark.ckptbench.backend": "redis",
            "spark.ckptbench.failAt": "40000,100000", "spark.ckptbench.failInstance": "1",
            "spark.ckptbench.stateDir": str(tmp_path / "work"),
            **{f"spark.ckptbench.backend.{k}": str(v) for k, v in redis_opts.items()},
            "spark.cores.max": "2", "spark.executor.memory": "1g"}
    argv = [str(Path(sys.executable).parent / "spark-submit"), "--master", master]
    for k, v in conf.items():
        argv += ["--conf", f"{k}={v}"]
    argv += [str(ROOT / "spark_integration/jobs/nexmark_q3.py"), "--events", "150000", "--batch", "30000",
             "--keys", "500", "--verify"]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=400, env=env, cwd=tmp_path)
    lines = [line for line in r.stdout.splitlines() if line.startswith("[SPARK], ")]
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-4000:])
    assert "[SPARK], ExactlyOnce, true" in lines, lines
    assert "[SPARK], Failures, 2" in lines, lines
    assert f"[SPARK], Master, {master}" in lines
    # the work ran in an executor the worker launched (its directory: work-dir/app-*/<executor>)
    assert list((state / "spark" / "worker" / "data").glob("app-*/*/stderr"))
