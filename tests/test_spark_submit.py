"""Conf selection end to end: the word-count job through a real ``spark-submit`` on ``local[2]``.

The backend, its path and the protocol come from ``--conf spark.ckptbench.*`` only; the job script
is the one users run.  The checkpoints must land under the ``backend.path`` given there, one
namespace per participant, and a killed instance must still end exactly-once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import pyspark  # noqa: E402,F401  (required: a missing Spark extra fails the run, never skips it)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def test_spark_submit_conf_selects_default_fs_and_its_path(tmp_path):
    store = tmp_path / "chosen-by-conf"
    conf = {"spark.ckptbench.protocol": "coordinated", "spark.ckptbench.backend": "default_fs",
            "spark.ckptbench.backend.path": str(store), "spark.ckptbench.jobId": "wc-submit",
            "spark.ckptbench.failAt": "70000", "spark.ckptbench.stateDir": str(tmp_path / "work"),
            "spark.ckptbench.retainCheckpoints": "true"}  # looked at below
    argv = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]"]
    for k, v in conf.items():
        argv += ["--conf", f"{k}={v}"]
    argv += [str(ROOT / "spark_integration/jobs/wordcount.py"), "--events", "150000",
             "--batch", "30000", "--keys", "500", "--verify"]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=400, env=env, cwd=tmp_path)
    lines = [line for line in r.stdout.splitlines() if line.startswith("[SPARK], ")]
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-4000:])
    assert "[SPARK], ExactlyOnce, true" in lines and "[SPARK], Failures, 1" in lines, lines
    # the checkpoints are where the conf said: DIR/<jobId>/<participant>/..., one file per key
    job = store / "wc-submit"
    assert {"i0", "i1", "driver"} <= set(os.listdir(job))
    files = [p for p in job.rglob("*") if p.is_file()]
    assert any("i0" in p.parts for p in files) and any("driver" in p.parts for p in files)
    assert not list(tmp_path.glob("*.seg"))  # nothing written beside it (cwd is tmp_path)
