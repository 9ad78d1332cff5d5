"""``services.common.start_and_wait``, the end every multi-process start shares, and the pid
files every stop and kill goes by.

Real processes under ``tmp_path`` (``sleep`` as the server, a shell that exits as a companion
that dies while starting): no server, no port, well under a second each.
"""

from __future__ import annotations

import pytest

from services.common import (
    ServiceContext,
    ServiceError,
    kill_pid,
    spawn,
    start_and_wait,
    stop_pid,
)


@pytest.fixture
def ctx(tmp_path):
    ctx = ServiceContext.for_service("svc", tmp_path / "state")
    spawn(ctx, ["sleep", "60"])
    yield ctx
    stop_pid(ctx, timeout=5)


def _stopper(calls: list):
    def stop(ctx: ServiceContext) -> None:
        calls.append(ctx.name)
        stop_pid(ctx, timeout=5)
    return stop


def test_ready_returns_the_status_and_stops_nothing(ctx):
    calls: list = []
    out = start_and_wait(ctx, lambda: True, 5, "svc", _stopper(calls),
                         lambda c: {"name": c.name, "pid": c.read_pid()})
    assert out["name"] == "svc" and out["pid"] is not None
    assert calls == []


def test_a_companion_that_exits_fails_at_once_with_its_log_and_stops_the_service(ctx):
    helper = ServiceContext.for_service("helper", ctx.root)
    spawn(helper, ["sh", "-c", "echo helper-broke; exit 3"])
    calls: list = []
    with pytest.raises(ServiceError) as err:
        start_and_wait(ctx, lambda: False, 30, "svc", _stopper(calls), lambda c: {},
                       companions=[("Helper", helper)])
    assert str(err.value).startswith("svc: the Helper exited while starting; ")
    assert "helper-broke" in str(err.value)
    assert calls == ["svc"] and ctx.read_pid() is None


def test_running_out_of_time_names_what_and_stops_the_service(ctx):
    calls: list = []
    with pytest.raises(ServiceError, match=r"^svc: the thing on :1 not ready after 0s"):
        start_and_wait(ctx, lambda: False, 0.3, "the thing on :1", _stopper(calls), lambda c: {})
    assert calls == ["svc"] and ctx.read_pid() is None


def test_a_pid_file_names_only_the_process_it_was_written_for(ctx, tmp_path):
    """A stale pid file whose pid now belongs to another process (pids and thread ids are
    reused) is no process of this state directory: stop and kill leave that process alone."""
    other = ServiceContext.for_service("other", tmp_path / "elsewhere")
    other.pid_file.write_text(str(ctx.read_pid()))  # the pid of a process `other` never started
    other.started_file.write_text("1")
    assert other.read_pid() is None
    stop_pid(other, timeout=1)
    kill_pid(other)
    assert ctx.read_pid() is not None  # the process `ctx` started still runs
    assert not other.pid_file.exists()
    other.pid_file.write_text(str(ctx.read_pid()))  # a pid file without its start time (an
    assert other.read_pid() == ctx.read_pid()       # older state directory) is taken as it is
