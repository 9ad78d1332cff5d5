"""Which backend a data directory belongs to: the owner marker ``.ckptbench-owner``.

Every backend that keeps its store in a directory (its ``path`` option) calls :func:`claim` when
it opens that directory, before it creates, locks or reads anything in it.  Invariants:

* A directory whose marker names another backend is refused with
  :class:`~backends.base.ForeignDirectoryError` (one line: the owner found and the fix); nothing
  in it is created, changed or deleted.  Two stores of different kinds in one directory would
  each take the other's files for damage or garbage.
* A directory without a marker (an empty one, or a store written before markers existed) is
  refused only when it plainly holds another backend's files and none of the opener's own
  (:data:`SIGNATURES`, matched on file names only, conservatively); otherwise the opener writes
  the marker naming itself and opens it.  So an existing store still opens for its own backend,
  and gets its marker on the way.
* The marker is written whole or not at all (the medium's ``write_atomic``: temporary file,
  rename) and durably (file and directory synced) in every durability mode: it is written once
  per directory, and ``flush()`` promises every file of a store durable, ``none`` included; an
  empty marker, which a crash of another kind of writer could leave, counts as none.  It goes through the store's medium, so it works the same on a local
  directory, ``nfs://`` and ``hdfs://``.

Limits: the check and the write are not one atomic step, so two openers of different backends
racing on the same new, empty directory could both claim it (the later marker wins); each
backend's own lock still keeps two writers of one kind apart.  Recognition without a marker
looks at file names, never contents: a directory of unrelated files is claimed.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Callable

from .base import ForeignDirectoryError
from .media import Medium, storage_errors
from .media.local import LocalMedium

#: the marker's file name (a dot file: no backend takes it for one of its own files)
MARKER = ".ckptbench-owner"


def _any(pattern: str) -> Callable[[set[str]], list[str]]:
    regex = re.compile(pattern)
    return lambda names: sorted(n for n in names if regex.match(n))


def _rocksdb(names: set[str]) -> list[str]:
    """RocksDB's ``CURRENT`` beside its table files or options: a ``CURRENT`` alone says little."""
    if "CURRENT" not in names:
        return []
    rest = _any(r"^(\d+\.sst|OPTIONS-\d+|MANIFEST-\d+)$")(names)
    return ["CURRENT", *rest] if rest else []


#: backend -> the names among a directory's files that only that backend writes (an empty list:
#: none found); how a directory without a marker is recognised
SIGNATURES: dict[str, Callable[[set[str]], list[str]]] = {
    "indexed_fs": _any(r"^(\d{9,}\.seg|snap-\d+\.idx)$"),
    "default_fs": _any(r".+\.ckpt$"),
    "rocksdb": _rocksdb,
    "lmdb": _any(r"^data\.mdb$"),
    "sqlite": _any(r"^store\.sqlite$"),
}


def claim(backend: str, medium: Medium) -> None:
    """Refuse ``medium``'s directory unless it is ``backend``'s or nobody's, then mark it as
    ``backend``'s, durably (see the module docstring)."""
    with storage_errors(backend, medium.path):
        if check(backend, medium):
            # a temporary file of this opener's own: two openers of one kind racing on a new
            # directory (Spark tasks of one instance) then each rename a whole marker, the same
            tmp = f"{MARKER}.{os.getpid()}-{threading.get_ident()}.tmp"
            medium.write_atomic(MARKER, f"{backend}\n".encode(), sync=True, tmp=tmp)


def check(backend: str, medium: Medium) -> bool:
    """Refuse ``medium``'s directory unless it is ``backend``'s or nobody's, writing nothing
    (what a read-only inspection of a store uses); whether it still lacks its marker."""
    names = set(medium.listdir())
    marked = medium.read_file(MARKER).decode("utf-8", "replace").strip() if MARKER in names else ""
    if marked == backend:
        return False
    if marked:
        _refuse(backend, medium, [marked], f"its {MARKER} names {marked!r}")
    found = {b: files for b, match in SIGNATURES.items() if (files := match(names))}
    if found and backend not in found:
        files = [f for b in found for f in found[b]]
        shown = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
        _refuse(backend, medium, list(found), f"it has no {MARKER} but holds {shown}")
    return True


def _refuse(backend: str, medium: Medium, owners: list[str], how: str) -> None:
    raise ForeignDirectoryError(
        f"backend {backend!r}: data directory {medium.path} holds a store of backend "
        f"{' or '.join(map(repr, owners))} ({how}); open it with --backend {owners[0]}, or give "
        f"{backend} another --opt path=DIR")


def claim_local_dir(backend: str, path: str | None) -> str:
    """A local ``path`` prepared as a data directory (created if missing, checked writable:
    :func:`~backends.media.local.prepare_dir`) and claimed for ``backend``; its absolute path.
    For the backends whose library opens the directory itself (rocksdb, lmdb, sqlite)."""
    medium = LocalMedium(path, backend)  # type: ignore[arg-type] # prepare_dir: None refused
    claim(backend, medium)
    return medium.root
