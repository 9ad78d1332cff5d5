"""``bench report`` and ``bench diff`` on real result files, and the report page in a real browser.

The runs are made here, tiny, by the real CLI (memory and indexed_fs); the documents that take a
Spark session or an audit to make (``ckptbench.spark``, ``ckptbench.spark-matrix``,
``ckptbench.audit``) are real ones such commands wrote, kept in ``tests/data/documents``.  The page
test loads the page from a ``file://`` URL in Debian's headless Chromium (installed by
:mod:`services.chromium` where it is missing and we are root) and checks that every chart is
decoded and drawn, that nothing was logged as an error and that nothing was fetched.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.core.format import target
from experiments.reproduce import run as reproduce
from experiments.reproduce.run import Experiment, Step
from experiments.report import diff as diffs

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "documents"
SAVED = ("audit.json", "spark.json", "spark-matrix.json")


def bench(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *argv], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """One file of every schema ``bench report`` reads here: a run, a compare with rounds, a
    sweep, and the saved Spark, Spark matrix and audit documents."""
    d = tmp_path_factory.mktemp("results")
    tiny = ("--records", "50", "--ops", "300")
    made = {"run": ("write-heavy", "--backend", "memory", *tiny, "--no-progress"),
            "compare": ("compare", "write-heavy", "--backends", "memory,indexed_fs", *tiny,
                        "--rounds", "2", "--no-progress"),
            "sweep": ("sweep", "ycsb-c", "--backends", "memory", "--threads-sweep", "1,2",
                      "--point-seconds", "0.2", "--records", "50", "--no-progress")}
    out = {}
    for name, argv in made.items():
        out[name] = d / f"{name}.json"
        proc = bench(*argv, "--json", str(out[name]))
        assert proc.returncode == 0, proc.stderr
    for name in SAVED:
        out[name.removesuffix(".json")] = Path(shutil.copy(DATA / name, d / name))
    return out


def test_report_prints_every_input_in_one_table_and_csv_and_html_cover_them(runs, tmp_path):
    paths = [str(p) for p in runs.values()]
    csv_path, html_path = tmp_path / "all.csv", tmp_path / "all.html"
    proc = bench("report", *paths, "--csv", str(csv_path), "--html", str(html_path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:6] == ["source", "workload", "backend", "durability", "setting",
                                    "throughput"]
    for p in runs.values():
        assert any(line.startswith(p.name) for line in lines[1:]), p.name
    compare_rows = [line for line in lines if line.startswith("compare.json")]
    assert len(compare_rows) == 2 and "x memory" in compare_rows[1]  # the ratio to the first
    assert any("held" in line for line in lines if line.startswith("audit.json"))
    # the saved matrix is a one-second run with one checkpoint: too short for a ratio to none
    assert any("too short" in line for line in lines if line.startswith("spark-matrix.json"))
    rows = list(csv.DictReader(csv_path.open()))
    assert {r["source"] for r in rows} == {p.name for p in runs.values()}
    compare = [r for r in rows if r["source"] == "compare.json"]
    assert all(len(r["rounds"].split()) == 2 for r in compare)  # every round's throughput
    text = html_path.read_text()
    assert all(p.name in text for p in runs.values())
    assert "http://" not in text and "https://" not in text and "<script" not in text


def test_experiments_write_their_page_beside_their_json_and_report_reads_them(runs, tmp_path):
    """A thesis figure and the advice from a saved matrix: each page beside its JSON, and
    rows of their own in the report."""
    (tmp_path / "thesis").mkdir()
    proc = bench("thesis", "fig4.2", "--quick", "--out", str(tmp_path / "thesis"))
    assert proc.returncode == 0, proc.stderr
    advise = tmp_path / "advise.json"
    proc = bench("advise", "--from", str(runs["spark-matrix"]), "--mtbf", "1h", "--json",
                 str(advise), "--plot", str(tmp_path / "advise.png"))
    assert proc.returncode == 0, proc.stderr
    fig = tmp_path / "thesis" / "fig4.2.json"
    assert (tmp_path / "thesis" / "fig4.2.html").exists() and (tmp_path / "advise.html").exists()
    proc = bench("report", str(fig), str(advise))
    assert proc.returncode == 0, proc.stderr
    rows = proc.stdout.splitlines()[1:]
    assert sum(line.startswith("fig4.2.json  thesis fig4.2") for line in rows) == 3
    assert any(line.startswith("advise.json") and "rank 1" in line for line in rows)


def test_report_without_plot_writes_nothing_and_bad_input_is_one_line(runs, tmp_path):
    proc = bench("report", str(runs["run"]), cwd=tmp_path)
    assert proc.returncode == 0 and list(tmp_path.iterdir()) == []
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "ckptbench.nothing/1"}')
    proc = bench("report", str(runs["run"]), str(bad))
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and str(bad) in proc.stderr


@pytest.fixture(scope="module")
def chromium() -> None:
    """Debian's chromium on PATH: installed here when missing (as CI, root, does), else the
    test fails naming the fix (never a skip: CI must not pass without the browser)."""
    from services import chromium as browser

    try:
        browser.install(log=lambda _msg: None)
    except browser.ChromiumError as exc:
        pytest.fail(str(exc))


@pytest.mark.browser
def test_report_page_shows_every_chart_offline_in_headless_chromium(runs, tmp_path, chromium):
    from services.chromium import load_page

    page = tmp_path / "page.html"
    proc = bench("report", *map(str, runs.values()), "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    shown = load_page(page)
    assert shown.errors == [] and shown.requests == []
    # a chart for the run, the compare, the sweep, the Spark job and the matrix (the audit has
    # no figure to draw)
    assert len(shown.images) == 5, shown.images
    for img in shown.images:
        assert img["decoded"] and img["natural_width"] > 0 and img["natural_height"] > 0, img
        assert img["width"] > 0 and img["height"] > 0, img


@pytest.mark.browser
def test_the_page_check_sees_a_broken_chart_and_a_console_error(tmp_path, chromium):
    """The check itself: a page with an undecodable image and a console error fails it."""
    from services.chromium import load_page

    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom")</script>'
                   '<img alt=x src="data:image/png;base64,AAAA"></body></html>')
    shown = load_page(bad)
    assert [img["decoded"] for img in shown.images] == [False]
    assert any("boom" in e for e in shown.errors)


def test_every_result_records_its_conditions(runs):
    for name in ("run", "compare", "sweep", "audit", "spark", "spark-matrix"):
        env = json.loads(runs[name].read_text())["environment"]
        assert env["version"] and env["commit"] and env["python"] and env["hostname"], name
        assert env["cpu_model"] and len(env["loadavg"]) == 3, name
        assert {"numpy", "matplotlib", "hdrhistogram"} <= set(env["libraries"]), name


# ----------------------------------------------------------------------------------- diff
def _run(tmp_path: Path, name: str, durability: str, directory: Path) -> Path:
    out = tmp_path / f"{name}.json"
    proc = bench("write-heavy", "--backend", "indexed_fs", "--read-proportion", "0",
                 "--records", "50", "--ops", "400", "--opt", f"durability={durability}",
                 "--opt", f"path={directory / name}", "--no-progress", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def test_diff_of_a_run_with_itself_is_no_regression(runs, tmp_path):
    out = tmp_path / "d.json"
    proc = bench("diff", str(runs["compare"]), str(runs["compare"]), "--fail-above", "10",
                 "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not comparable" not in proc.stdout and "no regression beyond 10%" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ckptbench.diff/1" and doc["regressions"] == 0
    tput = [c for c in doc["changes"] if c["metric"] == "throughput"]
    assert len(tput) == 2 and all(c["noise_pct"] is not None for c in tput)  # from the rounds
    assert all("within noise" in c["verdict"] for c in tput)


def test_diff_flags_durability_none_against_sync(tmp_path, real_disk_dir):
    base = _run(tmp_path, "none", "none", real_disk_dir)
    new = _run(tmp_path, "sync", "sync", real_disk_dir)
    proc = bench("diff", str(base), str(new))
    assert proc.returncode == 0, proc.stderr  # no --fail-above: a report, not a gate
    assert "not comparable: different durability: none / sync" in proc.stdout.splitlines()
    tput = next(line for line in proc.stdout.splitlines() if " throughput " in line)
    assert "higher" in tput and "worse by" in tput and "no rounds: noise unknown" in tput
    proc = bench("diff", str(base), str(new), "--fail-above", "10")
    assert proc.returncode == 1 and "REGRESSION" in proc.stdout


def test_diff_names_another_machine_and_workload_and_refuses_nothing_in_common(runs, tmp_path):
    doc = json.loads(runs["run"].read_text())
    doc["environment"]["hostname"] = "elsewhere"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    proc = bench("diff", str(runs["run"]), str(other))
    assert proc.returncode == 0 and "not comparable: different machine" in proc.stdout
    doc["workload"] = "ycsb-c"
    other.write_text(json.dumps(doc))
    proc = bench("diff", str(runs["run"]), str(other))
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("not comparable: ")]
    assert "different machine: " in line and "; different workload: write-heavy / ycsb-c" in line
    proc = bench("diff", str(runs["sweep"]), str(runs["audit"]))
    assert proc.returncode == 1 and "nothing compared" in proc.stderr


def test_a_change_within_the_rounds_noise_is_no_regression():
    """Pure logic: the noise is the rounds' range over their median, the larger of both runs."""
    base = diffs._Series(100.0, [90.0, 100.0, 110.0])
    within = diffs.compare_metric("x", "throughput", base, diffs._Series(85.0, []), 10)
    assert within.noise_pct == pytest.approx(20.0) and not within.regression
    assert "within noise" in within.verdict
    beyond = diffs.compare_metric("x", "throughput", base, diffs._Series(70.0, []), 10)
    assert beyond.regression and "beyond noise" in beyond.verdict
    latency = diffs.compare_metric("x", "p99_us", diffs._Series(100.0, []),
                                   diffs._Series(80.0, []), 10)
    assert latency.better == "lower" and "better by 20.0%" in latency.verdict
    assert "no rounds: noise unknown" in latency.verdict and not latency.regression


# ------------------------------------------------------------------------ reproduce targets
def test_reproduce_exits_1_on_a_missed_target_unless_allowed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    docs, readme = tmp_path / "results.md", tmp_path / "README.md"
    docs.write_text("")
    readme.write_text("")
    tiny = "write-heavy --backend memory --read-proportion 0 --ops 100"
    registry = {"harness": Experiment(
        "harness", "a target no run meets", (Step("run", tiny, tiny),),
        lambda runs: [target(False, "an impossible goal"), target(True, "an easy one")],
        lambda runs: "headline")}
    said: list[str] = []
    kw = dict(quick=True, out="results", docs=str(docs), readme=str(readme), say=said.append,
              registry=registry)
    assert reproduce.run(["harness"], **kw) == 1
    doc = json.loads((tmp_path / "results" / "harness.json").read_text())
    assert doc["status"] == "ok"
    assert doc["targets"] == [{"what": "an impossible goal", "met": False},
                              {"what": "an easy one", "met": True}]
    assert any("target(s) NOT met: an impossible goal" in line for line in said)
    assert (tmp_path / "results" / "harness.html").exists()  # the page beside the JSON
    assert reproduce.run(["harness"], **kw, allow_missed=True) == 0


def test_help_texts_name_the_outputs():
    report = bench("report", "--help").stdout
    assert "--html" in report and "--csv" in report and "--plot" in report
    diff = bench("diff", "--help").stdout
    assert "--fail-above" in diff and "--json" in diff and "noise" in diff
    assert "--allow-missed" in bench("reproduce", "--help").stdout
    assert "--html" in bench("write-heavy", "--help").stdout


def test_the_saved_documents_are_what_the_commands_write():
    """The saved Spark and audit files parse as their types (a schema change shows up here)."""
    from bench.results_cli import read_documents

    docs = read_documents([str(DATA / n) for n in SAVED])
    assert [d.SCHEMA for _, d in docs] == ["ckptbench.audit/1", "ckptbench.spark/1",
                                           "ckptbench.spark-matrix/2"]
    assert all(os.path.getsize(DATA / n) < 20_000 for n in SAVED)


def test_value_axes_are_linear_from_zero_unless_the_values_span_decades():
    from experiments.report.plots import pyplot, value_axis

    plt = pyplot()
    fig, (near, wide) = plt.subplots(1, 2)
    near.bar([0, 1], [8413, 7749])
    value_axis(near, [8413, 7749], "ops/s")
    wide.bar([0, 1, 2], [0, 20, 90_000])
    value_axis(wide, [0, 20, 90_000], "latency (us)")
    assert near.get_yscale() == "linear" and near.get_ylim()[0] == 0 and near.get_ylabel() == "ops/s"
    assert wide.get_yscale() == "log" and wide.get_ylabel() == "latency (us), log scale"
    plt.close(fig)


def test_peer_documents_are_rows_with_one_throughput_and_their_rounds(tmp_path):
    """``bench peer``'s documents (against redis-benchmark, against YCSB's binding): a row
    per comparison with the median round's throughput, every round and the ratio, and a page
    that renders them."""
    from experiments.report import page, summary
    from experiments.storage.binding_peer import BindingPeer, ThreadsRun
    from experiments.storage.peers import PeerResult

    peer = PeerResult(peer_throughput=[10.0, 12.0, 11.0], ours_rounds=[9.0, 13.0], clients=4)
    binding = BindingPeer(workload="workloada", records=100, ops=200, field_count=10,
                          field_length=100, distribution="zipfian", read_proportion=0.5,
                          update_proportion=0.5, placement="any", warmup=1, rounds=3, by_threads=[
                              ThreadsRun(1, [5.0, 6.0, 5.0, 6.0], [7.0, 5.0, 6.0], [1.27, 0.91, 1.09],
                                         1.09)])
    rows = summary.rows(peer.document("redis"), "p.json") + summary.rows(binding, "b.json")
    assert [(r.setting, r.throughput, r.rounds) for r in rows] == [
        ("clients 4 pipeline 1", 13.0, [9.0, 13.0]),
        ("threads 1 beside YCSB's binding", 6.0, [7.0, 5.0, 6.0])]
    assert rows[1].ratio == "1.09x the binding" and rows[1].workload == "workloada"
    out = tmp_path / "peers.html"
    page.write_page(str(out), [("p.json", peer.document("redis")), ("b.json", binding)], "peers")
    assert "threads 1 beside YCSB&#x27;s binding" in out.read_text()
