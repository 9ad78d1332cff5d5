"""File-system helpers shared by the file backends (``default_fs``, ``indexed_fs``).

One place for: preparing the data directory with a clear error, the single-writer advisory lock,
directory fsync, and turning ``ENOSPC``/``EDQUOT``/``EACCES`` into the interface's typed errors.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from typing import Iterator

from .base import BackendUnavailableError, BadOptionError, StorageFullError, StoreLockedError

LOCK_NAME = "LOCK"


def prepare_dir(backend: str, path: str | None) -> str:
    """Create ``path`` if needed and check it is a writable directory."""
    if not path:
        raise BadOptionError(f"backend {backend!r} needs option path=DIR (the data directory)")
    path = os.path.abspath(os.path.expanduser(str(path)))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise BackendUnavailableError(
            f"backend {backend!r}: cannot create data directory {path}: {exc.strerror}; "
            f"choose a writable path with --opt path=DIR"
        ) from exc
    if not os.path.isdir(path):
        raise BackendUnavailableError(f"backend {backend!r}: {path} is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise BackendUnavailableError(
            f"backend {backend!r}: data directory {path} is not writable; "
            f"fix its permissions or choose another with --opt path=DIR"
        )
    return path


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


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written: a nearly full disk gives a *short* write first and
    ``ENOSPC`` only on the next call, so a single unchecked write can acknowledge half a record."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def fsync_dir(path: str) -> None:
    """Make a directory's entries (creates, renames, unlinks) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def storage_errors(backend: str, path: str) -> Iterator[None]:
    """Map a full disk to :class:`StorageFullError` and other OS errors to a clear message."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StorageFullError(
                f"backend {backend!r}: no space left under {path}; the write was not "
                f"acknowledged and stored data is intact — free space or use another --opt path=DIR"
            ) from exc
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise BackendUnavailableError(
                f"backend {backend!r}: cannot write under {path}: {exc.strerror}"
            ) from exc
        raise
