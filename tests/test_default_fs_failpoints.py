"""default_fs killed at each of its fail points, mid-put: every acknowledged write survives.

A child process overwrites a few keys with values that differ on every put (so a stale value, or
one under the wrong key, is seen) and prints ``BEGIN``/``ACK`` around each put; the fail point
ends it (exit 87) with one put in flight.  After a reopen each key must hold its latest
acknowledged value, or the in-flight put's new value for the key that put was writing, never
anything else and never a corrupt file; the in-flight temp file is removed by the open.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from backends import failpoints, open_backend
from backends.default_fs import _FAILPOINTS
from conftest import nfs_dir

ROOT = Path(__file__).resolve().parents[1]
KEYS = 7

CHILD = """
    import sys
    from backends import open_backend
    sys.path.insert(0, "tests")
    from test_default_fs_failpoints import key_of, value_of
    store = open_backend("default_fs", path=sys.argv[1], durability=sys.argv[2])
    for i in range(int(sys.argv[3])):
        print("BEGIN", i, flush=True)
        store.put(key_of(i), value_of(i))
        print("ACK", i, flush=True)
    store.close()
    print("DONE", flush=True)
"""


def key_of(i: int) -> str:
    return f"ckpt/{i % KEYS}" if i % 3 else f"{'long-' * 50}{i % KEYS}"  # hashed names too


def value_of(i: int) -> bytes:
    """Different on every put, of varying length (one put of many pages)."""
    seed = hashlib.sha256(str(i).encode()).digest()
    return key_of(i).encode() + b"|" + seed * (1 + (i * 37) % 300)


def crash_at(path: str, durability: str, spec: str, puts: int = 60) -> tuple[int, set[int], int]:
    env = {k: v for k, v in os.environ.items() if k != failpoints.ENV}
    env[failpoints.ENV] = spec
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), path, durability,
                           str(puts)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == failpoints.EXIT_CODE, proc.stderr
    assert proc.stderr.startswith(f"[FAILPOINT] {spec.split('@')[0]} hit "), proc.stderr
    begun = [int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("BEGIN")]
    acked = {int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("ACK")}
    in_flight = begun[-1]
    assert in_flight not in acked and set(begun[:-1]) == acked
    return in_flight, acked, len(begun)


def check_after_crash(path: str, in_flight: int, acked: set[int]) -> None:
    latest: dict[str, int] = {}
    for i in sorted(acked):
        latest[key_of(i)] = i
    with open_backend("default_fs", path=path) as store:
        assert store.stats()["leftover_temp_files_removed"] == 1  # the in-flight put's
        got = dict(store.scan())  # a corrupt file raises here: never returned as data
        for key in {key_of(i) for i in range(in_flight + 1)}:
            allowed = {value_of(latest[key])} if key in latest else {None}
            if key == key_of(in_flight):
                allowed.add(value_of(in_flight))
            assert store.get(key) in allowed, f"{key}: neither the acknowledged nor the new value"
            assert got.get(key) == store.get(key)
        assert set(got) <= {key_of(i) for i in range(in_flight + 1)}


def test_default_fs_declares_its_fail_points():
    assert set(_FAILPOINTS) == {"default_fs.put.mid_write", "default_fs.put.before_rename"}
    assert all(name in failpoints.DECLARED for name in _FAILPOINTS)


def test_unarmed_puts_take_the_plain_write_path(tmp_path):
    with open_backend("default_fs", path=str(tmp_path / "s")) as store:
        assert store._step is None


@pytest.mark.crash
@pytest.mark.parametrize("point", ["default_fs.put.mid_write", "default_fs.put.before_rename"])
@pytest.mark.parametrize("nth", [1, 9, 40])
@pytest.mark.parametrize("durability", ["sync", "none"])
def test_killed_at_a_fail_point_keeps_every_acknowledged_write(point, nth, durability, tmp_path):
    path = str(tmp_path / "store")
    in_flight, acked, begun = crash_at(path, durability, f"{point}@{nth}")
    assert begun == nth and in_flight == nth - 1  # one hit per put: the nth put died
    leftovers = [n for n in os.listdir(path) if n.startswith(".tmp-")]
    assert len(leftovers) == 1  # what the crash left: the in-flight temp file ...
    if point.endswith("before_rename"):  # ... complete, or ...
        assert os.path.getsize(os.path.join(path, leftovers[0])) > len(value_of(in_flight))
    else:  # ... only partly written
        assert 0 < os.path.getsize(os.path.join(path, leftovers[0])) < len(value_of(in_flight))
    check_after_crash(path, in_flight, acked)


@pytest.mark.crash
@pytest.mark.server
@pytest.mark.nfs
def test_killed_before_the_rename_on_nfs_keeps_every_acknowledged_write():
    path = nfs_dir("dffp")
    in_flight, acked, _ = crash_at(path, "sync", "default_fs.put.before_rename@12", puts=20)
    check_after_crash(path, in_flight, acked)
