"""The FUSE side of the lossy file system: a passthrough to ``<backing>/tree`` that tells
:class:`~services.lossyfs.model.Durability` about every change, plus the control socket.

Run by :mod:`services.lossyfs` as its own process (``python -m services.lossyfs serve``); nothing
else imports it, so ``mfusepy`` (and libfuse3) are needed only where a mount is made.

Passthrough rules:

* Every operation takes one lock, shared with the crash, so a crash is one instant between two
  operations.  Real I/O goes to the backing file system's page cache; no real ``fsync`` is ever
  issued, since durability is what the model says, not what the backing disk does.
* ``O_DIRECT`` is stripped when opening the backing file, and a write-only open is read-write
  there (the data still reaches the model the
  same way).  A write through a handle opened with ``O_SYNC`` or ``O_DSYNC`` counts as a write
  followed by ``fdatasync`` of that file.  ``O_APPEND`` writes land at the backing file's end.
* ``hard_remove``: an unlinked open file stays readable and writable through its handle (it
  lives in limbo).  Hard links are refused (``EPERM``).  Attribute and entry caching is off, so
  the kernel asks again after a crash.
* After :meth:`LossyOperations.power_off` every operation fails with ``EIO`` until
  :meth:`LossyOperations.power_on`; handles opened before the crash stay dead (``EIO``).
* :meth:`LossyOperations.arm` cuts the power from inside: right after the n-th ``fsync`` of a
  file whose path matches a pattern, before that ``fsync`` returns.  It is a fail point in a
  program we do not own (a DataNode between its checksum ``fsync`` and its block ``fsync``).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import itertools
import json
import os
import random
import socket
import stat
import threading
from typing import Any

import mfusepy as fuse

from .model import Durability

_STAT_KEYS = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns",
              "st_mtime_ns", "st_ctime_ns", "st_blocks", "st_blksize")
_SYNC_FLAGS = os.O_SYNC | getattr(os, "O_DSYNC", 0)
_FALLOC_KEEP_SIZE = 0x01
_FALLOC_PUNCH_HOLE = 0x02
_FALLOC_ZERO_RANGE = 0x10


def _attrs(st: os.stat_result) -> dict[str, Any]:
    out = {k: getattr(st, k) for k in _STAT_KEYS if hasattr(st, k)}
    for name in ("atime", "mtime", "ctime"):
        out[f"st_{name}"] = out.pop(f"st_{name}_ns")
    return out


class _Handle:
    __slots__ = ("fd", "ino", "sync", "append", "generation", "path")

    def __init__(self, fd: int, ino: int, flags: int, generation: int, path: str) -> None:
        """``path``: the file's path under the mount when it was opened (an armed cut matches it)."""
        self.fd, self.ino, self.generation, self.path = fd, ino, generation, path
        self.sync = bool(flags & _SYNC_FLAGS)
        self.append = bool(flags & os.O_APPEND)


def _oserror(func):
    """Turn an ``OSError`` of the backing file system into the errno FUSE returns."""
    def wrapped(self, *args, **kwargs):
        try:
            return func(self, *args, **kwargs)
        except fuse.FuseOSError:
            raise
        except OSError as exc:
            raise fuse.FuseOSError(exc.errno or errno.EIO) from None
    wrapped.__name__ = func.__name__
    return wrapped


class LossyOperations(fuse.Operations):
    use_ns = True

    def __init__(self, backing: str, metadata: str = "posix") -> None:
        self.model = Durability(backing, metadata)
        self.tree = self.model.tree
        self._mutex = threading.RLock()
        self.handles: dict[int, _Handle] = {}
        self._fh = itertools.count(1)
        self.generation = 0
        self.down = False
        self.counters = {"writes": 0, "written_bytes": 0, "sync_writes": 0, "global_syncs": 0}
        #: an armed cut: (path pattern, matching fsyncs left, torn, seed)
        self.armed: tuple[str, int, bool, int | None] | None = None
        #: what the armed cut dropped, once it went off (power_off then returns it)
        self.tripped: dict[str, Any] | None = None

    # ------------------------------------------------------------------------------ helpers
    def _path(self, path: str) -> str:
        return self.tree + path if path != "/" else self.tree

    def _up(self) -> None:
        if self.down:
            raise fuse.FuseOSError(errno.EIO)

    def _register(self, fd: int, ino: int, flags: int, full: str) -> int:
        """A new handle number (never a reused descriptor number: a handle from before a
        crash must not alias a new one)."""
        fh = next(self._fh)
        self.handles[fh] = _Handle(fd, ino, flags, self.generation, full[len(self.tree):] or "/")
        return fh

    def _synced(self, handle: _Handle) -> None:
        """``handle``'s file is durable; an armed cut whose pattern it matches counts down."""
        self.model.synced_file(handle.ino)
        if self.armed is None or not fnmatch.fnmatchcase(handle.path, self.armed[0]):
            return
        pattern, left, torn, seed = self.armed
        if left > 1:
            self.armed = (pattern, left - 1, torn, seed)
            return
        self.armed = None
        self.tripped = self._power_off(torn, seed)

    def _handle(self, fh: int) -> _Handle:
        handle = self.handles.get(fh)
        if handle is None or handle.generation != self.generation:
            raise fuse.FuseOSError(errno.EIO)
        return handle

    def init_with_config(self, conn_info, config_3) -> None:
        if config_3 is not None:
            config_3.use_ino = 1
            config_3.hard_remove = 1
            config_3.nullpath_ok = 1
            config_3.entry_timeout = 0
            config_3.negative_timeout = 0
            config_3.attr_timeout = 0

    # -------------------------------------------------------------------------- power cuts
    def power_off(self, torn: bool = False, seed: int | None = None) -> dict[str, Any]:
        """The power cut: drop what is not durable; every operation fails until power_on.
        After an armed cut went off, the power is already off: what that cut dropped."""
        with self._mutex:
            if self.down and self.tripped is not None:
                return self.tripped
            return self._power_off(torn, seed)

    def _power_off(self, torn: bool, seed: int | None) -> dict[str, Any]:
        self.down = True
        self.generation += 1
        return self.model.crash(torn=torn, rng=random.Random(seed))

    def arm(self, pattern: str, count: int = 1, torn: bool = False,
            seed: int | None = None) -> None:
        """Cut the power right after the ``count``-th ``fsync`` (or synchronous write) of a file
        whose path under the mount matches ``pattern`` (``fnmatch``; ``*`` spans directories),
        before that call returns to the program."""
        if count < 1:
            raise ValueError(f"an armed cut needs a count of at least 1, not {count}")
        with self._mutex:
            self._up()
            self.armed, self.tripped = (pattern, count, torn, seed), None

    def power_on(self) -> None:
        with self._mutex:
            self.armed = self.tripped = None
            for fh in [fh for fh, h in self.handles.items() if h.generation != self.generation]:
                os.close(self.handles.pop(fh).fd)
            self.down = False

    def sync_all(self) -> None:
        """``sync(2)`` (through the control socket): everything durable, unless the power is off."""
        with self._mutex:
            if self.down:
                return
            self.counters["global_syncs"] += 1
            self.model.sync_all()

    def stats(self) -> dict[str, Any]:
        with self._mutex:
            return {**self.model.counters, **self.counters, **self.model.pending(),
                    "down": self.down, "open_handles": len(self.handles),
                    "armed": self.armed is not None, "tripped": self.tripped is not None}

    # -------------------------------------------------------------------------- attributes
    @_oserror
    def getattr(self, path, fh=None):
        with self._mutex:
            self._up()
            if fh is not None and fh in self.handles:
                return _attrs(os.fstat(self._handle(fh).fd))
            if path is None:
                raise fuse.FuseOSError(errno.EBADF)
            return _attrs(os.lstat(self._path(path)))

    @_oserror
    def access(self, path, amode):
        with self._mutex:
            self._up()
            if not os.access(self._path(path), amode):
                raise fuse.FuseOSError(errno.EACCES)
            return 0

    @_oserror
    def chmod(self, path, mode):
        with self._mutex:
            self._up()
            os.chmod(self._path(path), mode)
            return 0

    @_oserror
    def chown(self, path, uid, gid):
        with self._mutex:
            self._up()
            os.chown(self._path(path), uid, gid, follow_symlinks=False)
            return 0

    @_oserror
    def utimens(self, path, times=None):
        with self._mutex:
            self._up()
            os.utime(self._path(path), ns=times, follow_symlinks=False)
            return 0

    @_oserror
    def statfs(self, path):
        st = os.statvfs(self.tree)
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                                           "f_favail", "f_ffree", "f_files", "f_flag",
                                           "f_frsize", "f_namemax")}

    # --------------------------------------------------------------------------- directories
    @_oserror
    def opendir(self, path):
        with self._mutex:
            self._up()
            full = self._path(path)
            fd = os.open(full, os.O_RDONLY | os.O_DIRECTORY)
            return self._register(fd, os.fstat(fd).st_ino, 0, full)

    def releasedir(self, path, fh):
        return self.release(path, fh)

    @_oserror
    def readdir(self, path, fh):
        with self._mutex:
            self._up()
            out = [".", ".."]
            with os.scandir(self._handle(fh).fd) as it:
                for entry in it:
                    st = entry.stat(follow_symlinks=False)
                    out.append((entry.name, {"st_mode": st.st_mode, "st_ino": st.st_ino}, 0))
            return out

    @_oserror
    def mkdir(self, path, mode):
        with self._mutex:
            self._up()
            full = self._path(path)
            self.model.before_dir_change(os.path.dirname(full))
            os.mkdir(full, mode)
            self.model.created_dir(os.lstat(full).st_ino)
            return 0

    @_oserror
    def rmdir(self, path):
        with self._mutex:
            self._up()
            full = self._path(path)
            if os.listdir(full):
                raise fuse.FuseOSError(errno.ENOTEMPTY)
            self.model.before_dir_change(os.path.dirname(full))
            self.model.to_limbo(full)
            return 0

    @_oserror
    def fsyncdir(self, path, datasync, fh):
        with self._mutex:
            self._up()
            self.model.synced_dir(self._handle(fh).ino)
            return 0

    # ----------------------------------------------------------------------------- namespace
    @_oserror
    def unlink(self, path):
        with self._mutex:
            self._up()
            full = self._path(path)
            self.model.before_dir_change(os.path.dirname(full))
            self.model.to_limbo(full)
            return 0

    @_oserror
    def rename(self, old, new, flags=0):
        with self._mutex:
            self._up()
            src, dst = self._path(old), self._path(new)
            if flags & ~1:  # RENAME_EXCHANGE, RENAME_WHITEOUT
                raise fuse.FuseOSError(errno.EINVAL)
            os.lstat(src)
            target = None
            try:
                target = os.lstat(dst)
            except FileNotFoundError:
                pass
            if target is not None:
                if flags & 1:  # RENAME_NOREPLACE
                    raise fuse.FuseOSError(errno.EEXIST)
                if os.path.samestat(target, os.lstat(src)):
                    return 0
                if stat.S_ISDIR(target.st_mode) and os.listdir(dst):
                    raise fuse.FuseOSError(errno.ENOTEMPTY)
            self.model.before_dir_change(os.path.dirname(src))
            self.model.before_dir_change(os.path.dirname(dst))
            if target is not None:
                self.model.to_limbo(dst)
            os.rename(src, dst)
            return 0

    @_oserror
    def symlink(self, target, source):
        with self._mutex:
            self._up()
            full = self._path(target)
            self.model.before_dir_change(os.path.dirname(full))
            os.symlink(source, full)
            return 0

    @_oserror
    def readlink(self, path):
        with self._mutex:
            self._up()
            return os.readlink(self._path(path))

    def link(self, target, source):
        raise fuse.FuseOSError(errno.EPERM)

    @_oserror
    def mknod(self, path, mode, dev):
        with self._mutex:
            self._up()
            full = self._path(path)
            self.model.before_dir_change(os.path.dirname(full))
            os.mknod(full, mode, dev)
            if stat.S_ISREG(mode):
                self.model.created_file(os.lstat(full).st_ino)
            return 0

    # --------------------------------------------------------------------------------- files
    def _open(self, full: str, flags: int, mode: int = 0o644) -> int:
        backing_flags = flags & ~(getattr(os, "O_DIRECT", 0) | os.O_TRUNC)
        if flags & os.O_ACCMODE != os.O_RDONLY:  # the undo log reads what a write replaces
            backing_flags = (backing_flags & ~os.O_ACCMODE) | os.O_RDWR
        fd = os.open(full, backing_flags, mode)
        st = os.fstat(fd)
        if flags & os.O_TRUNC and st.st_size and (flags & os.O_ACCMODE) != os.O_RDONLY:
            self.model.before_truncate(fd, st.st_ino, 0)
            os.ftruncate(fd, 0)
        return self._register(fd, st.st_ino, flags, full)

    @_oserror
    def open(self, path, flags):
        with self._mutex:
            self._up()
            return self._open(self._path(path), flags & ~os.O_CREAT)

    @_oserror
    def create(self, path, mode, flags=os.O_WRONLY):
        with self._mutex:
            self._up()
            full = self._path(path)
            existed = os.path.lexists(full)
            if not existed:
                self.model.before_dir_change(os.path.dirname(full))
            fh = self._open(full, flags | os.O_CREAT, mode)
            if not existed:
                self.model.created_file(self.handles[fh].ino)
            return fh

    @_oserror
    def read(self, path, size, offset, fh):
        with self._mutex:
            self._up()
            return os.pread(self._handle(fh).fd, size, offset)

    @_oserror
    def write(self, path, data, offset, fh):
        with self._mutex:
            self._up()
            handle = self._handle(fh)
            if handle.append:  # the backing fd appends whatever the offset says
                offset = os.fstat(handle.fd).st_size
            self.model.before_write(handle.fd, handle.ino, offset, len(data))
            written = os.pwrite(handle.fd, data, offset)
            self.counters["writes"] += 1
            self.counters["written_bytes"] += written
            if handle.sync:
                self.counters["sync_writes"] += 1
                self._synced(handle)
            else:
                self.model.after_write(handle.ino, offset, bytes(data[:written]))
            return written

    @_oserror
    def truncate(self, path, length, fh=None):
        with self._mutex:
            self._up()
            if fh is not None:
                handle = self._handle(fh)
                self.model.before_truncate(handle.fd, handle.ino, length)
                os.ftruncate(handle.fd, length)
                return 0
            fd = os.open(self._path(path), os.O_RDWR)
            try:
                self.model.before_truncate(fd, os.fstat(fd).st_ino, length)
                os.ftruncate(fd, length)
            finally:
                os.close(fd)
            return 0

    @_oserror
    def fallocate(self, path, mode, offset, size, fh):
        with self._mutex:
            self._up()
            handle = self._handle(fh)
            if mode & ~_FALLOC_KEEP_SIZE:
                raise fuse.FuseOSError(errno.EOPNOTSUPP)  # punch/zero/collapse: not modelled
            st = os.fstat(handle.fd)
            if mode & _FALLOC_KEEP_SIZE:
                return 0  # allocation only: no visible change
            self.model.before_write(handle.fd, handle.ino, st.st_size, 0)  # records the size
            os.posix_fallocate(handle.fd, offset, size)
            return 0

    @_oserror
    def fsync(self, path, datasync, fh):
        with self._mutex:
            self._up()
            self._synced(self._handle(fh))
            return 0

    def flush(self, path, fh):
        return 0  # close(2) succeeds even on a dead handle; nothing is buffered here

    def release(self, path, fh):
        with self._mutex:
            handle = self.handles.pop(fh, None)
            if handle is not None:
                os.close(handle.fd)
            return 0


class _Fuse(fuse.FUSE):
    """mfusepy drops the file handle of ``truncate``; an unlinked open file needs it."""

    def truncate_fuse_3(self, path, length, fip):
        fh = fip.contents.fh if fip else None
        decoded = None if path is None else path.decode(self.encoding, self.errors)
        return self.operations.truncate(decoded, length, fh)


# ------------------------------------------------------------------------------ control socket
def _control_loop(ops: LossyOperations, sock_path: str, metadata: str) -> None:
    """One JSON request per connection: ``{"cmd": "crash"|"power_off"|"power_on"|"arm"|"sync"|
    "stats"}``."""
    with contextlib.suppress(OSError):
        os.unlink(sock_path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path)
    server.listen(8)
    while True:
        conn, _ = server.accept()
        with conn:
            try:
                request = json.loads(conn.makefile("r").readline() or "{}")
                cmd = request.get("cmd")
                if cmd == "crash":
                    reply = {"ok": True, "dropped": ops.power_off(bool(request.get("torn")),
                                                                 request.get("seed"))}
                    if not request.get("hold"):
                        ops.power_on()
                elif cmd == "power_off":
                    reply = {"ok": True, "dropped": ops.power_off(bool(request.get("torn")),
                                                                 request.get("seed"))}
                elif cmd == "arm":
                    ops.arm(str(request["pattern"]), int(request.get("count", 1)),
                            bool(request.get("torn")), request.get("seed"))
                    reply = {"ok": True}
                elif cmd == "power_on":
                    ops.power_on()
                    reply = {"ok": True}
                elif cmd == "sync":
                    ops.sync_all()
                    reply = {"ok": True}
                elif cmd == "stats":
                    reply = {"ok": True, "stats": {**ops.stats(), "metadata": metadata}}
                else:
                    reply = {"ok": False, "error": f"unknown command {cmd!r}"}
            except Exception as exc:  # noqa: BLE001 - reported to the client
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            with contextlib.suppress(OSError):  # a client killed while it waited (the sync gate)
                conn.sendall((json.dumps(reply) + "\n").encode())


def serve(backing: str, mountpoint: str, control: str, metadata: str = "posix") -> None:
    """Mount and serve until unmounted (``fusermount3 -u``)."""
    ops = LossyOperations(backing, metadata)
    threading.Thread(target=_control_loop, args=(ops, control, metadata), daemon=True,
                     name="lossyfs-control").start()
    _Fuse(ops, mountpoint, foreground=True, fsname="lossyfs", subtype="lossyfs",
          default_permissions=True)
