"""Crash safety of indexed_fs and the peer stores (rocksdb, lmdb, sqlite) with real SIGKILLs.

A child process (tests/helpers/crash_writer.py) writes with durability=sync and reports every
write before it starts and once it is acknowledged.  The parent kills it at a random moment,
reopens the directory and checks: every acknowledged write is there with its exact latest value
(a write in flight may or may not have landed), nothing else appears, no corrupt record.
24 rounds on one directory, varying rotation (small segments), background compaction and index
flushes, and sometimes forcing a full-scan rebuild by deleting the snapshot.

The peers run the same check with fewer rounds (their crash safety is their own, not this
project's code; the test shows that the backend acknowledges a put only once it is durable).

indexed_fs runs on a local directory and on the real NFS server (an ``nfs://`` URL, userspace client):
there nfs-rs writes are durable when they return (WRITE+COMMIT), so a SIGKILLed client loses no
acknowledged write either, and the next open breaks the dead writer's lease lock at once.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from backends import open_backend
from backends.media import open_medium

HELPERS = Path(__file__).resolve().parent / "helpers"
sys.path.insert(0, str(HELPERS))
from crash_writer import value_of  # noqa: E402

ROUNDS = 24
PEER_ROUNDS = 5
PEERS = ("rocksdb", "lmdb", "sqlite")
_ABSENT = object()


def _indexed_fs_options(rnd: random.Random) -> list[str]:
    """Options of one indexed_fs round: rotation, background compaction and index flushes."""
    return [f"segment_size={rnd.choice((4096, 16384, 64 * 1024 * 1024))}",
            f"compaction_interval={rnd.choice((0, 0.02, 0.1))}",
            f"index_flush_interval={rnd.choice((0, 0.05, 0.3))}",
            "compaction_live_ratio=0.6"]


def _run_child(path: str, rnd: random.Random, round_no: int, backend: str = "indexed_fs",
               options: list[str] | None = None) -> list[str]:
    if options is None:
        options = _indexed_fs_options(rnd)
    proc = subprocess.Popen(
        [sys.executable, str(HELPERS / "crash_writer.py"), str(path), f"r{round_no}", backend,
         *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.strip() == "READY":
                ready.set()
            else:
                lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not ready.wait(30):
        proc.kill()
        raise AssertionError(f"crash_writer did not start: {proc.stderr.read()}")  # type: ignore
    time.sleep(rnd.uniform(0.05, 0.6))
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    reader.join(10)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()  # type: ignore[union-attr]
    return lines


def _store_dir(where: str, tmp_path: Path) -> str:
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


class Model:
    """What the children acknowledged (key -> latest value, ``None``: deleted) and, per round,
    what was in flight at the kill (may or may not have landed)."""

    def __init__(self) -> None:
        self.acked: dict[str, bytes | None] = {}
        self.pending: dict[str, bytes | None] = {}
        self.total_acked = 0
        self.compactions = 0

    def read(self, lines: list[str]) -> None:
        self.pending = {}
        for line in lines:
            parts = line.split()
            if parts[:1] == ["C"] and line.endswith("\n"):
                self.compactions = max(self.compactions, int(parts[1]))
                continue
            if len(parts) < 3 or not line.endswith("\n"):
                continue  # a line cut by the kill: its op is still pending
            kind, op, key = parts[:3]
            val = value_of(parts[3], int(parts[4])) if op == "P" else None
            if kind == "S":
                self.pending[key] = val
            else:
                self.acked[key] = val
                self.pending.pop(key, None)
                self.total_acked += 1

    def check(self, store, round_no: int) -> None:
        """Every acknowledged write is there with its latest value; nothing else appears."""
        found = dict(store.scan())
        for key in set(self.acked) | set(self.pending) | set(found):
            got = found.get(key)
            allowed = [self.acked.get(key)]
            if key in self.pending:
                allowed.append(self.pending[key])
            assert got in allowed, (
                f"round {round_no}: {key} holds {got[:16] if got else got!r}, expected one of "
                f"{[a[:16] if a else a for a in allowed]}"
            )
            assert store.get(key) == got
            self.acked[key] = got


@pytest.mark.crash
@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["local", pytest.param("nfs", marks=[pytest.mark.server,
                                                                         pytest.mark.nfs])])
def test_acknowledged_writes_survive_sigkill(tmp_path, where):
    rnd = random.Random(int(os.environ.get("CKPT_CRASH_SEED", "20261122")))
    path = _store_dir(where, tmp_path)
    model = Model()
    max_segments_seen = 0
    for round_no in range(ROUNDS):
        model.read(_run_child(path, rnd, round_no))
        if round_no % 4 == 3:
            _delete_snapshots(path)
        with open_backend("indexed_fs", path=path, index_flush_interval=0) as store:
            st = store.stats()
            assert st["corrupt_records"] == 0, st["rebuild_notes"]
            max_segments_seen = max(max_segments_seen, st["active_segment"])
            model.check(store, round_no)
    assert model.total_acked > ROUNDS * 5, \
        "the child acknowledged too few writes to test anything"
    assert max_segments_seen > 20, "segments never rotated: the small-segment rounds did not bite"
    assert model.compactions > 0, "no child round ever ran a compaction"


@pytest.mark.crash
@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", PEERS)
def test_peer_acknowledged_writes_survive_sigkill(tmp_path, backend):
    rnd = random.Random(int(os.environ.get("CKPT_CRASH_SEED", "20261122")))
    path = str(tmp_path / "store")
    model = Model()
    for round_no in range(PEER_ROUNDS):
        model.read(_run_child(path, rnd, round_no, backend, []))
        with open_backend(backend, path=path) as store:
            model.check(store, round_no)
    assert model.total_acked > PEER_ROUNDS * 5, \
        "the child acknowledged too few writes to test anything"
