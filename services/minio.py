"""MinIO: a single-node S3 server built from source with ``go install`` and run on 127.0.0.1.

MinIO is in neither Debian nor PyPI and its repository is archived upstream, so we pin one module
version (the proxy has no semver tags for MinIO's ``RELEASE.*`` tags; the pin is the pseudo-version
of the last commit) and build it once into ``~/.cache/ckptbench/bin`` (Go module cache in
``$GOPATH/pkg/mod``).  The build takes several minutes the first time.

Credentials come from ``CKPTBENCH_MINIO_USER`` / ``CKPTBENCH_MINIO_PASSWORD`` (defaults
``ckptbench`` / ``ckptbench-secret``).  Durability: MinIO writes object metadata/inline data with
``O_DSYNC`` or ``O_DIRECT`` + ``fdatasync`` before it acknowledges a PUT, then renames it into
place; with ``MINIO_FS_OSYNC=on`` (our default; ``bench services up minio --minio-fs-osync off``
turns it off) it calls ``sync(2)`` after that rename, so the rename is durable too when the PUT is
answered.  Without it a power cut can undo the latest renames (docs/audit.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .common import (
    ServiceContext,
    ServiceError,
    cache_dir,
    load_options,
    require_port_free,
    save_options,
    spawn,
    stop_pid,
    wait_until,
)

NAME = "minio"
HOST = "127.0.0.1"
DEFAULT_PORT = 9000
MODULE = "github.com/minio/minio"
#: last commit of the archived repository (2026-02-12); verified to build with Go 1.26
VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
DEFAULT_USER = "ckptbench"
DEFAULT_PASSWORD = "ckptbench-secret"
BUCKET = "ckptbench"


def credentials() -> tuple[str, str]:
    """(access key, secret key) the server is started with and clients use."""
    user = os.environ.get("CKPTBENCH_MINIO_USER", DEFAULT_USER)
    password = os.environ.get("CKPTBENCH_MINIO_PASSWORD", DEFAULT_PASSWORD)
    if len(user) < 3 or len(password) < 8:
        raise ServiceError(
            "minio: CKPTBENCH_MINIO_USER needs >= 3 and CKPTBENCH_MINIO_PASSWORD >= 8 characters"
        )
    return user, password


def binary() -> Path:
    return cache_dir("bin") / "minio"


def _go() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    return "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None


def install(log) -> None:
    """``go install github.com/minio/minio@VERSION`` into the cache, unless already built."""
    if binary().exists():
        return
    go = _go()
    if go is None:
        raise ServiceError(
            "minio: building MinIO needs Go >= 1.24 and `go` is not on PATH; install Go "
            "(https://go.dev/dl, or /usr/local/go) and run `bench services up minio` again"
        )
    build_log = cache_dir("build") / "minio-go-install.log"
    log(f"minio: building {MODULE}@{VERSION} with {go} (several minutes; log: {build_log})")
    env = {**os.environ, "GOBIN": str(binary().parent), "GOFLAGS": "-buildvcs=false"}
    with open(build_log, "wb") as out:
        done = subprocess.run([go, "install", f"{MODULE}@{VERSION}"], env=env,
                              stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0 or not binary().exists():
        tail = build_log.read_text(errors="replace").splitlines()[-15:]
        raise ServiceError(
            f"minio: `go install {MODULE}@{VERSION}` failed (exit {done.returncode}):\n"
            + "\n".join(tail) + "\nfix the Go error above (Go >= 1.24, Go module proxy reachable)"
        )


def _options(ctx: ServiceContext) -> dict:
    opts = {"port": DEFAULT_PORT}
    opts.update(load_options(ctx))
    return opts


def _live(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/minio/health/live", timeout=1) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def start(ctx: ServiceContext, port: int | None = None, fs_osync: bool | None = None,
          sync_gate: str | None = None, **_ignored: Any) -> dict:
    """Start (or reuse) the server on ``port`` (S3 API) and ``port + 1`` (console).

    ``fs_osync``: MinIO's ``MINIO_FS_OSYNC``, a ``sync(2)`` after each object is renamed into
    place (default: on, unless the environment sets ``MINIO_FS_OSYNC``; the backend's ``sync``
    mode needs it).  ``sync_gate``: the backing directory of a lossy mount whose ``sync`` each of
    MinIO's ``sync(2)`` calls must reach (:mod:`services.lossyfs.syncgate`; audits only)."""
    port = int(port or DEFAULT_PORT)
    if ctx.read_pid() is not None:
        running = int(_options(ctx)["port"])
        if running != port:
            raise ServiceError(
                f"minio: already running on {HOST}:{running}; "
                f"run `bench services down minio` first to move it to port {port}"
            )
        wait_until(ctx, lambda: _live(port), 60, f"minio on {HOST}:{port}")
        return status(ctx)
    require_port_free(NAME, HOST, port, wait=5)
    require_port_free(NAME, HOST, port + 1, wait=5)
    if not binary().exists():
        raise ServiceError(f"minio: {binary()} is missing; run `bench services up minio`")
    if fs_osync is None:
        fs_osync = os.environ.get("MINIO_FS_OSYNC", "on").lower() in ("on", "true", "1", "yes")
    user, password = credentials()
    env = {**os.environ, "MINIO_ROOT_USER": user, "MINIO_ROOT_PASSWORD": password,
           "MINIO_UPDATE": "off", "MINIO_BROWSER": "on",
           "MINIO_FS_OSYNC": "on" if fs_osync else "off"}
    argv = [str(binary()), "server", str(ctx.data_dir), "--address", f"{HOST}:{port}",
            "--console-address", f"{HOST}:{port + 1}", "--quiet"]
    if sync_gate:
        argv = [sys.executable, "-m", "services.lossyfs", "gate", "--backing", str(sync_gate),
                "--", *argv]
    save_options(ctx, {"port": port, "fs_osync": env["MINIO_FS_OSYNC"],
                       "sync_gate": str(sync_gate or "")})
    spawn(ctx, argv, env=env, cwd=str(Path(__file__).resolve().parents[1]))
    wait_until(ctx, lambda: _live(port), 120, f"minio on {HOST}:{port}")
    return status(ctx)


def stop(ctx: ServiceContext) -> None:
    stop_pid(ctx)


def _version() -> str:
    # a `go install` build reports "DEVELOPMENT.GOGET"; the pinned module version says more
    return f"{MODULE}@{VERSION}"


def status(ctx: ServiceContext) -> dict:
    port = int(_options(ctx)["port"])
    pid = ctx.read_pid()
    running = pid is not None and _live(port)
    return {
        "name": NAME, "running": running, "pid": pid, "address": f"{HOST}:{port}",
        "version": _version() if binary().exists() else None,
        "settings": {
            "endpoint": f"http://{HOST}:{port}",
            "console": f"http://{HOST}:{port + 1}",
            "data_dir": str(ctx.data_dir),
            "ack_after": "O_DSYNC / O_DIRECT+fdatasync of the object's data and xl.meta, its "
                         "rename into place" + (", sync(2)" if _options(ctx).get("fs_osync") == "on"
                                                else " (not synced)"),
            "MINIO_FS_OSYNC": _options(ctx).get("fs_osync", "off"),
        },
    }


def client_options(ctx: ServiceContext, namespace: str) -> dict:
    """Options for ``backends.minio``: bucket ``ckptbench``, objects under ``<namespace>/``."""
    user, password = credentials()
    return {
        "endpoint": f"http://{HOST}:{int(_options(ctx)['port'])}",
        "bucket": BUCKET, "prefix": f"{namespace}/",
        "access_key": user, "secret_key": password,
    }
