"""``hbase``: one HBase row per checkpoint, through the Thrift1 gateway (happybase).

The thesis schema: row key = the checkpoint key (UTF-8), column ``data:checkpoint``, column family
``data`` keeping one version.  HBase orders rows by their key bytes, and UTF-8 byte order is code
point order, so a row-range scan returns keys in ``str`` order.

Durability modes:

* ``wal`` (default) — each put/delete is written with ``SYNC_WAL``: acknowledged after the region
  server synced its write-ahead log; on HDFS that sync is an ``hflush`` (the edit is in the
  DataNode's memory, not yet on its disk).  How durable it is depends on the server's file system
  (``bench services status hbase`` says; on a local ``file://`` rootdir it survives a process crash
  but not a power loss).
* ``wal_hsync`` — puts and deletes go through the Thrift2 gateway (option ``thrift2_port``) with
  ``FSYNC_WAL``: acknowledged after the WAL edit was ``hsync``ed, fsync'ed on the DataNode.
  Thrift1 cannot ask for this (its mutations carry only a write-to-WAL bool, which the gateway
  turns into ``SYNC_WAL``), hence the second gateway, which ``bench services up hbase`` starts
  beside the first.  Reads still use Thrift1.  On a local rootdir ``FSYNC_WAL`` means no more than
  ``SYNC_WAL`` (Hadoop's local streams cannot fsync: both are a flush to the page cache);
  ``bench services status hbase`` says which applies.  Even on HDFS a power cut can take the
  WAL's last acknowledged edits: the DataNode fsyncs a block's checksum file before its block
  file, and at restart cuts an unfinished replica back to its last chunk whose checksum holds,
  so a cut between the two fsyncs of the *next* packet loses the tail of the one before
  (``bench audit power-loss --backend hbase --durability wal_hsync --cut-after-sync
  '*/rbw/*.meta'``; docs/audit.md).  The claim says so; survival of a process crash is whole.
* ``skip_wal`` — the edit lives only in the region server's memstore until HBase flushes it; a
  crash of the server loses it.  ``flush()`` forces it out (see :meth:`HBaseBackend._flush`).

Every call goes through a :class:`happybase.ConnectionPool` (threads share the backend) with a
socket timeout and :class:`~backends.base.Retry`, so a dead or hung server becomes a
:class:`~backends.base.BackendUnavailableError` within about ``(retries + 1) * timeout``.
"""

from __future__ import annotations

import socket
import threading
from typing import Any, Callable, Iterator, TypeVar

import happybase
from Hbase_thrift import AlreadyExists, IOError as HBaseIOError  # loaded by happybase's import
from thriftpy2.transport import TTransportException

from .thrift2 import TIOError as Thrift2IOError
from .thrift2 import Thrift2Writer, count_rpcs
from ..base import (LONGEST_WAIT_S, Backend, BackendUnavailableError, BadOptionError, Claim,
                    Option, Retry)

T = TypeVar("T")

FAMILY = "data"
_SKIP_WAL = "skip_wal: puts are in the memstore only until a flush; any crash may lose them"
#: what a power-loss audit's cuts measure, by where HBase keeps its root (see :class:`Claim`)
_LOCAL_NOTE = ("HBase runs on Hadoop's LocalFileSystem here; its WAL sync is no fsync, so this "
               "measures what a power cut costs it")
_HDFS_NOTE = ("HBase on a private HDFS on the lossy mount: the lossy file system saw {file_syncs} "
              "file fsyncs while the writers ran ({acknowledged} writes acknowledged); hsync "
              "reaches it as the DataNode's fsync of the block file, hflush does not")
COLUMN = b"data:checkpoint"

#: failures worth another try: no connection, a broken or timed-out socket, or the region server
#: refusing for now (region moving, server starting) — never bad arguments
_TRANSIENT = (TTransportException, OSError, socket.timeout, HBaseIOError, Thrift2IOError,
              happybase.NoConnectionsAvailable)


def _row_stop(prefix: bytes) -> bytes | None:
    """The first row key after every key starting with ``prefix`` (``None``: to the end)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


class HBaseBackend(Backend):
    name = "hbase"
    kind = "server"
    durability_modes = ("wal", "wal_hsync", "skip_wal")
    #: where the server keeps its root directory and WAL: Hadoop's LocalFileSystem or HDFS
    media = ("local", "hdfs")
    #: FSYNC_WAL is an fsync only on HDFS (Hadoop's local streams turn hsync into a flush)
    mode_media = {"wal_hsync": "hdfs"}
    claims = {
        "wal": Claim("wal", "WAL on, but on the local file system the WAL sync is a flush to the "
                     "page cache (no fsync): survives a process crash, not a power cut",
                     crash_safe=True, power_safe=False, note=_LOCAL_NOTE),
        "wal_hsync": Claim("wal_hsync", "wal_hsync: FSYNC_WAL puts, but on the local file system "
                           "hsync is a flush to the page cache too: no power-cut durability "
                           "promised", crash_safe=True, power_safe=False, note=_LOCAL_NOTE),
        "skip_wal": Claim("skip_wal", _SKIP_WAL, crash_safe=False, power_safe=False,
                          note=_LOCAL_NOTE),
    }
    medium_claims = {"hdfs": {
        "wal": Claim("wal", "wal: SYNC_WAL puts on HDFS, acknowledged after the WAL edit was "
                     "hflushed to the DataNode (its memory, not its disk): survives a process "
                     "crash, not a power cut", crash_safe=True, power_safe=False,
                     note=_HDFS_NOTE),
        "wal_hsync": Claim("wal_hsync", "wal_hsync: FSYNC_WAL puts on HDFS, acknowledged after "
                           "the WAL edit was hsynced (fsync'ed on the DataNode): survives a "
                           "process crash; a power cut can lose the last acknowledged edits, "
                           "because the DataNode fsyncs a block's checksums before its data and, "
                           "restarting, cuts an unfinished block back to its last chunk whose "
                           "checksum holds (up to 511 bytes of WAL)",
                           crash_safe=True, power_safe=False, note=_HDFS_NOTE),
        "skip_wal": Claim("skip_wal", _SKIP_WAL, crash_safe=False, power_safe=False,
                          note=_HDFS_NOTE),
    }}
    audit_mode = "wal"
    audit_run_seconds = 3.0
    #: one value is one cell, which HBase refuses above ``hbase.client.keyvalue.maxsize`` (and
    #: ``hbase.server.keyvalue.maxsize``), 10485760 bytes by default, the row key and column
    #: included: a row key may take 32767 bytes, the column and the cell's fixed fields are a
    #: few dozen
    max_value_bytes = 10485760 - 32767 - 1024
    #: one batch is one Thrift ``mutateRows`` call, passed on as one multi request per region
    #: server (which refuses a request above ``hbase.ipc.max.request.size``, 256 MiB by default).
    #: The Thrift gateway holds a call about three times over — the request, its ``Put``\ s, the
    #: RPC to the region server — in a heap that concurrent clients share (``bench services``
    #: gives it 256 MiB): 64 MiB calls from two Spark instances ran it out of heap, and it exits
    #: on that.  16 MiB calls keep two clients' well inside it.
    max_batch_bytes = 16 * 1024 * 1024
    options = {
        "host": Option(str, "127.0.0.1", "HBase Thrift1 gateway host"),
        "port": Option(int, 9090, "HBase Thrift1 gateway port (buffered transport, binary protocol)",
                       min=1, max=65535),
        "table": Option(str, "ckptbench", "table holding the checkpoints; created if missing",
                        nonempty=True),
        "timeout": Option(int, 10000, "socket timeout of one Thrift call, in ms",
                          min=1, max=int(LONGEST_WAIT_S * 1000)),
        "retries": Option(int, 3, "extra tries of a failed call, with exponential backoff", min=0),
        "pool_size": Option(int, 8, "Thrift connections shared by the threads using this store",
                            min=1),
        "batch_size": Option(int, 1000, "rows per Thrift call in put_many/get_many/scan", min=1),
        "thrift2_port": Option(int, 9091, "HBase Thrift2 gateway port, used by durability="
                               "wal_hsync for its FSYNC_WAL writes", min=1, max=65535),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        cfg = self.config
        self.address = f"{cfg['host']}:{cfg['port']}"
        self.table_name: str = cfg["table"]
        self._wal = self.durability in ("wal", "wal_hsync")
        self._hsync: Thrift2Writer | None = None
        if self.durability == "wal_hsync":
            self._hsync = Thrift2Writer(cfg["host"], cfg["thrift2_port"], self.table_name, COLUMN,
                                        cfg["timeout"], cfg["pool_size"], self.ledger)
        self._batch = cfg["batch_size"]
        timeout_s = cfg["timeout"] / 1000
        self._retry = Retry(attempts=cfg["retries"] + 1, deadline=timeout_s * (cfg["retries"] + 1),
                            retry_on=_TRANSIENT, ledger=self.ledger)
        # wait for a pooled connection at most as long as one call may take
        self._pool_wait = timeout_s
        self._pool: happybase.ConnectionPool | None = None  # made by the first (retried) call
        self._pool_lock = threading.Lock()
        self._ensure_table()
        if self._hsync is not None:
            self._probe_thrift2()

    # -- plumbing -------------------------------------------------------------------------
    def _call(self, op: str, fn: Callable[[happybase.Table], T]) -> T:
        """Run ``fn`` on the table with a pooled connection, retried; typed error at the end."""

        def attempt() -> T:
            with self._connections().connection(timeout=self._pool_wait) as conn:
                count_rpcs(conn.client, self.ledger)
                return fn(conn.table(self.table_name))

        try:
            return self._retry.call(f"hbase {op}", attempt)
        except BackendUnavailableError as exc:
            raise BackendUnavailableError(
                f"HBase Thrift gateway at {self.address} is unavailable ({exc}); start it with "
                f"`bench services up hbase` or point --opt host=/port= at a running one"
            ) from exc

    def _call2(self, op: str, fn: Callable[[], T]) -> T:
        """A Thrift2 (wal_hsync) write, retried like :meth:`_call`; typed error at the end."""
        try:
            return self._retry.call(f"hbase {op}", fn)
        except BackendUnavailableError as exc:
            raise BackendUnavailableError(
                f"HBase Thrift2 gateway at {self.config['host']}:{self.config['thrift2_port']} is "
                f"unavailable ({exc}); durability=wal_hsync writes through it: `bench services "
                f"up hdfs hbase` starts it (or point --opt thrift2_port= at a running one)"
            ) from exc

    def _probe_thrift2(self) -> None:
        """Fail at open, with the fix, when no Thrift2 gateway answers (HBase on a local root)."""
        try:
            with socket.create_connection((self.config["host"], self.config["thrift2_port"]),
                                          timeout=self.config["timeout"] / 1000):
                pass
        except OSError as exc:
            raise BackendUnavailableError(
                f"backend 'hbase': durability=wal_hsync writes through HBase's Thrift2 gateway, "
                f"and none answers at {self.config['host']}:{self.config['thrift2_port']} "
                f"({exc.strerror or exc}); `bench services up hdfs hbase` starts HBase on HDFS "
                f"with it (a server started without it: `bench services down hbase` first), or "
                f"point --opt thrift2_port= at a running one"
            ) from exc

    def _connections(self) -> happybase.ConnectionPool:
        """The pool, created on first use: creating it already connects (and may fail)."""
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    cfg = self.config
                    self._pool = happybase.ConnectionPool(
                        cfg["pool_size"], host=cfg["host"], port=cfg["port"],
                        timeout=cfg["timeout"], autoconnect=False,
                    )
        return self._pool

    def _ensure_table(self) -> None:
        """Create the table (family ``data``, one version) unless it exists with that family."""
        name = self.table_name.encode()

        def ensure(table: happybase.Table) -> None:
            conn = table.connection
            if name not in conn.tables():
                try:
                    conn.create_table(self.table_name, {FAMILY: {"max_versions": 1}})
                except AlreadyExists:
                    pass  # another client won the race
            families = table.families()
            if FAMILY.encode() not in families:
                raise BadOptionError(
                    f"backend 'hbase': table {self.table_name!r} exists without column family "
                    f"{FAMILY!r}; choose another table with --opt table=NAME"
                )

        self._call("create table", ensure)

    # -- primitives -----------------------------------------------------------------------
    def _put(self, key: str, value: bytes) -> None:
        row = key.encode()
        if self._hsync is not None:
            self._call2("put", lambda: self._hsync.put(row, value))
            return
        self._call("put", lambda t: t.put(row, {COLUMN: value}, wal=self._wal))

    def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        rows = [(k.encode(), v) for k, v in items]
        if self._hsync is not None:
            self._call2("put_many", lambda: self._hsync.put_many(rows, self._batch))
            return

        def put_all(table: happybase.Table) -> None:
            # one mutateRows call per batch_size rows; a retry resends all (puts are idempotent)
            with table.batch(batch_size=self._batch, wal=self._wal) as batch:
                for row, value in rows:
                    batch.put(row, {COLUMN: value})

        self._call("put_many", put_all)

    def _get(self, key: str) -> bytes | None:
        row = key.encode()
        data = self._call("get", lambda t: t.row(row, columns=[COLUMN]))
        return data.get(COLUMN)

    def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for start in range(0, len(keys), self._batch):
            rows = [k.encode() for k in keys[start:start + self._batch]]
            found = self._call("get_many", lambda t: t.rows(rows, columns=[COLUMN]))
            for row, data in found:
                if COLUMN in data:
                    out[row.decode()] = data[COLUMN]
        return out

    def _delete(self, key: str) -> None:
        row = key.encode()
        if self._hsync is not None:
            self._call2("delete", lambda: self._hsync.delete(row))
            return
        self._call("delete", lambda t: t.delete(row, wal=self._wal))

    def _delete_many(self, keys: list[str]) -> None:
        rows = [k.encode() for k in keys]
        if self._hsync is not None:
            self._call2("delete_many", lambda: self._hsync.delete_many(rows, self._batch))
            return

        def delete_all(table: happybase.Table) -> None:
            # one mutateRows call per batch_size rows; a retry resends all (deletes are idempotent)
            with table.batch(batch_size=self._batch, wal=self._wal) as batch:
                for row in rows:
                    batch.delete(row)

        self._call("delete_many", delete_all)

    def _pages(self, prefix: str, row_filter: bytes | None = None) -> Iterator[list[tuple[bytes, dict]]]:
        """The rows under ``prefix`` a page at a time, by row range: each page is one retried
        call, and no connection is held while the caller consumes the iterator."""
        start = prefix.encode() or None
        stop = _row_stop(prefix.encode())
        while True:
            page = self._call("scan", lambda t: list(t.scan(
                row_start=start, row_stop=stop, columns=[COLUMN], filter=row_filter,
                batch_size=self._batch, limit=self._batch)))
            yield page
            if len(page) < self._batch:
                return
            start = page[-1][0] + b"\x00"

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        for page in self._pages(prefix):
            for row, data in page:
                if COLUMN in data:
                    yield row.decode(), data[COLUMN]

    def _keys(self, prefix: str) -> list[str]:
        """The row keys alone (a ``KeyOnlyFilter`` scan: the region server sends no values)."""
        return [row.decode() for page in self._pages(prefix, b"KeyOnlyFilter()") for row, _ in page]

    def _flush(self) -> None:
        """``wal``: nothing to do, every acknowledged edit is in the WAL.  ``skip_wal``: Thrift1
        has no memstore flush, so the table is disabled and re-enabled — closing its regions
        writes their memstores to HFiles.  That takes seconds and blocks every client of the
        table meanwhile; it is the price of asking skip_wal for durability."""
        if self._wal:
            return
        self._call("flush", self._cycle)

    def _cycle(self, table: happybase.Table) -> None:
        """Disable and enable the table: closing its regions writes their memstores to HFiles."""
        conn = table.connection
        if conn.is_table_enabled(self.table_name):
            conn.disable_table(self.table_name)
        conn.enable_table(self.table_name)

    def _close(self) -> None:
        # not flushing skip_wal here: disabling a table shared with other clients is not a side
        # effect a close() should have; call flush() explicitly
        if self._hsync is not None:
            self._hsync.close()
        pool, self._pool = self._pool, None
        while pool is not None:
            try:
                conn = pool._queue.get_nowait()  # happybase has no ConnectionPool.close()
            except Exception:  # noqa: BLE001 - queue.Empty: all closed
                break
            conn.close()

    def _reclaim(self) -> None:
        """Flush the table's memstores (a disable and enable, as :meth:`_flush` does for
        skip_wal: it blocks the table's clients for seconds) and ask for a major compaction:
        deletes and overwritten cells are tombstones and old versions in HFiles until one
        rewrites them (HBase runs it on its own about once a week), and a compaction sees only
        what was flushed.  The region server compacts in the background; this returns once it
        is asked."""
        self._call("flush", self._cycle)
        self._call("major_compact", lambda t: t.connection.compact_table(self.table_name, major=True))

    def _stats(self) -> dict[str, Any]:
        return {
            "table": self.table_name,
            "wal": {"wal": "on (SYNC_WAL)", "wal_hsync": "on (FSYNC_WAL, through Thrift2)",
                    "skip_wal": "off (SKIP_WAL)"}[self.durability],
            "server": self.address,
            "pool_size": self.config["pool_size"],
            "timeout_ms": self.config["timeout"],
        }
