"""The bare append+fdatasync floors of ``--baseline`` (experiments.core.baselines)."""

from __future__ import annotations

import os

from experiments.core import baselines


def test_fsync_baseline(tmp_path):
    result = baselines.fsync_baseline(str(tmp_path), operations=50, value_size=128)
    assert result.operations == 50
    assert result.measurements.summary("APPEND")["count"] == 50
    assert list(tmp_path.iterdir()) == []  # its file is removed


def test_fsync_baseline_threads_share_syncs_and_do_every_append(tmp_path, slow_sync):
    """Syncs are slow on purpose (slow_sync), so the 4 writers queue behind each one: sharing
    must bring the syncs well below one per append (without sharing there would be 203)."""
    synced = []
    real = os.fdatasync

    def counting(fd):
        synced.append(os.fstat(fd).st_size)
        real(fd)

    os.fdatasync = counting
    try:
        result = baselines.fsync_baseline(str(tmp_path), operations=203, value_size=100, threads=4)
    finally:
        os.fdatasync = real
    assert result.operations == 203
    assert result.measurements.summary("APPEND")["count"] == 203
    assert synced[-1] == 203 * 100  # every append reached the file before the last sync
    assert len(synced) <= 203 // 2 and synced == sorted(synced)
