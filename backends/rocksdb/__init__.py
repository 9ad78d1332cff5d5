"""``rocksdb``: RocksDB (Flink's state backend) through rocksdict, as a peer of ``indexed_fs``.

Keys are utf-8 bytes and values raw bytes (rocksdict's ``raw_mode``: nothing is pickled), so a
prefix scan is one range of RocksDB's byte order (:mod:`backends.byte_keys`).  A batch
(``put_many``) is one ``WriteBatch``: one WAL record, atomic.

Durability modes, as RocksDB's write options set them:

* ``sync`` (default): ``WriteOptions.sync`` — the WAL is synced before ``put`` returns; the write
  survives a power cut.
* ``none``: the WAL record is handed to the OS but not synced; the write survives a crash of the
  process, an OS crash or power cut may lose the latest writes (RocksDB then recovers a
  consistent prefix of them).

Where the binding limits it: rocksdict holds the GIL for the whole of a ``put`` (the WAL write
and its sync included) and of a ``get``.  A Python thread probing while another puts barely runs,
and with the ``statistics`` option ``stats()`` shows ``writes_grouped`` staying at zero under
many writer threads: RocksDB's own group commit, which merges concurrent writers into one WAL
sync, never forms from Python threads, so durable writes from N threads cost N syncs.  The test
suite keeps that fact checked (``tests/test_peer_backends.py``).
"""

from __future__ import annotations

from typing import Any, Iterator

import rocksdict

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
from ..owner import claim_local_dir
from ..media.local import local_bytes_held

#: keys as long as ``indexed_fs`` takes them (RocksDB itself would take longer ones)
MAX_KEY_BYTES = 1 << 16
#: RocksDB refuses a value whose length does not fit 32 bits (``Status::InvalidArgument``)
MAX_VALUE_BYTES = (1 << 32) - 1
#: counters of RocksDB's statistics that ``stats()`` reports, under these names
_STAT_NAMES = {"rocksdb.write.self": "writes_leading", "rocksdb.write.other": "writes_grouped",
               "rocksdb.wal.synced": "wal_syncs", "rocksdb.write.wal": "wal_writes"}


def _typed(exc: Exception, what: str) -> Exception:
    """The typed error for a RocksDB status raised by rocksdict (always a plain ``Exception``)."""
    text = str(exc)
    if "No space left" in text or "Disk quota" in text:
        return StorageFullError(f"backend 'rocksdb': no space left while {what}: {text}; the "
                                f"write was not acknowledged — free space or use another "
                                f"--opt path=DIR")
    if text.startswith("Corruption"):
        return CorruptDataError(f"backend 'rocksdb': {what}: {text}")
    return BackendUnavailableError(f"backend 'rocksdb': {what} failed: {text}")


class RocksDBBackend(Backend):
    name = "rocksdb"
    kind = "embedded"
    durability_modes = ("sync", "none")
    claims = {
        "sync": Claim("sync", "sync: WriteOptions.sync, the WAL is fsync'ed before each put or "
                      "delete returns; no acknowledged write may be lost",
                      crash_safe=True, power_safe=True),
        "none": Claim("none", "none: the WAL is written to the OS unsynced; a power cut may lose "
                      "the latest writes", crash_safe=False, power_safe=False),
    }
    audit_mode = "sync"
    max_value_bytes = MAX_VALUE_BYTES
    options = {
        "path": Option(str, None, "data directory (required; a local path)", nonempty=True),
        "statistics": Option(bool, False, "collect RocksDB's statistics (write groups, WAL "
                                          "syncs) for stats(); costs a little on every write"),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.path = claim_local_dir(self.name, self.config["path"])
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        if self.config["statistics"]:
            opts.enable_statistics()
        self._opts = opts
        try:
            self._db = rocksdict.Rdict(self.path, opts)
        except OSError as exc:
            raise BackendUnavailableError(
                f"backend 'rocksdb': cannot use {self.path}: {exc.strerror or exc}; choose "
                f"another --opt path=DIR") from exc
        except Exception as exc:  # rocksdict raises a plain Exception with RocksDB's status
            if "lock" in str(exc).lower():
                raise StoreLockedError(
                    f"backend 'rocksdb': {self.path} is in use by another process ({exc}); "
                    f"close it there or choose another --opt path=DIR") from exc
            raise _typed(exc, f"opening {self.path}") from exc
        self._write = rocksdict.WriteOptions()
        self._write.sync = self.durability == "sync"

    # -- primitives ---------------------------------------------------------------------------
    def _put(self, key: str, value: bytes) -> None:
        kb = key_bytes(self.name, key, MAX_KEY_BYTES)
        try:
            self._db.put(kb, value, self._write)
        except Exception as exc:
            raise _typed(exc, f"writing {key!r}") from exc

    def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in items:
            batch.put(key_bytes(self.name, key, MAX_KEY_BYTES), value)
        try:
            self._db.write(batch, self._write)
        except Exception as exc:
            raise _typed(exc, f"writing a batch of {len(items)}") from exc

    def _delete_many(self, keys: list[str]) -> None:
        """Every delete in one ``WriteBatch``: one write, atomic."""
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key in keys:
            batch.delete(key_bytes(self.name, key, MAX_KEY_BYTES))
        try:
            self._db.write(batch, self._write)
        except Exception as exc:
            raise _typed(exc, f"deleting a batch of {len(keys)}") from exc

    def _get(self, key: str) -> bytes | None:
        try:
            return self._db.get(key_bytes(self.name, key, MAX_KEY_BYTES))
        except ValueError:
            raise
        except Exception as exc:
            raise _typed(exc, f"reading {key!r}") from exc

    def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        encoded = [key_bytes(self.name, k, MAX_KEY_BYTES) for k in keys]
        try:
            values = self._db.get(encoded)  # a list: RocksDB's MultiGet
        except Exception as exc:
            raise _typed(exc, f"reading {len(keys)} keys") from exc
        return {k: v for k, v in zip(keys, values) if v is not None}

    def _delete(self, key: str) -> None:
        try:
            self._db.delete(key_bytes(self.name, key, MAX_KEY_BYTES), self._write)
        except ValueError:
            raise
        except Exception as exc:
            raise _typed(exc, f"deleting {key!r}") from exc

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        lo = key_bytes(self.name, prefix, MAX_KEY_BYTES) if prefix else b""
        hi = prefix_end(lo)
        it = self._db.iter()
        it.seek(lo)
        while it.valid():
            kb = it.key()
            if hi is not None and kb >= hi:
                break
            yield kb.decode("utf-8"), it.value()
            it.next()

    def _flush(self) -> None:
        try:
            self._db.flush_wal(True)
        except Exception as exc:
            raise _typed(exc, "syncing the WAL") from exc

    def _close(self) -> None:
        """Sync the WAL and close the database.  RocksDB's close writes the memtable to a table
        file, which a full disk refuses; rocksdict then raises a plain ``Exception`` but has
        released the database (its ``LOCK`` too) all the same, so the error is only translated:
        every acknowledged write is in the WAL, which the next open replays."""
        try:
            self._flush()
        finally:
            try:
                self._db.close()
            except Exception as exc:
                err = _typed(exc, "closing")
                if isinstance(err, StorageFullError):
                    err = StorageFullError(
                        f"backend 'rocksdb': no space left to write the memtable while closing "
                        f"{self.path}: {exc}; the store is closed and every acknowledged write "
                        f"is in its WAL, which the next open replays — free space before "
                        f"reopening")
                raise err from exc

    def _footprint(self, prefix: str) -> int:
        return local_bytes_held(self.path)

    def _reclaim(self) -> None:
        self._db.compact_range(None, None)  # drops deleted keys' tombstones and old values

    def _stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "keys_estimated": self._db.property_int_value("rocksdb.estimate-num-keys"),
            "statistics": self.config["statistics"],
        }
        if self.config["statistics"]:
            for line in (self._opts.get_statistics() or "").splitlines():
                name, _, rest = line.partition(" COUNT : ")
                if name in _STAT_NAMES and rest.strip().isdigit():
                    out[_STAT_NAMES[name]] = int(rest)
        return out
