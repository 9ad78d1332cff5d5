"""What every managed server shares: its state directory, pid file, start/stop and readiness wait.

A service module (``redis.py``, ``hbase.py``, ``minio.py``, later ``nfs.py``) exposes:

    NAME: str
    install(log) -> None                          idempotent; caches in the usual user caches
    start(ctx: ServiceContext, **opts) -> dict    start if not running, wait until it answers;
                                                  returns status(ctx)
    stop(ctx) -> None                             graceful stop (TERM, then KILL after a timeout)
    status(ctx) -> dict                           {"name", "running", "pid", "address", "version",
                                                   "settings": {...durability-relevant...}}
    client_options(ctx, namespace: str) -> dict   backend options for talking to the running
                                                  server, isolated under ``namespace`` (a key
                                                  prefix, table or bucket prefix)

Errors for the user are :class:`ServiceError` with a message naming the problem and the fix.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence


class ServiceError(RuntimeError):
    """A service could not be installed, started or reached; the message says how to fix it."""


def default_state_root() -> Path:
    """``$CKPTBENCH_STATE`` or ``<project>/.state``: data, logs and pid files of every server."""
    env = os.environ.get("CKPTBENCH_STATE")
    if env:
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parents[1] / ".state"


def cache_dir(*parts: str) -> Path:
    """A directory under the user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``)/ckptbench."""
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    path = base.joinpath("ckptbench", *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class ServiceContext:
    """Where one service keeps its things: ``<state root>/<name>/{data,logs}`` and its pid file."""

    name: str
    root: Path

    @classmethod
    def for_service(cls, name: str, root: Path | None = None) -> "ServiceContext":
        ctx = cls(name, (root or default_state_root()) / name)
        ctx.data_dir.mkdir(parents=True, exist_ok=True)
        ctx.log_dir.mkdir(parents=True, exist_ok=True)
        return ctx

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @property
    def pid_file(self) -> Path:
        return self.root / "pid"

    @property
    def started_file(self) -> Path:
        """When the process of :attr:`pid_file` started (:func:`started_at`), beside it."""
        return self.root / "pid.started"

    def read_pid(self) -> int | None:
        """The recorded pid if that process is still alive, else ``None``.

        A pid file outlives its process after a crash or a ``kill``, and pids are reused (also
        as thread ids of other processes, which ``kill`` reaches too): a live pid counts only
        if it started when the recorded process did, so a stop or kill never reaches a process
        this state directory did not start (another state directory's server, say)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if not pid_alive(pid):
            return None
        with contextlib.suppress(OSError, ValueError):
            if int(self.started_file.read_text().strip()) != started_at(pid):
                return None
        return pid

    def forget_pid(self) -> None:
        """Remove the pid file (and its start time): the process is gone for good."""
        for path in (self.pid_file, self.started_file):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def apt_install(name: str, packages: Sequence[str], log: Callable[[str], None],
                error: type[Exception] = ServiceError) -> None:
    """``apt-get install -y PACKAGES`` as root (``name`` prefixes the messages), with one
    ``apt-get update`` and a retry when the first try fails (a fresh machine's package lists
    are empty or stale); apt keeps what it downloaded in its own cache.  ``error`` (naming the
    command and apt's own message) when it cannot, or when we are not root."""
    cmd = ["apt-get", "install", "-y", *packages]
    if os.geteuid() != 0:
        raise error(f"{name}: {packages[0]} is not installed; install it with `sudo "
                    f"{' '.join(cmd)}`")
    log(f"{name}: installing {', '.join(packages)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise error(f"{name}: `{' '.join(cmd)}` failed:\n{done.stderr[-2000:]}\n"
                        f"fix the apt error above or install {' '.join(packages)} by hand")


def log(msg: str) -> None:
    print(f"[services] {msg}", file=sys.stderr, flush=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still answers kill(0); look at its state
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def started_at(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat``), or ``None`` if it is
    gone: orders the starts of two live processes."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    return None


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError):
        with socket.create_connection((host, port), timeout=timeout):
            return True
    return False


def require_port_free(name: str, host: str, port: int, wait: float = 0.0) -> None:
    """Fail unless ``port`` is free; ``wait`` seconds of grace let a just-killed server's threads
    finish exiting (a SIGKILLed thread-group leader shows as a zombie before its sockets close)."""
    deadline = time.monotonic() + wait
    while port_open(host, port) and time.monotonic() < deadline:
        time.sleep(0.1)
    if port_open(host, port):
        raise ServiceError(
            f"{name}: port {host}:{port} is already taken by another process; stop it "
            f"(e.g. `ss -ltnp 'sport = :{port}'` shows who) or choose another port"
        )


def spawn(ctx: ServiceContext, argv: Sequence[str], env: dict | None = None,
          cwd: str | os.PathLike | None = None) -> int:
    """Start ``argv`` detached (own session, survives the CLI), output in ``logs/<name>.log``."""
    logfile = open(ctx.log_dir / f"{ctx.name}.log", "ab")
    try:
        proc = subprocess.Popen(
            list(argv), stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, cwd=cwd, start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise ServiceError(f"{ctx.name}: cannot run {argv[0]!r}: {exc.strerror}") from exc
    finally:
        logfile.close()
    ctx.started_file.write_text(str(started_at(proc.pid)))
    ctx.pid_file.write_text(str(proc.pid))
    return proc.pid


def wait_until(ctx: ServiceContext, ready: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``ready`` until true; fail with the log's tail if the process died or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if ctx.read_pid() is None:
            raise ServiceError(f"{ctx.name} exited while starting; {tail_log(ctx)}")
        time.sleep(0.2)
    raise ServiceError(f"{ctx.name}: {what} not ready after {timeout:.0f}s; {tail_log(ctx)}")


def start_and_wait(ctx: ServiceContext, ready: Callable[[], bool], timeout: float, what: str,
                   stop: Callable[[ServiceContext], None],
                   status: Callable[[ServiceContext], dict],
                   companions: Sequence[tuple[str, ServiceContext]] = ()) -> dict:
    """The end of a fresh start: wait until ``ready``, then return ``status(ctx)``.

    ``companions`` are the other processes the start spawned beside the service's own (label,
    context), e.g. a DataNode or a gateway; one that exits fails the start at once with its own
    log's tail instead of waiting out ``timeout``.  On any failure ``stop(ctx)`` ends everything
    the start left running before the error goes up, so a failed start holds no ports and a
    retry begins from nothing."""

    def all_ready() -> bool:
        for label, companion in companions:
            if companion.read_pid() is None:
                raise ServiceError(f"{ctx.name}: the {label} exited while starting; "
                                   f"{tail_log(companion)}")
        return ready()

    try:
        wait_until(ctx, all_ready, timeout, what)
    except ServiceError:
        stop(ctx)
        raise
    return status(ctx)


def tail_log(ctx: ServiceContext, lines: int = 15) -> str:
    path = ctx.log_dir / f"{ctx.name}.log"
    with contextlib.suppress(OSError):
        text = path.read_text(errors="replace").splitlines()[-lines:]
        return f"last lines of {path}:\n" + "\n".join(text)
    return f"no log at {path}"


def stop_pid(ctx: ServiceContext, timeout: float = 20.0) -> None:
    """SIGTERM the service's process group, SIGKILL it after ``timeout``; forget the pid."""
    stop_pids([ctx], timeout)


def stop_pids(ctxs: Sequence[ServiceContext], timeout: float = 20.0) -> None:
    """:func:`stop_pid` for several processes at once: all get SIGTERM first and share one
    ``timeout``, so stopping many costs the slowest one's shutdown, not the sum."""
    pids = [pid for pid in (ctx.read_pid() for ctx in ctxs) if pid is not None]
    for pid in pids:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if pid_alive(pid):
            _signal_group(pid, signal.SIGKILL)
    for ctx in ctxs:
        ctx.forget_pid()


def kill_pid(ctx: ServiceContext) -> None:
    """SIGKILL the service (a real crash, for durability audits); the pid file stays for status."""
    pid = ctx.read_pid()
    if pid is not None:
        _signal_group(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


# ------------------------------------------------------------------ remembered start options
def save_options(ctx: ServiceContext, opts: dict) -> None:
    """Remember how the service was started (port, policy...) for ``client_options``/``restart``."""
    import json

    (ctx.root / "options.json").write_text(json.dumps(opts, sort_keys=True))


def load_options(ctx: ServiceContext) -> dict:
    """The options of the last start, or ``{}`` if it was never started from this state dir."""
    import json

    with contextlib.suppress(OSError, ValueError):
        opts = json.loads((ctx.root / "options.json").read_text())
        if isinstance(opts, dict):
            return opts
    return {}
