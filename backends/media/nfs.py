"""The NFS medium: an export reached with the userspace client nfs-rs, no kernel mount needed.

URL: ``nfs://HOST[:PORT]/EXPORT[/DIR...]?version=3|4.1[&nfsport=N&mountport=M][&timeout=S]``
(``timeout``, seconds, default 10, is ours: every RPC wait is bounded, so a dead server gives
:class:`BackendUnavailableError`, never a hang).  The deepest existing directory of the path that
the server lets us mount is mounted, the rest is created with ``mkdir -p``.

Semantics match the local medium: ``append`` buffers in memory (like the page cache) and
``sync`` sends the buffered bytes with one durable nfs-rs ``write_at`` (WRITE, plus COMMIT when
the server answers UNSTABLE); reads, sizes and renames of a file first push its pending appends.
Appends and syncs may come from different threads: a sync takes the pending bytes under a short
lock and sends them with no lock held for appenders, so threads keep appending during the RPC and
the next sync sends all of theirs at once (group commit).  A failed sync puts its bytes back, so
they are retried by the next one (like dirty pages after a writeback error).
After a connection error the next call reconnects, so a restarted server is used again.
"""

from __future__ import annotations

import contextlib
import errno
import posixpath
import threading
import uuid
from typing import Callable, Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..base import BackendUnavailableError, BadOptionError, StorageFullError
from .medium import BufferedAppendFile, BufferedAppends, Medium, ReadFile, parts_of, push_before_read

DEFAULT_TIMEOUT = 10.0
FLUSH_BYTES = 1 << 20  # pending appends pushed without waiting for sync(), like writeback


def _nfs_rs():
    try:
        import nfs_rs
    except ImportError as exc:
        raise BackendUnavailableError(
            "nfs:// paths need the PyPI package nfs-rs; install it with `pip install nfs-rs`"
        ) from exc
    return nfs_rs


class NfsAppendFile(BufferedAppendFile):
    flush_bytes = FLUSH_BYTES

    def __init__(self, medium: "NfsMedium", rel: str) -> None:
        with medium.guard("open", rel):
            medium.client.touch(medium.abs(rel), exist_ok=True)
            size = medium.client.stat(medium.abs(rel)).size
        self._file = None
        self._gen = -1
        self._start_buffer(medium, rel, size)

    def _push(self, data: bytes) -> None:
        m = self.medium
        with m.guard("write", self.rel):
            if self._file is None or self._gen != m.generation:
                self._file = m.client.open(m.abs(self.rel), "r+b")
                self._gen = m.generation
            m.client_write(self._file, data, self.durable)

    def _release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(Exception):
                self._file.close()
            self._file = None


class NfsReadFile(ReadFile):
    def __init__(self, medium: "NfsMedium", rel: str) -> None:
        self.medium, self.rel = medium, rel
        with medium.guard("open", rel):
            self._file = medium.client.open(medium.abs(rel), "rb")
        self._gen = medium.generation

    def pread(self, offset: int, size: int) -> bytes:
        m = self.medium
        push_before_read(m, self.rel, offset, size)
        with m.guard("read", self.rel):
            if self._gen != m.generation:
                self._file = m.client.open(m.abs(self.rel), "rb")
                self._gen = m.generation
            return self._file.read_at(offset, size)

    def size(self) -> int:
        return self.medium.size(self.rel)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._file.close()


class NfsMedium(BufferedAppends, Medium):
    kind = "nfs"

    def __init__(self, url: str, label: str = "medium") -> None:
        super().__init__(url, label)
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        try:
            self.timeout = float(query.pop("timeout", DEFAULT_TIMEOUT))
        except ValueError:
            raise BadOptionError(f"{label}: timeout= in {url} is not a number of seconds") from None
        if not parts.hostname or not parts.path.strip("/"):
            raise BadOptionError(f"{label}: {url} is not nfs://HOST/EXPORT[/DIR]?version=3|4.1")
        self._host = parts.netloc
        self._query = urlencode(query)
        self._path = "/" + parts.path.strip("/")
        self.root = url
        self.generation = 0
        self.client = None
        self._appenders: dict[str, NfsAppendFile] = {}
        self._base = ""
        self._connect_lock = threading.Lock()
        self._connect(create=True)

    # -- connection -----------------------------------------------------------------------
    def _url(self, path: str) -> str:
        return f"nfs://{self._host}{path}" + (f"?{self._query}" if self._query else "")

    def _unavailable(self, what: str, exc: Exception) -> BackendUnavailableError:
        return BackendUnavailableError(
            f"{self.label}: NFS server for {self.path} failed during {what}: {exc}; the "
            f"operation was not acknowledged — is the server running? (`bench services status "
            f"nfs`; start it with `bench services up nfs`)")

    def _connect(self, create: bool = False) -> None:
        """Mount the deepest mountable prefix of the URL path; ``mkdir -p`` the rest."""
        nfs_rs = _nfs_rs()
        path, rest = self._path, []
        while True:
            try:
                client = nfs_rs.Client.connect(self._url(path), connect_timeout=self.timeout,
                                               operation_timeout=self.timeout)
                break
            except (nfs_rs.NfsMountError, nfs_rs.NfsNotFoundError) as exc:
                if path.count("/") <= 1:
                    raise BackendUnavailableError(
                        f"{self.label}: no NFS export of {self.path} can be mounted ({exc}); "
                        f"check the export path (`bench services status nfs` shows it)") from exc
                path, last = posixpath.split(path)
                rest.insert(0, last)
            except nfs_rs.NfsError as exc:
                raise self._unavailable("connect", exc) from exc
        self.client = client
        self.generation += 1
        self._base = "/".join(rest)
        if create and self._base:
            with self.guard("mkdir", ""):
                client.mkdir(self._base, parents=True, exist_ok=True)

    @contextlib.contextmanager
    def guard(self, what: str, rel: str) -> Iterator[None]:
        """Typed errors for one client call; a dead connection is replaced on the next call.
        The call is counted in the ledger as ``what`` (an nfs-rs call: one or more NFS RPCs)."""
        self.ledger.record_shared(what)
        nfs_rs = _nfs_rs()
        if self.client is None:
            with self._connect_lock:
                if self.client is None:
                    self._connect()
        try:
            yield
        except (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError):
            raise
        except nfs_rs.NfsError as exc:
            code = getattr(exc, "errno", None)
            if code in (errno.ENOSPC, errno.EDQUOT) or getattr(exc, "code_name", "") in (
                    "NFS3ERR_NOSPC", "NFS4ERR_NOSPC", "NFS3ERR_DQUOT", "NFS4ERR_DQUOT"):
                raise StorageFullError(
                    f"{self.label}: no space left on the NFS export of {self.path}; the write "
                    f"was not acknowledged and stored data is intact — free space on the "
                    f"server") from exc
            if isinstance(exc, PermissionError):
                raise BackendUnavailableError(
                    f"{self.label}: permission denied on {self.path} ({what} {rel}): {exc}; "
                    f"check the export's access settings") from exc
            self._drop()
            raise self._unavailable(f"{what} {rel}".strip(), exc) from exc

    def _drop(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
        self.client = None

    @staticmethod
    def client_write(file, data: bytes, offset: int) -> None:
        view, done = memoryview(data), 0
        while done < len(data):
            done += file.write_at(view[done:], offset + done)

    def abs(self, rel: str) -> str:
        return posixpath.join(self._base, rel) if self._base else (rel or ".")

    # -- operations -----------------------------------------------------------------------
    def open_append(self, rel: str) -> NfsAppendFile:
        return NfsAppendFile(self, rel)

    def open_read(self, rel: str) -> NfsReadFile:
        self.settle(rel)
        return NfsReadFile(self, rel)

    def read_file(self, rel: str) -> bytes:
        self.settle(rel)
        with self.guard("read", rel):
            with self.client.open(self.abs(rel), "rb") as f:
                return f.read_at(0, self.client.stat(self.abs(rel)).size)

    def write_atomic(self, rel: str, data, sync: bool = True, tmp: str | None = None,
                     step: Callable[[str], None] | None = None) -> None:
        # nfs-rs writes are durable when they return and NFS renames/creates are synchronous
        # on the server, so ``sync`` costs nothing extra here.  Parts are joined: one durable
        # write (one COMMIT) instead of one per part.
        parts = parts_of(data)
        blob = parts[0] if len(parts) == 1 else b"".join(parts)
        tmp = tmp or f"{rel}.tmp"
        with self.guard("write", rel):
            try:
                with self.client.open(self.abs(tmp), "wb") as f:
                    if blob:
                        self.client_write(f, blob, 0)
                if step:  # one WRITE of the joined parts: no "mid_write" here
                    step("before_rename")
                self.client.rename(self.abs(tmp), self.abs(rel))
            except BaseException:
                with contextlib.suppress(Exception):
                    self.client.unlink(self.abs(tmp), missing_ok=True)
                raise

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """The classic NFS lock-file recipe: write a uniquely named file, then hard-link it to
        ``rel`` (LINK is atomic on the server and fails if ``rel`` exists).  A retransmitted LINK
        may report "exists" for our own link, so on that answer the link count decides."""
        tmp = f"{rel}.new-{uuid.uuid4().hex[:12]}"
        with self.guard("create", rel):
            with self.client.open(self.abs(tmp), "wb") as f:
                if data:
                    self.client_write(f, data, 0)
            try:
                try:
                    self.client.link(self.abs(tmp), self.abs(rel))
                    return True
                except FileExistsError:
                    return self.client.stat(self.abs(tmp)).nlink == 2
            finally:
                with contextlib.suppress(Exception):
                    self.client.unlink(self.abs(tmp), missing_ok=True)

    def rename(self, src: str, dst: str) -> None:
        self.settle(src)
        with self.guard("rename", src):
            self.client.rename(self.abs(src), self.abs(dst))

    def listdir(self, rel: str = "") -> list[str]:
        with self.guard("list", rel):
            return self.client.listdir(self.abs(rel))

    def list_files(self, rel: str = "") -> list[str]:
        with self.guard("list", rel):  # READDIRPLUS: the types come with the listing
            return [e.name for e in self.client.scandir(self.abs(rel))
                    if str(getattr(e.info.type, "value", e.info.type)) == "file"]

    def delete(self, rel: str, missing_ok: bool = True) -> None:
        with self.guard("delete", rel):
            self.client.unlink(self.abs(rel), missing_ok=missing_ok)

    def size(self, rel: str) -> int:
        appender = self._appenders.get(rel)
        if appender is not None:
            return appender.size
        with self.guard("stat", rel):
            return self.client.stat(self.abs(rel)).size

    def truncate(self, rel: str, size: int) -> None:
        self.settle(rel)
        with self.guard("truncate", rel):
            self.client.truncate(self.abs(rel), size)
        appender = self._appenders.get(rel)
        if appender is not None:
            appender.size = appender.durable = size

    def makedirs(self, rel: str) -> None:
        with self.guard("mkdir", rel):
            self.client.mkdir(self.abs(rel), parents=True, exist_ok=True)

    def exists(self, rel: str) -> bool:
        if rel in self._appenders:
            return True
        with self.guard("stat", rel):
            return self.client.exists(self.abs(rel))

    def sync_dir(self, rel: str = "") -> None:
        """Nothing to do: an NFS server makes directory operations durable before replying."""

    def close(self) -> None:
        try:
            for appender in list(self._appenders.values()):
                appender.close()
        finally:
            self._drop()
