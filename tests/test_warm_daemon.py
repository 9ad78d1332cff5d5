"""``spark_integration.warm_daemon``: workers forked with the job's modules imported, and only
while forking stays safe (one thread)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


@pytest.mark.parametrize("omp", ["", "3"])  # unset, and an executor's 3 cores as Spark sets it
def test_the_preload_imports_the_workers_modules_and_starts_no_thread(omp):
    done = _python("import sys\nfrom spark_integration import warm_daemon as w\nw.preload()\n"
                   "print(w.thread_count(), 'pyarrow' in sys.modules, 'spark_integration.operators' in sys.modules)",
                   OMP_NUM_THREADS=omp)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "True", "True"]


def test_a_second_thread_stops_the_daemon_with_one_line():
    # pyarrow imported before the daemon could tell jemalloc not to start its purging thread
    done = _python("import pyarrow\nimport runpy\nrunpy.run_module('spark_integration.warm_daemon', run_name='__main__')")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "threads after importing" in done.stderr


@pytest.mark.slow
def test_a_session_forks_its_workers_from_the_warm_daemon(spark):
    def parent_command(_):
        import os

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            yield f.read().replace(b"\0", b" ").decode()

    commands = spark.sparkContext.parallelize(range(2), 2).mapPartitions(parent_command).collect()
    assert commands and all("spark_integration.warm_daemon" in c for c in commands), commands
