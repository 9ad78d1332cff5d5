"""``lmdb``: LMDB (a memory-mapped copy-on-write B+tree) through py-lmdb, as a peer of ``indexed_fs``.

Every ``put`` is one write transaction and ``put_many`` one for the whole batch (atomic).  A
``get`` is a read transaction on the memory map: no system call once the pages are cached, which
is why LMDB reads fast.  Keys are utf-8 bytes in LMDB's byte order, so a prefix scan is a cursor
over one range (:mod:`backends.byte_keys`), read in chunks, each in its own read transaction, so
that the scan holds no transaction while the caller works between items.

Durability modes, as the environment is opened:

* ``sync`` (default): a commit is synced (data pages, then the meta page) before ``put`` returns;
  the write survives a power cut.  LMDB syncs its files, never their directory, so the open
  fsyncs the directory once the environment's files exist: the files themselves would otherwise
  be lost with a power cut, and every commit with them.
* ``none``: ``sync=False`` — commits are written to the OS but not synced; the write survives a
  crash of the process, an OS crash or power cut may lose the latest writes (and LMDB's
  documentation warns it may damage the database).

Where the binding limits it: py-lmdb releases the GIL while a commit writes and syncs, so other
Python threads run meanwhile, but LMDB admits one write transaction at a time per environment and
has no group commit: durable writes from N threads are N serial syncs.  The map is a fixed
reservation of address space (``map_size``); a store that outgrows it fails its writes with
:class:`~backends.base.StorageFullError` until reopened with a larger one.
"""

from __future__ import annotations

from typing import Any, Iterator

import lmdb

from ..base import (
    Backend,
    BackendUnavailableError,
    Claim,
    CorruptDataError,
    Option,
    StorageFullError,
    StoreLockedError,
)
from ..byte_keys import key_bytes, prefix_end
from ..media.local import fsync_dir, local_bytes_held
from ..owner import claim_local_dir

#: LMDB stores a value's length in 32 bits
MAX_VALUE_BYTES = (1 << 32) - 1
#: entries read per read transaction during a scan
SCAN_CHUNK = 256


def _typed(exc: Exception, what: str, path: str) -> Exception:
    """The typed error for an ``lmdb.Error``."""
    text = str(exc)
    if isinstance(exc, lmdb.MapFullError):
        return StorageFullError(
            f"backend 'lmdb': the map of {path} is full while {what}; the write was not "
            f"acknowledged — reopen with a larger --opt map_size=BYTES")
    if "No space left" in text or "Disk quota" in text:
        return StorageFullError(f"backend 'lmdb': no space left under {path} while {what}; the "
                                f"write was not acknowledged — free space or use another "
                                f"--opt path=DIR")
    if isinstance(exc, (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.InvalidError)):
        return CorruptDataError(f"backend 'lmdb': {path} is damaged ({what}): {text}")
    return BackendUnavailableError(f"backend 'lmdb': {what} in {path} failed: {text}")


class LMDBBackend(Backend):
    name = "lmdb"
    kind = "embedded"
    durability_modes = ("sync", "none")
    claims = {
        "sync": Claim("sync", "sync: each commit's data pages, then its meta page, are fsync'ed "
                      "before it returns, and the directory once the environment's files exist; "
                      "no acknowledged write may be lost", crash_safe=True, power_safe=True),
        "none": Claim("none", "none: commits are written to the OS unsynced; a power cut may lose "
                      "the latest writes", crash_safe=False, power_safe=False),
    }
    audit_mode = "sync"
    max_value_bytes = MAX_VALUE_BYTES
    options = {
        "path": Option(str, None, "data directory (required; a local path)", nonempty=True),
        "map_size": Option(int, 1 << 40, "bytes of address space reserved for the map: the "
                                         "largest the store may grow", min=1 << 20),
        "max_readers": Option(int, 1024, "concurrent read transactions (one per reading "
                                         "thread)", min=1, max=1 << 20),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.path = claim_local_dir(self.name, self.config["path"])
        try:
            self._env = lmdb.open(self.path, map_size=self.config["map_size"],
                                  sync=self.durability == "sync", metasync=True,
                                  max_readers=self.config["max_readers"], max_dbs=0)
        except OSError as exc:
            raise BackendUnavailableError(
                f"backend 'lmdb': cannot use {self.path}: {exc.strerror or exc}; choose "
                f"another --opt path=DIR") from exc
        except lmdb.LockError as exc:
            raise StoreLockedError(f"backend 'lmdb': cannot lock {self.path}: {exc}") from exc
        except lmdb.Error as exc:
            raise _typed(exc, "opening", self.path) from exc
        try:
            # LMDB creates data.mdb and lock.mdb on the first open and never fsyncs their
            # directory: until it is, a power cut can drop the files with every commit in them
            fsync_dir(self.path)
        except OSError as exc:
            self._env.close()
            raise BackendUnavailableError(
                f"backend 'lmdb': cannot sync {self.path}: {exc.strerror or exc}; choose "
                f"another --opt path=DIR") from exc
        self.max_key_bytes: int = self._env.max_key_size()

    def _key(self, key: str) -> bytes:
        return key_bytes(self.name, key, self.max_key_bytes)

    # -- primitives ---------------------------------------------------------------------------
    def _put(self, key: str, value: bytes) -> None:
        kb = self._key(key)
        try:
            with self._env.begin(write=True) as txn:
                txn.put(kb, value)
        except lmdb.Error as exc:
            raise _typed(exc, f"writing {key!r}", self.path) from exc

    def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        encoded = [(self._key(k), v) for k, v in items]
        try:
            with self._env.begin(write=True) as txn:
                for kb, value in encoded:
                    txn.put(kb, value)
        except lmdb.Error as exc:
            raise _typed(exc, f"writing a batch of {len(items)}", self.path) from exc

    def _get(self, key: str) -> bytes | None:
        kb = self._key(key)
        try:
            with self._env.begin() as txn:
                return txn.get(kb)
        except lmdb.Error as exc:
            raise _typed(exc, f"reading {key!r}", self.path) from exc

    def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        encoded = [self._key(k) for k in keys]
        out = {}
        try:
            with self._env.begin() as txn:
                for key, kb in zip(keys, encoded):
                    value = txn.get(kb)
                    if value is not None:
                        out[key] = value
        except lmdb.Error as exc:
            raise _typed(exc, f"reading {len(keys)} keys", self.path) from exc
        return out

    def _delete(self, key: str) -> None:
        kb = self._key(key)
        try:
            with self._env.begin(write=True) as txn:
                txn.delete(kb)
        except lmdb.Error as exc:
            raise _typed(exc, f"deleting {key!r}", self.path) from exc

    def _delete_many(self, keys: list[str]) -> None:
        """Every delete in one write transaction: one commit."""
        encoded = [self._key(k) for k in keys]
        try:
            with self._env.begin(write=True) as txn:
                for kb in encoded:
                    txn.delete(kb)
        except lmdb.Error as exc:
            raise _typed(exc, f"deleting a batch of {len(keys)}", self.path) from exc

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        lo = self._key(prefix) if prefix else b""
        hi = prefix_end(lo)
        start, first = lo, True
        while True:
            chunk: list[tuple[bytes, bytes]] = []
            with self._env.begin() as txn:
                cur = txn.cursor()
                found = cur.set_range(start)
                if found and not first and cur.key() == start:
                    found = cur.next()  # resume after the last key of the previous chunk
                while found and len(chunk) < SCAN_CHUNK:
                    kb = cur.key()
                    if hi is not None and kb >= hi:
                        break
                    chunk.append((kb, cur.value()))
                    found = cur.next()
            for kb, value in chunk:
                yield kb.decode("utf-8"), value
            if len(chunk) < SCAN_CHUNK:
                return
            start, first = chunk[-1][0], False

    def _flush(self) -> None:
        try:
            self._env.sync(True)
        except lmdb.Error as exc:
            raise _typed(exc, "syncing", self.path) from exc

    def _close(self) -> None:
        try:
            self._flush()
        finally:
            self._env.close()

    def _footprint(self, prefix: str) -> int:
        return local_bytes_held(self.path)

    def _stats(self) -> dict[str, Any]:
        stat, info = self._env.stat(), self._env.info()
        return {"keys": stat["entries"], "depth": stat["depth"], "map_size": info["map_size"],
                "last_txnid": info["last_txnid"], "max_key_bytes": self.max_key_bytes}
