"""The local/POSIX medium: thin wrappers over ``os.*`` (also right for a kernel NFS mount).

Nothing is added on the hot path: an append is one ``os.write`` (looped only on a short write) and
a sync one ``os.fdatasync``; backends that want raw descriptors use :attr:`LocalAppendFile.fd`.
Opening one prepares its directory (:func:`prepare_dir`: created if missing, checked writable,
with a message naming the fix); :func:`fsync_dir` makes a directory's entries durable.
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable

from ..base import BackendUnavailableError, BadOptionError
from ..ledger import Ledger
from .medium import AppendFile, Medium, ReadFile, map_os_error, parts_of


def prepare_dir(backend: str, path: str | None) -> str:
    """Create ``path`` if needed and check it is a writable directory; its absolute path.

    Each directory it creates is made durable (its parent fsynced): a store's first
    acknowledged writes must not vanish with a directory entry a power cut dropped."""
    if not path:
        raise BadOptionError(f"backend {backend!r} needs option path=DIR (the data directory)")
    if "://" in str(path):
        raise BadOptionError(f"backend {backend!r} needs a local directory, not {path!r}; "
                             f"give --opt path=DIR")
    path = os.path.abspath(os.path.expanduser(str(path)))
    blocker = _file_in_the_way(path)
    if blocker is not None:
        what = "is a file" if blocker == path else f"cannot be created: {blocker} is a file"
        raise BackendUnavailableError(
            f"backend {backend!r}: data directory {path} {what}, not a directory; give a "
            f"directory (missing ones are created) with --opt path=DIR"
        )
    created = []  # the directories this call creates, deepest last
    parent = path
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        created.insert(0, parent)
        parent = os.path.dirname(parent)
    try:
        os.makedirs(path, exist_ok=True)
        for new in created:  # a new directory's entry is durable only once its parent is synced
            with contextlib.suppress(OSError):
                fsync_dir(os.path.dirname(new))
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


def _file_in_the_way(path: str) -> str | None:
    """The first existing component of ``path`` (from the root) that is not a directory."""
    parent = os.path.dirname(path)
    if parent != path:
        found = _file_in_the_way(parent)
        if found is not None:
            return found
    return path if os.path.exists(path) and not os.path.isdir(path) else None


def fsync_dir(path: str) -> None:
    """Make a directory's entries (creates, renames, unlinks) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalAppendFile(AppendFile):
    def __init__(self, path: str, label: str, ledger: Ledger) -> None:
        self.path, self.label, self.ledger = path, label, ledger
        ledger.record_shared("open")
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size

    def append(self, data: bytes) -> int:
        offset = self.size
        try:
            self.ledger.record_shared("write", len(data))
            written = os.write(self.fd, data)
            while written < len(data):
                self.ledger.record_shared("write")
                written += os.write(self.fd, memoryview(data)[written:])
        except OSError as exc:
            raise map_os_error(exc, self.label, self.path) from exc
        self.size = offset + len(data)
        return offset

    def sync(self) -> None:
        try:
            self.ledger.record_shared("fsync")
            os.fdatasync(self.fd)
        except OSError as exc:
            raise map_os_error(exc, self.label, self.path) from exc

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class LocalReadFile(ReadFile):
    def __init__(self, path: str, ledger: Ledger) -> None:
        self.ledger = ledger
        ledger.record_shared("open")
        self.fd = os.open(path, os.O_RDONLY)

    def pread(self, offset: int, size: int) -> bytes:
        data = os.pread(self.fd, size, offset)
        self.ledger.record_shared("read", 0, len(data))
        return data

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def memory_backed(path: str) -> bool:
    """Whether ``path`` lies on a file system kept in memory (tmpfs, ramfs), whose pages no
    eviction can make cold: the longest mount point of ``/proc/mounts`` containing it (True
    when that cannot be read: then nothing may be claimed cold)."""
    path, best, fstype = os.path.realpath(path), "", ""
    try:
        with open("/proc/mounts") as f:
            for line in f:
                _dev, mnt, kind = line.split()[:3]
                mnt = mnt.replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, fstype = mnt, kind
    except OSError:
        return True
    return fstype in ("tmpfs", "ramfs")


def disk_directory() -> str:
    """A directory on a disk for a run's files: the system's temporary directory, unless that is
    kept in memory (then the user's cache), so what is written there is measured on a device."""
    import tempfile

    base = tempfile.gettempdir()
    if memory_backed(base):
        base = os.path.join(os.path.expanduser("~"), ".cache", "ckptbench")
        os.makedirs(base, exist_ok=True)
    return base


def local_bytes_held(path: str) -> int:
    """The blocks allocated to the files under ``path`` (``du``'s figure, not the logical sizes:
    LMDB's map file, for one, is as long as its map but holds only the pages written)."""
    total = 0
    for top, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
            except FileNotFoundError:  # removed while we walked: holds nothing now
                continue
    return total


class LocalMedium(Medium):
    kind = "local"

    def __init__(self, path: str, label: str = "medium") -> None:
        super().__init__(path, label)
        self.root = prepare_dir(label, path)

    def full(self, rel: str) -> str:
        """The absolute path of ``rel`` (for backends that use ``os`` directly)."""
        return os.path.join(self.root, rel) if rel else self.root

    def open_append(self, rel: str) -> LocalAppendFile:
        return LocalAppendFile(self.full(rel), self.label, self.ledger)

    def open_read(self, rel: str) -> LocalReadFile:
        return LocalReadFile(self.full(rel), self.ledger)

    def read_file(self, rel: str) -> bytes:
        self.ledger.record_shared("open")
        with open(self.full(rel), "rb") as f:
            data = f.read()
        self.ledger.record_shared("read", 0, len(data))
        return data

    def write_atomic(self, rel: str, data, sync: bool = True, tmp: str | None = None,
                     step: Callable[[str], None] | None = None) -> None:
        final = self.full(rel)
        tmp = self.full(tmp) if tmp else f"{final}.tmp"
        ledger = self.ledger
        try:
            ledger.record_shared("open")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                try:
                    for i, part in enumerate(parts_of(data)):
                        if i and step:
                            step("mid_write")
                        view = memoryview(part)
                        while view:
                            ledger.record_shared("write", len(view))
                            view = view[os.write(fd, view):]
                    if sync:
                        ledger.record_shared("fsync")
                        os.fdatasync(fd)
                finally:
                    os.close(fd)
                if step:
                    step("before_rename")
                ledger.record_shared("rename")
                os.replace(tmp, final)
            except BaseException:
                with contextlib.suppress(OSError):
                    ledger.record_shared("unlink")
                    os.unlink(tmp)
                raise
            if sync:
                self._fsync_dir(os.path.dirname(final))
        except OSError as exc:
            raise map_os_error(exc, self.label, final) from exc

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        ledger = self.ledger
        try:
            ledger.record_shared("open")
            fd = os.open(self.full(rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            ledger.record_shared("write", len(data))
            os.write(fd, data)
            ledger.record_shared("fsync")
            os.fsync(fd)
        finally:
            os.close(fd)
        self._fsync_dir(os.path.dirname(self.full(rel)))
        return True

    def _fsync_dir(self, path: str) -> None:
        """:func:`fsync_dir`, counted (an ``open`` and an ``fsync``)."""
        self.ledger.record_shared("open")
        self.ledger.record_shared("fsync")
        fsync_dir(path)

    def rename(self, src: str, dst: str) -> None:
        self.ledger.record_shared("rename")
        os.replace(self.full(src), self.full(dst))

    def listdir(self, rel: str = "") -> list[str]:
        self.ledger.record_shared("list")
        return os.listdir(self.full(rel))

    def list_files(self, rel: str = "") -> list[str]:
        self.ledger.record_shared("list")
        with os.scandir(self.full(rel)) as it:  # the entry types come with the listing
            return [e.name for e in it if e.is_file()]

    def delete(self, rel: str, missing_ok: bool = True) -> None:
        try:
            self.ledger.record_shared("unlink")
            os.unlink(self.full(rel))
        except FileNotFoundError:
            if not missing_ok:
                raise

    def size(self, rel: str) -> int:
        return os.stat(self.full(rel)).st_size

    def bytes_held(self, rel: str = "") -> int:
        return local_bytes_held(self.full(rel))

    def evict(self, rel: str = "") -> str | None:
        """``fdatasync`` (dirty pages cannot be dropped) then ``POSIX_FADV_DONTNEED`` every file
        under ``rel``: no privilege needed, and no other process' cache is touched."""
        top = self.full(rel)
        if memory_backed(top):
            return "the directory is on a memory file system (tmpfs): its pages are its data"
        for folder, _dirs, files in os.walk(top):
            for name in files:
                try:
                    fd = os.open(os.path.join(folder, name), os.O_RDONLY)
                except FileNotFoundError:
                    continue
                try:
                    os.fdatasync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        return None

    def truncate(self, rel: str, size: int) -> None:
        os.truncate(self.full(rel), size)

    def makedirs(self, rel: str) -> None:
        os.makedirs(self.full(rel), exist_ok=True)

    def exists(self, rel: str) -> bool:
        return os.path.exists(self.full(rel))

    def sync_dir(self, rel: str = "") -> None:
        self._fsync_dir(self.full(rel))

    def sync_all(self) -> None:
        self.ledger.record_shared("sync")
        os.sync()
