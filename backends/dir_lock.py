"""The single-writer lock of a data directory: one store process writes a directory at a time.

Two kinds, chosen by :func:`lock_dir` from the medium: :class:`DirLock`, an ``flock`` on a local
directory (the kernel drops it when the process dies, so a crash never leaves it behind), and
:class:`LeaseLock`, a lock file kept alive by a heartbeat, for a medium without ``flock`` (an
``nfs://`` directory).  Both raise :class:`~backends.base.StoreLockedError` naming the holder and
the fix when the directory is taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING

from .base import StoreLockedError

if TYPE_CHECKING:
    from .media import Medium

LOCK_NAME = "LOCK"
#: a lease lock whose heartbeat is older than this many seconds is stale (see LeaseLock)
LEASE_SECONDS = 30.0


class DirLock:
    """An exclusive ``flock`` on ``DIR/LOCK``: one writer process per data directory.

    The kernel drops the lock when the process dies (even by SIGKILL), so a crash never leaves a
    stale lock behind.
    """

    def __init__(self, backend: str, path: str) -> None:
        self.path = os.path.join(path, LOCK_NAME)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = ""
            with contextlib.suppress(OSError):
                holder = os.pread(self.fd, 32, 0).decode(errors="replace").strip()
            os.close(self.fd)
            raise StoreLockedError(
                f"backend {backend!r}: data directory {path} is locked by another process"
                + (f" (pid {holder})" if holder else "")
                + "; close that store first or use another --opt path=DIR"
            ) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


class LeaseLock:
    """Single-writer lock for a medium without ``flock`` (an ``nfs://`` directory).

    Semantics:

    * **Taking it**: ``LOCK`` is created atomically-if-absent (``Medium.create_exclusive``: a hard
      link on NFS) holding JSON ``{pid, host, token, heartbeat, lease}``.
    * **Holding it**: a daemon thread rewrites ``LOCK`` (atomic rename) with a fresh ``heartbeat``
      wall-clock time every ``lease / 6`` seconds, after checking the token is still ours; if it
      is not, :attr:`lost` is set and the heartbeat stops (reported in the backend's stats).
    * **Breaking it**: only when stale — its holder ran on this host and that pid is gone (a
      crashed or SIGKILLed writer: broken at once), or its heartbeat is older than its lease
      (another host; assumes clocks agree to well within the lease, 30 s by default).  A live
      holder is never broken.  Two openers breaking the same stale lock at the same instant could
      both win (no compare-and-delete over NFS); the next heartbeat of the loser notices
      (:attr:`lost`).
    * **Releasing it**: the heartbeat stops and ``LOCK`` is deleted if it is still ours.
    """

    def __init__(self, backend: str, medium: "Medium", lease: float = LEASE_SECONDS) -> None:
        self.backend, self.medium, self.lease = backend, medium, lease
        self.host, self.pid, self.token = socket.gethostname(), os.getpid(), uuid.uuid4().hex
        self.lost = False
        self.heartbeat_errors = 0
        self._stop = threading.Event()
        for _ in range(5):
            if medium.create_exclusive(LOCK_NAME, self._record()):
                break
            holder = self._holder()
            if holder is None:
                continue  # released meanwhile: try again
            why = self._stale(holder)
            if why is None:
                age = time.time() - float(holder.get("heartbeat", 0))
                raise StoreLockedError(
                    f"backend {backend!r}: data directory {medium.path} is locked by another "
                    f"process (pid {holder.get('pid')} on {holder.get('host')}, heartbeat "
                    f"{age:.0f} s ago); close that store first or use another --opt path=DIR (a "
                    f"dead holder's lock is broken after {self.lease:.0f} s, at once on its host)")
            medium.delete(LOCK_NAME)  # stale: break it
        else:
            raise StoreLockedError(f"backend {backend!r}: could not take the lock of {medium.path}: "
                                   f"other processes keep taking it; try again")
        self._thread = threading.Thread(target=self._beat, name=f"{backend}-lock", daemon=True)
        self._thread.start()

    def _record(self) -> bytes:
        return json.dumps({"pid": self.pid, "host": self.host, "token": self.token,
                           "heartbeat": time.time(), "lease": self.lease}).encode()

    def _holder(self) -> dict | None:
        """The current lock record; ``None`` if there is none, ``{}`` if it is unreadable."""
        try:
            raw = self.medium.read_file(LOCK_NAME)
        except FileNotFoundError:
            return None
        try:
            rec = json.loads(raw)
            return rec if isinstance(rec, dict) else {}
        except ValueError:
            return {}

    def _stale(self, holder: dict) -> str | None:
        """Why ``holder``'s lock may be broken, or ``None`` while it is alive."""
        try:
            pid, beat = int(holder["pid"]), float(holder["heartbeat"])
            lease = float(holder.get("lease", self.lease))
        except (KeyError, TypeError, ValueError):
            return "unreadable lock record"
        if holder.get("host") == self.host and pid != self.pid:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return f"pid {pid} on this host is gone"
            except PermissionError:
                pass
        if time.time() - beat > lease:
            return f"heartbeat {time.time() - beat:.0f} s old (lease {lease:.0f} s)"
        return None

    def _beat(self) -> None:
        while not self._stop.wait(self.lease / 6):
            try:
                holder = self._holder()
                if not holder or holder.get("token") != self.token:
                    self.lost = True
                    return
                self.medium.write_atomic(LOCK_NAME, self._record(), tmp=f"{LOCK_NAME}.hb")
            except Exception:  # server away: the next beat retries; the lease covers the gap
                self.heartbeat_errors += 1

    def release(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(Exception):
            holder = self._holder()
            if holder and holder.get("token") == self.token:
                self.medium.delete(LOCK_NAME)


def lock_dir(backend: str, medium: "Medium") -> "DirLock | LeaseLock":
    """The single-writer lock: ``flock`` on a local directory, a lease file over NFS."""
    if medium.kind == "local":
        return DirLock(backend, medium.root)  # type: ignore[attr-defined]
    return LeaseLock(backend, medium)
