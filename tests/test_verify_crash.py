"""``bench verify`` after crashes raises no false alarm: a directory a crash left behind, checked
before any reopen, verifies clean.

A crash leaves behind what the store's own safety arguments allow: segments GC or compaction
deleted while an older snapshot still points into them (every entry superseded by a durable
record first), compaction's copies beside their sources, a torn tail, temp files.  None of that
is damage, and a check that reported it would invite a wrong repair.  Two kinds of crash:

* the writer of :mod:`test_indexed_fs_failpoints` ended at every ``indexed_fs`` fail point
  (compaction and delta steps among them);
* SIGKILLs at random instants of an audit writer with small segments and background compaction
  (:func:`experiments.audit.runner.audit`), each directory verified before the check reopens it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from backends import failpoints
from backends.indexed_fs import store as _store  # noqa: F401  (declares the points)
from backends.indexed_fs.verify import verify_path
from experiments.audit import runner as audit
from experiments.audit.spec import AuditSpec
from test_indexed_fs_failpoints import CHILD, HIT, ROOT

POINTS = sorted(n for n in failpoints.DECLARED if n.startswith("indexed_fs."))


def _alarms(path: str) -> list[str]:
    rep = verify_path(path)
    return [r.line() for r in rep.damaged] + rep.bad_snapshots + rep.bad_hints


def test_the_compaction_and_delta_points_are_among_them():
    assert {"indexed_fs.compaction.after_copy", "indexed_fs.compaction.after_delete",
            "indexed_fs.delta.after_write", "indexed_fs.delta.after_rename"} <= set(POINTS)


@pytest.mark.crash
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("hit", [1, 2])
def test_no_false_alarm_after_a_crash_at_a_fail_point(tmp_path, point, hit):
    path = str(tmp_path / "store")
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               **{failpoints.ENV: f"{point}@{HIT.get(point, 0) + hit}"})
    child = subprocess.run([sys.executable, "-c", CHILD, path, str(tmp_path / "ops.log"), "7"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == failpoints.EXIT_CODE, \
        f"{point} was not reached (exit {child.returncode}): {child.stderr[-2000:]}"
    assert _alarms(path) == []


@pytest.mark.crash
@pytest.mark.timeout(180)
def test_no_false_alarm_after_20_sigkills_with_background_compaction(tmp_path):
    alarms: list[tuple[int, list[str]]] = []

    def after_cut(round_no: int, path: str) -> None:
        found = _alarms(path)
        if found:
            alarms.append((round_no, found))

    spec = AuditSpec.build("sigkill", "indexed_fs", rounds=20, seed=28, use_hazards=False,
                           options={"path": str(tmp_path / "store"), "segment_size": 4096,
                                    "compaction_interval": 0.02, "index_flush_interval": 0.05,
                                    "compaction_live_ratio": 0.6, "delta_records": 8},
                           run_seconds=0.4)
    res = audit.audit(spec, workdir=tmp_path / "audit", after_cut=after_cut)
    assert (res.lost, res.wrong) == (0, 0), res.failures
    assert any("compactions seen by the writers" in n and not n.endswith(": 0")
               for n in res.notes), "no round ran a compaction"
    assert alarms == []
