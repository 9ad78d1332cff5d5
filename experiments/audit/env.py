"""Where an audited store keeps its data: a plain directory or the lossy mount, and the audit's
private servers (own ports, own state directory, never the shared servers).

HBase on HDFS is two services in one state directory: a private HDFS (NameNode and DataNode,
their name and block directories under ``state/hdfs``) and HBase with its root directory and WAL
on it (``hbase_root`` set to that HDFS's URL; its ZooKeeper and temporary files under
``state/hbase``).  All of it lives on the lossy mount, so a power cut reaches the DataNode's block
files and the NameNode's edit log as well as HBase's own files.  The services start in that
order, and a kill takes every JVM of both at once."""

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

    def arm(self, pattern: str, count: int) -> None:
        """Cut the power right after the ``count``-th fsync of a file matching ``pattern``."""
        self.fs.arm(pattern, count)

    def down(self) -> bool:
        """Whether the power is off (an armed cut went off)."""
        return bool(self.fs and self.fs.stats().get("down"))

    def file_syncs(self) -> int | None:
        """How many file fsyncs the lossy file system has seen (None on a plain directory):
        the evidence that a store's sync reaches the disk as an fsync."""
        return self.fs.stats().get("file_syncs") if self.fs else None

    def global_syncs(self) -> int | None:
        """How many ``sync(2)`` calls reached the lossy file system (through the sync gate)."""
        return self.fs.stats().get("global_syncs") if self.fs else None

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

    def __init__(self, name: str, state: Path, durability: str,
                 hbase_root: str = "local", sync_gate: Path | None = None) -> None:
        """``sync_gate``: the lossy mount's backing directory, for a server whose durability
        rests on ``sync(2)`` (MinIO in mode ``sync``), which FUSE alone never sees."""
        import services

        self.services = services
        self.name = name
        #: the services this server is made of, in start order (a server on HDFS: both)
        self.names = ["hdfs", name] if hbase_root == "hdfs" else [name]
        self.up_opts: dict[str, dict[str, Any]] = {}
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
            self.opts = {"port": port, "fs_osync": durability == "sync",
                         "sync_gate": str(sync_gate) if sync_gate and durability == "sync"
                         else None}
        else:
            self.opts = {"zk_port": _free_port(), "thrift_port": _free_port(),
                         "thrift2_port": _free_port(), "hbase_root": hbase_root,
                         # on HDFS, hbase:meta and the master's region hsync their WAL too: a
                         # power cut must not take the audited table's region assignment
                         "wal_hsync": hbase_root == "hdfs"}
        if "hdfs" in self.names:
            self.up_opts["hdfs"] = {k: _free_port() for k in (
                "port", "http_port", "dn_port", "dn_http_port", "dn_ipc_port")}
        self.up_opts[name] = self.opts

    @property
    def ports(self) -> list[int]:
        return [p for opts in self.up_opts.values() for p in opts.values()
                if isinstance(p, int) and not isinstance(p, bool)]

    def start(self) -> None:
        """Start the services in order (HDFS before the HBase on it); a restart after a cut
        finds the same ports and directories."""
        for name in self.names:
            try:
                self.services.up([name], state_dir=self.state, **self.up_opts[name])
            except self.services.ServiceError as exc:
                raise EnvError(f"the audit's private {name} server did not start: {exc}") \
                    from exc
            finally:
                self.seen |= self._pids()

    def _pids(self) -> set[int]:
        """The pids in the pid files under the state directory (HBase's master and gateways,
        HDFS's NameNode and DataNode)."""
        out = set()
        for name in self.names:
            root = self.state / name
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
        ports = [str(p) for p in self.ports]
        return str(self.state) in cmdline or any(f":{p}" in cmdline for p in ports)

    def kill(self) -> None:
        """SIGKILL every process of the server (HBase: master and both gateways; on HDFS also
        the NameNode and DataNode), found by the pid files under its state directory, read
        while they can still be read."""
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
        """Stop the server (HBase before the HDFS under it); anything of it still running after
        that (its pid file lost in a cut) is killed."""
        for name in reversed(self.names):
            with contextlib.suppress(Exception):
                self.services.down([name], state_dir=self.state)
        self.kill()


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


