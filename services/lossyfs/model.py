"""What a power cut keeps: the durability bookkeeping of the lossy file system, without FUSE.

The live state of the file system is an ordinary directory tree (``<root>/tree``): every write,
create, rename and unlink is applied there at once, so reads are plain reads.  This module keeps
what is needed to turn that tree back into what a disk would hold after a power cut (:meth:`crash`):

* **File data** (per inode): the *durable size* (the size at the last ``fsync``/``fdatasync``) and
  an *undo log*: before a write or a shrinking truncate changes bytes below the durable size, the
  bytes it replaces are saved.  A crash replays the undo log newest first, which puts back every
  byte as it was at the last sync, then truncates the file to its durable size.  Appends past the
  durable size cost nothing to record.  A sync of the file drops its undo log.
* **Directory entries** (per directory inode): before the first change to a directory since its
  last ``fsync``, its entries (name -> inode, is-directory) are copied; that copy is the durable
  listing.  A directory with no copy is durable as it is now.  A new directory starts with an empty
  durable listing; a new file with durable size 0.
* **Removed inodes**: an unlinked file, a removed directory and the target replaced by a rename are
  moved to ``<root>/limbo/<inode>`` rather than deleted, so a durable listing that still names them
  can bring them back.  Limbo entries no durable listing names are deleted at each directory sync.

With the ``journal`` metadata model (``metadata="journal"``), namespace changes go to one
ordered journal, as on ext4 or XFS: an ``fsync`` of any file or directory commits every namespace
change made before it.  The default ``posix`` model asks for what POSIX promises and no more.

A crash (1) replays every undo log and truncates to the durable sizes (optionally keeping a prefix
of the last unsynced write: a torn write), (2) moves every inode into a flat pool keyed by inode
number, (3) rebuilds the tree from the root by the durable listings, and (4) deletes what no
listing reached.  Inode numbers are the backing file system's, stable across renames, which is
why ``tree``, ``limbo`` and the pool must be on one file system.  Hard links are refused.

Safety argument: every change to durable state goes through one of the ``before_*`` hooks while
the caller holds the file system's lock, so at any instant the undo logs and listings describe the
last synced state exactly; ``crash`` runs under the same lock, so it is atomic with respect to
every operation.
"""

from __future__ import annotations

import os
import random
import shutil
import stat
from dataclasses import dataclass, field

Entry = tuple[int, bool]  # (inode, is a directory)
#: posix: a directory's entries are durable only once that directory is fsynced;
#: journal: any fsync commits every namespace change made before it (one metadata journal)
METADATA_MODELS = ("posix", "journal")


@dataclass
class FileUndo:
    """What it takes to bring one file back to its last synced state."""

    durable_size: int
    undo: list[tuple[int, bytes]] = field(default_factory=list)


@dataclass
class LastWrite:
    """The newest write not yet synced, for a torn-write crash."""

    ino: int
    offset: int
    data: bytes


class Durability:
    """The volatile layer over ``<root>/tree``; every method is called under the caller's lock."""

    def __init__(self, root: str, metadata: str = "posix") -> None:
        if metadata not in METADATA_MODELS:
            raise ValueError(f"metadata model {metadata!r} is not one of "
                             f"{', '.join(METADATA_MODELS)}")
        self.journal = metadata == "journal"
        self.root = os.path.abspath(root)
        self.tree = os.path.join(self.root, "tree")
        self.limbo = os.path.join(self.root, "limbo")
        self.pool = os.path.join(self.root, "pool")
        for path in (self.tree, self.limbo):
            os.makedirs(path, exist_ok=True)
        if os.path.isdir(self.pool):  # a crash that was itself cut short
            shutil.rmtree(self.pool)
        self.files: dict[int, FileUndo] = {}
        self.dirs: dict[int, dict[str, Entry]] = {}
        self.last_write: LastWrite | None = None
        self.root_ino = os.lstat(self.tree).st_ino
        self.counters = {"crashes": 0, "file_syncs": 0, "dir_syncs": 0, "undo_bytes": 0}

    # ------------------------------------------------------------------------- data changes
    def _file(self, ino: int, current_size: int) -> FileUndo:
        state = self.files.get(ino)
        if state is None:  # clean until now: what is there is what is durable
            state = self.files[ino] = FileUndo(current_size)
        return state

    def before_write(self, fd: int, ino: int, offset: int, length: int) -> None:
        """Save the bytes a write of ``length`` at ``offset`` replaces below the durable size."""
        size = os.fstat(fd).st_size
        state = self._file(ino, size)
        end = min(offset + length, state.durable_size)
        if end > offset:
            old = os.pread(fd, end - offset, offset)
            state.undo.append((offset, old))
            self.counters["undo_bytes"] += len(old)

    def after_write(self, ino: int, offset: int, data: bytes) -> None:
        self.last_write = LastWrite(ino, offset, data)

    def before_truncate(self, fd: int, ino: int, new_size: int) -> None:
        """Save the tail a shrinking truncate (or a hole punch) removes below the durable size."""
        size = os.fstat(fd).st_size
        state = self._file(ino, size)
        end = min(size, state.durable_size)
        if end > new_size:
            old = os.pread(fd, end - new_size, new_size)
            state.undo.append((new_size, old))
            self.counters["undo_bytes"] += len(old)

    def before_range_change(self, fd: int, ino: int, offset: int, length: int) -> None:
        """A change to ``length`` bytes at ``offset`` that is not a write (zeroing, punching)."""
        self.before_write(fd, ino, offset, length)

    def created_file(self, ino: int) -> None:
        self.files[ino] = FileUndo(0)

    def synced_file(self, ino: int) -> None:
        """``fsync``/``fdatasync`` (or an ``O_SYNC``/``O_DSYNC`` write): the data is durable."""
        self.files.pop(ino, None)
        if self.last_write is not None and self.last_write.ino == ino:
            self.last_write = None
        self.counters["file_syncs"] += 1
        if self.journal and self.dirs:
            self.dirs.clear()
            self._collect_limbo()

    # -------------------------------------------------------------------- namespace changes
    def before_dir_change(self, dir_path: str) -> None:
        """Copy the durable listing of ``dir_path`` before its first change since its last sync."""
        ino = os.lstat(dir_path).st_ino
        if ino not in self.dirs:
            self.dirs[ino] = self._listing(dir_path)

    @staticmethod
    def _listing(dir_path: str) -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        with os.scandir(dir_path) as it:
            for entry in it:
                st = entry.stat(follow_symlinks=False)
                out[entry.name] = (st.st_ino, stat.S_ISDIR(st.st_mode))
        return out

    def created_dir(self, ino: int) -> None:
        self.dirs[ino] = {}

    def to_limbo(self, path: str) -> None:
        """Take ``path`` out of the tree without destroying its inode (unlink, rmdir, replace)."""
        ino = os.lstat(path).st_ino
        os.rename(path, os.path.join(self.limbo, str(ino)))

    def synced_dir(self, ino: int) -> None:
        """``fsync`` of directory ``ino``: its entries as they are now are durable."""
        if self.journal:
            self.dirs.clear()
        else:
            self.dirs.pop(ino, None)
        self.counters["dir_syncs"] += 1
        self._collect_limbo()

    def _collect_limbo(self) -> None:
        wanted = {ino for listing in self.dirs.values() for ino, _ in listing.values()}
        for name in os.listdir(self.limbo):
            ino = int(name)
            if ino in wanted:
                continue
            path = os.path.join(self.limbo, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
            self.files.pop(ino, None)
            self.dirs.pop(ino, None)

    def sync_all(self) -> None:
        """``sync(2)``: everything is durable as it is now."""
        self.files.clear()
        self.dirs.clear()
        self.last_write = None
        self._collect_limbo()

    def pending(self) -> dict[str, int]:
        """How much is not durable: files with unsynced data, directories with unsynced entries."""
        return {"unsynced_files": len(self.files), "unsynced_dirs": len(self.dirs),
                "limbo": len(os.listdir(self.limbo))}

    # ---------------------------------------------------------------------------- the crash
    def crash(self, torn: bool = False, rng: random.Random | None = None) -> dict[str, int]:
        """Drop everything not durable, in place; returns what was dropped.

        With ``torn``, a random prefix (possibly empty, never all) of the newest unsynced write
        is kept, as a disk that wrote some of its sectors before the power went would."""
        rng = rng or random.Random()
        listings: dict[int, dict[str, Entry]] = {}
        where: dict[int, str] = {}
        self._walk(self.tree, listings, where)
        for name in os.listdir(self.limbo):
            path = os.path.join(self.limbo, name)
            st = os.lstat(path)
            where[st.st_ino] = path
            if stat.S_ISDIR(st.st_mode):
                self._walk(path, listings, where)
        dropped = {"files_rolled_back": 0, "bytes_dropped": 0, "torn_bytes_kept": 0}
        for ino, state in self.files.items():
            path = where.get(ino)
            if path is None or not os.path.isfile(path) or os.path.islink(path):
                continue
            dropped["files_rolled_back"] += 1
            fd = os.open(path, os.O_RDWR)
            try:
                dropped["bytes_dropped"] += max(0, os.fstat(fd).st_size - state.durable_size)
                for offset, old in reversed(state.undo):
                    os.pwrite(fd, old, offset)
                os.ftruncate(fd, state.durable_size)
            finally:
                os.close(fd)
        last = self.last_write
        if torn and last is not None and last.ino in where and len(last.data) > 1:
            keep = rng.randrange(len(last.data))
            if keep:
                fd = os.open(where[last.ino], os.O_RDWR)
                try:
                    os.pwrite(fd, last.data[:keep], last.offset)
                finally:
                    os.close(fd)
                dropped["torn_bytes_kept"] = keep
        # flatten every inode into the pool, deepest first so that paths stay valid
        os.makedirs(self.pool)
        for ino, path in sorted(where.items(), key=lambda kv: -kv[1].count(os.sep)):
            if ino != self.root_ino:
                os.rename(path, os.path.join(self.pool, str(ino)))
        placed = self._place(self.root_ino, self.tree, listings)
        dropped["inodes_dropped"] = len(os.listdir(self.pool))
        dropped["inodes_kept"] = placed
        shutil.rmtree(self.pool)
        self.files.clear()
        self.dirs.clear()
        self.last_write = None
        self.counters["crashes"] += 1
        return dropped

    def _walk(self, top: str, listings: dict[int, dict[str, Entry]], where: dict[int, str]) -> None:
        ino = os.lstat(top).st_ino
        listing = self._listing(top)
        listings[ino] = listing
        where[ino] = top
        for name, (child, is_dir) in listing.items():
            path = os.path.join(top, name)
            where[child] = path
            if is_dir:
                self._walk(path, listings, where)

    def _place(self, ino: int, path: str, listings: dict[int, dict[str, Entry]]) -> int:
        """Move the durable entries of directory ``ino`` from the pool into ``path``."""
        entries = self.dirs.get(ino)
        if entries is None:
            entries = listings.get(ino, {})
        placed = 0
        for name, (child, is_dir) in entries.items():
            src = os.path.join(self.pool, str(child))
            if not os.path.lexists(src):  # already placed elsewhere, or gone
                continue
            dst = os.path.join(path, name)
            os.rename(src, dst)
            placed += 1
            if is_dir:
                placed += self._place(child, dst, listings)
        return placed
