"""The local SparkSession an experiment runs its jobs on, and what lives exactly as long as it.

:func:`spark_session` starts a session whose Spark conf suits the protocols it will run (a
baseline's own conf included, :func:`experiments.spark.job.session_conf`), quiets Spark's log to
errors and stops the session however the block ends, so a failed experiment leaves no JVM behind.

:func:`spark_run` adds what an experiment of many runs shares: a temporary directory for the
path backends and the jobs' state (removed after the session stopped, so no Spark task still
writes into it) and the experiment's clock, started once the session is up, so that the
``seconds`` of a document measure the experiment and not the JVM's start.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from spark_integration.runner import build_session

from experiments.spark.job import session_conf


@contextmanager
def spark_session(master: str, protocols: Iterable[str],
                  conf: Mapping[str, str] | None = None) -> Iterator[Any]:
    """A session on ``master`` for ``protocols`` (``conf``: Spark conf of the caller's own, as a
    cluster's driver address), Spark's own log off, stopped on leaving the block."""
    spark = build_session(master, conf=session_conf(list(protocols), conf))
    try:
        # Spark would log every task failure (injected kills included) with its Python
        # traceback; the runner raises what failed itself, as one line where it can
        spark.sparkContext.setLogLevel("OFF")
        yield spark
    finally:
        spark.stop()


@dataclass
class SparkRun:
    """A session with its temporary directory and the experiment's start time."""

    spark: Any
    tmp: str
    started: float = field(default_factory=time.monotonic)

    def seconds(self) -> float:
        """Seconds since the session was up, to one decimal; still right after the block ended
        (an experiment's analysis after the runs counts towards its time)."""
        return round(time.monotonic() - self.started, 1)


@contextmanager
def spark_run(master: str, protocols: Iterable[str], prefix: str) -> Iterator[SparkRun]:
    """:func:`spark_session` plus a fresh temporary directory named ``<prefix>...`` and a clock;
    the session is stopped first, then the directory removed."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        with spark_session(master, protocols) as spark:
            yield SparkRun(spark, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
