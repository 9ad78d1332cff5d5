"""``sqlite``: SQLite in WAL mode through the standard library, as a peer of ``indexed_fs``.

One table ``kv(k BLOB PRIMARY KEY, v BLOB)`` in ``store.sqlite`` inside the data directory; keys
are utf-8 bytes, so a prefix scan is one range of SQLite's ``memcmp`` order
(:mod:`backends.byte_keys`), read in pages so that no statement stays open between items.  Every
``put`` is one autocommit statement; ``put_many`` one transaction (atomic).

Durability modes, as ``PRAGMA synchronous`` sets them (WAL journal):

* ``sync`` (default): ``FULL`` — the WAL is synced at every commit before ``put`` returns; the
  write survives a power cut.
* ``normal``: ``NORMAL`` — the WAL is synced only at checkpoints; a commit survives a crash of
  the process, an OS crash or power cut may roll back the latest commits, and the database stays
  consistent.
* ``none``: ``OFF`` — no syncs at all; a commit survives a crash of the process, an OS crash or
  power cut may lose commits or damage the database.

Where the binding limits it: ``sqlite3`` releases the GIL while a statement runs (its I/O and
syncs included), but SQLite admits one writer at a time and has no group commit, and the store
shares one connection behind a lock: durable writes from N threads are N serial syncs.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any, Iterator

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

FILE_NAME = "store.sqlite"
#: keys as long as ``indexed_fs`` takes them
MAX_KEY_BYTES = 1 << 16
#: SQLite's default ``SQLITE_MAX_LENGTH``: the longest string, blob or row it stores
ROW_LIMIT = 1_000_000_000
#: a row holds the key and a record header besides the value
MAX_VALUE_BYTES = ROW_LIMIT - MAX_KEY_BYTES - 64
#: ``PRAGMA synchronous`` per durability mode
SYNCHRONOUS = {"sync": "FULL", "normal": "NORMAL", "none": "OFF"}
#: rows read per statement during a scan, keys per ``IN (...)`` in ``get_many``
PAGE = 256


def _typed(exc: sqlite3.Error, what: str, path: str) -> Exception:
    """The typed error for a ``sqlite3.Error``."""
    code = getattr(exc, "sqlite_errorcode", None)
    text = str(exc)
    if code == sqlite3.SQLITE_FULL or "disk is full" in text:
        return StorageFullError(f"backend 'sqlite': no space left under {path} while {what}; "
                                f"the write was not acknowledged — free space or use another "
                                f"--opt path=DIR")
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or "malformed" in text:
        return CorruptDataError(f"backend 'sqlite': {path} is damaged ({what}): {text}")
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreLockedError(f"backend 'sqlite': {path} is locked by another process "
                                f"({what}: {text}); close it there or choose another --opt "
                                f"path=DIR")
    return BackendUnavailableError(f"backend 'sqlite': {what} in {path} failed: {text}")


class SQLiteBackend(Backend):
    name = "sqlite"
    kind = "embedded"
    durability_modes = ("sync", "normal", "none")
    claims = {
        "sync": Claim("sync", "sync: WAL mode, synchronous=FULL, the WAL is fsync'ed at each "
                      "commit; no acknowledged write may be lost", crash_safe=True,
                      power_safe=True),
        "normal": Claim("normal", "normal: WAL mode, synchronous=NORMAL, the WAL is fsync'ed at "
                        "checkpoints only; a power cut may roll back the latest commits",
                        crash_safe=False, power_safe=False),
        "none": Claim("none", "none: synchronous=OFF, nothing is fsync'ed; a power cut may lose "
                      "any write", crash_safe=False, power_safe=False),
    }
    audit_mode = "sync"
    max_value_bytes = MAX_VALUE_BYTES
    options = {
        "path": Option(str, None, "data directory (required; a local path)", nonempty=True),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.path = claim_local_dir(self.name, self.config["path"])
        self.file = os.path.join(self.path, FILE_NAME)
        self._lock = threading.Lock()  # one connection, shared by every thread
        try:
            self._db = sqlite3.connect(self.file, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise _typed(exc, "opening", self.file) from exc
        try:
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise BackendUnavailableError(
                    f"backend 'sqlite': {self.file} cannot use a WAL journal (got {mode!r})")
            self._db.execute(f"PRAGMA synchronous={SYNCHRONOUS[self.durability]}")
            self._db.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL)")
        except sqlite3.Error as exc:
            self._db.close()
            raise _typed(exc, "opening", self.file) from exc
        except BaseException:
            self._db.close()
            raise

    def _key(self, key: str) -> bytes:
        return key_bytes(self.name, key, MAX_KEY_BYTES)

    def _run(self, what: str, sql: str, args: tuple = ()) -> list[tuple]:
        """One statement under the connection lock; its rows."""
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise _typed(exc, what, self.file) from exc

    # -- primitives ---------------------------------------------------------------------------
    def _put(self, key: str, value: bytes) -> None:
        self._run(f"writing {key!r}", "INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)",
                  (self._key(key), value))

    def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        rows = [(self._key(k), v) for k, v in items]
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", rows)
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise _typed(exc, f"writing a batch of {len(items)}", self.file) from exc

    def _get(self, key: str) -> bytes | None:
        rows = self._run(f"reading {key!r}", "SELECT v FROM kv WHERE k = ?", (self._key(key),))
        return rows[0][0] if rows else None

    def _get_many(self, keys: list[str]) -> dict[str, bytes]:
        by_bytes = {self._key(k): k for k in keys}
        wanted = list(by_bytes)
        out = {}
        for i in range(0, len(wanted), PAGE):
            page = wanted[i : i + PAGE]
            marks = ",".join("?" * len(page))
            for kb, value in self._run(f"reading {len(page)} keys",
                                       f"SELECT k, v FROM kv WHERE k IN ({marks})", tuple(page)):
                out[by_bytes[kb]] = value
        return out

    def _delete(self, key: str) -> None:
        self._run(f"deleting {key!r}", "DELETE FROM kv WHERE k = ?", (self._key(key),))

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        lo = self._key(prefix) if prefix else b""
        hi = prefix_end(lo)
        cond, args = "k >= ?", [lo]
        while True:
            sql = f"SELECT k, v FROM kv WHERE {cond}"
            if hi is not None:
                sql += " AND k < ?"
            rows = self._run("scanning", sql + f" ORDER BY k LIMIT {PAGE}",
                             tuple(args + ([hi] if hi is not None else [])))
            for kb, value in rows:
                yield kb.decode("utf-8"), value
            if len(rows) < PAGE:
                return
            cond, args = "k > ?", [rows[-1][0]]

    def _flush(self) -> None:
        """Sync every commit now: a checkpoint under ``synchronous=FULL`` syncs the WAL before
        copying it into the database, and the database after."""
        with self._lock:
            try:
                self._db.execute("PRAGMA synchronous=FULL")
                try:
                    self._db.execute("PRAGMA wal_checkpoint(FULL)").fetchall()
                finally:
                    self._db.execute(f"PRAGMA synchronous={SYNCHRONOUS[self.durability]}")
            except sqlite3.Error as exc:
                raise _typed(exc, "syncing", self.file) from exc

    def _close(self) -> None:
        try:
            self._flush()
        finally:
            with self._lock:
                self._db.close()

    def _footprint(self, prefix: str) -> int:
        return local_bytes_held(self.path)

    def _stats(self) -> dict[str, Any]:
        (keys,), = self._run("counting keys", "SELECT count(*) FROM kv")
        return {"keys": keys, "synchronous": SYNCHRONOUS[self.durability],
                "sqlite_version": sqlite3.sqlite_version}
