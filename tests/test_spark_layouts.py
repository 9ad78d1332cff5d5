"""Every protocol under every checkpoint layout stays exactly-once after a killed instance.

Real Spark (local[2], one session for the module), real task kills, real backends; keys hold
state of a size (``stateBytes``), so a checkpoint is many records under ``per-key`` and
``chunks`` (small chunks: several per instance) and the byte-for-byte check covers the rings.
Small runs — 30,000 events in micro-batches of 10,000, a kill in the second — so each case
takes a few seconds.  The same again with keys that expire (``windowEvents``): checkpoints that
carry tombstones, restores that must not bring a dropped key back.
"""

from __future__ import annotations

import pytest

import pyspark  # noqa: F401  (required: a missing Spark extra fails the run, never skips it)

from spark_integration.conf import PREFIX, from_conf
from spark_integration.layouts.registry import layout_names
from spark_integration.protocols.registry import protocol_names, registration
from spark_integration.runner import JobSpec, run_job
from test_spark_exactly_once import _backend, backend_entries, participants

pytestmark = pytest.mark.slow

SPEC = dict(events=30_000, keys=400, max_batch=10_000, verify=True, timeout=120)
#: per layout, the per-key size its runs use (a fixed size, and sizes that vary per key)
SIZES = {"changelog": "uniform:16:256", "per-key": "64", "chunks": "uniform:16:256"}


def cases():
    """Every checkpointing protocol x every layout on indexed_fs; the many-record layouts once
    more on default_fs and on Redis, under different protocols (the one-blob ``changelog`` is
    what test_spark_exactly_once runs on them); ``none`` (which writes no checkpoint) once."""
    out = []
    for layout in layout_names():
        for protocol in protocol_names(baseline=False):
            if registration(protocol).uses_backend:
                out.append((protocol, layout, "indexed_fs"))
    out += [("coordinated", "per-key", "redis"), ("uncoordinated", "chunks", "redis"),
            ("logio", "chunks", "default_fs"), ("cic", "per-key", "default_fs"),
            ("none", "per-key", "indexed_fs")]
    return [pytest.param(p, layout, b, marks=_backend(b).marks, id=f"{p}-{layout}-{b}") for p, layout, b in out]


@pytest.mark.parametrize("protocol, layout, backend", cases())
def test_layout_is_exactly_once_after_a_kill(spark, tmp_path, protocol, layout, backend):
    job = f"lay-{protocol[:3]}-{layout[:3]}"
    entries = {PREFIX + "protocol": protocol, PREFIX + "jobId": job, PREFIX + "interval": "1",
               PREFIX + "fullEvery": "2", PREFIX + "failAt": "15000", PREFIX + "failInstance": "1",
               PREFIX + "stateBytes": SIZES[layout], PREFIX + "layout": layout,
               PREFIX + "chunkBytes": "4096", PREFIX + "stateDir": str(tmp_path / "work"),
               PREFIX + "retainCheckpoints": "true"}  # participants() reads them, then cleans up
    if registration(protocol).uses_backend:
        entries.update({PREFIX + "backend": backend, **backend_entries(backend, tmp_path)})
    m = run_job(spark, from_conf(entries), JobSpec(**SPEC))
    if registration(protocol).uses_backend:
        participants(backend, entries, tmp_path, job, {"i0", "i1"})
    assert m.failures == 1, m.summary()
    assert m.exactly_once is registration(protocol).exactly_once, m.verify_detail
    if registration(protocol).exactly_once:
        assert "state bytes" in m.verify_detail and m.checkpoints >= 1


#: windowed runs: keys that come and go (a long tail of 3,000 keys), windows of 4,000 events that
#: close while the run goes on, so increments carry tombstones before the kill and after it
WINDOWED = dict(events=30_000, keys=3_000, max_batch=5_000, verify=True, timeout=120)


def windowed_cases():
    """Every checkpointing protocol x every layout on indexed_fs; the many-record layouts once
    more on Redis (its batch delete: one DEL of many keys)."""
    out = [(p, layout, "indexed_fs") for layout in layout_names()
           for p in protocol_names(baseline=False) if registration(p).uses_backend]
    out += [("coordinated", "per-key", "redis"), ("logio", "chunks", "redis")]
    return [pytest.param(p, layout, b, marks=_backend(b).marks, id=f"{p}-{layout}-{b}") for p, layout, b in out]


@pytest.mark.parametrize("protocol, layout, backend", windowed_cases())
def test_windowed_state_is_exactly_once_after_a_kill(spark, tmp_path, protocol, layout, backend):
    """Keys dropped when their window closes: the checkpoints delete as well as write, the
    restore after the kill brings no dropped key back, and the final state is the failure-free
    one of the windows still open (counts and rings)."""
    job = f"win-{protocol[:3]}-{layout[:3]}"
    entries = {PREFIX + "protocol": protocol, PREFIX + "jobId": job, PREFIX + "interval": "1",
               PREFIX + "fullEvery": "3", PREFIX + "failAt": "20000", PREFIX + "failInstance": "1",
               PREFIX + "stateBytes": SIZES[layout], PREFIX + "windowEvents": "4000",
               PREFIX + "layout": layout, PREFIX + "chunkBytes": "4096",
               PREFIX + "stateDir": str(tmp_path / "work"), PREFIX + "backend": backend,
               PREFIX + "retainCheckpoints": "true", **backend_entries(backend, tmp_path)}
    m = run_job(spark, from_conf(entries), JobSpec(**WINDOWED))
    participants(backend, entries, tmp_path, job, {"i0", "i1"})
    assert m.failures == 1, m.summary()
    assert m.exactly_once is registration(protocol).exactly_once, m.verify_detail
    assert m.dropped_keys and m.summary()["DroppedKeys"] == m.dropped_keys
    if registration(protocol).exactly_once:
        assert "state bytes" in m.verify_detail and m.checkpoints >= 1
