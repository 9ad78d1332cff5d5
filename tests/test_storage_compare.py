"""``bench storage-compare``: quick runs (tiny op counts) over real media produce table, JSON, PNG.

Speeds are never asserted (shared 2-core machine); only that every section ran, that every row
carries its configuration, and that the RPC counter saw at least one call per durable NFS write.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import nfs_dir

from backends.base import BadOptionError
from bench import cli
from experiments.core import media as storage_media

QUICK = ["--ops", "60", "--sync-ops", "20", "--sizes", "200", "--threads", "1,2",
         "--seconds", "3", "--recovery-keys", "300", "--rpc-ops", "5"]


def _run(tmp_path, media: str, capsys) -> tuple[dict, str]:
    out_json, out_png = tmp_path / "sc.json", tmp_path / "sc.png"
    rc = cli.main(["storage-compare", "--media", media, *QUICK, "--json", str(out_json),
                   "--plot", str(out_png)])
    assert rc == 0
    assert out_png.stat().st_size > 10_000  # a real chart, not an empty file
    doc = json.loads(out_json.read_text())
    for m in doc["media"]:  # the Fig 4.1 chart of every medium that ran, beside the main one
        fig41 = tmp_path / f"sc-fig4.1-{m['name']}.png"
        assert fig41.exists() != bool(m["skipped"]), m
        if not m["skipped"]:
            assert fig41.stat().st_size > 10_000
    return doc, capsys.readouterr().out


def _check_sections(doc: dict, media: list[str]) -> None:
    rows = doc["rows"]
    for m in media:
        mine = [r for r in rows if r["medium"] == m]
        assert all(not r["skipped"] for r in mine), [r["skipped"] for r in mine if r["skipped"]]
        t51 = [r for r in mine if r["section"] == "table5.1"]
        assert {(r["pattern"], r["sync_per_op"]) for r in t51} == {
            ("sequential", False), ("sequential", True), ("random", False), ("random", True)}
        for r in t51:
            assert r["ops_requested"] == 200 and r["record_bytes"] == 10 and r["ops_per_sec"] > 0
            assert r["ops"] == (20 if r["sync_per_op"] or (r["kind"] == "nfs" and
                                                          r["pattern"] == "random") else 200)
        wh = [r for r in mine if r["section"] == "write-heavy"]
        assert {(r["backend"], r["threads"]) for r in wh} == {
            (b, t) for b in ("default_fs", "indexed_fs") for t in (1, 2)}
        assert all(r["operations_done"] > 0 and not r["errors"] for r in wh)
        assert all(r["workload"]["value_size"] == 1024 for r in wh)
        assert f"indexed_over_default/{m}/x1" in doc["summary"]
        rec = [r for r in mine if r["section"] == "recovery"]
        assert len(rec) == 1 and rec[0]["keys"] == 300
        assert rec[0]["open_after_crash_ms"] > 0 and rec[0]["open_after_clean_ms"] > 0
        # the crash open rebuilt by scanning; the clean open used the snapshot of the close
        assert rec[0]["after_crash"]["keys"] == rec[0]["after_clean"]["keys"] == 300


def test_parse_media_rejects_bad_input_with_the_fix():
    with pytest.raises(BadOptionError, match="unknown kind 'ssd'.*valid: local, tmpfs, nfs, hdfs"):
        storage_media.parse_media("ssd:/x")
    with pytest.raises(BadOptionError, match="nfs needs a URL"):
        storage_media.parse_media("nfs:/mnt/x")
    with pytest.raises(BadOptionError, match="hdfs needs a URL hdfs://HOST:PORT/DIR"):
        storage_media.parse_media("hdfs:/mnt/x")


def test_sub_location_keeps_the_nfs_and_hdfs_query():
    url = "nfs://127.0.0.1/export/a?version=3&nfsport=2049"
    assert storage_media.sub_location(url, "b") == "nfs://127.0.0.1/export/a/b?version=3&nfsport=2049"
    url = "hdfs://127.0.0.1:8020/ckpt?webhdfs=9870"
    assert storage_media.sub_location(url, "b") == "hdfs://127.0.0.1:8020/ckpt/b?webhdfs=9870"
    assert storage_media.sub_location("/tmp/x", "b") == "/tmp/x/b"


@pytest.mark.server
@pytest.mark.hdfs
def test_hdfs_rows_small_writes_recovery_and_round_trips():
    """The HDFS rows of each section but write-heavy (whose 1,000-record load takes a minute on
    HDFS; bench write-heavy on hdfs:// is tested in tests/test_hdfs.py): random writes are
    skipped with why, recovery rebuilds from HDFS, round trips are counted per operation."""
    from conftest import hdfs_dir

    from experiments.storage import compare as sc

    url = hdfs_dir("sc")
    media = storage_media.parse_media(f"hdfs:{url}")
    assert [(m.name, m.kind, m.skipped) for m in media] == [("hdfs", "hdfs", None)]
    try:
        rows = sc.table51(media, sizes=[50], sync_ops=4)
        by = {(r.pattern, r.sync_per_op): r for r in rows}
        assert by[("sequential", False)].ops == 50 and by[("sequential", False)].ops_per_sec > 0
        assert by[("sequential", True)].ops == 4 and by[("sequential", True)].capped
        assert "append-only" in by[("random", False)].skipped
        assert "append-only" in by[("random", True)].skipped
        (rec,) = sc.recovery(media, keys=200)
        assert not rec.skipped, rec.skipped
        assert rec.after_crash["keys"] == rec.after_clean["keys"] == 200
        rpc = {r.case: r for r in sc.rpc_cost(media, ops=3)}
        assert all(not r.skipped for r in rpc.values()), rpc
        assert rpc["append"].rpcs_per_op == 2  # APPEND at the NameNode, then the DataNode
        assert rpc["indexed_fs"].rpcs_per_op >= 2  # at least one APPEND per durable put
        assert rpc["default_fs"].rpcs_per_op >= 3  # CREATE (2 requests) + RENAME
        assert "WebHDFS" in rpc["append"].unit
    finally:
        storage_media.remove_tree(url)


def test_unavailable_medium_is_reported_not_dropped(tmp_path, capsys):
    (tmp_path / "disk").mkdir()
    doc, out = _run(tmp_path, f"local:{tmp_path / 'disk'},tmpfs:{tmp_path / 'missing'}", capsys)
    media = {m["name"]: m for m in doc["media"]}
    assert "does not exist" in media["tmpfs"]["skipped"]
    assert "SKIPPED tmpfs" in out
    assert any(r["medium"] == "tmpfs" and r["skipped"] for r in doc["rows"])
    _check_sections(doc, ["local"])


@pytest.mark.server
@pytest.mark.nfs
def test_quick_run_over_local_tmpfs_and_nfs(tmp_path, capsys):
    """Starts the real nfs-ganesha (fails loudly if it cannot) and compares three media."""
    url = nfs_dir("sc")
    (tmp_path / "disk").mkdir()
    doc, out = _run(tmp_path, f"local:{tmp_path / 'disk'},tmpfs,nfs:{url}", capsys)
    assert [m["name"] for m in doc["media"]] == ["local", "tmpfs", "nfs"]
    _check_sections(doc, ["local", "tmpfs", "nfs"])
    for header in ("Table 5.1", "write-heavy", "recovery", "RPC cost", "idx/def"):
        assert header in out
    rpc = {r["case"]: r for r in doc["rows"] if r["section"] == "rpc"}
    assert set(rpc) == {"append", "indexed_fs", "default_fs"}
    for r in rpc.values():
        assert not r["skipped"] and r["rpcs_per_op"] >= 1  # a durable NFS write is >= 1 RPC
    assert not [d for d in os.listdir("/dev/shm") if d.startswith("ckptbench-storage-compare-")
                and d in doc["media"][1]["location"]]  # temp media removed
