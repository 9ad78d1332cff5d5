"""The recovery meter (pure logic): reads through the participant store count as load, with their
bytes; replay excludes the reads inside it; the meter belongs to its thread; the phase lines are
means over episodes and add up to RecoveryTime."""

from __future__ import annotations

import threading
import time

import pytest

from spark_integration import phases
from spark_integration.job import Metrics, RecoveryPhases
from spark_integration.store import Scoped


class SlowDict:
    """A backend stand-in whose reads take a known time."""

    def __init__(self, delay: float) -> None:
        self.data, self.delay = {}, delay

    def put(self, key, value):
        self.data[key] = value

    def get(self, key):
        time.sleep(self.delay)
        return self.data.get(key)

    def get_many(self, keys):
        time.sleep(self.delay)
        return {k: self.data[k] for k in keys if k in self.data}

    def scan(self, prefix):
        time.sleep(self.delay)
        return sorted((k, v) for k, v in self.data.items() if k.startswith(prefix))


def test_reads_count_as_load_with_their_bytes_and_replay_excludes_them():
    store = Scoped(SlowDict(0.02), "job/i0/")
    store.put("a", b"x" * 100)
    store.put("b", b"y" * 50)
    with phases.metering() as meter:
        assert store.get("a") == b"x" * 100
        assert store.get("missing") is None
        with phases.replaying():
            store.get_many(["a", "b"])  # a read inside the replay loop is still load
            time.sleep(0.05)  # re-applying events
        store.scan("")
    assert meter.load_bytes == 100 + 150 + 150
    assert meter.load_s == pytest.approx(0.08, abs=0.04)
    assert meter.replay_s == pytest.approx(0.05, abs=0.03)
    assert phases.current() is None  # the meter ends with its ``with``


def test_reads_outside_a_restore_or_in_another_thread_are_not_metered():
    store = Scoped(SlowDict(0.0), "p/")
    store.put("k", b"v" * 10)
    store.get("k")  # no meter: nothing to count, nothing breaks
    with phases.metering() as meter:
        t = threading.Thread(target=store.get, args=("k",))  # an asynchronous writer's read
        t.start()
        t.join()
    assert meter.load_bytes == 0


def test_phase_lines_are_means_over_episodes_and_sum_to_recovery_time():
    m = Metrics()
    for e in (RecoveryPhases(100, 20, 4000, 30, 400, 1000, 50), RecoveryPhases(300, 40, 2000, 10, 200, 3000, 150)):
        m.recoveries.append(e)
        m.recovery_ms.append(e.total_ms)
    s = m.summary()
    assert s["Recovery.Detect(ms)"] == 200 and s["Recovery.LoadBytes"] == 3000 and s["Recovery.ReplayEvents"] == 2000
    phase_sum = sum(s[k] for k in ("Recovery.Detect(ms)", "Recovery.Load(ms)", "Recovery.Restore(ms)",
                                   "Recovery.Replay(ms)", "Recovery.CatchUp(ms)"))
    assert phase_sum == pytest.approx(s["RecoveryTime(ms)"])


def test_catch_up_ends_at_the_pre_failure_level_and_a_paced_run_drains_its_backlog():
    """The runner and the spark-state baseline share this rule: a micro-batch after a recovery
    is back once it runs at 90 % of the median pre-failure rate (and, paced, is no larger than
    1.5 times the median pre-failure batch)."""
    assert phases.reference([]) is None and phases.back_at_rate(1.0, 10, None, paced=True)
    level = phases.reference([(1.0, 5), (100.0, 10), (200.0, 10), (300.0, 10), (400.0, 20), (500.0, 30)])
    assert level == (300.0, 10.0)  # the last five: medians of rate and size
    assert phases.back_at_rate(270.0, 10, level, paced=False)
    assert not phases.back_at_rate(269.0, 10, level, paced=False)
    assert phases.back_at_rate(300.0, 100, level, paced=False)
    assert not phases.back_at_rate(300.0, 100, level, paced=True)  # a backlog still drains
    assert phases.back_at_rate(300.0, 16, level, paced=True)
