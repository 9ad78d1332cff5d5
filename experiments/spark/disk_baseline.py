"""The physical limit beside a Spark run: the same bytes written sequentially and read back cold.

``bench spark --disk-baseline`` asks how close a checkpoint comes to what the medium gives: after
the job, :func:`sequential` writes as many bytes as the job's full state (``StateBytes``) into a
file beside the store — large ``write`` calls, one ``fdatasync`` at the end, the best case of any
durable checkpoint — then evicts the file from the page cache and reads it back, the best case of
a restore from a cold cache.  :func:`ratios` turns that into ``CheckpointDiskRatio`` (checkpoint
MB/s over sequential write MB/s) and ``RestoreDiskRatio`` (the recovery's load MB/s over cold
sequential read MB/s).

The eviction is ``posix_fadvise(DONTNEED)`` on the synced file, which any user may do for a file
it wrote; on a file system kept in memory (tmpfs: its pages *are* the file) nothing can be evicted,
and the result says the read was not cold rather than pass a memory copy off as a disk read.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from backends.media.local import memory_backed

BLOCK = 4 << 20  # bytes per write and read call


@dataclass(frozen=True)
class Sequential:
    """One sequential write + fdatasync and cold read of ``bytes`` bytes in ``directory``."""

    directory: str
    bytes: int
    write_mbps: float
    read_mbps: float
    cold: bool  # whether the read came from the device (the file was evicted from the cache)


def sequential(directory: str, nbytes: int) -> Sequential:
    """Write ``nbytes`` (at least one block) to a new file in ``directory`` with one
    ``fdatasync``, evict it, read it back; the file is removed afterwards."""
    nbytes = max(int(nbytes), BLOCK)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f".ckptbench-disk-baseline-{os.getpid()}")
    block = os.urandom(BLOCK)  # incompressible, as state bytes are
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        t = time.perf_counter()
        done = 0
        while done < nbytes:
            done += os.write(fd, block[:min(BLOCK, nbytes - done)])
        os.fdatasync(fd)
        write_s = time.perf_counter() - t
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            t = time.perf_counter()
            while os.read(fd, BLOCK):
                pass
            read_s = time.perf_counter() - t
        finally:
            os.close(fd)
    finally:
        os.unlink(path)
    return Sequential(directory, nbytes, nbytes / write_s / 1e6, nbytes / read_s / 1e6,
                      not memory_backed(directory))


def ratios(summary: dict[str, Any], base: Sequential) -> dict[str, Any]:
    """The ``[SPARK]`` lines of the baseline: its rates and the run's ratios to them (``n/a``
    where the run has no such figure: no checkpoint, or no restore)."""
    out: dict[str, Any] = {"DiskWrite(MB/s)": round(base.write_mbps, 1),
                           "DiskReadCold(MB/s)": round(base.read_mbps, 1),
                           "DiskReadWasCold": str(base.cold).lower()}
    ckpt = summary.get("CheckpointMB/s", 0.0)
    out["CheckpointDiskRatio"] = round(ckpt / base.write_mbps, 3) if ckpt else "n/a"
    load_ms, load_bytes = summary.get("Recovery.Load(ms)", 0.0), summary.get("Recovery.LoadBytes", 0)
    restore = load_bytes / load_ms / 1e3 if load_ms else 0.0
    out["RestoreMB/s"] = round(restore, 2) if restore else "n/a"
    out["RestoreDiskRatio"] = round(restore / base.read_mbps, 3) if restore else "n/a"
    return out
