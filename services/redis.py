"""Redis: Debian's ``redis-server``, started by us on 127.0.0.1 with our own command-line config.

No config file and no systemd unit: every setting that matters for durability is on the command
line (``--appendonly yes --appendfsync POLICY --save ""``), so ``status`` can state exactly what a
benchmark measured.  The AOF policy of a running server is changed live with ``CONFIG SET`` when
``up`` asks for another one (no restart, no data loss).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from .common import (
    ServiceContext,
    ServiceError,
    apt_install,
    load_options,
    require_port_free,
    save_options,
    spawn,
    stop_pid,
    wait_until,
)

NAME = "redis"
HOST = "127.0.0.1"
DEFAULT_PORT = 6379
POLICIES = ("always", "everysec", "no")
DEFAULT_POLICY = "everysec"


def install(log) -> None:
    """``apt-get install redis-server redis-tools`` if ``redis-server`` is missing."""
    if shutil.which("redis-server"):
        return
    apt_install("redis", ["redis-server", "redis-tools"], log)
    # Debian enables its own unit; we run our own server, so keep the packaged one off.
    if shutil.which("systemctl"):
        subprocess.run(["systemctl", "disable", "--now", "redis-server"], capture_output=True)
    if not shutil.which("redis-server"):
        raise ServiceError("redis: apt-get finished but redis-server is not on PATH")


def _client(port: int, timeout: float = 2.0):
    import redis

    return redis.Redis(host=HOST, port=port, socket_timeout=timeout,
                       socket_connect_timeout=timeout, retry=None)


def _answers(port: int) -> bool:
    import redis

    try:
        return bool(_client(port, 1.0).ping())
    except (redis.RedisError, OSError):  # refused, or still LOADING the AOF
        return False


def _options(ctx: ServiceContext) -> dict:
    opts = {"port": DEFAULT_PORT, "durability": DEFAULT_POLICY}
    opts.update(load_options(ctx))
    return opts


def start(ctx: ServiceContext, durability: str | None = None, port: int | None = None,
          **_ignored: Any) -> dict:
    """Start (or reuse) the server; ``durability`` is the AOF ``appendfsync`` policy.

    Reusing a running server keeps its policy and port unless they are given: a test or a
    benchmark that merely needs Redis up must not change what the run measures."""
    if durability is not None and durability not in POLICIES:
        raise ServiceError(f"redis: durability {durability!r} is not one of {', '.join(POLICIES)}")
    if ctx.read_pid() is not None:
        running = _options(ctx)
        port = int(port or running["port"])
        policy = durability or running.get("durability") or DEFAULT_POLICY
        if int(running["port"]) != port:
            raise ServiceError(
                f"redis: already running on {HOST}:{running['port']}; "
                f"run `bench services down redis` first to move it to port {port}"
            )
        wait_until(ctx, lambda: _answers(port), 60, f"redis on {HOST}:{port}")
        client = _client(port)
        if client.config_get("appendfsync").get("appendfsync") != policy:
            client.config_set("appendfsync", policy)
        save_options(ctx, {"port": port, "durability": policy})
        return status(ctx)
    policy = durability or DEFAULT_POLICY
    port = int(port or DEFAULT_PORT)
    require_port_free(NAME, HOST, port, wait=5)
    argv = [
        shutil.which("redis-server") or "redis-server",
        "--bind", HOST, "--port", str(port), "--dir", str(ctx.data_dir),
        "--appendonly", "yes", "--appendfsync", policy, "--save", "",
        "--daemonize", "no", "--protected-mode", "yes",
        "--logfile", "",  # to stdout, i.e. logs/redis.log
    ]
    save_options(ctx, {"port": port, "durability": policy})
    spawn(ctx, argv)
    wait_until(ctx, lambda: _answers(port), 120, f"redis on {HOST}:{port}")
    return status(ctx)


def stop(ctx: ServiceContext) -> None:
    """SIGTERM: Redis fsyncs its AOF and exits."""
    stop_pid(ctx)


def status(ctx: ServiceContext) -> dict:
    import redis

    opts = _options(ctx)
    port = int(opts["port"])
    out: dict[str, Any] = {
        "name": NAME, "running": False, "pid": ctx.read_pid(), "address": f"{HOST}:{port}",
        "version": None, "settings": {"appendfsync": opts["durability"]},
    }
    if out["pid"] is None:
        return out
    try:
        client = _client(port)
        info = client.info("server")
        persistence = client.info("persistence")
        conf = {k: v for k, v in client.config_get("*").items()  # redis-py decodes CONFIG
                if k in ("appendonly", "appendfsync", "save", "dir", "bind")}
    except (redis.RedisError, OSError) as exc:
        out["error"] = str(exc)
        return out
    out["running"] = True
    out["version"] = info.get("redis_version")
    out["settings"] = {
        **conf,
        "aof_enabled": persistence.get("aof_enabled"),
        "aof_last_write_status": persistence.get("aof_last_write_status"),
    }
    return out


def client_options(ctx: ServiceContext, namespace: str) -> dict:
    """Options for ``backends.redis`` isolated under the key prefix ``ckpt:<namespace>:``."""
    return {"host": HOST, "port": int(_options(ctx)["port"]), "prefix": f"ckpt:{namespace}:"}
