"""A lossy FUSE file system, in the style of LazyFS: a power cut drops everything not fsynced.

Mount one, run a store on it, cut the power, look at what is left::

    with LossyFS.mount("/tmp/x/backing", "/tmp/x/mnt") as fs:
        ...                       # a store writes under /tmp/x/mnt
        fs.power_off()            # the power cut: unsynced data and entries are gone, I/O fails
        ...                       # SIGKILL the writers (they are dead on a real power cut too)
        fs.power_on()             # the "reboot": the mount serves what survived
        # or fs.crash(): power_off + power_on at once

The model (docs/lossyfs.md; :mod:`services.lossyfs.model`): data writes, truncates, creates,
renames, unlinks and mkdirs are kept in a volatile layer; ``fsync``/``fdatasync`` of a file makes
its data and size durable, ``fsync`` of a directory its entries; a write through an ``O_SYNC`` or
``O_DSYNC`` handle is durable when it returns; ``torn=True`` keeps a random prefix of the newest
unsynced write.  The daemon is a separate process (``python -m services.lossyfs serve``) driven
through a unix socket, so crashing it never takes the caller down.

Needs ``/dev/fuse``, ``fusermount3`` (Debian ``fuse3``; :func:`install`) and ``mfusepy``
(the ``lossyfs`` extra).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..common import ServiceError, apt_install

__all__ = ["LossyFS", "LossyFSError", "available", "ensure_available", "install", "is_mounted"]


class LossyFSError(ServiceError):
    """The lossy file system cannot be mounted or driven; the message says how to fix it."""


def available() -> str | None:
    """``None`` if a lossy mount can be made here, else the reason it cannot."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is absent (no FUSE in this kernel or container)"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing; install Debian's fuse3 (`apt-get install -y fuse3`)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"the mfusepy binding is unusable ({exc}); `pip install -e '.[lossyfs]'`"
    return None


def ensure_available(log=print) -> str | None:
    """:func:`available`, after installing ``fuse3`` when that is all that is missing and we are
    root (tests call this, so a fresh CI machine mounts instead of skipping)."""
    reason = available()
    if reason and "fusermount3" in reason and os.path.exists("/dev/fuse") and os.geteuid() == 0:
        try:
            install(log)
        except LossyFSError as exc:
            return str(exc)
        reason = available()
    return reason


def install(log=print) -> None:
    """``apt-get install fuse3`` when ``fusermount3`` is missing (root only); idempotent."""
    if shutil.which("fusermount3"):
        return
    apt_install("lossyfs", ["fuse3"], log, LossyFSError)


def is_mounted(mountpoint: str | os.PathLike) -> bool:
    """Whether ``mountpoint`` is a mount point in ``/proc/self/mounts``."""
    target = os.path.abspath(mountpoint)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == target for line in f if len(line.split()) > 1)


def _unmount(mountpoint: str) -> None:
    if is_mounted(mountpoint):
        done = subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True)
        if done.returncode != 0:  # busy, or the daemon is gone: detach it
            subprocess.run(["fusermount3", "-u", "-z", mountpoint], capture_output=True)


class LossyFS:
    """One mounted lossy file system (its daemon, backing directory and control socket)."""

    def __init__(self, backing: Path, mountpoint: Path,
                 proc: subprocess.Popen | None = None) -> None:
        """``proc``: the daemon, when this process started it (else unmounting ends it)."""
        self.backing, self.mountpoint, self.proc = backing, mountpoint, proc
        self.control = str(backing / "control.sock")

    @classmethod
    def mount(cls, backing: str | os.PathLike, mountpoint: str | os.PathLike,
              metadata: str = "posix", timeout: float = 20.0) -> "LossyFS":
        """Start the daemon serving ``backing`` (created if missing) at ``mountpoint``;
        ``metadata`` is ``posix`` (a directory's entries need its fsync) or ``journal`` (any
        fsync commits every earlier namespace change, as ext4 and XFS do)."""
        if metadata not in ("posix", "journal"):
            raise LossyFSError(f"lossyfs: metadata model {metadata!r} is not posix or journal")
        reason = available()
        if reason:
            raise LossyFSError(f"lossyfs: cannot mount: {reason}")
        backing, mountpoint = Path(backing).resolve(), Path(mountpoint).resolve()
        backing.mkdir(parents=True, exist_ok=True)
        _unmount(str(mountpoint))  # a mount left behind by a daemon that died
        mountpoint.mkdir(parents=True, exist_ok=True)
        log = open(backing / "lossyfs.log", "ab")
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "services.lossyfs", "serve", str(backing), str(mountpoint),
                 "--metadata", metadata],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=str(Path(__file__).resolve().parents[2]), start_new_session=True)
        finally:
            log.close()
        fs = cls(backing, mountpoint, proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = (backing / "lossyfs.log").read_text(errors="replace")[-1500:]
                raise LossyFSError(f"lossyfs: the daemon exited ({proc.returncode}):\n{tail}")
            if is_mounted(mountpoint) and os.path.exists(fs.control):
                try:
                    fs.stats()
                    return fs
                except LossyFSError:
                    pass
            time.sleep(0.05)
        fs.unmount()
        raise LossyFSError(f"lossyfs: {mountpoint} not mounted after {timeout:.0f}s")

    def _call(self, **request: Any) -> dict[str, Any]:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(300)
                sock.connect(self.control)
                sock.sendall((json.dumps(request) + "\n").encode())
                reply = json.loads(sock.makefile("r").readline() or "{}")
        except (OSError, ValueError) as exc:
            raise LossyFSError(f"lossyfs: control socket {self.control}: {exc}") from exc
        if not reply.get("ok"):
            raise LossyFSError(f"lossyfs: {request.get('cmd')} failed: {reply.get('error')}")
        return reply

    def power_off(self, torn: bool = False, seed: int | None = None) -> dict[str, Any]:
        """Cut the power: drop everything not durable; all I/O fails until :meth:`power_on`."""
        return self._call(cmd="power_off", torn=torn, seed=seed)["dropped"]

    def arm(self, pattern: str, count: int = 1, torn: bool = False,
            seed: int | None = None) -> None:
        """Cut the power right after the ``count``-th ``fsync`` of a file whose path under the
        mount matches ``pattern`` (``fnmatch``), before that ``fsync`` returns; ``stats()["down"]``
        says when it went off, and :meth:`power_off` then returns what it dropped."""
        self._call(cmd="arm", pattern=pattern, count=count, torn=torn, seed=seed)

    def power_on(self) -> None:
        """Serve again what survived (handles opened before the cut stay dead)."""
        self._call(cmd="power_on")

    def crash(self, torn: bool = False, seed: int | None = None) -> dict[str, Any]:
        """A power cut and a reboot at once."""
        return self._call(cmd="crash", torn=torn, seed=seed)["dropped"]

    def sync(self) -> None:
        """Make everything durable as it is now, as ``sync(2)`` would on a real disk (FUSE does
        not pass ``sync``/``syncfs`` to its file systems, so this is the only way)."""
        self._call(cmd="sync")

    def stats(self) -> dict[str, Any]:
        return self._call(cmd="stats")["stats"]

    def unmount(self) -> None:
        """Unmount and stop the daemon (lazily if something still has files open)."""
        _unmount(str(self.mountpoint))
        if self.proc is None:
            return
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> "LossyFS":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.unmount()
