"""What a host's loss takes of a job (:mod:`spark_integration.node_loss`), on real state files.

Each task records the host it ran on (``CKPTBENCH_HOST``); the loss of a host drops exactly the
working state of the instances whose last task ran there and leaves their failure records at the
kill's instant, which the instances' next tasks report as the start of the recovery.  The host
kill itself, Spark's rescheduling and the protocols' recovery run in the acceptance runs of
``bench spark --master cluster --fail-node K`` (docs/spark.md).
"""

from __future__ import annotations

from spark_integration import node_loss
from spark_integration.operators import (HOST_ENV, failure_instant, load_state, new_state,
                                         record_host, save_state)
from spark_integration.settings import Settings

A, B = "10.99.0.11", "10.99.0.12"


def _settings(tmp_path) -> Settings:
    return Settings(job_id="job-nodeloss", state_dir=str(tmp_path))


def test_a_hosts_loss_takes_the_state_of_the_instances_it_ran_and_nothing_else(tmp_path, monkeypatch):
    settings = _settings(tmp_path)
    for instance, host in ((0, A), (1, B), (2, A)):
        monkeypatch.setenv(HOST_ENV, host)
        record_host(settings, instance)
        state = new_state(settings)
        state.version = 3
        save_state(settings, instance, state)
    monkeypatch.setenv(HOST_ENV, B)
    record_host(settings, 2)  # instance 2's last task ran on B: its state is B's now
    assert node_loss.instances_on(settings, A, 3) == [0]

    assert node_loss.lose_working_state(settings, A, 3, at=1234.5) == [0]
    assert load_state(settings, 0) is None and failure_instant(settings, 0) == 1234.5
    for survivor in (1, 2):
        assert load_state(settings, survivor).version == 3
        assert failure_instant(settings, survivor) == 0.0


def test_off_the_cluster_no_host_is_recorded(tmp_path, monkeypatch):
    monkeypatch.delenv(HOST_ENV, raising=False)
    settings = _settings(tmp_path)
    record_host(settings, 0)
    assert node_loss.instances_on(settings, A, 1) == []
    assert node_loss.lose_working_state(settings, A, 1, at=1.0) == []


def test_fail_node_is_for_the_cluster_and_one_offset(capsys):
    from bench.cli import main as bench_main

    cases = [(["--master", "local[2]"], "--fail-node 1 kills a host of the cluster: give --master cluster"),
             (["--master", "cluster", "--fail-at", "10", "--fail-at", "20"],
              "--fail-node kills one host, at one offset: give at most one --fail-at")]
    for argv, needle in cases:
        assert bench_main(["spark", "--protocol", "coordinated", "--backend", "redis",
                           "--events", "1000", "--fail-node", "1", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
