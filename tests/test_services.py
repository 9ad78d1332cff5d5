"""``bench services``: the Python API and the command line, with real servers.

A private Redis under ``tmp_path`` on a free port is the guinea pig, so the shared servers other
tests use are never stopped or reconfigured here.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

import services
from services import ServiceError
from bench.services_cli import main as cli_main

pytestmark = [pytest.mark.redis, pytest.mark.server]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def state(tmp_path):
    """A private Redis started through the API; stopped at the end."""
    state_dir = str(tmp_path / "state")
    services.up(["redis"], state_dir=state_dir, port=free_port())
    yield state_dir
    services.down(["redis"], state_dir=state_dir)


def test_up_is_idempotent_and_status_tells_the_settings(state):
    first = services.status(["redis"], state_dir=state)[0]
    port = int(first["address"].rsplit(":", 1)[1])
    second = services.up(["redis"], state_dir=state, port=port)[0]
    assert first["running"] and second["running"]
    assert second["pid"] == first["pid"]
    assert first["address"].startswith("127.0.0.1:")
    assert first["version"]
    assert first["settings"]["appendonly"] == "yes"
    assert first["settings"]["appendfsync"] == "everysec"
    assert first["settings"]["save"] == ""


def test_up_changes_the_aof_policy_live(state):
    pid = services.status(["redis"], state_dir=state)[0]["pid"]
    port = int(services.client_options("redis", "x", state_dir=state)["port"])
    st = services.up(["redis"], state_dir=state, port=port, durability="always")[0]
    assert st["pid"] == pid and st["settings"]["appendfsync"] == "always"
    # restart keeps the policy it was last given
    assert services.restart("redis", state_dir=state)["settings"]["appendfsync"] == "always"


def test_moving_a_running_server_to_another_port_is_a_clear_error(state):
    with pytest.raises(ServiceError, match="services down redis"):
        services.up(["redis"], state_dir=state, port=free_port())


def test_client_options_open_the_backend(state):
    from backends import open_backend

    with open_backend("redis", **services.client_options("redis", "ns", state_dir=state)) as s:
        s.put("k", b"v")
        assert s.stats()["prefix"] == "ckpt:ns:"


@pytest.mark.crash
def test_kill_is_a_crash_and_restart_recovers(state):
    before = services.status(["redis"], state_dir=state)[0]
    services.kill("redis", state_dir=state)
    assert not services.status(["redis"], state_dir=state)[0]["running"]
    after = services.restart("redis", state_dir=state)
    assert after["running"] and after["pid"] != before["pid"]
    assert after["address"] == before["address"]


def test_port_taken_is_a_clear_error(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(ServiceError, match="already taken"):
            services.up(["redis"], state_dir=str(tmp_path / "s"), port=port)


def test_unknown_and_missing_services_are_clear_errors(monkeypatch):
    with pytest.raises(ServiceError, match="unknown service 'nope'.*redis"):
        services.up(["nope"])
    monkeypatch.setitem(services.MODULES, "ghost", "services.ghost_not_written")
    with pytest.raises(ServiceError, match="not available"):
        services.status(["ghost"])


def test_cli_status_json_and_text(state, capsys):
    assert cli_main(["status", "redis", "--json", "--state-dir", state]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["name"] == "redis" and data[0]["running"] is True
    assert cli_main(["status", "redis", "--state-dir", state]) == 0
    assert "listening on 127.0.0.1:" in capsys.readouterr().out


def test_cli_usage_errors(capsys):
    assert cli_main(["up", "redis", "minio", "--port", "1234"]) == 2
    assert cli_main(["kill"]) == 2
    with pytest.raises(SystemExit):
        cli_main(["up", "redis", "--durability", "sometimes"])


def test_cli_runs_as_a_module(state):
    out = subprocess.run(
        [sys.executable, "-m", "bench.services_cli", "status", "redis", "--json",
         "--state-dir", state], capture_output=True, text=True, check=True).stdout
    assert '"running": true' in out  # what scripts/test.sh greps for


def test_reusing_a_running_redis_keeps_its_durability_policy(state):
    """`up` without --durability (every test fixture, every benchmark) must not change what a
    running server was started to measure.  On a private server: the shared one is never
    reconfigured by a test."""
    port = int(services.client_options("redis", "x", state_dir=state)["port"])
    services.up(["redis"], state_dir=state, port=port, durability="always")
    services.up(["redis"], state_dir=state, port=port)
    assert services.status(["redis"], state_dir=state)[0]["settings"]["appendfsync"] == "always"
    services.up(["redis"], state_dir=state, port=port, durability="everysec")
    services.up(["redis"], state_dir=state, port=port)
    assert services.status(["redis"], state_dir=state)[0]["settings"]["appendfsync"] == "everysec"


def test_default_state_directory_is_the_repositorys_own(monkeypatch):
    """Without $CKPTBENCH_STATE the servers keep their files in <repository>/.state."""
    from pathlib import Path

    from services.common import default_state_root

    monkeypatch.delenv("CKPTBENCH_STATE", raising=False)
    assert default_state_root() == Path(__file__).resolve().parents[1] / ".state"
