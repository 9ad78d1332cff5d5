"""``experiments.spark.session``: what lives exactly as long as an experiment's session (pure
logic: a stand-in session records what was done to it; the real sessions are in test_spark)."""

from __future__ import annotations

import os

import pytest

from experiments.spark import session as spark_session


class FakeSession:
    def __init__(self, log: list):
        self.log = log
        self.sparkContext = self

    def setLogLevel(self, level: str) -> None:
        self.log.append(("level", level))

    def stop(self) -> None:
        self.log.append(("stop",))


@pytest.fixture
def log(monkeypatch):
    log: list = []

    def build(master, conf=None):
        log.append(("build", master, dict(conf or {})))
        return FakeSession(log)

    monkeypatch.setattr(spark_session, "build_session", build)
    return log


def test_a_run_has_a_fresh_directory_removed_after_the_session_stopped(log):
    with spark_session.spark_run("local[2]", ["none", "spark-state"], "ckptbench-t-") as run:
        assert os.path.isdir(run.tmp) and os.path.basename(run.tmp).startswith("ckptbench-t-")
        tmp = run.tmp
    assert not os.path.exists(tmp)
    assert log[0][:2] == ("build", "local[2]") and log[0][2]  # the baseline brought its conf
    assert log[1:] == [("level", "OFF"), ("stop",)]
    assert run.seconds() >= 0.0  # the clock still reads after the block


def test_a_failing_experiment_still_stops_the_session_and_removes_the_directory(log):
    with pytest.raises(RuntimeError, match="boom"):
        with spark_session.spark_run("local[1]", ["none"], "ckptbench-t-") as run:
            tmp = run.tmp
            raise RuntimeError("boom")
    assert not os.path.exists(tmp) and log[-1] == ("stop",)


def test_a_bare_session_is_stopped_on_leaving(log):
    with spark_session.spark_session("local[1]", ["none"]) as spark:
        assert isinstance(spark, FakeSession)
    assert log[-1] == ("stop",)
