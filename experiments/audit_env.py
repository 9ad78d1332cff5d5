"""Where an audited store keeps its data: a plain directory or the lossy mount, and the audit's
private servers (own ports, own state directory, never the shared servers)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

from backends import CkptError
from backends.media.local import fsync_dir


class EnvError(CkptError):
    """The lossy mount or a private server could not be set up."""


class Medium:
    """Where the store's files live: a plain directory (sigkill) or the lossy mount."""

    def __init__(self, workdir: Path, lossy: bool, fs_model: str = "posix") -> None:
        self.fs = None
        if lossy:
            from services import lossyfs

            reason = lossyfs.available()
            if reason:
                raise EnvError(f"a power-loss audit needs the lossy file system: {reason}")
            try:
                self.fs = lossyfs.LossyFS.mount(workdir / "lossy-backing", workdir / "mnt",
                                                metadata=fs_model)
            except lossyfs.LossyFSError as exc:
                raise EnvError(str(exc)) from exc
            self.root = workdir / "mnt"
            # the store's parent directory is durable before the audit starts
            (self.root / "data").mkdir()
            fsync_dir(self.root / "data")
            fsync_dir(self.root)
            self.root = self.root / "data"
        else:
            self.root = workdir / "data"
            self.root.mkdir(parents=True, exist_ok=True)

    def power_off(self, seed: int, torn: bool = False) -> dict[str, Any]:
        return self.fs.power_off(torn=torn, seed=seed) if self.fs else {}

    def power_on(self) -> None:
        if self.fs:
            self.fs.power_on()

    def sync(self) -> None:
        if self.fs:
            self.fs.sync()

    def close(self) -> None:
        if self.fs:
            self.fs.unmount()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateServer:
    """A server of our own for one audit: own ports, its whole state directory (data, logs, pid
    file) under ``state``, which for a power-loss audit is on the lossy mount."""

    def __init__(self, name: str, state: Path, durability: str) -> None:
        import services

        self.services = services
        self.name = name
        self.state = state
        state.mkdir(parents=True, exist_ok=True)
        fsync_dir(state.parent)  # the state directory is there before the server starts
        self.seen: set[int] = set()
        if name == "redis":
            self.opts: dict[str, Any] = {"port": _free_port(), "durability": durability}
        elif name == "minio":
            port = _free_port()
            while not _port_free(port + 1):
                port = _free_port()
            self.opts = {"port": port}
        else:
            self.opts = {"zk_port": _free_port(), "thrift_port": _free_port(),
                         "thrift2_port": _free_port(), "hbase_root": "local"}

    def start(self) -> None:
        try:
            self.services.up([self.name], state_dir=self.state, **self.opts)
        except self.services.ServiceError as exc:
            raise EnvError(f"the audit's private {self.name} server did not start: {exc}") \
                from exc
        finally:
            self.seen |= self._pids()

    def _pids(self) -> set[int]:
        """The pids in the pid files under the state directory (master and gateways)."""
        root = self.state / self.name
        out = set()
        with contextlib.suppress(OSError):  # not the data directory: the server writes there
            for pid_file in [root / "pid", *(d / "pid" for d in root.iterdir()
                                              if d.name != "data" and d.is_dir())]:
                with contextlib.suppress(OSError, ValueError):
                    out.add(int(pid_file.read_text().strip()))
        return out

    def _ours(self, pid: int) -> bool:
        """Whether ``pid`` still runs one of this server's programs (not a reused pid)."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            return False
        ports = [str(p) for p in self.opts.values() if isinstance(p, int)]
        return str(self.state) in cmdline or any(f":{p}" in cmdline for p in ports)

    def kill(self) -> None:
        """SIGKILL every process of the server (HBase: master and both gateways), found by the
        pid files under its state directory, read while they can still be read."""
        self.seen |= self._pids()
        for pid in sorted(self.seen):
            if self._ours(pid):
                for kill in (os.killpg, os.kill):
                    with contextlib.suppress(OSError):
                        kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(self._ours(p) for p in self.seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.seen = {p for p in self.seen if self._ours(p)}

    def options(self, namespace: str) -> dict[str, Any]:
        return self.services.client_options(self.name, namespace, state_dir=self.state)

    def stop(self) -> None:
        """Stop the server; anything of it still running after that (its pid file lost in a
        cut) is killed."""
        with contextlib.suppress(Exception):
            self.services.down([self.name], state_dir=self.state)
        self.kill()


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


