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
