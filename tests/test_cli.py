"""The ``bench`` CLI end to end, as a user runs it: a real subprocess, YCSB lines, JSON, errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\[([^\]]+)\], ([^,]+), (-?[0-9.]+(?:[eE][-+]?[0-9]+)?|true|false)$")
OP_METRICS = [
    "Operations",
    "AverageLatency(us)",
    "MinLatency(us)",
    "MaxLatency(us)",
    "50thPercentileLatency(us)",
    "95thPercentileLatency(us)",
    "99thPercentileLatency(us)",
    "99.9PercentileLatency(us)",
    "Return=OK",
]


def bench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def parse(stdout: str) -> dict[tuple[str, str], str]:
    """Every stdout line must be a YCSB line; returns {(section, metric): value}."""
    out = {}
    for line in stdout.splitlines():
        m = LINE.match(line)
        assert m, f"not a YCSB result line: {line!r}"
        out[(m.group(1), m.group(2))] = m.group(3)
    return out


def test_write_heavy_memory_prints_ycsb_lines_and_json(tmp_path):
    out_json = tmp_path / "r.json"
    proc = bench("write-heavy", "--backend", "memory", "--ops", "2000", "--seed", "3",
                 "--json", str(out_json))
    assert proc.returncode == 0, proc.stderr
    lines = parse(proc.stdout)
    # the run's 2000 operations over its run time (whole milliseconds, however rounded)
    runtime_ms, throughput = int(lines[("OVERALL", "RunTime(ms)")]), float(
        lines[("OVERALL", "Throughput(ops/sec)")])
    assert runtime_ms >= 1
    assert 2000 * 1000 / (runtime_ms + 1) <= throughput <= 2000 * 1000 / max(runtime_ms - 1, 0.5)
    for op in ("READ", "UPDATE"):
        for metric in OP_METRICS:
            assert (op, metric) in lines, (op, metric)
    assert int(lines[("READ", "Operations")]) + int(lines[("UPDATE", "Operations")]) == 2000
    assert lines[("LOAD-OVERALL", "Records")] == "1000"
    # the run's block first, so a parser taking the first [OVERALL] reads the run
    order = [line.split("]")[0][1:] for line in proc.stdout.splitlines()]
    assert order[0] == "OVERALL" and order.index("LOAD-OVERALL") > order.index("UPDATE")
    # only the statuses that occurred, as YCSB prints them
    assert not any(metric == "Return=ERROR" for _section, metric in lines)

    doc = json.loads(out_json.read_text())
    assert doc["schema"] == "ckptbench.result/1"
    assert doc["workload"] == "write-heavy" and doc["backend"] == "memory"
    assert {"python", "platform", "cpu_count", "hostname", "time"} <= set(doc["environment"])
    assert doc["config"]["seed"] == 3 and doc["seed"] == 3
    assert "seed 3" in proc.stderr
    run = doc["phases"]["run"]
    assert {"runtime_ms", "throughput_ops_sec", "operations"} <= set(run)
    read = run["operations"]["READ"]
    assert {"count", "ok", "errors", "mean_us", "min_us", "max_us", "p50_us", "p95_us", "p99_us",
            "p999_us"} <= set(read)
    assert read["count"] == int(lines[("READ", "Operations")])
    assert doc["phases"]["load"]["records"] == 1000
    assert doc["backend_stats"]["backend"] == "memory"


def test_write_only_and_ycsb_presets(tmp_path):
    proc = bench("write-heavy", "--backend", "memory", "--ops", "500", "--read-proportion", "0")
    assert proc.returncode == 0, proc.stderr
    lines = parse(proc.stdout)
    assert lines[("UPDATE", "Operations")] == "500"
    assert ("READ", "Operations") not in lines
    for name, op in [("ycsb-c", "READ"), ("ycsb-e", "SCAN"), ("ycsb-f", "READ-MODIFY-WRITE")]:
        proc = bench(name, "--backend", "memory", "--records", "300", "--ops", "300",
                     "--threads", "2")
        assert proc.returncode == 0, proc.stderr
        assert int(parse(proc.stdout)[(op, "Operations")]) > 0


@pytest.mark.parametrize("interval, intended", [(None, False), ("op", False),
                                                 ("intended", False), ("both", True)])
def test_intended_sections_only_with_measurement_interval(interval, intended):
    """As YCSB: a target rate alone prints only the plain sections (measurement.interval=op);
    ``both`` adds ``[Intended-<OP>]``, ``intended`` prints that latency under the plain ones."""
    extra = () if interval is None else ("--measurement-interval", interval)
    proc = bench("ycsb-a", "--backend", "memory", "--records", "100", "--ops", "200",
                 "--target", "2000", "--distribution", "uniform", *extra)
    assert proc.returncode == 0, proc.stderr
    sections = {metric for metric, _ in parse(proc.stdout)}
    assert any(s.startswith("Intended-") for s in sections) == intended, sorted(sections)
    assert {"OVERALL", "LOAD-OVERALL"} <= sections
    assert not any(s.startswith("LOAD-Intended-") for s in sections)


@pytest.mark.parametrize(
    "args, message",
    [
        (["write-heavy", "--backend", "nope"], "unknown backend 'nope'"),
        (["write-heavy", "--backend", "memory", "--opt", "novalue"], "is not KEY=VALUE"),
        (["write-heavy", "--backend", "memory", "--opt", "colour=red"], "has no option 'colour'"),
        (["write-heavy", "--backend", "memory", "--durability", "sync"], "durability"),
        (["write-heavy", "--backend", "memory", "--ops", "-3"], "--ops"),
        (["ycsb-a", "--backend", "memory", "--distribution", "pareto"], "--distribution"),
        (["recovery", "--backend", "memory", "--records", "10"], "persistent backend"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args, message):
    proc = bench(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1, proc.stderr
    assert err[0].startswith("bench: error: ") and message in err[0]
    assert "Traceback" not in proc.stderr


def test_help_lists_workloads():
    proc = bench("--help")
    assert proc.returncode == 0
    for name in ("write-heavy", "ycsb-a", "ycsb-f", "recovery", "services"):
        assert name in proc.stdout
    assert "_recovery-load" not in proc.stdout


@pytest.mark.parametrize("backend", ["default_fs", "indexed_fs"])
def test_file_backend_write_heavy_with_baseline(backend, tmp_path):
    proc = bench("write-heavy", "--backend", backend, "--records", "50", "--ops", "100",
                 "--baseline", "--opt", f"path={tmp_path / 'store'}")
    assert proc.returncode == 0, proc.stderr
    lines = parse(proc.stdout)
    assert int(lines[("READ", "Operations")]) + int(lines[("UPDATE", "Operations")]) == 100
    assert float(lines[("BASELINE", "Throughput(ops/sec)")]) > 0
    assert float(lines[("BASELINE", "Ratio")]) > 0
    assert ("BASELINE", "RunTime(ms)") in lines
    from backends.indexed_fs import group_commit as commit
    if commit.native_available:  # the same appends in C, with the store's C group committer
        assert float(lines[("BASELINE-C", "Throughput(ops/sec)")]) > 0
        assert float(lines[("BASELINE-C", "Ratio")]) > 0


def test_baseline_with_threads_runs_the_c_ceiling_with_as_many_threads(tmp_path):
    from backends.indexed_fs import group_commit as commit
    if not commit.native_available:
        pytest.skip("the C committer was not built")
    out = tmp_path / "r.json"
    proc = bench("write-heavy", "--backend", "indexed_fs", "--records", "50", "--ops", "400",
                 "--read-proportion", "0", "--threads", "4", "--baseline", "--json", str(out),
                 "--opt", f"path={tmp_path / 'store'}")
    assert proc.returncode == 0, proc.stderr
    native = json.loads(out.read_text())["baseline"]["native"]
    assert native["operations"] == 400 and native["throughput"] > 0
    assert len(native["legs_throughput"]) == 2


@pytest.mark.parametrize("backend", ["default_fs", "indexed_fs"])
def test_file_backend_default_dir_is_temporary(backend, tmp_path):
    import os

    env_tmp = tmp_path / "tmp"
    env_tmp.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "write-heavy", "--backend", backend, "--records", "20",
         "--ops", "20"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TMPDIR": str(env_tmp)},
    )
    assert proc.returncode == 0, proc.stderr
    assert list(env_tmp.iterdir()) == []  # created for the run, removed afterwards


@pytest.mark.parametrize("backend", ["default_fs", "indexed_fs"])
def test_recovery_clean(backend, tmp_path):
    proc = bench("recovery", "--backend", backend, "--records", "300", "--value-size", "100",
                 "--opt", f"path={tmp_path / 'store'}", "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    lines = parse(proc.stdout)
    assert lines[("RECOVERY", "Missing")] == "0"
    assert lines[("RECOVERY", "Corrupt")] == "0"
    assert float(lines[("RECOVERY", "OpenTime(ms)")]) >= 0
    assert lines[("READ", "Return=OK")] == "300"
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["recovery"]["missing"] == 0


@pytest.mark.crash
@pytest.mark.parametrize("backend", ["default_fs", "indexed_fs"])
def test_recovery_after_sigkill(backend, tmp_path):
    proc = bench("recovery", "--backend", backend, "--records", "300", "--value-size", "100",
                 "--crash", "--durability", "sync", "--opt", f"path={tmp_path / 'store'}")
    assert proc.returncode == 0, proc.stderr
    lines = parse(proc.stdout)
    assert lines[("RECOVERY", "Crash")] == "true"
    assert lines[("RECOVERY", "Missing")] == "0"
    assert lines[("RECOVERY", "Corrupt")] == "0"


@pytest.mark.crash
def test_recovery_reopens_times_fresh_processes_and_reports_their_median(tmp_path):
    """--reopens 3 after a SIGKILL: three timed reopens, each in a process killed with the store
    open, so each finds the crash image (every one walks the log past the snapshot); OpenTime is
    their median, and the reopen after them still finds every key."""
    proc = bench("recovery", "--backend", "indexed_fs", "--records", "300", "--value-size", "100",
                 "--crash", "--reopens", "3", "--opt", f"path={tmp_path / 'store'}",
                 "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr
    lines = parse(proc.stdout)
    doc = json.loads((tmp_path / "r.json").read_text())["recovery"]
    assert len(doc["open_ms_rounds"]) == 3
    assert doc["open_ms"] == sorted(doc["open_ms_rounds"])[1]
    assert lines[("RECOVERY", "Reopens")] == "3"
    assert float(lines[("RECOVERY", "OpenTimeMin(ms)")]) == min(doc["open_ms_rounds"])
    assert int(lines[("RECOVERY", "RecordsScanned")]) == 300  # the crash image, walked again
    assert lines[("RECOVERY", "Missing")] == "0" and lines[("READ", "Return=OK")] == "300"
    bad = bench("recovery", "--backend", "indexed_fs", "--records", "3", "--reopens", "0")
    assert bad.returncode == 2 and "reopens" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("backend", ["default_fs", "indexed_fs"])
def test_recovery_eager_prefetches_with_get_many(backend, tmp_path):
    proc = bench("recovery", "--backend", backend, "--records", "2500", "--value-size", "50",
                 "--eager", "--opt", f"path={tmp_path / 'store'}")
    assert proc.returncode == 0, proc.stderr
    lines = parse(proc.stdout)
    assert lines[("RECOVERY", "Eager")] == "true"
    assert lines[("RECOVERY", "Missing")] == "0"
    assert lines[("READ", "Return=OK")] == "2500"
    assert lines[("READ-PREFETCH", "Operations")] == "3"  # batches of 1000


def test_spark_is_wired_like_services():
    proc = bench("--help")
    assert proc.returncode == 0 and "spark" in proc.stdout
    assert bench("spark", "--help").returncode == 0
