"""Backend access for one participant (the driver, or operator instance ``i``) of a Spark job.

The file backends take a single-writer lock on their directory, and Spark runs a task in whichever
Python worker is idle — so two processes may act for the same instance one after the other, and
the driver and the instances are always different processes.  Hence:

* every participant has its own namespace: keys ``<jobId>/<owner>/...``, and for backends with a
  ``path`` option its own sub-directory ``<path>/<jobId>/<owner>`` (no lock is ever shared);
* path backends are opened for a use and closed after it (releasing the lock; a worker that
  crashed released it too), retrying briefly while a dying task of the same instance still holds it;
* server backends (redis, ...) keep one connection per process, reused across tasks.

Every read (and every open of a path backend, which reads its index) is reported to the recovery
meter of the calling thread (:mod:`.phases`), so a restore's load time and bytes are measured here,
for every protocol, without the protocol doing anything.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Iterator

from backends import Backend, backend_class, open_backend
from backends.media import Medium, join, open_medium
from backends.base import StoreLockedError

from . import phases
from .errors import SparkIntegrationError
from .settings import Settings

_cached: dict[tuple, Backend] = {}


def _is_path_backend(settings: Settings) -> bool:
    return backend_class(settings.backend).keeps_a_directory()


def prefix(settings: Settings, owner: str) -> str:
    return f"{settings.job_id}/{owner}/"


class Scoped:
    """The backend seen through one participant's key prefix, counting the operations issued."""

    def __init__(self, backend: Backend, key_prefix: str) -> None:
        self.backend, self.prefix, self.ops = backend, key_prefix, 0

    def put(self, key: str, value: bytes) -> None:
        self.ops += 1
        with phases.timed("write_s"):
            self.backend.put(self.prefix + key, value)

    def put_many(self, items: list[tuple[str, bytes | memoryview]]) -> None:
        """Several records in one call: the backend's batch path (pipeline, batch put, one
        group commit) where it has one."""
        self.ops += 1
        with phases.timed("write_s"):
            self.backend.put_many([(self.prefix + k, v) for k, v in items])

    def get(self, key: str) -> bytes | None:
        self.ops += 1
        with phases.reading() as nbytes:
            value = self.backend.get(self.prefix + key)
            nbytes.append(len(value) if value else 0)
        return value

    def delete(self, key: str) -> None:
        self.ops += 1
        with phases.timed("write_s"):
            self.backend.delete(self.prefix + key)

    def delete_many(self, keys: list[str]) -> None:
        """Several deletes in one call: the backend's batch path (one ``DEL``, ``DeleteObjects``,
        one group commit of tombstones) where it has one."""
        self.ops += 1
        with phases.timed("write_s"):
            self.backend.delete_many([self.prefix + k for k in keys])

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        self.ops += 1
        with phases.reading() as nbytes:
            found = self.backend.get_many([self.prefix + k for k in keys])
            nbytes.append(sum(len(v) for v in found.values()))
        return {k[len(self.prefix):]: v for k, v in found.items()}

    def scan(self, key_prefix: str = "") -> list[tuple[str, bytes]]:
        self.ops += 1
        with phases.reading() as nbytes:
            found = [(k[len(self.prefix):], v) for k, v in self.backend.scan(self.prefix + key_prefix)]
            nbytes.append(sum(len(v) for _, v in found))
        return found

    def keys(self, key_prefix: str = "") -> list[str]:
        """The keys under ``key_prefix``, ordered, without reading a value."""
        self.ops += 1
        return [k[len(self.prefix):] for k in self.backend.keys(self.prefix + key_prefix)]

    def flush(self) -> None:
        with phases.timed("write_s"):
            self.backend.flush()

    def footprint(self) -> int | None:
        return self.backend.footprint(self.prefix)


#: how long a participant waits for its directory while another process holds it (a task and a
#: writer of the same instance in two Python workers take turns)
LOCK_WAIT = 20.0
#: how long the driver's census of the participants' directories (the job's keys and their
#: sizes, its footprint, the drop of its records: at the run's end, and after each checkpoint
#: with ``--orphans``) waits for one a process holds: an executor's asynchronous checkpoint writer
#: (``uncoordinated``) may still be writing, and a checkpoint of gigabytes takes this disk
#: minutes.  The lock goes with its holder, so the wait ends when that write does; the census
#: then counts what the write left, not a directory half-written.
DRIVER_LOCK_WAIT = 600.0


@contextlib.contextmanager
def participant_store(settings: Settings, owner: str, lock_wait: float | None = None) -> Iterator[Scoped]:
    """The backend as seen by ``owner`` ("driver", "i0", ...), for the duration of a ``with``;
    a path backend's directory held by another process is waited for up to ``lock_wait``
    seconds (default :data:`LOCK_WAIT`)."""
    options = dict(settings.backend_options)
    with phases.reading():  # finding the backend imports it (a fresh Python worker's first use)
        path_backend = _is_path_backend(settings)
    if path_backend:
        if not options.get("path"):  # from_conf fills in a default: Settings built by hand
            raise SparkIntegrationError(
                f"backend {settings.backend!r} needs a path option; build the settings with "
                f"spark_integration.conf.from_conf or give backend_options={{'path': DIR}}")
        options["path"] = join(options["path"], settings.job_id, owner)
        deadline = time.monotonic() + (LOCK_WAIT if lock_wait is None else lock_wait)
        while True:
            try:
                with phases.reading():  # opening a path backend reads its index
                    store = open_backend(settings.backend, **options)
                break
            except StoreLockedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        try:
            yield Scoped(store, "")
        finally:
            store.close()
        return
    key = (settings.backend, tuple(sorted(options.items())))
    store = _cached.get(key)
    if store is None or store.closed:
        with phases.reading():
            store = _cached[key] = open_backend(settings.backend, **options)
    yield Scoped(store, prefix(settings, owner))


def job_keys(settings: Settings) -> dict[str, list[str]]:
    """Every key job ``settings.job_id`` holds in the store, by participant (``driver``, ``i0``,
    ``log-s0``, ...), as the participant's store sees it (without the job's prefix); lists
    keys only (:meth:`~backends.base.Backend.keys`), reads no value."""
    if not _is_path_backend(settings):  # one namespace on the server: the job's key prefix
        with participant_store(settings, "driver") as store:
            job = f"{settings.job_id}/"
            found: dict[str, list[str]] = {}
            for key in store.backend.keys(job):
                owner, _, rest = key[len(job):].partition("/")
                found.setdefault(owner, []).append(rest)
            return found
    out = {}
    for owner in _owners(settings):
        with participant_store(settings, owner, DRIVER_LOCK_WAIT) as store:
            out[owner] = store.backend.keys("")
    return out


def _owners(settings: Settings) -> list[str]:
    """The participants of job ``settings.job_id`` on a path backend: one directory each."""
    with _job_directory(settings) as medium:
        files = set(medium.list_files())
        return [n for n in medium.listdir() if n not in files]


@contextlib.contextmanager
def _job_directory(settings: Settings) -> Iterator[Medium]:
    """The directory holding job ``settings.job_id``'s participants (a path backend's), on its
    medium, for the length of a ``with``."""
    medium = open_medium(join(settings.backend_options["path"], settings.job_id))
    try:
        yield medium
    finally:
        medium.close()


def job_footprint(settings: Settings) -> tuple[int | None, int | None]:
    """The bytes the store holds for job ``settings.job_id`` (every participant's namespace:
    checkpoints, commit records, sender logs) as the run left them, and again after the store's
    own GC (:meth:`~backends.base.Backend.reclaim`); ``(None, None)`` where the store cannot
    attribute bytes to the job (HBase)."""
    if not _is_path_backend(settings):
        with participant_store(settings, "driver") as store:
            backend, job = store.backend, f"{settings.job_id}/"
            before = backend.footprint(job)
            if before is None:
                return None, None
            backend.reclaim()
            return before, backend.footprint(job)
    before = after = 0
    for owner in _owners(settings):
        with participant_store(settings, owner, DRIVER_LOCK_WAIT) as store:
            before += store.footprint() or 0
            store.backend.reclaim()
            after += store.footprint() or 0
    return before, after


#: keys a call of :func:`drop_job` deletes at a time (the backend splits further to its limits)
DROP_BATCH = 10_000


def drop_job(settings: Settings) -> int:
    """Delete every record job ``settings.job_id`` left in the store — each participant's
    checkpoints, commit records and sender logs — through the store's own deletes, then let the
    store collect the space (:meth:`~backends.base.Backend.reclaim`); returns the keys deleted.
    Called when a run has ended and measured its footprint, so a benchmark of gigabytes does
    not leave gigabytes on a server; keys of other jobs and files the store did not write are
    never touched."""
    if not _is_path_backend(settings):  # one namespace on the server: the job's key prefix
        with participant_store(settings, "driver") as store:
            return _delete_all(store.backend, f"{settings.job_id}/")
    job_local = os.path.join(os.path.abspath(settings.state_dir), settings.job_id) + os.sep
    if os.path.abspath(str(settings.backend_options["path"])).startswith(job_local):
        return 0  # the default directory: inside the job's working state, removed with it
    deleted = 0
    for owner in _owners(settings):
        with participant_store(settings, owner, DRIVER_LOCK_WAIT) as store:
            deleted += _delete_all(store.backend, "")
    return deleted


def _delete_all(backend: Backend, key_prefix: str) -> int:
    keys = backend.keys(key_prefix)
    for start in range(0, len(keys), DROP_BATCH):
        backend.delete_many(keys[start:start + DROP_BATCH])
    backend.reclaim()
    return len(keys)


def evict_job(settings: Settings) -> str:
    """Drop job ``settings.job_id``'s files from this machine's page cache before a restore:
    ``"cold"``, or ``"warm: WHY"`` where the restore cannot be made cold (a server keeps the
    data in its own memory or cache; a memory file system; a remote medium's server cache)."""
    if not _is_path_backend(settings):
        return f"warm: {settings.backend} keeps its data in its server's memory or cache"
    with _job_directory(settings) as medium:
        why = medium.evict()
    return "cold" if why is None else f"warm: {why}"
