"""The physical limit beside a Spark run: the run's checkpoint bytes written sequentially, read back cold.

``bench spark --disk-baseline`` asks how close a checkpoint comes to what the medium gives.  After
the job, :func:`replay` writes, into a file beside the store, as many bytes as each of the run's
checkpoints wrote — large ``write`` calls and one ``fdatasync`` per checkpoint, the best case of
any durable checkpoint — paced as the run's checkpoints were (one every ``wall time ÷
checkpoints``).  Why a replay and not one burst of the state's size: a virtual disk (and many a
real one) takes a burst into a write cache at several times the rate it sustains, so the first
gigabyte after an idle spell is not what the tenth gets.  Written the same amount at the same
pace, the baseline meets the cache in the state the run's checkpoints did, and the ratio compares
like with like.  Then the largest checkpoint's bytes are written once more, evicted from the page
cache and read back: the best case of a restore from a cold cache.

:func:`ratios` turns that into ``CheckpointDiskRatio`` (the run's checkpoint MB/s over the
replay's), ``FullCheckpointDiskRatio`` (the largest checkpoint's MB/s over its own replay's: the
full checkpoint when the run took one) and ``RestoreDiskRatio`` (the recovery's load MB/s over
the cold read's).

The eviction is ``posix_fadvise(DONTNEED)`` on the synced file, which any user may do for a file
it wrote; on a file system kept in memory (tmpfs: its pages *are* the file) nothing can be evicted,
and the result says the read was not cold rather than pass a memory copy off as a disk read.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Sequence

from backends.media.local import memory_backed

BLOCK = 4 << 20  # bytes per write and read call


@dataclass(frozen=True)
class Sequential:
    """The replay of a run's checkpoint writes in ``directory``, and one cold read."""

    directory: str
    bytes: int  # written by the replay, all checkpoints together
    write_mbps: float  # the replay's rate: its bytes over the time its writes and syncs took
    largest_mbps: float  # the largest checkpoint's replay alone
    read_bytes: int
    read_mbps: float
    cold: bool  # whether the read came from the device (the file was evicted from the cache)


def _write(path: str, nbytes: int, block: bytes) -> float:
    """Write ``nbytes`` to a new file ``path`` and ``fdatasync`` it; the seconds it took."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        t = time.perf_counter()
        done = 0
        while done < nbytes:
            done += os.write(fd, block[:min(BLOCK, nbytes - done)])
        os.fdatasync(fd)
        return time.perf_counter() - t
    finally:
        os.close(fd)


def _read_cold(path: str) -> float:
    """Evict ``path`` from the page cache and read it; the seconds the read took."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        t = time.perf_counter()
        while os.read(fd, BLOCK):
            pass
        return time.perf_counter() - t
    finally:
        os.close(fd)


def replay(directory: str, sizes: Sequence[int], period_s: float) -> Sequential:
    """Write ``sizes`` (a run's checkpoint bytes, in order; at least one block each) one file
    after another in ``directory``, starting one every ``period_s`` seconds, each synced; then
    write the largest again and read it back cold.  The file is removed afterwards."""
    sizes = [max(int(n), BLOCK) for n in sizes] or [BLOCK]
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f".ckptbench-disk-baseline-{os.getpid()}")
    block = os.urandom(BLOCK)  # incompressible, as state bytes are
    try:
        start, took = time.perf_counter(), []
        for i, nbytes in enumerate(sizes):
            time.sleep(max(0.0, start + i * period_s - time.perf_counter()))
            took.append(_write(path, nbytes, block))
        largest = max(range(len(sizes)), key=sizes.__getitem__)
        _write(path, sizes[largest], block)
        read_s = _read_cold(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return Sequential(directory, sum(sizes), sum(sizes) / sum(took) / 1e6,
                      sizes[largest] / took[largest] / 1e6, sizes[largest],
                      sizes[largest] / read_s / 1e6, not memory_backed(directory))


def ratios(summary: dict[str, Any], base: Sequential) -> dict[str, Any]:
    """The ``[SPARK]`` lines of the baseline: its rates and the run's ratios to them (``n/a``
    where the run has no such figure: no checkpoint, or no restore)."""
    out: dict[str, Any] = {"DiskWrite(MB/s)": round(base.write_mbps, 1),
                           "DiskReadCold(MB/s)": round(base.read_mbps, 1),
                           "DiskReadWasCold": str(base.cold).lower()}
    ckpt = summary.get("CheckpointMB/s", 0.0)
    out["CheckpointDiskRatio"] = round(ckpt / base.write_mbps, 3) if ckpt else "n/a"
    full = summary.get("LargestCheckpointMB/s", 0.0)
    out["FullCheckpointDiskRatio"] = round(full / base.largest_mbps, 3) if full else "n/a"
    load_ms, load_bytes = summary.get("Recovery.Load(ms)", 0.0), summary.get("Recovery.LoadBytes", 0)
    restore = load_bytes / load_ms / 1e3 if load_ms else 0.0
    out["RestoreMB/s"] = round(restore, 2) if restore else "n/a"
    out["RestoreDiskRatio"] = round(restore / base.read_mbps, 3) if restore else "n/a"
    return out
