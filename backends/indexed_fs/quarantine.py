"""Quarantine: copies of damaged bytes, taken before the store cuts or deletes them.

The store never destroys evidence of damage on its own: a segment found to hold damage (by the
open's walk, a read, a hint's or compaction's walk) is copied whole into ``quarantine/`` (beside
the segments, in the store's directory) when it is found, and again checked to be there before
GC or compaction deletes it; the bytes of a torn tail are copied before the open cuts them off.
Where the copy cannot be made (the quarantine would grow past its cap, ``quarantine_bytes``, or
the medium refuses), the bytes are left where they are: the segment is not deleted, the tail not
cut (the store then writes to a new segment).  One warning says so, and how to make room.

Files are named after what they hold: ``quarantine/<segment file>`` for a whole segment,
``quarantine/<segment file>.<start>-<end>`` for a byte range.  They go through the medium
(:meth:`backends.media.Medium.copy`: temp file, sync, rename), so a quarantine exists on every
medium a store can live on, and a crash leaves either the whole copy or none (a leftover
``*.tmp`` inside ``quarantine/`` is overwritten by the next copy of that name).  The store never
deletes or reads anything in ``quarantine/``: what to keep is the operator's call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import CkptError

if TYPE_CHECKING:
    from ..media import Medium

#: the quarantine directory, relative to the store's directory
DIR = "quarantine"


class Quarantine:
    """The quarantine of one store directory, with a cap on the bytes it may hold."""

    def __init__(self, medium: "Medium", cap: int) -> None:
        self.medium = medium
        self.cap = cap
        self._used: int | None = None  # bytes in DIR, counted once on first use
        #: the one warning the quarantine gives (full, or a copy failed); None: none
        self.warning: str | None = None

    def used(self) -> int:
        """Bytes the quarantine holds (its files' sizes, counted once, then kept up to date)."""
        if self._used is None:
            try:
                names = self.medium.list_files(DIR)
            except FileNotFoundError:
                names = []
            self._used = sum(self.medium.size(f"{DIR}/{n}") for n in names
                             if not n.endswith(".tmp"))
        return self._used

    def keep(self, name: str, start: int = 0, stop: int | None = None) -> bool:
        """Copy bytes ``[start, stop)`` of file ``name`` (``stop`` None: the whole file) into
        the quarantine; ``False`` (and the warning set) where it would pass the cap or the copy
        failed: the caller then leaves the bytes where they are."""
        size = (self.medium.size(name) if stop is None else stop) - start
        dst = f"{DIR}/{name}" if stop is None and start == 0 else f"{DIR}/{name}.{start}-{stop}"
        try:
            old = self.medium.size(dst)  # an earlier copy, replaced (the segment grew since)
        except FileNotFoundError:
            old = 0
        else:
            if old == size:
                return True  # kept already (a sealed segment's bytes never change)
        if self.used() - old + size > self.cap:
            self._warn(f"{DIR}/ is full ({self.used()} of quarantine_bytes={self.cap} bytes): "
                       f"{size} damaged bytes of {name} were left in place, not cut or deleted; "
                       f"move the files out of {DIR}/ (or raise quarantine_bytes) and reopen")
            return False
        try:
            self.medium.makedirs(DIR)
            self.medium.copy(name, dst, start, stop)
        except (OSError, CkptError) as exc:  # full, unreachable: the bytes stay where they are
            self._warn(f"could not copy damaged bytes of {name} into {DIR}/ ({exc}); they were "
                       f"left in place, not cut or deleted")
            return False
        self._used = self.used() - old + size
        return True

    def _warn(self, text: str) -> None:
        if self.warning is None:
            self.warning = text
