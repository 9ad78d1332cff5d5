"""The bounded retry every server backend uses (pure logic; real servers in test_redis & co)."""

from __future__ import annotations

import pytest

from backends.base import BackendUnavailableError, Retry


def test_a_callers_own_failed_attempt_with_no_budget_left_is_reported_as_is():
    """retries=0: the caller's first attempt failed and used the whole budget; the error names
    that failure (it used to fall through to an internal 'unreachable' assertion)."""
    calls = []
    retry = Retry(attempts=1, deadline=5.0, retry_on=(OSError,), sleep=lambda s: None)
    with pytest.raises(BackendUnavailableError, match="put failed after 1 attempts.*refused") as ei:
        retry.call("put", lambda: calls.append(1), tried=1, last=ConnectionRefusedError("refused"))
    assert calls == [] and isinstance(ei.value.__cause__, ConnectionRefusedError)


def test_retries_until_success_within_the_attempts():
    outcomes = [OSError("down"), OSError("down"), "ok"]
    retry = Retry(attempts=3, deadline=5.0, retry_on=(OSError,), sleep=lambda s: None)

    def fn():
        out = outcomes.pop(0)
        if isinstance(out, BaseException):
            raise out
        return out

    assert retry.call("get", fn) == "ok" and outcomes == []


def test_non_transient_errors_are_not_retried():
    calls = []
    retry = Retry(attempts=3, deadline=5.0, retry_on=(OSError,), sleep=lambda s: None)

    def fn():
        calls.append(1)
        raise ValueError("bad request")

    with pytest.raises(ValueError):
        retry.call("put", fn)
    assert calls == [1]


def test_the_deadline_ends_the_retries_before_the_attempts_run_out(monkeypatch):
    """A clock under the test's control: each attempt takes 1 s, the jitter is fixed at its top
    (a sleep of the whole delay), deadline 5 s with 100 attempts allowed.  Attempt 1 ends at 1 s
    (sleep 0.5), attempt 2 at 2.5 s (sleep 1), attempt 3 at 4.5 s, when 4.5 + 1 passes the
    deadline: three attempts, 1.5 s slept."""
    from backends import base

    clock = [1000.0]
    slept: list[float] = []
    monkeypatch.setattr(base.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(base.random, "random", lambda: 1.0)

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    calls = []

    def fn():
        calls.append(clock[0])
        clock[0] += 1.0
        raise OSError("down")

    retry = Retry(attempts=100, base_delay=0.5, max_delay=1.0, deadline=5.0,
                  retry_on=(OSError,), sleep=sleep)
    with pytest.raises(BackendUnavailableError, match=r"get failed after 3 attempts in 4\.5s: down"):
        retry.call("get", fn)
    assert calls == [1000.0, 1001.5, 1003.5] and slept == [0.5, 1.0]


def test_a_callers_own_time_counts_against_the_deadline(monkeypatch):
    """``started`` in the past: a caller that spent 9.9 s already gets one attempt, not five."""
    from backends import base

    clock = [50.0]
    monkeypatch.setattr(base.time, "monotonic", lambda: clock[0])
    calls = []

    def fn():
        calls.append(1)
        raise OSError("down")

    retry = Retry(attempts=5, base_delay=0.2, deadline=10.0, retry_on=(OSError,),
                  sleep=lambda s: None)
    with pytest.raises(BackendUnavailableError, match="put failed after 2 attempts in 9.9s"):
        retry.call("put", fn, started=clock[0] - 9.9, tried=1)
    assert calls == [1]
