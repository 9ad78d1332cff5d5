"""``bench audit``: a small power-loss audit of every backend and mode that claims power-cut
durability, one of a mode that does not (the audit must see its loss), and the command's output
and bad input.

The durable modes are enumerated from the audit's own claim table (:data:`experiments.audit.runner.
DURABLE`), so a mode that claims to survive a power cut is audited here as soon as it is claimed,
and the claim's text, the table and the backends' declared modes are checked against each other.

Power-loss audits mount the lossy FUSE file system (services/lossyfs) and are skipped, with the
reason, only where no such mount can be made.  Redis, MinIO, HBase and HDFS run as the audit's
private servers (their own ports and state directories), never the shared ones.
"""

from __future__ import annotations

import json

import pytest

from bench import cli
from backends import backend_class
from experiments.audit import runner as audit
from services import lossyfs

NO_MOUNT = lossyfs.ensure_available(log=lambda _msg: None)

needs_fuse = [pytest.mark.lossyfs,
              pytest.mark.skipif(NO_MOUNT is not None, reason=f"no lossy mount here: {NO_MOUNT}")]


def _held(res: audit.AuditResult) -> None:
    assert res.claims_durability
    assert (res.lost, res.wrong) == (0, 0), res.failures
    assert not [n for n in res.notes if "did not open" in n], res.notes
    assert res.acknowledged > 0, "nothing was acknowledged: the audit tested nothing"


#: the promise of a mode in DURABLE, as its claim text states it
NO_LOSS = "no acknowledged write may be lost"
#: rounds per audited claim: indexed_fs and default_fs cut at their fail points on odd rounds
#: and need a few to reach them; HBase on HDFS restarts five JVMs a round
CI_ROUNDS = {"indexed_fs": 6, "default_fs": 4, "hbase@hdfs": 1}
DEFAULT_CI_ROUNDS = 3


def _power_cut_claims() -> list:
    """One parameter per mode that claims power-cut durability, with the markers its servers
    need (a server backend's audit starts private servers of the installed kind)."""
    params = []
    for key, mode in sorted(audit.DURABLE):
        backend, _, root = key.partition("@")
        marks = list(needs_fuse)
        if backend_class(backend).kind == "server":
            marks += [pytest.mark.server, pytest.mark.slow, getattr(pytest.mark, backend)]
            marks += [pytest.mark.hdfs] if root == "hdfs" else []
        params.append(pytest.param(backend, mode, root or None, CI_ROUNDS.get(key,
                                   DEFAULT_CI_ROUNDS), id=f"{key}-{mode}", marks=marks))
    return params


@pytest.mark.crash
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend,durability,hbase_root,rounds", _power_cut_claims())
def test_every_power_cut_claim_holds(tmp_path, backend, durability, hbase_root, rounds):
    """Each mode whose claim is that a power cut loses nothing acknowledged loses nothing on
    the lossy file system (posix metadata, or the claim's stated model for HBase on HDFS)."""
    if backend_class(backend).kind == "server":
        import services

        services.install(["hdfs", backend] if hbase_root == "hdfs" else [backend])
    res = audit.audit("power-loss", backend, durability=durability, hbase_root=hbase_root,
                      rounds=rounds, seed=11, workdir=tmp_path)
    _held(res)
    if audit.hazard_points(backend):
        assert any(c["at"] != "random" and c["reached"] for c in res.cuts), \
            "no round ended at one of the store's fail points"
    if backend == "minio":
        assert sum(c.get("global_syncs") or 0 for c in res.cuts) > 0, \
            "no sync(2) of MinIO's reached the mount: is the sync gate on?"


def test_the_claim_table_agrees_with_itself_and_the_backends():
    """A mode is in DURABLE exactly when its claim text promises no loss, every mode a backend
    declares has a claim, and every backend's ``sync`` mode is audited as durable."""
    from backends import backend_class, backend_names

    promising = {k for k, text in audit.CLAIMS.items() if NO_LOSS in text}
    assert promising == audit.DURABLE
    for name in backend_names():
        cls = backend_class(name)
        if name in ("memory", "redis"):  # no file system / the server's policy is the mode
            continue
        for mode in cls.durability_modes:
            assert audit.claim_of(name, mode) != f"{mode}: (no stated claim)", (name, mode)
        if "sync" in cls.durability_modes:
            assert (name, "sync") in audit.DURABLE, name
    assert {("redis", p) for p in audit.REDIS_POLICIES} <= set(audit.CLAIMS)


@pytest.mark.crash
@pytest.mark.timeout(120)
def test_a_durable_mode_survives_sigkill(tmp_path):
    """indexed_fs's SIGKILL audit is tests/test_crash.py; default_fs's is here."""
    res = audit.audit("sigkill", "default_fs", rounds=4, seed=11, workdir=tmp_path)
    _held(res)
    assert any(c["at"] != "random" and c["reached"] for c in res.cuts), \
        "no round ended at one of the store's fail points"


@pytest.mark.crash
@pytest.mark.timeout(120)
@pytest.mark.lossyfs
@pytest.mark.skipif(NO_MOUNT is not None, reason=f"no lossy mount here: {NO_MOUNT}")
def test_a_mode_without_fsync_shows_its_loss(tmp_path):
    """The audit is not blind: indexed_fs with durability=none loses writes on a power cut."""
    res = audit.audit("power-loss", "indexed_fs", durability="none", rounds=3, seed=5,
                      workdir=tmp_path, use_hazards=False)
    assert not res.claims_durability and res.ok
    assert res.lost > 0, "a power cut under durability=none lost nothing: is the cut real?"
    assert res.wrong == 0


@pytest.mark.crash
@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", [pytest.param("power-loss", marks=needs_fuse)])
def test_bench_audit_prints_audit_lines_and_json(tmp_path, capsys, kind):
    out = tmp_path / "audit.json"
    code = cli.main(["audit", kind, "--backend", "default_fs", "--rounds", "2", "--seed", "1",
                     "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    for metric in ("Rounds, 2", "Acknowledged, ", "Lost, 0", "Wrong, 0", "Claim, sync: "):
        assert f"[AUDIT], {metric}" in printed
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ckptbench.audit/1" and doc["lost"] == 0 and doc["ok"]


@pytest.mark.parametrize("argv,needle", [
    (["--backend", "redis", "--durability", "sync"], "--durability 'sync' is not a mode"),
    (["--backend", "memory"], "keeps no data on a file system"),
    (["--backend", "indexed_fs", "--rounds", "0"], "--rounds and --threads"),
    (["--backend", "indexed_fs", "--opt", "path=/tmp/x"], "set by the audit"),
    (["--backend", "indexed_fs", "--run-seconds", "0"], "--run-seconds 0.0 is not"),
    (["--backend", "lmdb", "--opt", "nosuch=1"], "has no option 'nosuch'"),
    (["--backend", "redis", "--opt", "nosuch=1"], "has no option 'nosuch'"),
    (["--backend", "lmdb", "--opt", "map_size=big"], "map_size='big' is not a valid int"),
])
def test_bad_input_is_one_line(capsys, argv, needle):
    """Refused before any mount, server or writer starts: at once, one line, exit 2."""
    assert cli.main(["audit", "power-loss", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_a_store_that_does_not_open_stops_the_audit_at_once(tmp_path):
    """The writer child's open fails: the audit says why in one line, without waiting for it."""
    import time

    from experiments.audit.writer import WriterError

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    started = time.monotonic()
    with pytest.raises(WriterError) as err:
        audit.audit("sigkill", "lmdb", rounds=1, options={"path": str(blocker)},
                    workdir=tmp_path / "work")
    assert time.monotonic() - started < 30
    assert "is a file, not a directory" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.lossyfs
@pytest.mark.skipif(NO_MOUNT is not None, reason=f"no lossy mount here: {NO_MOUNT}")
@pytest.mark.parametrize("backend", ["default_fs", "indexed_fs", "lmdb", "rocksdb", "sqlite"])
def test_a_new_store_directory_survives_a_power_cut(tmp_path, backend):
    """Opening a store creates its directory (and missing parents) durably: the first
    acknowledged put survives a cut right after it (the writer ends without closing)."""
    import subprocess
    import sys

    from backends import open_backend

    with lossyfs.LossyFS.mount(tmp_path / "backing", tmp_path / "mnt") as fs:
        path = str(tmp_path / "mnt" / "a" / "b" / "store")
        code = ("import os, sys; from backends import open_backend; "
                "s = open_backend(sys.argv[1], path=sys.argv[2], durability='sync'); "
                "s.put('k', b'acknowledged'); os._exit(0)")
        subprocess.run([sys.executable, "-c", code, backend, path], check=True, timeout=60)
        fs.crash()
        reopened = open_backend(backend, path=path, durability="sync")
        try:
            assert reopened.get("k") == b"acknowledged"
        finally:
            reopened.close()
