"""An operator instance's working state in its executor-local file, mapped rather than copied.

Every task of an instance opens the instance's state, applies one micro-batch and leaves it for the
next task, which may run in another Python worker (:mod:`.operators`).  With state of a size
(:mod:`.sized_state`: a gigabyte an instance) reading the whole file into memory and writing it back
at every micro-batch would cost more than the micro-batch itself, for every protocol alike.  So the
file is the state: :func:`load` maps it (``mmap``, shared) and the state's numpy arrays are views of
the mapping, updated in place; :func:`save` then writes only the header.  Only when an array had to
grow (new keys past its capacity: the state replaced it by a larger one in memory) is the file
written anew, to a temporary name and renamed into place.

Layout: a header of :data:`HEADER_WORDS` little-endian int64 words — magic, the in-progress mark,
the number of scalars and of arrays, the scalars (the state's version, ...), then per array its
dtype code and length — followed by the arrays, each starting on an 8-byte boundary.

Safety: the working state is memory of the instance, not a checkpoint — a killed instance loses it
and the protocol recovers it.  What must never happen is that a task continues from a state that a
dead task had half-updated.  :func:`begin` therefore sets the in-progress mark in the mapped header
before the first change, and :func:`save` clears it after the last; :func:`load` treats a file
still marked as no state at all (the instance is then recovered, see
:class:`~.operators.InstanceStateLost`).
"""

from __future__ import annotations

import mmap
import os
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .keyed_state import KeyedState

MAGIC = 0x3145_5441_5453_4B43  # "CKSTATE1", little-endian
HEADER_WORDS = 64
_DTYPES = (np.dtype(np.int64), np.dtype(np.bool_))
_IN_PROGRESS = 1  # header word


def _aligned(n: int) -> int:
    return (n + 7) & ~7


def _header(state: "KeyedState", arrays: dict[str, np.ndarray], in_progress: int = 0) -> np.ndarray:
    scalars = state.file_scalars()
    head = np.zeros(HEADER_WORDS, "<i8")
    head[:4] = (MAGIC, in_progress, len(scalars), len(arrays))
    head[4:4 + len(scalars)] = list(scalars.values())
    at = 4 + len(scalars)
    for name, a in arrays.items():
        head[at:at + 2] = (_DTYPES.index(a.dtype), len(a))
        at += 2
    return head


def save(path: str, state: "KeyedState") -> None:
    """Leave ``state`` in ``path`` for the instance's next task (see the module doc)."""
    arrays = state.file_arrays()
    mapped = state.mapping
    if mapped is not None and mapped.path == path and mapped.holds(arrays) and mapped.same_file():
        mapped.buffer[:8 * HEADER_WORDS] = _header(state, arrays).tobytes()
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(_header(state, arrays).tobytes())
        for a in arrays.values():
            f.write(np.ascontiguousarray(a).tobytes())
            f.write(b"\0" * (_aligned(a.nbytes) - a.nbytes))
    os.replace(tmp, path)
    state.mapping = None  # the next task maps the new file


def begin(state: "KeyedState") -> None:
    """Mark the mapped file as being changed (a no-op for a state that is not mapped)."""
    if state.mapping is not None:
        state.mapping.buffer[8 * _IN_PROGRESS:8 * _IN_PROGRESS + 8] = np.array([1], "<i8").tobytes()


def load(path: str, cls: "type[KeyedState]") -> "KeyedState | None":
    """The state in ``path``, its arrays views of the mapped file; None when there is none or a
    task died while changing it."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size < 8 * HEADER_WORDS:
            return None
        buffer = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        inode = os.fstat(fd).st_ino
    finally:
        os.close(fd)
    head = np.frombuffer(buffer, "<i8", HEADER_WORDS)
    magic, in_progress, nscalars, narrays = (int(x) for x in head[:4])
    if magic != MAGIC or in_progress:
        return None
    scalars = [int(x) for x in head[4:4 + nscalars]]
    specs, at = [], 4 + nscalars
    for _ in range(narrays):
        specs.append((_DTYPES[int(head[at])], int(head[at + 1])))
        at += 2
    arrays, offset = [], 8 * HEADER_WORDS
    for dtype, n in specs:
        arrays.append(np.frombuffer(buffer, dtype, n, offset))
        offset += _aligned(n * dtype.itemsize)
    state = cls.from_file(arrays, scalars)
    state.mapping = Mapping(path, buffer, inode, state.file_arrays())
    return state


class Mapping:
    """Where a loaded state's arrays live: the mapped file, and the arrays as they were mapped."""

    __slots__ = ("path", "buffer", "inode", "views")

    def __init__(self, path: str, buffer: mmap.mmap, inode: int, views: dict[str, np.ndarray]) -> None:
        self.path, self.buffer, self.inode, self.views = path, buffer, inode, views

    def holds(self, arrays: dict[str, np.ndarray]) -> bool:
        """Whether every array is still the mapped view (none was replaced by a larger one)."""
        return arrays.keys() == self.views.keys() and all(a is self.views[n] for n, a in arrays.items())

    def same_file(self) -> bool:
        """Whether ``path`` is still the mapped file (not dropped or replaced since)."""
        try:
            return os.stat(self.path).st_ino == self.inode
        except FileNotFoundError:
            return False
