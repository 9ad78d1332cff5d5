"""The storage medium interface: what a file backend may do with a directory, and the errors.

A :class:`Medium` is a directory tree on some storage; every path is relative to its root
(created on open).  Operations, the same semantics on every medium:

* ``open_append(p)`` -> :class:`AppendFile`: ``append(data) -> offset`` (not yet durable),
  ``sync()`` (durable), ``size``, ``close()``; ``open_read(p)`` -> :class:`ReadFile`:
  ``pread(offset, n)``, ``size()``, ``close()``.
* ``write_atomic(p, data)`` (temp + sync + rename + directory sync; ``data`` may be a list of
  parts), ``create_exclusive(p, data)`` (atomic create-if-absent, for lock files), ``read_file``,
  ``rename``, ``listdir``, ``list_files`` (regular files only), ``delete``, ``size``,
  ``truncate``, ``makedirs``, ``exists``, ``sync_dir``, ``sync_all``, and ``copy`` (a byte range
  of one file into a new file, built on the others).

Errors: a missing file is :class:`FileNotFoundError` (as with ``os``); a full medium is
:class:`~backends.base.StorageFullError`; an unreachable server, a timeout or a permission
problem is :class:`~backends.base.BackendUnavailableError` naming the path and the fix
(:func:`map_os_error`).  A backend that does its own I/O on the medium's files (raw fds) gets the
same translation from :class:`storage_errors`.
"""

from __future__ import annotations

import abc
import errno
import threading
from typing import Callable

from ..base import BackendUnavailableError, StorageFullError
from ..ledger import Ledger


def map_os_error(exc: OSError, label: str, where: str) -> Exception:
    """The typed error for an ``OSError`` on ``where`` (the caller raises it ``from exc``)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageFullError(
            f"{label}: no space left under {where}; the write was not acknowledged and stored "
            f"data is intact — free space or use another --opt path=DIR")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return BackendUnavailableError(f"{label}: cannot write under {where}: "
                                       f"{exc.strerror or exc}; fix its permissions or choose "
                                       f"another --opt path=DIR")
    return exc


class storage_errors:
    """``with storage_errors(backend, path):`` raises an ``OSError`` inside as the typed error
    :func:`map_os_error` gives (full medium, permissions), naming the backend; others pass
    through.  A class, not ``@contextmanager``: it wraps appends and syncs on the write path,
    where a generator-based manager adds a call and a generator per use."""

    __slots__ = ("label", "path")

    def __init__(self, backend: str, path: str) -> None:
        self.label, self.path = f"backend {backend!r}", path

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ, exc, tb) -> bool:
        if exc is None or not isinstance(exc, OSError):
            return False
        where = self.path
        if isinstance(exc.filename, str) and exc.filename.startswith(self.path):
            where = exc.filename  # the one file at fault, where the error knows it
        typed = map_os_error(exc, self.label, where)
        if typed is exc:
            return False
        raise typed from exc


def parts_of(data: "bytes | list[bytes]") -> list:
    """``write_atomic``'s data as a list of parts."""
    return data if isinstance(data, list) else [data]


class AppendFile(abc.ABC):
    """A file opened for appending; ``append`` returns the offset the bytes were written at."""

    size: int

    @abc.abstractmethod
    def append(self, data: bytes) -> int: ...

    @abc.abstractmethod
    def sync(self) -> None:
        """Make every appended byte durable (fdatasync / NFS WRITE+COMMIT)."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> "AppendFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BufferedAppendFile(AppendFile):
    """An append file on a remote medium: appends gather in memory and one :meth:`sync` pushes
    them all in one request (an NFS WRITE+COMMIT, a WebHDFS APPEND), so the records of writers
    that share a sync reach the server together: group commit over the network.

    Invariants: bytes ``[0, durable)`` are on the server, ``[durable, size)`` are pending in
    order; one push is in flight per file (``_io_lock``), so pushes land in offset order.  A push
    that fails keeps the bytes it did not make durable at the head of the pending list, so the next
    sync retries them and no acknowledged byte is skipped.  A subclass implements :meth:`_push`
    (and may release resources in :meth:`_release`); it calls :meth:`_start_buffer` once it
    knows the file's size on the server.
    """

    #: pending bytes pushed without waiting for sync(), like writeback
    flush_bytes: int = 1 << 20

    def _start_buffer(self, medium: "Medium", rel: str, size: int) -> None:
        self.medium, self.rel = medium, rel
        self.size = size
        self.durable = size
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._buf_lock = threading.Lock()  # _pending, _pending_bytes, size
        self._io_lock = threading.Lock()  # one push in flight per file, in offset order
        medium._appenders[rel] = self

    @abc.abstractmethod
    def _push(self, data: bytes) -> None:
        """Make ``data`` durable at offset ``durable``.  It may advance ``durable`` itself over
        a prefix it finds already there (a retried request); the rest is retried on failure."""

    def _release(self) -> None:
        """Free what the file holds on the server side (after its last sync)."""

    def append(self, data: bytes) -> int:
        with self._buf_lock:
            offset = self.size
            self._pending.append(bytes(data))
            self._pending_bytes += len(data)
            self.size += len(data)
            full = self._pending_bytes >= self.flush_bytes
        if full:
            self.sync()
        return offset

    def sync(self) -> None:
        with self._io_lock:
            with self._buf_lock:
                if not self._pending:
                    return
                chunks, self._pending = self._pending, []
                self._pending_bytes = 0
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            start = self.durable
            try:
                self._push(data)
            except BaseException:
                rest = data[self.durable - start:]
                with self._buf_lock:  # not durable: keep the bytes for the next sync
                    if rest:
                        self._pending.insert(0, rest)
                        self._pending_bytes += len(rest)
                raise
            self.durable = start + len(data)

    def close(self) -> None:
        try:
            self.sync()
        finally:
            if self.medium._appenders.get(self.rel) is self:
                del self.medium._appenders[self.rel]
            self._release()


class BufferedAppends:
    """For a medium whose appends are :class:`BufferedAppendFile` s: the open appenders by
    path, and :meth:`settle`, which pushes one file's pending appends before a read or a
    metadata operation must see them."""

    _appenders: dict

    def settle(self, rel: str) -> None:
        """Push pending appends of ``rel`` so that reads and metadata see them."""
        appender = self._appenders.get(rel)
        if appender is not None:
            appender.sync()


def push_before_read(medium: "Medium", rel: str, offset: int, size: int) -> None:
    """A read of ``[offset, offset + size)`` of ``rel`` that reaches bytes still pending in an
    open :class:`BufferedAppendFile` pushes them first, so a reader sees every appended byte."""
    appender = medium._appenders.get(rel)
    if appender is not None and offset + size > appender.durable:
        appender.sync()


class ReadFile(abc.ABC):
    """A file opened for positional reads."""

    @abc.abstractmethod
    def pread(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer only at the end of the file)."""

    @abc.abstractmethod
    def size(self) -> int: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> "ReadFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Medium(abc.ABC):
    """A directory tree on some storage; every path is relative to :attr:`root`."""

    kind: str = ""

    def __init__(self, path: str, label: str) -> None:
        self.path = path  # what the user gave, for messages
        self.label = label
        #: what this medium sent: system calls (local), client calls (NFS), HTTP requests
        #: (HDFS); a file store adopts it as its own ledger (:mod:`backends.ledger`)
        self.ledger = Ledger()

    @abc.abstractmethod
    def open_append(self, rel: str) -> AppendFile: ...

    @abc.abstractmethod
    def open_read(self, rel: str) -> ReadFile: ...

    @abc.abstractmethod
    def read_file(self, rel: str) -> bytes: ...

    @abc.abstractmethod
    def write_atomic(self, rel: str, data: "bytes | list[bytes]", sync: bool = True,
                     tmp: str | None = None, step: Callable[[str], None] | None = None) -> None:
        """Replace ``rel`` by ``data`` (bytes, or a list of parts written in order) all-or-nothing:
        temp file ``tmp`` (default ``rel + ".tmp"``; give a unique name when several threads may
        write the same ``rel``), sync, rename, directory sync.  On failure the temp file is removed.
        ``step`` (crash tests' fail points) is called with ``"mid_write"`` between two parts the
        medium writes separately and with ``"before_rename"`` once the temp file is complete
        (and synced when ``sync``)."""

    @abc.abstractmethod
    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Atomically create ``rel`` holding ``data`` if it does not exist; ``False`` if it does."""

    @abc.abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Atomically rename, replacing ``dst``."""

    @abc.abstractmethod
    def listdir(self, rel: str = "") -> list[str]: ...

    def list_files(self, rel: str = "") -> list[str]:
        """The names in directory ``rel`` that are regular files (no directories, devices or
        sockets): what a backend may take for one of its files."""
        return self.listdir(rel)

    def copy(self, src: str, dst: str, start: int = 0, stop: int | None = None,
             chunk: int = 8 << 20) -> int:
        """Copy bytes ``[start, stop)`` of ``src`` (``stop`` None: to its end) into a new file
        ``dst``, all-or-nothing (temp file, sync, rename, directory sync), ``chunk`` bytes in
        memory at a time; return the bytes copied.  Through :meth:`open_read` and
        :meth:`open_append`, so it works wherever those do."""
        tmp = dst + ".tmp"
        self.delete(tmp)
        done = 0
        try:
            with self.open_read(src) as r:
                stop = r.size() if stop is None else stop
                with self.open_append(tmp) as out:
                    pos = start
                    while pos < stop:
                        data = r.pread(pos, min(chunk, stop - pos))
                        if not data:
                            break
                        out.append(data)
                        pos += len(data)
                    out.sync()
                    done = pos - start
            self.rename(tmp, dst)
        except BaseException:
            try:
                self.delete(tmp)
            except OSError:
                pass
            raise
        self.sync_dir(dst.rpartition("/")[0])
        return done

    @abc.abstractmethod
    def delete(self, rel: str, missing_ok: bool = True) -> None: ...

    @abc.abstractmethod
    def size(self, rel: str) -> int: ...

    @abc.abstractmethod
    def truncate(self, rel: str, size: int) -> None: ...

    @abc.abstractmethod
    def makedirs(self, rel: str) -> None: ...

    @abc.abstractmethod
    def exists(self, rel: str) -> bool: ...

    def evict(self, rel: str = "") -> str | None:
        """Drop the files under ``rel`` from this machine's page cache, so the next reads come
        from the device (a restore measured cold); ``None`` when done, else why it cannot be:
        the base answer, for media whose cache is a server's (NFS, HDFS: their servers' page
        cache is not this client's to drop)."""
        return f"{self.kind} keeps its cache in its server"

    def bytes_held(self, rel: str = "") -> int:
        """Bytes the files under directory ``rel`` hold, subdirectories included: what a store
        on this medium costs in space (logical sizes; :class:`LocalMedium` counts the blocks
        allocated, so a sparse file costs what it uses)."""
        files = set(self.list_files(rel))
        total = 0
        for name in self.listdir(rel):
            sub = f"{rel}/{name}" if rel else name
            total += self.size(sub) if name in files else self.bytes_held(sub)
        return total

    @abc.abstractmethod
    def sync_dir(self, rel: str = "") -> None:
        """Make creates/renames/unlinks in directory ``rel`` durable."""

    def sync_all(self) -> None:
        """Make every write made through this medium durable (used on close without per-write
        syncs).  Nothing to do where every write is durable on return (NFS via nfs-rs)."""

    def close(self) -> None:
        """Release connections; idempotent."""

    def __enter__(self) -> "Medium":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"
