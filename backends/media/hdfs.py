"""The HDFS medium: a directory on HDFS reached over WebHDFS (HTTP), no JVM or libhdfs in Python.

URL: ``hdfs://HOST:PORT/DIR[?webhdfs=HTTP_PORT][&timeout=S][&user=NAME]``.  ``PORT`` is the
NameNode's RPC port (what ``fs.defaultFS`` names); WebHDFS is served by the NameNode's HTTP port,
``webhdfs=`` (default 9870, Hadoop 3's).  ``timeout`` (seconds, default 30) bounds every HTTP
wait, so a dead server gives :class:`BackendUnavailableError`, never a hang.  ``user`` (default:
this process's user) is WebHDFS's ``user.name`` (simple authentication; no Kerberos).

Why WebHDFS over plain HTTP: it is HDFS's own REST protocol, served by every NameNode and
DataNode; Python's ``http.client`` speaks it with persistent connections, so nothing is
installed.  The alternative, pyarrow's ``HadoopFileSystem``, needs ``libhdfs.so`` and a Hadoop
classpath in the client process, and libhdfs ships only in Hadoop's binary tarball, not in a
package registry.

What an operation means here (every call is one or two HTTP requests: the NameNode, then for data
the DataNode it redirects to):

* ``append`` buffers in memory; ``sync`` sends the buffered bytes with one WebHDFS ``APPEND``.  The
  DataNode appends them to the file and *closes* it before it answers; with
  ``dfs.datanode.synconclose=true`` (``bench services up hdfs`` sets it) closing finalizes the block
  and fsyncs it on the DataNode, and the NameNode logs the new length in its edit log, which it
  syncs before answering.  So an acknowledged ``sync`` is on the DataNode's disk and in the
  NameNode's durable metadata.  On a server without ``synconclose`` it is in the DataNode's page
  cache only.  WebHDFS has no ``hflush``/``hsync`` of an open stream: each sync is an
  open-for-append, write, close.
* Appends and syncs may come from different threads: a sync takes the pending bytes under a short
  lock and sends them with no lock held for appenders, so writers keep appending during the
  request and the next sync sends all of theirs at once (group commit, as on NFS).  A failed sync
  puts its bytes back; before the retry the file's length on HDFS says how many of them the failed
  request did append (an append lands as a prefix), and only the rest is sent again.
* No random writes and no preallocation (HDFS files are append-only); ``truncate`` is HDFS's
  truncate, and a cut inside a block starts a block recovery that the next append waits out.
* ``write_atomic``: ``CREATE`` a temp file (closed, so fsync'ed), then ``RENAME`` with
  ``OVERWRITE`` (atomic on the NameNode).  ``create_exclusive``: a uniquely named temp file, then a
  plain ``RENAME``, which fails when the target exists: readers never see a half-written lock.
* Directory operations are NameNode metadata, durable when the call returns: ``sync_dir`` has
  nothing to do.
"""

from __future__ import annotations

import getpass
import http.client
import json
import posixpath
import threading
import time
import uuid
from typing import Callable
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from ..base import BackendUnavailableError, BadOptionError, StorageFullError
from .medium import BufferedAppendFile, BufferedAppends, Medium, ReadFile, parts_of, push_before_read

DEFAULT_WEBHDFS_PORT = 9870
DEFAULT_TIMEOUT = 30.0  # a DataNode's first WebHDFS request starts its REST stack: seconds
FLUSH_BYTES = 4 << 20  # pending appends pushed without waiting for sync(), like writeback
#: seconds to wait out a lease or block recovery (truncate, a crashed writer) before failing
RECOVERY_WAIT = 90.0
#: seconds a keep-alive connection may sit idle and still be reused (servers close idle ones)
IDLE_REUSE = 5.0
#: DataNodes a read leaves out of its redirects before it gives up (one per lost replica: HDFS
#: keeps at most this many of a block on a cluster of ``bench services up cluster``)
MAX_EXCLUDED = 3

#: WebHDFS RemoteException names meaning "try again shortly": a block recovery or an earlier
#: writer's lease still being settled by the NameNode
_BUSY = ("RecoveryInProgressException", "AlreadyBeingCreatedException",
         "LeaseExpiredException", "RetriableException", "SafeModeException")
_FULL = ("DSQuotaExceededException", "NSQuotaExceededException", "DiskOutOfSpaceException")


class WebHdfsError(Exception):
    """A WebHDFS ``RemoteException``: ``exception`` is the Java class's simple name."""

    def __init__(self, status: int, exception: str, message: str) -> None:
        super().__init__(f"{exception}: {message.splitlines()[0] if message else ''}")
        self.status, self.exception, self.message = status, exception, message


def is_hdfs_url(path: str) -> bool:
    return str(path).startswith("hdfs://")


class HdfsAppendFile(BufferedAppendFile):
    flush_bytes = FLUSH_BYTES

    def __init__(self, medium: "HdfsMedium", rel: str) -> None:
        st = medium.stat(rel)
        if st is None:
            medium.create(rel, b"", overwrite=False, missing_ok=True)
            st = {"length": 0}
        self._doubt = False  # a push failed: HDFS may hold some of its bytes already
        self._start_buffer(medium, rel, int(st["length"]))

    def _push(self, data: bytes) -> None:
        m = self.medium
        try:
            if self._doubt:
                # the failed request may have appended a prefix of these bytes
                st = m.stat(self.rel)
                landed = int(st["length"]) - self.durable if st else 0
                if landed < 0 or landed > len(data):
                    raise BackendUnavailableError(
                        f"{m.label}: {m.path}/{self.rel} is {st and st['length']} bytes on "
                        f"HDFS, expected {self.durable} to {self.durable + len(data)}; "
                        f"another writer changed it")
                self.durable += landed
                data = data[landed:]
                self._doubt = False
            if data:
                m.append_data(self.rel, data)
        except BaseException:
            self._doubt = True
            raise


class HdfsReadFile(ReadFile):
    def __init__(self, medium: "HdfsMedium", rel: str) -> None:
        self.medium, self.rel = medium, rel
        if medium.stat(rel) is None:
            raise FileNotFoundError(f"{medium.path}/{rel}")

    def pread(self, offset: int, size: int) -> bytes:
        m = self.medium
        push_before_read(m, self.rel, offset, size)
        if size <= 0:
            return b""
        return m.read_range(self.rel, offset, size)

    def size(self) -> int:
        return self.medium.size(self.rel)

    def close(self) -> None:
        pass


class HdfsMedium(BufferedAppends, Medium):
    kind = "hdfs"

    def __init__(self, url: str, label: str = "medium") -> None:
        super().__init__(url, label)
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        try:
            self.timeout = float(query.pop("timeout", DEFAULT_TIMEOUT))
            self.http_port = int(query.pop("webhdfs", DEFAULT_WEBHDFS_PORT))
        except ValueError:
            raise BadOptionError(f"{label}: timeout= or webhdfs= in {url} is not a number") from None
        self.user = query.pop("user", None) or getpass.getuser()
        if query:
            raise BadOptionError(f"{label}: unknown parameter(s) {', '.join(query)} in {url}; "
                                 f"valid: webhdfs=HTTP_PORT, timeout=SECONDS, user=NAME")
        if not parts.hostname or not parts.path.strip("/"):
            raise BadOptionError(f"{label}: {url} is not hdfs://HOST:PORT/DIR[?webhdfs=HTTP_PORT]")
        self.host = parts.hostname
        self.base = "/" + parts.path.strip("/")
        self.root = url
        self._local = threading.local()  # one keep-alive connection per thread and server
        self._appenders: dict[str, HdfsAppendFile] = {}
        self.requests = 0  # HTTP requests sent (round trips), for the experiments' RPC rows
        self.appends = 0  # WebHDFS APPENDs sent (one per sync that had bytes to send)
        self.makedirs("")

    # -- HTTP -----------------------------------------------------------------------------
    def _conn(self, host: str, port: int) -> http.client.HTTPConnection:
        """This thread's connection to ``host:port``; one idle for longer than
        :data:`IDLE_REUSE` is replaced first (the server may have closed it, and a request sent
        on a closed connection could not be told apart from one the server lost)."""
        conns = self._local.__dict__.setdefault("conns", {})
        now = time.monotonic()
        conn, used = conns.get((host, port), (None, 0.0))
        if conn is not None and now - used > IDLE_REUSE:
            conn.close()
            conn = None
        if conn is None:
            conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        conns[(host, port)] = (conn, now)
        return conn

    def _drop(self, host: str, port: int) -> None:
        conn, _ = self._local.__dict__.get("conns", {}).pop((host, port), (None, 0.0))
        if conn is not None:
            conn.close()

    def _unavailable(self, what: str, exc: Exception) -> BackendUnavailableError:
        return BackendUnavailableError(
            f"{self.label}: HDFS at {self.path} failed during {what}: {exc}; the operation was "
            f"not acknowledged — is HDFS running? (`bench services status hdfs`; start it with "
            f"`bench services up hdfs`)")

    def _send(self, method: str, host: str, port: int, target: str, body: bytes | None,
              what: str) -> tuple[int, bytes]:
        """One request on this thread's keep-alive connection; a stale connection (the server
        closed it while idle) is replaced once."""
        headers = {"Content-Type": "application/octet-stream"} if body is not None else {}
        for attempt in (0, 1):
            conn = self._conn(host, port)
            try:
                self.requests += 1
                if attempt:
                    self.ledger.retried(0.0)
                conn.request(method, target, body=body, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                # counted by WebHDFS operation (NameNode and DataNode requests alike)
                self.ledger.record_shared(what.split(" ", 1)[0], len(body or b""), len(raw))
                return resp.status, raw
            except (http.client.RemoteDisconnected, ConnectionResetError,
                    BrokenPipeError) as exc:
                self._drop(host, port)
                if attempt or method != "GET":
                    raise self._unavailable(what, exc) from exc
            except (OSError, http.client.HTTPException) as exc:
                self._drop(host, port)
                raise self._unavailable(what, exc) from exc
        raise AssertionError("unreachable")

    def _full_path(self, rel: str) -> str:
        return posixpath.join(self.base, rel) if rel else self.base

    def _call(self, method: str, rel: str, op: str, body: bytes | None = None,
              data_node: bool = False, **params) -> dict:
        """One WebHDFS operation on ``rel``; with ``data_node`` the NameNode's redirect is
        followed to the DataNode, which gets ``body``.  The JSON answer, or a typed error."""
        what = f"{op} {rel}".strip()
        query = urlencode({"op": op, "user.name": self.user, **params})
        target = f"/webhdfs/v1{quote(self._full_path(rel))}?{query}"
        deadline = time.monotonic() + RECOVERY_WAIT
        while True:
            try:
                if data_node:
                    status, raw = self._send(method, self.host, self.http_port,
                                             target + "&noredirect=true", None, what)
                    location = self._answer(status, raw, rel, what).get("Location")
                    if not location:
                        raise self._unavailable(what, RuntimeError("no DataNode location"))
                    dn = urlsplit(location)
                    status, raw = self._send(method, dn.hostname, dn.port,
                                             f"{dn.path}?{dn.query}", body, what)
                else:
                    status, raw = self._send(method, self.host, self.http_port, target, body,
                                             what)
                return self._answer(status, raw, rel, what)
            except WebHdfsError as exc:
                if exc.exception in _BUSY and time.monotonic() < deadline:
                    time.sleep(0.2)  # a recovery in progress: the NameNode settles it
                    continue
                raise self._typed(exc, rel, what) from exc

    def _answer(self, status: int, raw: bytes, rel: str, what: str) -> dict:
        if 200 <= status < 300:
            if not raw:
                return {}
            try:
                return json.loads(raw)
            except ValueError:
                raise self._unavailable(what, RuntimeError(f"not JSON: {raw[:80]!r}")) from None
        try:
            err = json.loads(raw)["RemoteException"]
            raise WebHdfsError(status, err.get("exception", ""), err.get("message", ""))
        except (ValueError, KeyError, TypeError):
            raise self._unavailable(what, RuntimeError(f"HTTP {status}: {raw[:200]!r}")) from None

    def _typed(self, exc: WebHdfsError, rel: str, what: str) -> Exception:
        full = self._full_path(rel)
        if exc.exception == "FileNotFoundException":
            return FileNotFoundError(f"{self.path}: {full} does not exist")
        if exc.exception == "FileAlreadyExistsException":
            return FileExistsError(f"{self.path}: {full} exists")
        if exc.exception in _FULL or "could only be written to 0" in exc.message:
            return StorageFullError(
                f"{self.label}: no space left on HDFS for {full}; the write was not acknowledged "
                f"and stored data is intact — free space or raise the quota")
        if exc.exception == "AccessControlException":
            return BackendUnavailableError(
                f"{self.label}: permission denied on HDFS {full} ({what}): "
                f"{exc.message.splitlines()[0]}; fix its permissions or give ?user=NAME")
        return self._unavailable(what, exc)

    # -- helpers used by the files ---------------------------------------------------------
    def stat(self, rel: str) -> dict | None:
        try:
            return self._call("GET", rel, "GETFILESTATUS")["FileStatus"]
        except FileNotFoundError:
            return None

    def create(self, rel: str, data: bytes, overwrite: bool, missing_ok: bool = False) -> None:
        try:
            self._call("PUT", rel, "CREATE", data, data_node=True,
                       overwrite=str(overwrite).lower())
        except FileExistsError:
            if not missing_ok:
                raise

    def append_data(self, rel: str, data: bytes) -> None:
        self.appends += 1
        self._call("POST", rel, "APPEND", data, data_node=True)

    def read_range(self, rel: str, offset: int, size: int) -> bytes:
        """Bytes ``[offset, offset + size)`` (fewer at the end of the file).  A DataNode that
        does not answer (a lost host the NameNode has not yet found stale) is left out of the
        next redirect (WebHDFS's ``excludedatanodes``, as Hadoop's own WebHDFS client does), so
        the read goes on from another replica; a read changes nothing, so asking again is safe."""
        out = bytearray()
        excluded: list[str] = []
        while len(out) < size:
            # data comes back raw, not as JSON: go through the redirect by hand
            what = f"OPEN {rel}"
            params = {"op": "OPEN", "user.name": self.user, "offset": offset + len(out),
                      "length": size - len(out), "noredirect": "true"}
            if excluded:
                params["excludedatanodes"] = ",".join(excluded)
            target = f"/webhdfs/v1{quote(self._full_path(rel))}?{urlencode(params)}"
            status, raw = self._send("GET", self.host, self.http_port, target, None, what)
            try:
                location = self._answer(status, raw, rel, what)["Location"]
            except WebHdfsError as exc:
                if "out of the range" in exc.message:
                    break  # at or past the end
                raise self._typed(exc, rel, what) from exc
            dn = urlsplit(location)
            try:
                status, raw = self._send("GET", dn.hostname, dn.port, f"{dn.path}?{dn.query}",
                                         None, what)
            except BackendUnavailableError:
                if dn.hostname in excluded or len(excluded) >= MAX_EXCLUDED:
                    raise
                excluded.append(dn.hostname)  # by address: each DataNode has its own
                continue
            if not 200 <= status < 300:
                try:
                    self._answer(status, raw, rel, what)
                except WebHdfsError as exc:
                    raise self._typed(exc, rel, what) from exc
            if not raw:
                break
            out += raw
        return bytes(out)

    # -- operations -----------------------------------------------------------------------
    def open_append(self, rel: str) -> HdfsAppendFile:
        return HdfsAppendFile(self, rel)

    def open_read(self, rel: str) -> HdfsReadFile:
        self.settle(rel)
        return HdfsReadFile(self, rel)

    def read_file(self, rel: str) -> bytes:
        self.settle(rel)
        st = self.stat(rel)
        if st is None:
            raise FileNotFoundError(f"{self.path}: {self._full_path(rel)} does not exist")
        length = int(st["length"])
        return self.read_range(rel, 0, length) if length else b""

    def write_atomic(self, rel: str, data, sync: bool = True, tmp: str | None = None,
                     step: Callable[[str], None] | None = None) -> None:
        # a closed HDFS file is fsync'ed on the DataNode (synconclose) and renames are durable
        # NameNode metadata, so ``sync`` costs nothing extra.  Parts are joined: one request.
        parts = parts_of(data)
        blob = parts[0] if len(parts) == 1 else b"".join(parts)
        tmp = tmp or f"{rel}.tmp"
        try:
            self.create(tmp, blob, overwrite=True)
            if step:  # one CREATE of the joined parts: no "mid_write" here
                step("before_rename")
            self._call("PUT", tmp, "RENAME", destination=self._full_path(rel),
                       renameoptions="OVERWRITE")
        except BaseException:
            try:
                self.delete(tmp)
            except Exception:  # noqa: BLE001 - the original error is the one to report
                pass
            raise

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        tmp = f"{rel}.new-{uuid.uuid4().hex[:12]}"
        self.create(tmp, data, overwrite=False)
        try:
            done = self._call("PUT", tmp, "RENAME", destination=self._full_path(rel))
            return bool(done.get("boolean"))
        finally:
            try:
                self.delete(tmp)
            except Exception:  # noqa: BLE001 - a leftover temp file is harmless
                pass

    def rename(self, src: str, dst: str) -> None:
        self.settle(src)
        self._call("PUT", src, "RENAME", destination=self._full_path(dst),
                   renameoptions="OVERWRITE")

    def listdir(self, rel: str = "") -> list[str]:
        out = self._call("GET", rel, "LISTSTATUS")["FileStatuses"]["FileStatus"]
        return [s["pathSuffix"] for s in out]

    def list_files(self, rel: str = "") -> list[str]:
        out = self._call("GET", rel, "LISTSTATUS")["FileStatuses"]["FileStatus"]
        return [s["pathSuffix"] for s in out if s.get("type") == "FILE"]

    def delete(self, rel: str, missing_ok: bool = True) -> None:
        done = self._call("DELETE", rel, "DELETE", recursive="false")
        if not done.get("boolean") and not missing_ok:
            raise FileNotFoundError(f"{self.path}: {self._full_path(rel)} does not exist")

    def size(self, rel: str) -> int:
        appender = self._appenders.get(rel)
        if appender is not None:
            return appender.size
        st = self.stat(rel)
        if st is None:
            raise FileNotFoundError(f"{self.path}: {self._full_path(rel)} does not exist")
        return int(st["length"])

    def truncate(self, rel: str, size: int) -> None:
        self.settle(rel)
        length = self.size(rel)
        if size > length:
            raise BadOptionError(f"{self.label}: cannot extend {self._full_path(rel)} to {size} "
                                 f"bytes: HDFS files only grow by appends")
        if size < length:
            done = self._call("POST", rel, "TRUNCATE", newlength=str(size))
            if not done.get("boolean"):
                # a cut inside a block: the NameNode recovers the block first; an empty append
                # succeeds once it is done (and is retried while it is not)
                self.append_data(rel, b"")
        appender = self._appenders.get(rel)
        if appender is not None:
            appender.size = appender.durable = size

    def makedirs(self, rel: str) -> None:
        self._call("PUT", rel, "MKDIRS")

    def exists(self, rel: str) -> bool:
        return rel in self._appenders or self.stat(rel) is not None

    def sync_dir(self, rel: str = "") -> None:
        """Nothing to do: the NameNode syncs its edit log before a metadata call returns."""

    def sync_all(self) -> None:
        for appender in list(self._appenders.values()):
            appender.sync()

    def remove_tree(self) -> None:
        """Delete the whole directory of this medium (recursive); for test and scratch cleanup."""
        self._call("DELETE", "", "DELETE", recursive="true")

    def close(self) -> None:
        try:
            for appender in list(self._appenders.values()):
                appender.close()
        finally:
            for conn, _ in self._local.__dict__.get("conns", {}).values():
                conn.close()
            self._local = threading.local()


__all__ = ["HdfsMedium", "HdfsAppendFile", "HdfsReadFile", "WebHdfsError", "is_hdfs_url",
           "DEFAULT_WEBHDFS_PORT"]
