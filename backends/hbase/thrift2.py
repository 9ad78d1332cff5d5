"""Writes through HBase's Thrift2 gateway with a per-mutation ``TDurability`` (``FSYNC_WAL``).

Why a second protocol: Thrift1 (``Hbase.thrift``, what happybase speaks) carries durability as
``Mutation.writeToWAL``, a bool the gateway turns into ``SYNC_WAL`` or ``SKIP_WAL``; nothing in it
asks for ``FSYNC_WAL``, and the server's ``hbase.wal.hsync`` only changes ``USE_DEFAULT`` puts,
which Thrift1 never sends.  Thrift2 (``THBaseService``) has ``TPut.durability``/``TDelete.durability``.

:data:`IDL` declares the part of THBaseService this module calls (``put``, ``putMultiple``,
``deleteSingle``, ``deleteMultiple`` and the structs they take), with the field ids of HBase 2.6's
``thrift2/hbase.thrift``; thriftpy2 builds the client from it at import.  Transport and protocol
are the gateway's defaults: buffered, binary.
"""

from __future__ import annotations

import io
import queue
import threading
from typing import Any, Callable, TypeVar

import thriftpy2
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.rpc import make_client
from thriftpy2.transport import TBufferedTransportFactory

from ..ledger import Ledger

T = TypeVar("T")

IDL = """
struct TColumn {
  1: required binary family,
  2: optional binary qualifier,
  3: optional i64 timestamp
}
struct TColumnValue {
  1: required binary family,
  2: required binary qualifier,
  3: required binary value,
  4: optional i64 timestamp,
  5: optional binary tags,
  6: optional byte type
}
enum TDeleteType { DELETE_COLUMN = 0, DELETE_COLUMNS = 1, DELETE_FAMILY = 2,
                   DELETE_FAMILY_VERSION = 3 }
enum TDurability { USE_DEFAULT = 0, SKIP_WAL = 1, ASYNC_WAL = 2, SYNC_WAL = 3, FSYNC_WAL = 4 }
struct TPut {
  1: required binary row,
  2: required list<TColumnValue> columnValues,
  3: optional i64 timestamp,
  5: optional map<binary, binary> attributes,
  6: optional TDurability durability
}
struct TDelete {
  1: required binary row,
  2: optional list<TColumn> columns,
  3: optional i64 timestamp,
  4: optional TDeleteType deleteType = 1,
  6: optional map<binary, binary> attributes,
  7: optional TDurability durability
}
exception TIOError {
  1: optional string message,
  2: optional bool canRetry
}
exception TIllegalArgument {
  1: optional string message
}
service THBaseService {
  void put(1: required binary table, 2: required TPut tput) throws (1: TIOError io)
  void putMultiple(1: required binary table, 2: required list<TPut> tputs)
    throws (1: TIOError io)
  void deleteSingle(1: required binary table, 2: required TDelete tdelete)
    throws (1: TIOError io)
  list<TDelete> deleteMultiple(1: required binary table, 2: required list<TDelete> tdeletes)
    throws (1: TIOError io)
}
"""

hbase2 = thriftpy2.load_fp(io.StringIO(IDL), "hbase2_thrift")
TIOError = hbase2.TIOError
FSYNC_WAL = hbase2.TDurability.FSYNC_WAL


def count_rpcs(client: Any, ledger: Ledger) -> Any:
    """``client`` (a thriftpy2 ``TClient``: happybase's Thrift one or our Thrift2 one) with every
    RPC it sends counted in ``ledger`` by method name, once per client: its ``_send``, which
    writes one call to the wire, is wrapped on the instance.  Bytes are not counted."""
    if getattr(client, "_ckpt_ledger", None) is not ledger:
        send = type(client)._send.__get__(client)

        def counted(_api: str, **kwargs: Any) -> None:
            ledger.record_shared(_api)
            send(_api, **kwargs)

        client._send = counted
        client._ckpt_ledger = ledger
    return client


class Thrift2Writer:
    """Puts and deletes with ``FSYNC_WAL`` through a pool of Thrift2 connections (made lazily;
    a connection whose call failed is dropped, the next call opens a new one)."""

    def __init__(self, host: str, port: int, table: str, column: bytes, timeout_ms: int,
                 pool_size: int, ledger: Ledger) -> None:
        self.host, self.port, self.timeout_ms, self.ledger = host, port, timeout_ms, ledger
        self.table = table.encode()
        self.family, _, self.qualifier = column.partition(b":")
        self._idle: queue.LifoQueue = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(pool_size)

    def _with_client(self, fn: Callable[[Any], T]) -> T:
        if not self._slots.acquire(timeout=self.timeout_ms / 1000):
            raise TimeoutError(f"no free Thrift2 connection to {self.host}:{self.port}")
        try:
            try:
                client = self._idle.get_nowait()
            except queue.Empty:
                client = count_rpcs(make_client(hbase2.THBaseService, self.host, self.port,
                                                timeout=self.timeout_ms,
                                                proto_factory=TBinaryProtocolFactory(),
                                                trans_factory=TBufferedTransportFactory()),
                                    self.ledger)
            try:
                out = fn(client)
            except BaseException:
                client.close()
                raise
            self._idle.put(client)
            return out
        finally:
            self._slots.release()

    def _tput(self, row: bytes, value: bytes) -> Any:
        cv = hbase2.TColumnValue(family=self.family, qualifier=self.qualifier, value=value)
        return hbase2.TPut(row=row, columnValues=[cv], durability=FSYNC_WAL)

    def put(self, row: bytes, value: bytes) -> None:
        self._with_client(lambda c: c.put(self.table, self._tput(row, value)))

    def put_many(self, rows: list[tuple[bytes, bytes]], batch: int) -> None:
        for start in range(0, len(rows), batch):
            puts = [self._tput(r, v) for r, v in rows[start:start + batch]]
            self._with_client(lambda c: c.putMultiple(self.table, puts))

    def delete(self, row: bytes) -> None:
        tdelete = hbase2.TDelete(row=row, durability=FSYNC_WAL)
        self._with_client(lambda c: c.deleteSingle(self.table, tdelete))

    def delete_many(self, rows: list[bytes], batch: int) -> None:
        """``deleteMultiple`` per ``batch`` rows; the rows it hands back were not deleted."""
        for start in range(0, len(rows), batch):
            deletes = [hbase2.TDelete(row=r, durability=FSYNC_WAL)
                       for r in rows[start:start + batch]]
            failed = self._with_client(lambda c: c.deleteMultiple(self.table, deletes))
            if failed:
                raise OSError(f"HBase Thrift2 deleteMultiple left {len(failed)} of {len(deletes)} "
                              f"rows undeleted (first: {failed[0].row!r})")

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return
