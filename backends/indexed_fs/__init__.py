"""``indexed_fs``: a Bitcask-style append-only checkpoint store (see :mod:`.store`)."""

from .store import IndexedFSBackend

__all__ = ["IndexedFSBackend"]
