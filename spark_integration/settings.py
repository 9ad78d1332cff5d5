"""The validated settings of one job, as shipped from the driver to every executor.

Plain, picklable data: the driver builds it once (:func:`spark_integration.conf.from_conf`) and
it travels inside the task closures, so executors never read the Spark conf.  Executor-local
files of a job (working state, fences, durable notes) all live under :func:`local_path`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Settings:
    """Everything an executor needs to know; plain data, so it pickles into closures."""

    backend: str | None = None
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    protocol: str = "none"
    interval: int = 1
    jitter: int = 0
    full_every: int = 10
    job_id: str = ""
    state_dir: str = ""
    fail_at: tuple[int, ...] = ()
    fail_instance: int = 0
    #: with ``fail_at``: the named fail point (``spark.worker.*``, ``spark.<protocol>.*``) at which
    #: the instance dies instead of right after applying its events (``""``: right after)
    fail_point: str = ""
    #: bytes of state per key beyond its count (:mod:`.state_size`, canonical text; "0": none)
    state_bytes: str = "0"
    #: events per tumbling event-time window of the keyed count; a key's state is dropped when
    #: its window closes (:mod:`.sized_state`; 0: keys live for ever)
    window_events: int = 0
    #: how a checkpoint becomes store records (:mod:`.layouts`: changelog, per-key, chunks)
    layout: str = "changelog"
    #: the ``chunks`` layout's object size, in bytes
    chunk_bytes: int = 4 << 20
    #: drop the store's files from the page cache before each restore, so that recovery is
    #: measured from the device (:func:`.store.evict_job`)
    cold_restore: bool = False
    #: leave the job's records in the store when the run ends (:func:`.store.drop_job` deletes
    #: them otherwise, after the run measured their footprint)
    retain_checkpoints: bool = False
    #: a baseline's own checkpoint location (``spark-state``: Spark's ``checkpointLocation``, a
    #: directory or an ``hdfs://`` URL); ``""``: a fresh directory on the local disk
    checkpoint_location: str = ""
    #: the keyed operator's kind of state (``count``, ``join``): set by the runner from the job,
    #: not a conf key — the job script decides what it computes
    operator: str = "count"
    #: whether the protocol writes checkpoints to the backend; taken from the protocol's
    #: registration when the conf is read, so executors never consult the registry
    writes_checkpoints: bool = False


def replace_local(path: str, text: str) -> None:
    """Replace the executor-local file ``path`` by ``text`` whole (a temporary file, then a
    rename): a reader in another Python worker finds the old text or the new, never a part."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def local_path(settings: Settings, name: str) -> str:
    """The executor-local file ``name`` of this job (``<stateDir>/<jobId>/<name>``), its
    directory created: working state is per executor, never on the checkpoint backend."""
    base = os.path.join(settings.state_dir, settings.job_id)
    os.makedirs(base, exist_ok=True)
    return os.path.join(base, name)
