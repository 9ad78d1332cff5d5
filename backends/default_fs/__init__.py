"""``default_fs``: S4's original file-system backend — one file per checkpoint key.

Each ``put`` writes the whole checkpoint to a temporary file, fsyncs it, renames it over the key's
file and (in ``sync`` mode) fsyncs the directory, so a crash leaves either the old or the new
checkpoint, never a mix.  It is the baseline the indexed store is measured against: every write
costs a file create, a data sync, a rename and a directory sync, and concurrent writers of
different keys cannot share any of it.

File format: ``CRC32C(4) | key length(4) | value length(4) | key | value`` — the CRC covers
the lengths, the key and the value, so a torn or flipped file is detected and never returned as
data.  The key is inside the file because a file name cannot hold every key: names are the key
percent-encoded, or ``~<sha1>`` when that would be too long.  The header gives the checkpoint's
exact length: bytes past it (appended by something else) are not part of it, so a checkpoint
whose lengths and CRC verify is returned, and the trailing bytes are reported in ``stats()``
warnings and left in place (evidence, never the store's to cut); a file shorter than its header
says is torn and is an error.

Fail points (:mod:`backends.failpoints`): ``default_fs.put.mid_write`` with part of a put's temp
file written and ``default_fs.put.before_rename`` with the temp file complete (and synced) but
not yet renamed.  A crash at either leaves the key's previous checkpoint and a temp file, which
the next open removes.  When one is armed the put writes its file in two parts (so that a
``mid_write`` falls inside it); otherwise the write path is the plain one.

The directory is a storage medium (:mod:`backends.media`): a local path (also a kernel NFS mount)
or an ``nfs://`` URL; the write is the medium's ``write_atomic`` (locally: ``os.write``,
``fdatasync``, ``rename``, directory ``fsync``; over NFS: WRITE+COMMIT, RENAME).
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from typing import Any, Iterator
from urllib.parse import quote, unquote

import crc32c

from .. import failpoints
from ..base import Backend, Claim, CorruptDataError, Option
from ..byte_keys import key_bytes
from ..dir_lock import lock_dir
from ..media import open_data_dir, storage_errors
from ..owner import claim

_HEADER = struct.Struct("<III")  # crc, key length, value length
_SUFFIX = ".ckpt"
_TMP_PREFIX = ".tmp-"
_MAX_NAME = 200  # below NAME_MAX (255) with room for the suffix and temp prefix

_FAILPOINTS = (
    failpoints.declare("default_fs.put.mid_write",
                       "a crash with part of a put's temp file written: the old checkpoint stays"),
    failpoints.declare("default_fs.put.before_rename",
                       "a crash with a put's temp file written and synced, before the rename: "
                       "the old checkpoint stays"),
)


def _fail_step(step: str) -> None:
    failpoints.hit(f"default_fs.put.{step}")


def _key_bytes(key: str) -> bytes:
    return key_bytes("default_fs", key)


def _encode(key: str, value: bytes) -> bytes:
    kb = _key_bytes(key)
    body = struct.pack("<II", len(kb), len(value)) + kb + value
    return struct.pack("<I", crc32c.crc32c(body)) + body


def _decode(path: str, blob: bytes) -> tuple[str, bytes, int]:
    """The key and value of a checkpoint file, and how many bytes follow the checkpoint (not
    part of it); :class:`CorruptDataError` when it is torn or its CRC does not verify."""
    if len(blob) < _HEADER.size:
        raise CorruptDataError(f"default_fs: {path} is truncated ({len(blob)} bytes)")
    crc, klen, vlen = _HEADER.unpack_from(blob)
    end = _HEADER.size + klen + vlen
    if len(blob) < end or crc != crc32c.crc32c(memoryview(blob)[4:end]):
        raise CorruptDataError(f"default_fs: checksum mismatch in {path}; the checkpoint is corrupt")
    key = blob[_HEADER.size : _HEADER.size + klen].decode()
    return key, blob[_HEADER.size + klen : end], len(blob) - end


def _file_name(key: str) -> str:
    """The key's file: percent-encoded, or hashed when too long; a :class:`BadKeyError` for a
    key that has no utf-8 form (every operation on a key starts here)."""
    kb = _key_bytes(key)
    name = quote(kb, safe="")
    if len(name) > _MAX_NAME or name.startswith((".", "~")):
        name = "~" + hashlib.sha1(kb).hexdigest()
    return name + _SUFFIX


class DefaultFSBackend(Backend):
    name = "default_fs"
    kind = "file"
    durability_modes = ("sync", "none")
    media = ("local", "nfs", "hdfs")
    claims = {
        "sync": Claim("sync", "sync: temp file fdatasync'ed, renamed, directory fsync'ed before "
                      "the put returns; no acknowledged write may be lost",
                      crash_safe=True, power_safe=True),
        "none": Claim("none", "none: no fsync; a power cut may lose any write", crash_safe=True,
                      power_safe=False),
    }
    audit_mode = "sync"
    options = {"path": Option(str, None, "data directory (created if missing)", nonempty=True)}

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.medium = open_data_dir(self.name, self.config["path"])
        self.path = self.medium.root
        self.ledger = self.medium.ledger  # its system calls (or client calls) are the store's
        try:
            claim(self.name, self.medium)
            self._lock = lock_dir(self.name, self.medium)
        except BaseException:
            self.medium.close()
            raise
        self._sync = self.durability == "sync"
        # fail points are armed once per process (from the environment): decided here, so an
        # unarmed put passes no step and writes its file in one part
        self._step = _fail_step if any(p in failpoints.armed() for p in _FAILPOINTS) else None
        self._removed_tmp = self._remove_leftover_temp_files()
        self._puts = 0
        #: file name -> bytes found after its checkpoint at the latest read (see _decode)
        self._trailing: dict[str, int] = {}

    def _remove_leftover_temp_files(self) -> int:
        """A crash between create and rename leaves a temp file: never data, so drop it."""
        count = 0
        for name in self.medium.listdir():
            if name.startswith(_TMP_PREFIX):
                self.medium.delete(name)
                count += 1
        return count

    def _put(self, key: str, value: bytes) -> None:
        tmp = f"{_TMP_PREFIX}{os.getpid()}-{threading.get_ident()}"
        blob: bytes | list = _encode(key, value)
        if self._step is not None:  # two parts, so that "mid_write" falls inside the file
            view = memoryview(blob)
            blob = [view[: len(view) // 2], view[len(view) // 2 :]]
        name = _file_name(key)
        with storage_errors(self.name, self.path):
            self.medium.write_atomic(name, blob, self._sync, tmp, self._step)
        self._puts += 1
        if self._trailing:
            self._trailing.pop(name, None)  # the file is new: nothing trails it

    def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        for key, _ in items:  # a key that cannot be stored fails the batch before any write
            _key_bytes(key)
        super()._put_many(items)

    def _get(self, key: str) -> bytes | None:
        name = _file_name(key)
        try:
            blob = self.medium.read_file(name)
        except FileNotFoundError:
            return None
        stored_key, value, trailing = _decode(f"{name} in {self.path}", blob)
        if trailing:
            self._trailing[name] = trailing
        else:
            self._trailing.pop(name, None)  # rewritten since
        if stored_key != key:  # a hash-named file belongs to another key (sha1 collision)
            return None
        return value

    def _delete(self, key: str) -> None:
        name = _file_name(key)
        with storage_errors(self.name, self.path):
            try:
                self.medium.delete(name, missing_ok=False)
            except FileNotFoundError:
                return
            self._trailing.pop(name, None)
            if self._sync:
                self.medium.sync_dir()

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        found: list[str] = []
        for name in self.medium.listdir():
            if not name.endswith(_SUFFIX):
                continue
            if name.startswith("~"):  # hashed name: the key is only inside the file
                try:
                    head = self.medium.read_file(name)
                    _, klen, _ = _HEADER.unpack_from(head)
                    key = head[_HEADER.size : _HEADER.size + klen].decode()
                except (OSError, struct.error, UnicodeDecodeError):
                    continue
            else:
                key = unquote(name[: -len(_SUFFIX)])
            if key.startswith(prefix):
                found.append(key)
        found.sort()
        for key in found:
            value = self._get(key)
            if value is not None:
                yield key, value

    def _flush(self) -> None:
        """Under ``sync`` every put synced its file and the directory; the directory again is a
        cheap barrier.  Under ``none`` no put synced anything: the files' data must be made
        durable too (``sync_all``; nothing to do on media whose writes are durable on return)."""
        with storage_errors(self.name, self.path):
            if not self._sync:
                self.medium.sync_all()
            self.medium.sync_dir()

    def _close(self) -> None:
        try:
            if not self._sync:
                self.medium.sync_all()  # `none` promises nothing per write, but close leaves data on disk
        finally:
            try:
                self._lock.release()
            finally:
                self.medium.close()

    def _footprint(self, prefix: str) -> int:
        return self.medium.bytes_held()

    def _stats(self) -> dict[str, Any]:
        trailing = sorted(self._trailing.copy().items())  # copy(): atomic beside a get
        return {"path": self.path, "medium": self.medium.kind, "puts": self._puts,
                "leftover_temp_files_removed": self._removed_tmp,
                "warnings": [f"{name} in {self.path} has {extra} byte(s) after its checkpoint, "
                             f"which are not part of it: the checkpoint verified and is read; the "
                             f"bytes are left in place (a put of the key rewrites the file)"
                             for name, extra in trailing],
                "lock_lost": getattr(self._lock, "lost", False)}  # lease lock (NFS) taken over
