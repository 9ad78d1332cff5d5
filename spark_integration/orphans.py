"""What a protocol left in the store that its recovery line does not reference: the orphans.

A protocol knows which of its records a recovery would read if an instance failed now
(:meth:`~spark_integration.protocols.base.Protocol.references`): per participant namespace
(``driver``, ``i0``, ``log-s0``, ...) the checkpoints of its recovery line (a checkpoint is its
commit record, its pieces and their index: :mod:`spark_integration.layouts.base`), single records
(coordinated's commit records, logio's acknowledgements of Input Sets not yet committed) and the
tail of a log from a key on (the senders' entries a recovery would replay).  Everything else the
job holds in the store is an orphan: space the store bills for that no recovery will read.

:func:`census` lists the job's keys (:meth:`~backends.base.Backend.keys`: one listing per
namespace, no value read) and reads only the orphans' values, to count their bytes.  Each orphan
has a kind:

* ``stale``: a record the recovery line has passed — a checkpoint (its commit record is there,
  and its pieces), a commit record, an acknowledgement;
* ``torn``: pieces (and their index) of a checkpoint whose commit record is not there — a write
  cut short by a failure, which no reader takes for a checkpoint and which a protocol that finds
  its checkpoints by their commit records never deletes;
* ``unfinished``: such pieces of a checkpoint named after the recovery line's latest one: being
  written (an asynchronous writer's, uncoordinated's and cic's, runs beside the micro-batches),
  or cut short since the line's checkpoint; a later checkpoint makes them ``torn`` if they stay;
* ``log``: a sender's log entries that no recovery line replays any more;
* ``other``: a record in a namespace the protocol does not name.

Safety: a census only lists and reads; it writes and deletes nothing, so taking one changes no
store and no result (it costs requests and time, which the caller reports apart from the run's).
Invariant: the referenced objects and the orphans are every key the job holds, each counted once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from backends.base import binary_units

from .layouts.base import PIECES
from .settings import Settings
from .store import DRIVER_LOCK_WAIT, job_keys, participant_store

KINDS = ("stale", "torn", "unfinished", "log", "other")
#: orphans whose bytes are read at a time
READ_BATCH = 4096


@dataclass(frozen=True)
class References:
    """The records of one participant's namespace a recovery would read now (module doc)."""

    #: checkpoint names (layouts' commit records): the record, its pieces and their index
    checkpoints: frozenset[str] = frozenset()
    #: single records, by key
    keys: frozenset[str] = frozenset()
    #: key prefix -> the first key under it that is referenced: every key under the prefix that
    #: sorts at or after it is (a log's tail; its keys are zero-padded so they sort in order)
    tails: tuple[tuple[str, str], ...] = ()

    def covers(self, key: str) -> bool:
        if key in self.keys or key in self.checkpoints:
            return True
        if key.startswith(PIECES) and _piece_owner(key) in self.checkpoints:
            return True
        return any(key.startswith(p) and key >= first for p, first in self.tails)


def _piece_owner(key: str) -> str:
    """The checkpoint a piece (or its index) belongs to: ``pieces/<name>/<id>`` -> ``<name>``."""
    return key[len(PIECES):].rsplit("/", 1)[0]


@dataclass
class Census:
    """The orphans one census found: objects and bytes, in all and by kind, and the objects the
    recovery line references."""

    objects: int = 0
    bytes: int = 0
    kinds: dict[str, list[int]] = field(default_factory=dict)  # kind -> [objects, bytes]
    referenced: int = 0
    ms: float = 0.0  # the census' own time (listing and reading)

    @property
    def settled(self) -> int:
        """The orphans but the ``unfinished`` ones (which may be a checkpoint being written)."""
        return self.objects - self.kinds.get("unfinished", [0, 0])[0]

    def as_dict(self) -> dict[str, Any]:
        return {"objects": self.objects, "settled": self.settled, "bytes": self.bytes, "referenced": self.referenced,
                "kinds": {k: {"objects": o, "bytes": b} for k, (o, b) in self.kinds.items()},
                "ms": round(self.ms, 1)}


def classify(owner: str, keys: Iterable[str], refs: References | None) -> dict[str, str]:
    """The orphans among ``keys`` of namespace ``owner``, each with its kind (module doc)."""
    keys = list(keys)
    present = set(keys)
    latest = max(refs.checkpoints) if refs is not None and refs.checkpoints else ""
    out: dict[str, str] = {}
    for key in keys:
        if refs is not None and refs.covers(key):
            continue
        if key.startswith(PIECES):
            name = _piece_owner(key)
            out[key] = "stale" if name in present else "unfinished" if name > latest else "torn"
        elif owner.startswith("log-"):
            out[key] = "log"
        else:
            out[key] = "stale" if refs is not None else "other"
    return out


def census(settings: Settings, references: dict[str, References], sizes: bool = True) -> Census:
    """The job's orphans in the store now, against ``references`` (a namespace it does not name
    is all orphans); reads the orphans' values to count their bytes (``sizes``), nothing else."""
    t = time.perf_counter()
    result = Census()
    for owner, keys in job_keys(settings).items():
        refs = references.get(owner)
        orphans = classify(owner, keys, refs)
        result.referenced += len(keys) - len(orphans)
        if not orphans:
            continue
        found = _sizes(settings, owner, sorted(orphans)) if sizes else {}
        for key, kind in orphans.items():
            slot = result.kinds.setdefault(kind, [0, 0])
            slot[0] += 1
            slot[1] += found.get(key, 0)
        result.objects += len(orphans)
        result.bytes += sum(found.values())
    result.ms = (time.perf_counter() - t) * 1e3
    return result


def settle(settings: Settings, quiet_s: float = 1.0, limit_s: float = 30.0) -> None:
    """Wait until the job's keys stop changing for ``quiet_s`` (at most ``limit_s``): an
    asynchronous writer may still be writing the last checkpoints when the last micro-batch
    is done, and a census should see what it leaves, not what it is doing."""
    deadline = time.monotonic() + limit_s
    seen = job_keys(settings)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = job_keys(settings)
        if now == seen:
            return
        seen = now


def _sizes(settings: Settings, owner: str, keys: list[str]) -> dict[str, int]:
    """The byte length of each of ``keys`` in ``owner``'s namespace (one gone meanwhile: absent)."""
    sizes: dict[str, int] = {}
    with participant_store(settings, owner, DRIVER_LOCK_WAIT) as store:
        for start in range(0, len(keys), READ_BATCH):
            sizes.update((k, len(v)) for k, v in store.get_many(keys[start:start + READ_BATCH]).items())
    return sizes


def growing(series: list[int]) -> bool:
    """Whether the orphans counted after each checkpoint grow: past the first checkpoint (which
    has no predecessor for a lazy GC to leave behind), the floor (the minimum) of the last half
    of the series above the floor of the first half.  A protocol that collects lazily
    (coordinated deletes a chain of epochs at the checkpoint after the next full one) leaves a
    sawtooth whose floor stays put; orphans nothing collects raise the floor."""
    series = series[1:]
    if len(series) < 3:
        return False
    half = max(2, len(series) // 2)
    return min(series[-half:]) > min(series[:half])


def report(each: list[Census], before: Census, after: Census) -> dict[str, Any]:
    """The JSON's ``orphans`` section: the census after every checkpoint (objects: it reads no
    value), as the run left the store (before the protocol's GC) and after it, and whether the
    count grew."""
    series = [c.settled for c in each]
    return {"each": [c.as_dict() for c in each], "before_gc": before.as_dict(), "after_gc": after.as_dict(),
            "growing": growing(series),
            "census_ms": round(sum(c.ms for c in each) + before.ms + after.ms, 1)}


def lines(section: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``[ORPHANS], <name>, <value>`` lines of a :func:`report`."""
    out = []
    each = [c["settled"] for c in section["each"]]
    if each:
        verdict = ("growing: its floor rose over the run, a leak or a GC slower than the run"
                   if section["growing"]
                   else "not growing")
        out.append(("AfterEachCheckpoint", f"{' '.join(map(str, each))} objects, unfinished ones "
                                           f"left out ({verdict})"))
    for name, key in (("BeforeGC", "before_gc"), ("AfterGC", "after_gc")):
        c = section[key]
        kinds = " ".join(f"{k}={v['objects']}/{_size(v['bytes'])}" for k, v in sorted(c["kinds"].items()))
        out.append((f"{name}.Objects", f"{c['objects']}{f' ({kinds})' if kinds else ''}"))
        out.append((f"{name}.Bytes", f"{c['bytes']} ({_size(c['bytes'])})"))
        out.append((f"{name}.Referenced", f"{c['referenced']}"))
    out.append(("CensusTime(ms)", f"{section['census_ms']:g}"))
    return out


def _size(n: int) -> str:
    size, unit = binary_units(n)
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
