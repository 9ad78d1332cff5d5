"""The incarnation fence: a dead incarnation of an instance never writes a checkpoint.

The checkpoint writer thread outlives the task that fed it (it lives in a reused Python worker),
so a cancelled task of a failed job may still have a checkpoint built from partial input in the
queue — or in flight — when the instance is recovered.  Every instance has an *incarnation*
number in an executor-local fence file.  Recovery bumps it under an exclusive ``flock``
(:func:`new_incarnation`); the writer checks, under a shared lock held across its whole write,
that its item's incarnation is still the current one, else drops the item.  So once recovery has
bumped the number, no write of the old incarnation is in flight and none can start.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Iterator

from ...settings import Settings, local_path


class Fence:
    """The instance's incarnation number, read or bumped under its ``flock``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @property
    def current(self) -> int:
        text = os.pread(self.fd, 32, 0).strip()
        return int(text) if text else 0

    def bump(self) -> int:
        """A new incarnation (only under the exclusive lock): older writers are fenced off."""
        n = self.current + 1
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, str(n).encode(), 0)
        return n


@contextlib.contextmanager
def fence(settings: Settings, instance: int, exclusive: bool = False) -> Iterator[Fence]:
    """Shared: a writer's check-and-write; exclusive: recovery's bump (waits for writers in flight)."""
    fd = os.open(local_path(settings, f"i{instance}.fence"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield Fence(fd)
    finally:
        os.close(fd)  # releases the lock


def new_incarnation(settings: Settings, instance: int) -> int:
    """Fence every older incarnation of ``instance`` off; returns the new incarnation number."""
    with fence(settings, instance, exclusive=True) as f:
        return f.bump()
