"""``default_fs``: S4's original file-system backend — one file per checkpoint key.

Each ``put`` writes the whole checkpoint to a temporary file, fsyncs it, renames it over the key's
file and (in ``sync`` mode) fsyncs the directory, so a crash leaves either the old or the new
checkpoint, never a mix.  It is the baseline the indexed store is measured against: every write
costs a file create, a data sync, a rename and a directory sync, and concurrent writers of
different keys cannot share any of it.

File format: ``CRC32C(4) | key length(4) | value length(4) | key | value`` — the CRC covers
everything after itself, so a torn or flipped file is detected and never returned as data.  The key
is inside the file because a file name cannot hold every key: names are the key percent-encoded, or
``~<sha1>`` when that would be too long.
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from typing import Any, Iterator
from urllib.parse import quote, unquote

import crc32c

from ..base import Backend, CorruptDataError, Option
from ..fsutil import DirLock, fsync_dir, prepare_dir, storage_errors, write_all

_HEADER = struct.Struct("<III")  # crc, key length, value length
_SUFFIX = ".ckpt"
_TMP_PREFIX = ".tmp-"
_MAX_NAME = 200  # below NAME_MAX (255) with room for the suffix and temp prefix


def _encode(key: str, value: bytes) -> bytes:
    kb = key.encode()
    body = struct.pack("<II", len(kb), len(value)) + kb + value
    return struct.pack("<I", crc32c.crc32c(body)) + body


def _decode(path: str, blob: bytes) -> tuple[str, bytes]:
    if len(blob) < _HEADER.size:
        raise CorruptDataError(f"default_fs: {path} is truncated ({len(blob)} bytes)")
    crc, klen, vlen = _HEADER.unpack_from(blob)
    if crc != crc32c.crc32c(memoryview(blob)[4:]) or len(blob) != _HEADER.size + klen + vlen:
        raise CorruptDataError(f"default_fs: checksum mismatch in {path}; the checkpoint is corrupt")
    key = blob[_HEADER.size : _HEADER.size + klen].decode()
    return key, blob[_HEADER.size + klen :]


def _file_name(key: str) -> str:
    name = quote(key, safe="")
    if len(name) > _MAX_NAME or name.startswith((".", "~")):
        name = "~" + hashlib.sha1(key.encode()).hexdigest()
    return name + _SUFFIX


class DefaultFSBackend(Backend):
    name = "default_fs"
    durability_modes = ("sync", "none")
    options = {"path": Option(str, None, "data directory (created if missing)")}

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.path = prepare_dir(self.name, self.config["path"])
        self._lock = DirLock(self.name, self.path)
        self._sync = self.durability == "sync"
        self._removed_tmp = self._remove_leftover_temp_files()
        self._puts = 0

    def _remove_leftover_temp_files(self) -> int:
        """A crash between create and rename leaves a temp file: never data, so drop it."""
        count = 0
        for entry in os.scandir(self.path):
            if entry.name.startswith(_TMP_PREFIX):
                os.unlink(entry.path)
                count += 1
        return count

    def _file(self, key: str) -> str:
        return os.path.join(self.path, _file_name(key))

    def _put(self, key: str, value: bytes) -> None:
        target = self._file(key)
        tmp = os.path.join(self.path, f"{_TMP_PREFIX}{os.getpid()}-{threading.get_ident()}")
        with storage_errors(self.name, self.path):
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    write_all(fd, _encode(key, value))
                    if self._sync:
                        os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, target)
            except BaseException:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
                raise
            if self._sync:
                fsync_dir(self.path)
        self._puts += 1

    def _get(self, key: str) -> bytes | None:
        path = self._file(key)
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except FileNotFoundError:
            return None
        stored_key, value = _decode(path, blob)
        if stored_key != key:  # a hash-named file belongs to another key (sha1 collision)
            return None
        return value

    def _delete(self, key: str) -> None:
        with storage_errors(self.name, self.path):
            try:
                os.unlink(self._file(key))
            except FileNotFoundError:
                return
            if self._sync:
                fsync_dir(self.path)

    def _scan(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        found: list[tuple[str, str]] = []
        for entry in os.scandir(self.path):
            name = entry.name
            if not name.endswith(_SUFFIX):
                continue
            if name.startswith("~"):  # hashed name: the key is only inside the file
                try:
                    with open(entry.path, "rb") as f:
                        head = f.read(_HEADER.size)
                        _, klen, _ = _HEADER.unpack(head)
                        key = f.read(klen).decode()
                except (OSError, struct.error, UnicodeDecodeError):
                    continue
            else:
                key = unquote(name[: -len(_SUFFIX)])
            if key.startswith(prefix):
                found.append((key, entry.path))
        found.sort()
        for key, path in found:
            value = self._get(key)
            if value is not None:
                yield key, value

    def _flush(self) -> None:
        fsync_dir(self.path)

    def _close(self) -> None:
        try:
            if not self._sync:
                os.sync()  # `none` promises nothing per write, but close leaves data on disk
        finally:
            self._lock.release()

    def _stats(self) -> dict[str, Any]:
        return {"path": self.path, "puts": self._puts, "leftover_temp_files_removed": self._removed_tmp}
