"""Crash safety of indexed_fs and the peer stores (rocksdb, lmdb, sqlite) with real SIGKILLs.

These are ``bench audit sigkill`` runs (:func:`experiments.audit.runner.audit`, the one mechanism): a
writer child process puts and deletes with durability=sync and reports every write before it
starts and once it is acknowledged; it is killed at a random moment or ends at one of the store's
fail points; the directory is reopened and every acknowledged write must be there with its exact
latest value (a write in flight may or may not have landed), nothing garbled.  24 rounds on one
directory, varying rotation (small segments), background compaction and index flushes, and every
fourth round forcing a full-scan rebuild by deleting the snapshots.

The peers run the same check with fewer rounds (their crash safety is their own, not this
project's code; the test shows that the backend acknowledges a put only once it is durable).

indexed_fs runs on a local directory and on the real NFS server (an ``nfs://`` URL, userspace client):
there nfs-rs writes are durable when they return (WRITE+COMMIT), so a SIGKILLed client loses no
acknowledged write either, and the next open breaks the dead writer's lease lock at once.
"""

from __future__ import annotations

import os
import uuid

import pytest

from backends.indexed_fs import verify
from backends.media import open_medium
from experiments.audit import runner as audit
from experiments.audit.spec import AuditSpec

ROUNDS = 24
PEER_ROUNDS = 5
PEERS = ("rocksdb", "lmdb", "sqlite")
SEED = int(os.environ.get("CKPT_CRASH_SEED", "20261122"))


def _store_dir(where: str, tmp_path) -> str:
    if where == "local":
        return str(tmp_path / "store")
    import services

    services.up(["nfs"])
    return services.client_options("nfs", f"crash{uuid.uuid4().hex[:10]}")["path"]


def _delete_snapshots(path: str) -> None:
    """Force a full-scan rebuild."""
    with open_medium(path, "test") as medium:
        for name in medium.listdir():
            if name.startswith("snap-") and name.endswith(".idx"):
                medium.delete(name)


@pytest.mark.crash
@pytest.mark.timeout(180)
@pytest.mark.parametrize("where", ["local", pytest.param("nfs", marks=[pytest.mark.server,
                                                                         pytest.mark.nfs])])
def test_acknowledged_writes_survive_sigkill(tmp_path, where):
    path = _store_dir(where, tmp_path)
    max_segments_seen = 0

    def after_cut(round_no: int, store_path: str) -> None:
        # bench verify after every SIGKILL (background compaction, deltas, snapshots), before
        # the open: an ordinary crash is never reported as damage
        report = verify.verify_path(store_path)
        assert report.ok, [r.line() for r in report.damaged] + report.bad_snapshots
        if round_no % 4 == 3:
            _delete_snapshots(store_path)

    def inspect(store, round_no: int) -> None:
        nonlocal max_segments_seen
        st = store.stats()
        assert st["corrupt_records"] == 0, st["rebuild_notes"]
        max_segments_seen = max(max_segments_seen, st["active_segment"])

    res = audit.audit(AuditSpec.build("sigkill", "indexed_fs", rounds=ROUNDS, seed=SEED,
                                      options={"path": path}), workdir=tmp_path / "audit",
                      after_cut=after_cut, inspect=inspect)
    assert (res.lost, res.wrong) == (0, 0), res.failures
    assert not [n for n in res.notes if "did not open" in n], res.notes
    assert res.acknowledged > ROUNDS * 5, "the child acknowledged too few writes to test anything"
    assert max_segments_seen > 20, "segments never rotated: the small-segment rounds did not bite"
    assert any("compactions seen by the writers" in n and not n.endswith(": 0")
               for n in res.notes), "no child round ever ran a compaction"
    assert any(c.at != "random" and c.reached for c in res.cuts), \
        "no round ended at a fail point"


@pytest.mark.crash
@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", PEERS)
def test_peer_acknowledged_writes_survive_sigkill(tmp_path, backend):
    res = audit.audit(AuditSpec.build("sigkill", backend, rounds=PEER_ROUNDS, seed=SEED),
                      workdir=tmp_path / "audit")
    assert (res.lost, res.wrong) == (0, 0), res.failures
    assert not [n for n in res.notes if "did not open" in n], res.notes
    assert res.acknowledged > PEER_ROUNDS * 5, \
        "the child acknowledged too few writes to test anything"
