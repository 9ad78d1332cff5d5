"""``bench audit``: a small power-loss audit of every backend and mode that claims power-cut
durability, one of a mode that does not (the audit must see its loss), and the command's output
and bad input.

The durable modes are enumerated from the backends' own claims (:attr:`backends.base.Backend.claims`
and ``medium_claims``), so a mode that claims to survive a power cut is audited here as soon as it is
claimed, and each claim's text and flags and the backends' declared modes are checked against each
other.

Power-loss audits mount the lossy FUSE file system (services/lossyfs) and are skipped, with the
reason, only where no such mount can be made.  Redis, MinIO, HBase and HDFS run as the audit's
private servers (their own ports and state directories), never the shared ones.
"""

from __future__ import annotations

import json

import pytest

from bench import cli
from backends import CkptError, backend_class, backend_names
from experiments.audit import runner as audit
from experiments.audit.spec import AuditSpec
from services import lossyfs

NO_MOUNT = lossyfs.ensure_available(log=lambda _msg: None)

needs_fuse = [pytest.mark.lossyfs,
              pytest.mark.skipif(NO_MOUNT is not None, reason=f"no lossy mount here: {NO_MOUNT}")]


def _held(res: audit.AuditResult) -> None:
    assert res.claims_durability
    assert (res.lost, res.wrong) == (0, 0), res.failures
    assert not [n for n in res.notes if "did not open" in n], res.notes
    assert res.acknowledged > 0, "nothing was acknowledged: the audit tested nothing"


#: the promise of a power-safe claim, as its text states it
NO_LOSS = "no acknowledged write may be lost"
#: rounds per audited claim: indexed_fs and default_fs cut at their fail points on odd rounds
#: and need a few to reach them
CI_ROUNDS = {"indexed_fs": 6, "default_fs": 4}
DEFAULT_CI_ROUNDS = 3


def _claims() -> list[tuple[str, str, str | None]]:
    """Every declared claim as (backend, mode, medium): ``None`` for a backend's own claims,
    the medium for those that differ there (HBase on HDFS).  Backends whose client library is
    not installed here are left out, as the registry's listing leaves them out."""
    out = []
    for name in backend_names():
        try:
            cls = backend_class(name)
        except CkptError:  # its client library is not installed here
            continue
        out += [(name, mode, None) for mode in cls.claims]
        out += [(name, mode, medium) for medium, claims in cls.medium_claims.items()
                for mode in claims]
    return out


def _power_cut_claims() -> list:
    """One parameter per mode that claims power-cut durability, with the markers its servers
    need (a server backend's audit starts private servers of the installed kind)."""
    params = []
    for backend, mode, root in sorted(_claims(), key=str):
        if not backend_class(backend).claim_of(mode, root).power_safe:
            continue
        key = f"{backend}@{root}" if root else backend
        marks = list(needs_fuse)
        if backend_class(backend).kind == "server":
            marks += [pytest.mark.server, pytest.mark.slow, getattr(pytest.mark, backend)]
            marks += [pytest.mark.hdfs] if root == "hdfs" else []
        params.append(pytest.param(backend, mode, root, CI_ROUNDS.get(key, DEFAULT_CI_ROUNDS),
                                   id=f"{key}-{mode}", marks=marks))
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
    spec = AuditSpec.build("power-loss", backend, durability=durability, hbase_root=hbase_root,
                           rounds=rounds, seed=11)
    assert spec.medium == (hbase_root or spec.medium), "the claim's medium is the one audited"
    res = audit.audit(spec, workdir=tmp_path)
    _held(res)
    if audit.hazard_points(spec.backend):
        assert any(c.at != "random" and c.reached for c in res.cuts), \
            "no round ended at one of the store's fail points"
    if backend == "minio":
        assert sum(c.global_syncs or 0 for c in res.cuts) > 0, \
            "no sync(2) of MinIO's reached the mount: is the sync gate on?"


@pytest.mark.crash
@pytest.mark.server
@pytest.mark.slow
@pytest.mark.hbase
@pytest.mark.hdfs
@pytest.mark.lossyfs
@pytest.mark.skipif(NO_MOUNT is not None, reason=f"no lossy mount here: {NO_MOUNT}")
@pytest.mark.timeout(420)
def test_hbase_on_hdfs_loses_an_acknowledged_edit_to_a_cut_between_the_datanodes_fsyncs(
        tmp_path):
    """Why HBase's ``wal_hsync`` claims no power-cut durability on HDFS.  An hsync makes the
    DataNode fsync a block's checksum file, then its block file; the next packet overwrites the
    checksum of the block's last, partial chunk.  A cut right after that checksum fsync leaves a
    checksum that describes bytes which did not survive, and the restarted DataNode cuts the
    replica back to its last chunk whose checksum holds: the tail of the WAL, with the last
    acknowledged edit, is gone."""
    import services

    services.install(["hdfs", "hbase"])
    spec = AuditSpec.build("power-loss", "hbase", durability="wal_hsync", rounds=1, seed=11,
                           cut_after_sync="*/rbw/*.meta")
    assert spec.medium == "hdfs", "wal_hsync is audited where an hsync is an fsync"
    res = audit.audit(spec, workdir=tmp_path)
    assert all(c.reached for c in res.cuts), "a DataNode checksum fsync was not reached"
    assert not res.claims_durability and res.wrong == 0, res.failures
    assert res.lost >= 1, "no acknowledged edit lost: does the DataNode now sync data first?"


def test_an_armed_cut_is_for_power_loss_only(capsys):
    assert cli.main(["audit", "sigkill", "--backend", "indexed_fs",
                     "--cut-after-sync", "*.meta"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cut-after-sync needs power-loss" in err[0], err


def test_a_server_that_does_not_come_back_after_a_cut_leaves_its_files_as_evidence(tmp_path):
    from experiments.audit.env import EnvError

    class Gone:
        def start(self) -> None:
            raise EnvError("the audit's private hdfs server did not start: not ready after 120s")
    with pytest.raises(audit.ServerLost) as err:
        audit.restart_after_cut(Gone(), 2, tmp_path)
    said = str(err.value)
    assert said.startswith("round 3: the private server did not come back after the cut; its files are "
                           f"kept in {tmp_path} for inspection: ")
    assert "not ready after 120s" in said and isinstance(err.value, audit.AuditError)


def test_the_claims_agree_with_themselves_and_the_backends():
    """A claim is power-safe exactly when its text promises no loss (and power-safe implies
    crash-safe), every mode a backend's claims are about has a claim, keyed by its own mode, the
    mode audited by default is one of them, every backend's ``sync`` mode is power-safe, and a
    medium with claims of its own is one of the backend's media."""
    for name, mode, medium in _claims():
        cls = backend_class(name)
        claim = cls.claim_of(mode, medium)
        assert claim.mode == mode, (name, mode, medium)
        assert claim.power_safe == (NO_LOSS in claim.text), (name, mode, medium)
        assert claim.crash_safe or not claim.power_safe, (name, mode, medium)
        assert medium is None or medium in cls.media, (name, medium)
    for name in {n for n, _, _ in _claims()} | {"default_fs", "indexed_fs", "lmdb", "sqlite"}:
        cls = backend_class(name)
        for mode in cls.claimed_modes():
            assert mode in cls.claims, (name, mode)
        assert cls.audit_mode in cls.claimed_modes(), name
        if "sync" in cls.durability_modes:
            assert cls.claim_of("sync").power_safe, name


@pytest.mark.crash
@pytest.mark.timeout(120)
def test_a_durable_mode_survives_sigkill(tmp_path):
    """indexed_fs's SIGKILL audit is tests/test_crash.py; default_fs's is here."""
    res = audit.audit(AuditSpec.build("sigkill", "default_fs", rounds=4, seed=11),
                      workdir=tmp_path)
    _held(res)
    assert any(c.at != "random" and c.reached for c in res.cuts), \
        "no round ended at one of the store's fail points"


@pytest.mark.crash
@pytest.mark.timeout(120)
@pytest.mark.lossyfs
@pytest.mark.skipif(NO_MOUNT is not None, reason=f"no lossy mount here: {NO_MOUNT}")
def test_a_mode_without_fsync_shows_its_loss(tmp_path):
    """The audit is not blind: indexed_fs with durability=none loses writes on a power cut."""
    res = audit.audit(AuditSpec.build("power-loss", "indexed_fs", durability="none", rounds=3,
                                      seed=5, use_hazards=False), workdir=tmp_path)
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
        audit.audit(AuditSpec.build("sigkill", "lmdb", rounds=1, options={"path": str(blocker)}),
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


def test_the_audit_document_reads_back_as_it_was_written():
    """``ckptbench.audit/1``: to_json keeps its keys (``ok`` and ``verdict`` beside the fields)
    and from_json gives the same result back, cuts as :class:`Cut` objects."""
    res = audit.AuditResult("power-loss", "hbase", "wal_hsync", "a claim", 2, 3,
                            fs_model="journal", hbase_root="hdfs", acknowledged=40, lost=1,
                            claims_durability=True, seed=7, seconds=1.5,
                            cuts=[audit.Cut("random", 0.4, file_syncs=3, global_syncs=0,
                                            dropped={"files": 1}, round=0, acknowledged=40,
                                            lost=1)],
                            failures=["k lost"], notes=["a note"])
    doc = json.loads(json.dumps(res.to_json()))
    assert list(doc)[:2] == ["schema", "kind"] and list(doc)[-2:] == ["ok", "verdict"]
    assert doc["schema"] == "ckptbench.audit/1" and doc["ok"] is False
    assert doc["verdict"] == "VIOLATED" and doc["cuts"][0]["at"] == "random"
    assert list(doc["cuts"][0]) == ["at", "seconds", "reached", "file_syncs", "global_syncs",
                                    "dropped", "round", "acknowledged", "lost", "wrong"]
    back = audit.AuditResult.from_json(doc)
    assert back == res and back.cuts[0].dropped == {"files": 1}
    assert back.lines() == res.lines()


def test_the_reproduce_table_prints_each_audit_with_its_claim():
    """The table and headline read audit documents as written by ``bench audit --json``."""
    from backends import backend_class

    claim = backend_class("indexed_fs").claim_of("sync").text
    runs = {"a": audit.AuditResult("power-loss", "indexed_fs", "sync", claim, 2, 3,
                                   acknowledged=9, claims_durability=True).to_json(),
            "b": audit.AuditResult("power-loss", "minio", "server", "x", 2, 3,
                                   fs_model="journal", acknowledged=5, lost=2).to_json(),
            "c": audit.AuditResult("power-loss", "minio", "sync", "y", 2, 3, acknowledged=4,
                                   claims_durability=True).to_json()}
    rows = audit.table(runs)
    assert rows[2] == (f"| indexed_fs | sync | power-loss | lossy, posix | 2 | 9 | 0 | 0 | held "
                       f"| {claim} |")
    assert audit.headline(runs) == (
        "lost 0 of 13 acknowledged writes in the 2 audits of modes that claim no loss "
        "(indexed_fs, minio); loss measured in 1 mode that allows it (the most: minio server "
        "(journal) 2 of 5)")
