"""`bench reproduce`: the experiment list, bad names, one real cheap experiment regenerating exactly
its block, a server that is down, and a failing command.  No server is needed: the server check
is pointed at an empty state directory, where every service reports not running."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from experiments.report import markdown_blocks

from experiments.reproduce import run as reproduce
from experiments.reproduce.run import Experiment, Step

DOCS = """# Results

Prose the generator must not touch: *emphasis*, `code`, trailing spaces   
and a Windows line ending\r
## harness: the harness' own overhead

<!-- reproduce:begin harness -->
Not generated yet: run `bench reproduce harness`.
<!-- reproduce:end harness -->

Text between blocks.

<!-- reproduce:begin store-reopen -->
Not generated yet: run `bench reproduce store-reopen`.
<!-- reproduce:end store-reopen -->
"""

README = """# ckptbench

<!-- reproduce:begin summary -->
Not generated yet: run `bench reproduce --all`.
<!-- reproduce:end summary -->

The rest of the README.
"""


def _bench(*argv: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *argv], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env)


def _outside(text: str, name: str) -> tuple[str, str]:
    begin, end = markdown_blocks.BEGIN.format(name=name), markdown_blocks.END.format(name=name)
    return text[:text.index(begin) + len(begin)], text[text.index(end):]


def _fixture(tmp_path) -> tuple[str, str]:
    (tmp_path / "docs").mkdir()
    docs, readme = tmp_path / "docs" / "results.md", tmp_path / "README.md"
    docs.write_bytes(DOCS.encode())
    readme.write_bytes(README.encode())
    return str(docs), str(readme)


def test_list_prints_one_name_per_line_and_nothing_else():
    proc = _bench("reproduce", "--list")
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.splitlines() == reproduce.names()
    for name in ("store-write", "store-scaling", "store-reopen", "harness", "checkpoint-drops",
                 "backends", "embedded-peers", "fig4.1", "fig4.2", "fig4.5", "fig4.7", "table5.2",
                 "storage-compare", "peer-redis", "spark-matrix"):
        assert name in reproduce.names()


def test_unknown_name_is_one_line_listing_the_valid_ones():
    proc = _bench("reproduce", "harness", "fig9.9")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert "'fig9.9'" in proc.stderr and "valid: " + ", ".join(reproduce.names()) in proc.stderr


def test_every_command_line_parses_at_both_sizes():
    from bench import cli

    parser = cli.build_parser()
    for exp in reproduce.EXPERIMENTS.values():
        for step in exp.steps:
            for quick in (False, True):
                parser.parse_args(step.argv("results", exp.name, quick))


def test_embedded_peers_runs_the_issues_commands_after_backends_and_they_parse():
    from bench import cli

    names = reproduce.names()
    assert names.index("embedded-peers") == names.index("backends") + 1
    exp = reproduce.EXPERIMENTS["embedded-peers"]
    assert exp.servers == ()
    full = [reproduce.command(s.argv("results", exp.name, False)) for s in exp.steps]
    for wanted in (
            "bench compare write-heavy --backends indexed_fs,rocksdb,lmdb,sqlite --read-proportion 0 --threads 16 ",
            "bench compare write-heavy --backends indexed_fs,rocksdb,lmdb,sqlite --read-proportion 0 --threads 1 ",
            "bench compare ycsb-c --backends indexed_fs,rocksdb,lmdb --records 100000 --ops 1000000 ",
            "bench recovery --backend indexed_fs --records 1000000 --value-size 40 --durability none --reopens",
            "bench recovery --backend indexed_fs --records 1000000 --value-size 40 --durability none --crash ",
            "bench recovery --backend rocksdb --records 1000000 --value-size 40 --durability none --reopens",
            "bench recovery --backend rocksdb --records 1000000 --value-size 40 --durability none --crash "):
        assert sum(c.startswith(wanted) for c in full) == 1, wanted
    parser = cli.build_parser()
    for quick in (False, True):
        for step in exp.steps:
            args = parser.parse_args(step.argv("results", exp.name, quick))
            if quick and args.command == "recovery":
                assert args.records == 200_000
    # every compare writes its chart beside the results, not to the command's default
    assert all("--plot results/embedded-peers-" in c for c in full if c.startswith("bench compare"))


def _compare(workload: str, threads: int, records: int, tput: dict[str, float]) -> dict:
    from experiments.core.results import Compare, Entry, OpStats, Phase

    op = "UPDATE" if workload == "write-heavy" else "READ"
    return Compare(workload=workload,
                   config={"threads": threads, "workload_spec": {"records": records}},
                   results=[Entry(b, throughput_ops_sec=t, phases={"run": Phase(operations={
                       op: OpStats(count=10, p50_us=5, p99_us=50)})})
                       for b, t in tput.items()]).to_json()


def _reopen(backend: str, crash: bool, ms: float, records: int = 1_000_000) -> dict:
    from experiments.core.results import Reopen, Result

    return Result(workload="recovery", backend=backend, config={"records": records},
                  recovery=Reopen(crash, False, ms, 0, 0)).to_json()


def test_embedded_peers_table_holds_indexed_fs_to_the_issues_targets():
    tables = reproduce.EXPERIMENTS["embedded-peers"].table
    runs = {"write-16": _compare("write-heavy", 16, 1000, {"indexed_fs": 400.0, "rocksdb": 100.0,
                                                            "lmdb": 90.0, "sqlite": 80.0}),
            "gets": _compare("ycsb-c", 1, 100_000, {"indexed_fs": 100.0, "rocksdb": 100.0,
                                                    "lmdb": 150.0}),
            "indexed_fs-clean": _reopen("indexed_fs", False, 10.0),
            "indexed_fs-crash": _reopen("indexed_fs", True, 40.0),
            "rocksdb-clean": _reopen("rocksdb", False, 12.0),
            "rocksdb-crash": _reopen("rocksdb", True, 12.0)}
    text = "\n".join(tables(runs))
    assert "≥ 4x the best peer (rocksdb): met" in text
    assert "indexed_fs ≥ 1.2x: NOT met" in text and "indexed_fs ≥ 1.0x: NOT met" in text
    assert "≤ rocksdb's reopen: met" in text
    assert "≤ 300 ms and ≤ 3x the clean reopen: NOT met" in text  # 40 ms > 3 x 10 ms
    assert "| 4.00x |" in text and "| 0.83x |" in text  # indexed_fs ÷ rocksdb, writes and clean reopen
    small = {**runs, "gets": _compare("ycsb-c", 1, 20_000, {"indexed_fs": 1.0, "rocksdb": 9.0})}
    assert "set for 100,000 keys" in "\n".join(tables(small))
    headline = reproduce.EXPERIMENTS["embedded-peers"].headline(runs)
    assert "durable puts x16 4.00x (rocksdb)" in headline and "gets x1 0.67x (lmdb)" in headline


def test_harness_writes_its_json_and_regenerates_exactly_its_block(tmp_path):
    docs, readme = _fixture(tmp_path)
    env = {**os.environ, "CKPTBENCH_STATE": str(tmp_path / "state")}
    # --allow-missed: the harness' targets depend on this machine's load; this test is the docs'
    proc = _bench("reproduce", "harness", "--quick", "--docs", docs, "--readme", readme,
                  "--allow-missed", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    # one progress line per command, with its elapsed time
    progress = [ln for ln in proc.stderr.splitlines() if ln.startswith("reproduce: harness [")]
    assert len(progress) == 2 and all(" ok in " in ln and " s: bench " in ln for ln in progress)

    doc = json.loads((tmp_path / "results" / "harness.json").read_text())
    assert doc["schema"] == "ckptbench.reproduce/1" and doc["status"] == "ok" and doc["quick"]
    assert doc["cpus"] == os.cpu_count() and len(doc["loadavg_before"]) == 3
    assert [r["command"] for r in doc["runs"]] == doc["commands"]
    assert all(r["document"]["schema"] == "ckptbench.result/1" for r in doc["runs"])
    assert doc["runs"][1]["document"]["config"]["processes"] == 2

    text = open(docs, encoding="utf-8", newline="").read()
    assert _outside(text, "harness") == _outside(DOCS, "harness")  # byte for byte
    assert _outside(text, "store-reopen")[1] == _outside(DOCS, "store-reopen")[1]
    assert "Not generated yet: run `bench reproduce store-reopen`." in text
    block = text.split("<!-- reproduce:begin harness -->")[1].split("<!-- reproduce:end harness -->")[0]
    assert "Not generated yet" not in block and "| processes |" in block
    # the commands in the docs are the ones that ran, output options included
    for command in doc["commands"]:
        assert f"`{command}`" in block and "--json results/harness/" in command
    assert "`bench reproduce harness --quick` on " in block and "load average" in block
    assert f"<!-- run sha256:{doc['run_sha256']}: " in block and doc["charts"] == []

    summary = open(readme, encoding="utf-8").read()
    assert _outside(summary, "summary") == _outside(README, "summary")
    assert "[harness](docs/results.md#harness-the-harness-own-overhead)" in summary


def test_the_summary_keeps_the_rows_of_experiments_not_run_here(tmp_path):
    """results/ is not committed: an experiment without a document on this machine keeps the
    summary row an earlier run wrote; one with a document gets its headline anew, in order."""
    from experiments.reproduce import docs as reproduce_docs

    docs, readme = _fixture(tmp_path)
    old_row = "| [store-reopen](docs/results.md#store-reopen) | an earlier headline | 2026-01-01 |"
    text = open(readme, encoding="utf-8").read().replace(
        "Not generated yet: run `bench reproduce --all`.",
        "| experiment | result | measured |\n|---|---|---|\n"
        "| [harness](docs/results.md#harness) | stale | 2026-01-01 |\n" + old_row)
    open(readme, "w", encoding="utf-8").write(text)
    proc = _bench("reproduce", "harness", "--quick", "--docs", docs, "--readme", readme,
                  "--allow-missed", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    block = open(readme, encoding="utf-8").read().split("<!-- reproduce:begin summary -->")[1]
    rows = [ln for ln in block.split("<!-- reproduce:end summary -->")[0].splitlines()
            if ln.startswith("| [")]
    names = reproduce.names()
    assert len(rows) == 2 and names.index("store-reopen") < names.index("harness")
    assert rows[0] == old_row  # in the registry's order
    assert rows[1].startswith("| [harness]") and "stale" not in rows[1]
    assert reproduce_docs.summary(reproduce.EXPERIMENTS, str(tmp_path / "none"), docs, readme,
                                  print).count("\n| [") == 2


def test_an_experiment_whose_server_is_down_is_skipped_with_one_line(tmp_path):
    docs, readme = _fixture(tmp_path)
    env = {**os.environ, "CKPTBENCH_STATE": str(tmp_path / "empty-state")}
    proc = _bench("reproduce", "peer-redis", "--quick", "--docs", docs, "--readme", readme,
                  cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert ("reproduce: peer-redis skipped: redis is not running (start it with: "
            "bench services up redis)") in proc.stderr.splitlines()
    assert not (tmp_path / "results" / "peer-redis.json").exists()
    assert open(docs, encoding="utf-8", newline="").read() == DOCS


def test_a_failing_command_fails_its_experiment_and_the_next_still_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    docs, readme = _fixture(tmp_path)
    tiny, bad = "write-heavy --backend memory --read-proportion 0 --ops 200", "write-heavy --backend nosuch"
    tables = (reproduce.tables.harness, reproduce.tables.harness_headline)
    registry = {
        "harness": Experiment("harness", "a failing command", (
            Step("ok", tiny, tiny), Step("bad", bad, bad), Step("never", tiny, tiny)), *tables),
        "store-reopen": Experiment("store-reopen", "runs after the failure",
                                   (Step("ok", tiny, tiny),), *tables),
    }
    said: list[str] = []
    rc = reproduce.run(["harness", "store-reopen"], quick=True, out="results", docs=docs,
                       readme=readme, say=said.append, registry=registry)
    assert rc == 1
    failed = json.loads((tmp_path / "results" / "harness.json").read_text())
    assert failed["status"] == "failed" and [r["label"] for r in failed["runs"]] == ["ok", "bad"]
    assert "nosuch" in failed["runs"][1]["error"] and failed["runs"][1]["returncode"] != 0
    assert any(ln.startswith("reproduce: harness [2/3] failed in ") and "nosuch" in ln for ln in said)
    text = open(docs, encoding="utf-8", newline="").read()
    assert "Not generated yet: run `bench reproduce harness`." in text  # a failure is not published
    assert "Not generated yet: run `bench reproduce store-reopen`." not in text
    assert json.loads((tmp_path / "results" / "store-reopen.json").read_text())["status"] == "ok"


def test_a_missing_marker_or_file_is_one_line_and_the_rest_goes_on(tmp_path):
    said: list[str] = []
    path = tmp_path / "r.md"
    path.write_text("<!-- reproduce:begin a -->\nold\n<!-- reproduce:end a -->\n")
    assert markdown_blocks.update_file(str(path), {"a": "new", "b": "x"}, said.append) == ["a"]
    assert path.read_text() == "<!-- reproduce:begin a -->\nnew\n<!-- reproduce:end a -->\n"
    assert len(said) == 1 and "no block <!-- reproduce:begin b -->" in said[0]
    assert markdown_blocks.update_file(str(tmp_path / "missing.md"), {"a": "x"}, said.append) == []
    assert len(said) == 2 and "does not exist" in said[1]


@pytest.mark.parametrize("heading, anchor", [("fig4.1", "fig41"),
                                             ("Store write: 16 threads", "store-write-16-threads")])
def test_anchor_is_githubs(heading, anchor):
    assert markdown_blocks.anchor(heading) == anchor


def test_a_papers_own_page_goes_beside_the_docs_being_written():
    """``bench reproduce --docs DIR/results.md`` keeps CheckMate's and LOG.io's pages in DIR
    too, so a run into other docs leaves the repository's own pages alone."""
    for name, page in (("checkmate", "checkmate.md"), ("logio-stragglers", "logio.md")):
        (step,) = reproduce.EXPERIMENTS[name].steps
        assert reproduce.command(step.argv("results", name, True)).startswith(
            f"bench {name} --quick --docs docs/{page} --json results/{name}/run.json")
        assert f"--docs /tmp/elsewhere/{page}" in reproduce.command(
            step.argv("results", name, True, "/tmp/elsewhere"))


def _state_run(state_bytes: int, disk_ratio: float | None, steady: float, exactly_once: bool = True) -> dict:
    metrics = {"StateBytes": state_bytes, "CheckpointP50(ms)": 900.0, "CheckpointP99(ms)": 1500.0,
               "CheckpointMB/s": 300.0, "SpaceAmplification": 2.0, "SpaceAmplificationAfterGC": 1.5,
               "RecoveryTime(ms)": 8000.0, "Recovery.Load(ms)": 2000.0, "SteadyThroughput(events/sec)": steady,
               "ExactlyOnce": exactly_once}
    base = None if disk_ratio is None else {
        "CheckpointDiskRatio": disk_ratio, "FullCheckpointDiskRatio": disk_ratio, "RestoreMB/s": 500.0,
        "RestoreDiskRatio": 0.5, "DiskWrite(MB/s)": 400.0, "DiskReadCold(MB/s)": 1000.0}
    return {"metrics": metrics, "disk_baseline": base}


def test_state_table_holds_gigabyte_runs_to_the_targets_and_says_when_a_run_is_too_small(tmp_path):
    exp = reproduce.EXPERIMENTS["state"]
    big = {"none": {"metrics": {"SteadyThroughput(events/sec)": 100_000.0}},
           "indexed_fs-chunks": _state_run(2_100_000_000, 0.85, 92_000.0),
           "indexed_fs-per-key": _state_run(2_100_000_000, 0.4, 80_000.0),
           "redis-chunks": _state_run(2_100_000_000, None, 90_000.0, exactly_once=False)}
    text = "\n".join(exp.table(big))
    assert "≥ 0.8x the disk's sequential write + fdatasync: met (0.85x)" in text
    assert "≥ 0.5x the disk's sequential write: NOT met (0.40x)" in text
    assert "cold sequential read: NOT met (0.50x)" in text
    assert "| redis | chunks |" in text and "n/a (no local directory)" in text and "| NO |" in text
    assert "| 0.92x |" in text  # steady events/s over none's
    assert "0.92x of none" in exp.headline(big)
    failed = "\n".join(exp.table({**big, "minio-chunks": {"error": "bench: error: the checkpoint store failed"}}))
    assert "| minio | chunks | failed: bench: error: the checkpoint store failed |" in failed
    small = {**big, "indexed_fs-chunks": _state_run(20_000_000, 0.04, 20_000.0)}
    assert "not checked: 20 MB of state is too little" in "\n".join(exp.table(small))
    exp.chart(big, str(tmp_path / "state.png"))
    assert (tmp_path / "state.png").stat().st_size > 0


def test_state_table_has_the_media_rows_and_the_one_percent_dirty_runs_against_their_own_none():
    exp = reproduce.EXPERIMENTS["state"]
    labels = [step.label for step in exp.steps]
    assert {"indexed_fs-nfs-chunks", "indexed_fs-hdfs-chunks", "dirty-none-r1", "dirty-indexed_fs-per-key-r1",
            "dirty-none-r3", "dirty-indexed_fs-changelog-r3"} <= set(labels)
    assert labels.index("dirty-none-r2") < labels.index("dirty-indexed_fs-per-key-r2") < labels.index("dirty-none-r3")
    nfs = next(s for s in exp.steps if s.label == "indexed_fs-nfs-chunks")
    assert "--medium nfs" in nfs.full and "--medium nfs" in nfs.quick
    dirty = next(s for s in exp.steps if s.label == "dirty-indexed_fs-per-key-r1")
    assert "--skew load+hot:1:20000" in dirty.full and "--fail-at" not in dirty.full
    remote = _state_run(2_100_000_000, None, 90_000.0)
    remote["metrics"].update({"Recovery.LoadBytes": 4_000_000_000, "Recovery.Load(ms)": 20_000.0})
    per_key = _state_run(2_000_000_000, 0.5, 47_000.0)
    per_key["metrics"].update({"Checkpoints": 5, "CheckpointBytes": 2_080_000_000 + 4 * 20_800_000,
                               "LargestCheckpointBytes": 2_080_000_000})
    runs = {"none": {"metrics": {"SteadyThroughput(events/sec)": 100_000.0}},
            "indexed_fs-nfs-chunks": remote}
    for r, (none, mine) in enumerate(((50_000.0, 47_000.0), (60_000.0, 51_000.0), (40_000.0, 40_000.0)), 1):
        runs[f"dirty-none-r{r}"] = {"metrics": {"SteadyThroughput(events/sec)": none}}
        runs[f"dirty-indexed_fs-per-key-r{r}"] = {**per_key, "metrics": {**per_key["metrics"],
                                                                       "SteadyThroughput(events/sec)": mine}}
    text = "\n".join(exp.table(runs))
    assert "| indexed_fs on nfs | chunks |" in text and "| 200 |" in text  # load MB/s from its bytes and time
    # 4 steady checkpoints of 20.8 MB (the load's full one apart); the median of the rounds' own ratios
    assert "| per-key | 2,000 | 4 | 900 / 1,500 | 20.8 | 47,000 | 0.94x; 0.94x, 0.85x, 1.00x | yes |" in text
    assert "≥ 0.9x the events/s of none: met (0.94x)" in text and "50,000, 60,000, 40,000 events/s" in text
    assert "1 % of the keys dirty: incremental per-key checkpoints at 0.94x of none" in exp.headline(
        {**runs, "indexed_fs-chunks": _state_run(2_100_000_000, 0.85, 92_000.0)})


def test_rows_apart_a_failed_step_is_its_rows_error_and_the_rest_is_published(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    docs, readme = _fixture(tmp_path)
    tiny, bad = "write-heavy --backend memory --read-proportion 0 --ops 200", "write-heavy --backend nosuch"
    seen: dict = {}

    def table(runs):
        seen.update(runs)
        return ["| row | result |", "|---|---|"] + [f"| {k} | {'failed' if 'error' in v else 'ok'} |"
                                                  for k, v in runs.items()]

    registry = {"harness": Experiment("harness", "rows apart", (
        Step("ok", tiny, tiny), Step("bad", bad, bad), Step("after", tiny, tiny)),
        table, lambda runs: "headline", rows_apart=True)}
    said: list[str] = []
    rc = reproduce.run(["harness"], quick=True, out="results", docs=docs, readme=readme,
                       say=said.append, registry=registry)
    assert rc == 1  # a failed row is still a failure of the run
    assert set(seen) == {"ok", "bad", "after"} and "nosuch" in seen["bad"]["error"]
    doc = json.loads((tmp_path / "results" / "harness.json").read_text())
    assert doc["status"] == "ok" and doc["error"].startswith("1 of 3 steps failed")
    assert "| bad | failed |" in open(docs, encoding="utf-8").read()  # published, with the failure


def test_rerun_runs_the_named_steps_and_takes_the_rest_over_from_the_earlier_run(tmp_path, monkeypatch, capsys):
    """``--rerun``: one row of an hour-long experiment again, the others as they ran, the docs'
    note saying which ran when; refused (one line) where the earlier run cannot stand in."""
    monkeypatch.chdir(tmp_path)
    docs, readme = _fixture(tmp_path)
    tiny = "write-heavy --backend memory --read-proportion 0 --ops 200"
    other = "write-heavy --backend memory --read-proportion 0 --ops 300"
    registry = {"harness": Experiment("harness", "rerun", (Step("a", tiny, tiny), Step("b", tiny, tiny)),
                                      lambda runs: ["| row |", "|---|"] + [f"| {k} |" for k in runs],
                                      lambda runs: "headline")}
    said: list[str] = []
    with pytest.raises(reproduce.RerunError, match="run `bench reproduce harness` in full first"):
        reproduce.run(["harness"], quick=True, out="results", docs=docs, readme=readme,
                      say=said.append, registry=registry, rerun=["b"])
    assert reproduce.run(["harness"], quick=True, out="results", docs=docs, readme=readme,
                         say=said.append, registry=registry) == 0
    first = json.loads((tmp_path / "results" / "harness.json").read_text())
    said.clear()
    assert reproduce.run(["harness"], quick=True, out="results", docs=docs, readme=readme,
                         say=said.append, registry=registry, rerun=["b"]) == 0
    assert [line for line in said if "[" in line and "/2]" in line] == [
        next(line for line in said if "[2/2]" in line)]  # only b ran
    again = json.loads((tmp_path / "results" / "harness.json").read_text())
    assert again["reused"] == ["a"] and again["reused_from"] == first["started"]
    assert again["runs"][0] == first["runs"][0]
    assert "(`--rerun b`: the other 1 steps are from the run of" in open(docs, encoding="utf-8").read()
    with pytest.raises(reproduce.RerunError, match="has no such step; its steps: a, b"):
        reproduce.run(["harness"], quick=True, out="results", docs=docs, readme=readme,
                      say=said.append, registry=registry, rerun=["c"])
    with pytest.raises(reproduce.RerunError, match="is a --quick run"):
        reproduce.run(["harness"], quick=False, out="results", docs=docs, readme=readme,
                      say=said.append, registry=registry, rerun=["b"])
    changed = {"harness": Experiment("harness", "rerun", (Step("a", other, other), Step("b", tiny, tiny)),
                                     registry["harness"].table, registry["harness"].headline)}
    with pytest.raises(reproduce.RerunError, match="step 'a' ran `.*--ops 200.*`; add it to --rerun"):
        reproduce.run(["harness"], quick=True, out="results", docs=docs, readme=readme,
                      say=said.append, registry=changed, rerun=["b"])
    from bench.cli import main

    assert main(["reproduce", "state", "harness", "--rerun", "x"]) == 2
    assert "takes the steps of one named experiment" in capsys.readouterr().err
def _published_with_a_chart(tmp_path, png_bytes: bytes = b"\x89PNG drawn by the run"):
    """A harness run with a chart (and one drawn beside it), published into the fixture's docs,
    which embed both after the block as docs/results.md does."""
    from types import SimpleNamespace

    from experiments.reproduce import docs as reproduce_docs
    from experiments.reproduce.result import Reproduce, StepRun

    out = tmp_path / "results"
    out.mkdir()
    (out / "harness.png").write_bytes(png_bytes)
    (out / "harness-zoom.png").write_bytes(b"\x89PNG beside it")
    run = StepRun("a", "bench write-heavy", 0, 1.0, "a.log", str(out / "harness" / "a.json"),
                  plot=str(out / "harness.png"), document={"schema": "ckptbench.result/1", "n": 1})
    doc = Reproduce(name="harness", shows="", quick=True, runs=[run], table=["| a |", "|---|", "| 1 |"],
                    commands=[run.command], started="2026-01-01T00:00:00+0000",
                    loadavg_before=[0.5, 0.5, 0.5], loadavg_after=[0.5, 0.5, 0.5])
    doc.run_sha256 = reproduce_docs.digest_json(doc.documents())
    doc.charts = reproduce_docs.charts_of(doc, str(out / "harness.json"))
    docs, _ = _fixture(tmp_path)
    end = "<!-- reproduce:end harness -->\n"
    with open(docs, encoding="utf-8", newline="") as fh:
        text = fh.read()
    with open(docs, "w", encoding="utf-8", newline="") as fh:
        fh.write(text.replace(end, end + "\n![harness](img/harness.png)\n![zoom](img/harness-zoom.png)\n"))
    reproduce_docs.publish(SimpleNamespace(name="harness"), doc, docs, lambda _: None)
    return docs, doc


def test_a_published_chart_is_recorded_with_its_run_and_a_foreign_one_is_found(tmp_path, capsys):
    from experiments.reproduce import docs as reproduce_docs

    docs, doc = _published_with_a_chart(tmp_path)
    assert [os.path.basename(c.png) for c in doc.charts] == ["harness.png", "harness-zoom.png"]
    assert all(c.source.endswith("harness/a.json") for c in doc.charts)
    assert reproduce_docs.chart_problems(docs) == []
    assert (tmp_path / "docs" / "img" / "harness.png").read_bytes() == b"\x89PNG drawn by the run"

    (tmp_path / "docs" / "img" / "harness.png").write_bytes(b"\x89PNG of another run")
    (problem,) = reproduce_docs.chart_problems(docs)
    assert problem.startswith("img/harness.png: not the chart the harness table's run drew")
    assert problem.endswith("regenerate both with `bench reproduce harness --quick`")

    with open(docs, "a", encoding="utf-8") as fh:  # a chart beside a block that records none
        fh.write("\n![reopen](img/store-reopen.png)\n")
    problems = reproduce_docs.chart_problems(docs)
    assert problems[-1].startswith("img/store-reopen.png: the store-reopen block records no run")


def test_every_chart_the_results_page_shows_is_from_the_run_of_the_table_beside_it():
    """docs/results.md: each embedded chart is, byte for byte, one the run of the table in the
    block before it drew (the block records its digest).  A failure names the charts and the
    `bench reproduce` command that regenerates each with its table."""
    from experiments.reproduce import docs as reproduce_docs

    problems = reproduce_docs.chart_problems(
        os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "results.md"))
    assert not problems, "charts in docs/results.md not drawn by their table's run:\n" + "\n".join(problems)


def test_cost_table_prices_each_run_per_price_row_and_follows_the_keys(tmp_path):
    from experiments.reproduce import cost

    def run(backend, layout, keys, puts, providers):
        return {"job": {"keys": keys}, "metrics": {"StateBytes": keys * 1040, "ExactlyOnce": True},
                "settings": {"backend": backend, "layout": layout},
                "cost": {"checkpoints": {"count": 4, "median": {"requests": {"PutObject": puts}, "sent_bytes": 1 << 20}},
                         "restores": {"each": [{"requests": {"GetObject": puts}}]},
                         "prices": {"providers": {p: {"confirmed": True, "per_checkpoint": puts * 5e-6,
                                                      "per_restore": puts * 4e-7,
                                                      "per_month": {"total": puts * 0.22}} for p in providers}}},
                "orphans": {"before_gc": {"objects": 7}, "after_gc": {"objects": 0}, "growing": False}}

    steps = dict(cost.commands("quick"))
    assert "minio-per-key-more" in steps and "--medium hdfs" in steps["indexed_fs-hdfs-chunks"]
    assert all("--orphans" in c and "--fail-at" in c for c in steps.values())
    runs = {"minio-per-key": run("minio", "per-key", 2000, 2004, ["s3-standard", "gcs-standard"]),
            "minio-per-key-more": run("minio", "per-key", 4000, 4004, ["s3-standard"]),
            "minio-chunks-more": run("minio", "chunks", 4000, 2, ["s3-standard"]),
            "redis-per-key": run("redis", "per-key", 2000, 1, []),
            "hbase-chunks": {"error": "HBase down"}}
    out = "\n".join(cost.table(runs))
    assert out.count("| minio | per-key | 2,000 |") == 2  # one row per price row
    assert "none lists this store" in out and "failed: HBase down" in out and "7 / 0" in out
    assert "4,004" in cost.headline(runs) and "chunks 2" in cost.headline(runs)
    cost.chart(runs, str(tmp_path / "cost.png"))
    assert (tmp_path / "cost.png").read_bytes()[:4] == b"\x89PNG"


def test_a_chart_another_step_drew_is_not_also_taken_as_drawn_beside_the_first(tmp_path):
    """spark-matrix's state step draws ``spark-matrix-state.png`` beside the run step's
    ``spark-matrix.png``: it is the state step's chart only, from the state step's document."""
    from experiments.reproduce import docs as reproduce_docs
    from experiments.reproduce.result import Reproduce, StepRun

    out = tmp_path / "results"
    out.mkdir()
    runs = []
    for label, png in (("run", "m.png"), ("state", "m-state.png")):
        (out / png).write_bytes(b"\x89PNG " + label.encode())
        runs.append(StepRun(label, "bench spark-matrix", 0, 1.0, f"{label}.log", str(out / "m" / f"{label}.json"),
                            plot=str(out / png), document={"schema": "x/1", "label": label}))
    doc = Reproduce(name="m", shows="", quick=True, runs=runs, table=[], commands=[],
                    started="2026-01-01T00:00:00+0000", loadavg_before=[0, 0, 0], loadavg_after=[0, 0, 0])
    charts = reproduce_docs.charts_of(doc, str(out / "m.json"))
    assert [(os.path.basename(c.png), os.path.basename(c.source)) for c in charts] == [
        ("m.png", "run.json"), ("m-state.png", "state.json")]
