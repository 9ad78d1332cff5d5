"""PySpark's worker daemon with the job's worker-side modules imported before it forks.

Spark runs each Python task in a worker forked from a daemon (``pyspark.daemon``) and keeps the
worker for the next task (``spark.python.worker.reuse``).  A fresh fork imports
``pyspark.worker``, numpy, this project's operators, protocols and stores before its first task.
Workers live as long as the session, so in steady state nobody pays that; but a failure that
kills a task kills its worker, and the replacement pays the imports inside the recovery of
whichever protocol lost it.  That is a cost of Python's start, not of the protocol, and it
falls unevenly: a protocol whose recovery re-runs every stage starts its replacements inside the
re-run, while LOG.io's input-less re-run leaves a start to the first micro-batch after it, where
the catch-up counts it (docs/logio.md measured it).  Importing those modules once in the daemon,
before it forks, makes every worker start warm, for every protocol alike.  The daemon then
freezes their objects (``gc.freeze``): a worker's garbage collector never scans them, so it
neither spends time on them nor writes to, and so copies, the pages it shares with the daemon.

Safety: a fork copies only the forking thread, so a lock another thread held at the fork stays
held in the child for ever.  PySpark's own daemon therefore imports the worker module after the
fork.  This daemon imports only modules that start no thread, and checks the result.  Two
libraries would start one on import, and both are told not to by the variable they read when
they load: numpy's OpenBLAS starts its thread pool, sized by ``OMP_NUM_THREADS`` (which Spark sets
to an executor's cores), so the daemon loads it with one thread (``OPENBLAS_NUM_THREADS``), which
its workers keep (they do no linear algebra: numpy here counts, hashes and sorts); pyarrow's
bundled jemalloc starts a background purging thread, which ``JE_ARROW_MALLOC_CONF``'s
``background_thread:false`` leaves out (jemalloc then purges freed pages in the allocating
thread; pyarrow's default pool here is mimalloc, so little goes through it).  With a second
thread after the imports it stops with one line on stderr (the executor's log) and Spark fails
the task that asked for a worker, instead of serving workers that might deadlock.

Spark starts it as ``python -m spark_integration.warm_daemon [worker module]``
(``spark.python.daemon.module``, set by :func:`spark_integration.runner.build_session`); the
arguments go through to ``pyspark.daemon`` unchanged.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import threading

#: modules every worker of a job imports, none of which starts a thread on import (given
#: :func:`single_threaded_imports`)
WORKER_MODULES = ("pyspark.worker", "numpy", "pyarrow", "spark_integration.operators", "spark_integration.source")


def single_threaded_imports() -> None:
    """Tell the libraries that start a thread when they load not to (set before they load)."""
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # read by OpenBLAS when numpy loads it; over OMP_NUM_THREADS
    conf = os.environ.get("JE_ARROW_MALLOC_CONF", "")
    if "background_thread" not in conf:  # a user's own choice stands, and the thread check judges it
        os.environ["JE_ARROW_MALLOC_CONF"] = ",".join(filter(None, (conf, "background_thread:false")))


def preload() -> None:
    """Import what a worker of any job imports: :data:`WORKER_MODULES`, every protocol's
    module and every installed store's (a store whose client library is missing is left to the
    worker that needs it, which reports it)."""
    single_threaded_imports()
    for name in WORKER_MODULES:
        importlib.import_module(name)
    from backends.registry import backend_class, backend_names
    from spark_integration.protocols.registry import protocol_names, registration

    for name in protocol_names(baseline=False):
        registration(name).load()
    for name in backend_names():
        try:
            backend_class(name)
        except Exception:  # noqa: BLE001 - its worker imports it again and says what failed
            pass


def thread_count() -> int:
    """The process's threads as the kernel counts them (a C library's threads included, which
    :func:`threading.active_count` does not see)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def main() -> None:
    preload()
    gc.freeze()
    threads = thread_count()
    if threads != 1:
        sys.stderr.write(f"ckptbench warm daemon: {threads} threads after importing the worker's modules, "
                         "so forking workers is unsafe; remove spark.python.daemon.module to use "
                         "PySpark's own daemon\n")
        sys.exit(1)
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
