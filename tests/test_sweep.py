"""``bench compare``, ``bench sweep`` and ``bench report``: tables, JSON, CSV, PNG, and backends
that cannot open reported as skipped (never dropped)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from experiments.core import compare
from workloads import core

ROOT = Path(__file__).resolve().parents[1]


def bench(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_compare_table_json_csv_png_and_skipped_backend(tmp_path):
    out, png, table = tmp_path / "c.json", tmp_path / "c.png", tmp_path / "c.csv"
    # redis on port 1: a real connection refusal -> skipped with the reason
    proc = bench("compare", "write-heavy", "--backends", "memory,indexed_fs,redis",
                 "--opt", "port=1", "--ops", "300", "--records", "100",
                 "--json", str(out), "--plot", str(png), "--csv", str(table))
    assert proc.returncode == 1, proc.stderr  # everything written, but redis was asked for
    assert "redis skipped" in proc.stderr
    rows = proc.stdout.splitlines()
    assert rows[0].split()[:3] == ["backend", "ops/s", "first/this"]
    assert rows[1].startswith("memory") and "1x" in rows[1]
    assert rows[2].startswith("indexed_fs")
    assert rows[3].startswith("redis") and "skipped:" in rows[3]
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ckptbench.compare/1"
    assert [e["backend"] for e in doc["results"]] == ["memory", "indexed_fs", "redis"]
    assert doc["results"][2]["skipped"] and "refused" in doc["results"][2]["skipped"].lower()
    assert doc["results"][1]["phases"]["run"]["operations_done"] == 300
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with table.open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["backend"] for r in rows} == {"memory", "indexed_fs", "redis"}


def test_compare_rounds_interleave_and_report_median_ratios(tmp_path):
    """--rounds 3: every backend runs 3 times, the order reversed every other round; each
    entry is the median run with every round's throughput, and [RATIO] lines give the first
    backend over each other as the median of the per-round ratios."""
    out = tmp_path / "c.json"
    proc = bench("compare", "ycsb-c", "--backends", "memory,indexed_fs", "--ops", "200",
                 "--records", "50", "--rounds", "3", "--json", str(out),
                 "--plot", str(tmp_path / "c.png"))
    assert proc.returncode == 0, proc.stderr
    said = [ln.split(":")[2].strip() for ln in proc.stderr.splitlines()
            if ln.startswith("bench: compare round")]
    assert said == ["memory", "indexed_fs", "indexed_fs", "memory", "memory", "indexed_fs"]
    doc = json.loads(out.read_text())
    assert doc["config"]["rounds"] == 3
    for e in doc["results"]:
        tputs = e["rounds_ops_sec"]
        assert len(tputs) == 3 and e["throughput_ops_sec"] == sorted(tputs)[1]
    (ratio,) = doc["ratios"]
    mem, ifs = (e["rounds_ops_sec"] for e in doc["results"])
    assert ratio["what"] == "memory / indexed_fs" and ratio["over"] == "indexed_fs"
    assert ratio["rounds"] == [a / b for a, b in zip(mem, ifs)]
    assert ratio["median"] == sorted(ratio["rounds"])[1]
    assert f"[RATIO], memory / indexed_fs, {ratio['median']:.2f}, median of 3 rounds" in proc.stdout
    assert bench("compare", "ycsb-c", "--backends", "memory", "--rounds", "0").returncode == 2


def test_compare_writes_no_chart_unless_asked(tmp_path):
    proc = bench("compare", "ycsb-c", "--backends", "memory", "--ops", "100", "--records", "50",
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_compare_unknown_backend_is_a_usage_error():
    proc = bench("compare", "write-heavy", "--backends", "memory,nosuch")
    assert proc.returncode == 2 and "unknown backend 'nosuch'" in proc.stderr


def test_sweep_runs_explicit_targets_with_intended_latencies():
    """Explicit targets are all tried while throughput grows; each point records Intended-."""
    spec = core.preset("write-heavy", records=100, operations=100)


    points = compare.sweep_points("memory", {}, spec, targets=[200, 400, 800], point_seconds=0.5)
    assert [p.params["target"] for p in points] == [200.0, 400.0, 800.0]
    assert all(p.run.measurements.summary("Intended-UPDATE")["count"] for p in points)


def test_sweep_cli_and_report_replot(tmp_path):
    out, png = tmp_path / "s.json", tmp_path / "s.png"
    proc = bench("sweep", "write-heavy", "--backends", "memory,default_fs", "--targets",
                 "200,400", "--point-seconds", "0.5", "--records", "100",
                 "--json", str(out), "--plot", str(png))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:4] == ["backend", "target", "threads", "ops/s"]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["memory", "200"], ["memory", "400"], ["default_fs", "200"], ["default_fs", "400"]]
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ckptbench.sweep/1" and len(doc["results"]) == 4
    assert png.exists()
    replot = tmp_path / "again.png"
    proc = bench("report", str(out), "--plot", str(replot))
    assert proc.returncode == 0, proc.stderr
    assert replot.read_bytes()[:4] == b"\x89PNG"
    assert "memory" in proc.stdout


def test_sweep_threads(tmp_path):
    proc = bench("sweep", "ycsb-c", "--backends", "memory", "--threads-sweep", "1,2",
                 "--point-seconds", "0.3", "--records", "50", "--plot", str(tmp_path / "t.png"))
    assert proc.returncode == 0, proc.stderr
    rows = proc.stdout.splitlines()[1:]
    assert [line.split()[2] for line in rows if not line.startswith("[")] == ["1", "2"]
    assert [line.split(", ")[1] for line in rows if line.startswith("[RATIO]")] == [
        "memory threads 2/1"]


def test_report_single_run_and_csv_on_runs(tmp_path):
    run_json, run_csv = tmp_path / "r.json", tmp_path / "r.csv"
    proc = bench("write-heavy", "--backend", "memory", "--ops", "200", "--json", str(run_json),
                 "--csv", str(run_csv), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    ops = {row["operation"] for row in csv.DictReader(run_csv.open())}
    assert {"READ", "UPDATE"} <= ops
    proc = bench("report", str(run_json), "--plot", str(tmp_path / "r.png"))
    assert proc.returncode == 0, proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    proc = bench("report", str(bad), "--plot", str(tmp_path / "x.png"))
    assert proc.returncode == 2 and "not a ckptbench result" in proc.stderr


def test_sweep_stop_rule_two_flat_points(monkeypatch):
    """Pure logic: stop after two consecutive points gaining < 5 % (fake throughputs)."""
    from workloads.measure import Measurements
    from workloads.runner import PhaseResult

    tputs = iter([100, 200, 300, 305, 310, 900])

    def fake(backend, options, spec, clients, progress=None):
        ops = next(tputs)
        return compare.Outcome(backend, {"run": PhaseResult("run", 1000.0, ops, Measurements())})

    monkeypatch.setattr(compare, "run_workload", fake)
    points = compare.sweep_points("memory", {}, core.preset("write-heavy"))
    assert [p.run.operations for p in points] == [100, 200, 300, 305, 310]
    assert [p.params["target"] for p in points][:3] == [100.0, 200.0, 400.0]


def test_thesis_fig42_quick_and_table52(tmp_path):
    """The thesis commands write JSON + PNG and print the thesis' figure beside ours."""
    proc = bench("thesis", "fig4.2", "--quick", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "thesis Fig 4.2" in proc.stdout
    doc = json.loads((tmp_path / "fig4.2.json").read_text())
    assert [r["pes"] for r in doc["rows"]] == [1000, 10000, 100000]
    assert all(r["open_after_crash_ms"] > 0 for r in doc["rows"])
    assert (tmp_path / "fig4.2.png").exists()
    # table5.2 from whatever results exist; missing experiments are named, not invented
    proc = bench("thesis", "table5.2", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "run `bench thesis fig4.1` first" in proc.stderr
    assert "indexed_fs" in proc.stdout and "thesis Table 5.2" in proc.stdout


def test_sweep_rounds_interleave_and_print_median_ratios(tmp_path):
    out = tmp_path / "s.json"
    proc = bench("sweep", "write-heavy", "--backends", "memory,indexed_fs", "--threads-sweep",
                 "1,2", "--point-seconds", "0.2", "--records", "50", "--rounds", "3",
                 "--json", str(out), "--plot", str(tmp_path / "s.png"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert [e["round"] for e in doc["results"]] == [1] * 4 + [2] * 4 + [3] * 4
    assert [e["backend"] for e in doc["results"][:4]] == ["memory"] * 2 + ["indexed_fs"] * 2
    whats = [r["what"] for r in doc["ratios"]]
    assert whats == ["memory threads 2/1", "indexed_fs threads 2/1",
                     "memory/indexed_fs threads 1", "memory/indexed_fs threads 2"]
    # the median itself is checked on known throughputs (test_sweep_ratios_from_known_throughputs)
    for r in doc["ratios"]:
        assert len(r["rounds"]) == 3
        assert f"[RATIO], {r['what']}, {r['median']:.2f}, median of 3 rounds" in proc.stdout
    assert (tmp_path / "s.png").stat().st_size > 0


def test_sweep_ratios_from_known_throughputs():
    from experiments.core import results
    from experiments.core.results import Entry, Point

    def entry(rnd, backend, threads, tput):
        return Entry(backend, Point(threads=threads), None, throughput_ops_sec=tput, round=rnd)

    entries = [entry(1, "a", 1, 100.0), entry(1, "a", 16, 500.0),
               entry(1, "b", 1, 10.0), entry(1, "b", 16, 50.0),
               entry(2, "a", 1, 100.0), entry(2, "a", 16, 700.0),
               entry(2, "b", 1, 20.0), entry(2, "b", 16, 35.0)]
    got = {r.what: (r.median, r.rounds) for r in results.sweep_ratios(entries)}
    assert got == {"a threads 16/1": (6.0, [5.0, 7.0]), "b threads 16/1": (3.375, [5.0, 1.75]),
                   "a/b threads 1": (7.5, [10.0, 5.0]), "a/b threads 16": (15.0, [10.0, 20.0])}
    # a target-rate sweep has no thread ratios
    assert results.sweep_ratios([Entry("a", Point(target=100.0), None,
                                       throughput_ops_sec=99.0)]) == []
