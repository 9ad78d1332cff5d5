"""YCSB's client properties and flags on ``bench load`` / ``bench run``: maxexecutiontime,
measurement.interval, workload=, zeropadding, warnings for names YCSB acts on, YCSB's own flags,
``-P NAME``, ``--json -`` and ``bench --version``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workloads import client_properties, core, properties
from workloads.core import WorkloadError
from workloads.measure import Measurements

ROOT = Path(__file__).resolve().parents[1]
SMALL = ("-p", "recordcount=50", "-p", "operationcount=200", "--no-progress")


def bench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=120)


def sections(stdout: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\[([^\]]+)\], ", stdout, re.M)}


def test_maxexecutiontime_stops_the_run_and_prints_ycsbs_output(tmp_path):
    began = time.monotonic()
    proc = bench("run", "-P", "workloada", "-db", "memory", "-t", "-p", "recordcount=50",
                 "-p", "operationcount=2000000000", "-p", "maxexecutiontime=1", "--no-progress",
                 cwd=tmp_path)  # -P NAME finds the shipped file from any directory
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - began < 30
    runtime = int(re.search(r"^\[OVERALL\], RunTime\(ms\), (\d+)$", proc.stdout, re.M).group(1))
    assert 900 <= runtime < 5000
    assert {"OVERALL", "READ", "UPDATE"} <= sections(proc.stdout)


@pytest.mark.parametrize("mode, expected", [
    (None, {"OVERALL", "READ", "UPDATE"}),
    ("op", {"OVERALL", "READ", "UPDATE"}),
    ("intended", {"OVERALL", "READ", "UPDATE"}),
    ("both", {"OVERALL", "READ", "UPDATE", "Intended-READ", "Intended-UPDATE"}),
])
def test_intended_sections_only_with_measurement_interval(mode, expected):
    extra = () if mode is None else ("-p", f"measurement.interval={mode}")
    proc = bench("run", "workloada", "--backend", "memory", "-target", "5000", *SMALL, *extra)
    assert proc.returncode == 0, proc.stderr
    assert sections(proc.stdout) == expected


def test_printed_phase_has_intended_sections_only_when_asked():
    """A paced run records ``Intended-<OP>``; the printed phase shows it only with
    measurement.interval=intended|both, as YCSB, so a parser that sums ``Operations`` over
    the sections counts each operation once."""
    from bench import report
    from workloads.runner import PhaseResult

    m = Measurements()
    for name, us in (("READ", 10), ("Intended-READ", 99), ("UPDATE", 20), ("Intended-UPDATE", 98)):
        m.record(name, us)
    phase = PhaseResult("run", 1000.0, 2, m)

    def printed(**kw):
        return {line.split("]")[0][1:] for line in report.phase_lines(phase, **kw)}

    assert printed() == printed(interval="op") == {"OVERALL", "READ", "UPDATE"}
    assert printed(interval="both") == {"OVERALL", "READ", "UPDATE", "Intended-READ",
                                        "Intended-UPDATE"}
    intended = report.phase_lines(phase, interval="intended")
    assert "[READ], MaxLatency(us), 99" in intended
    assert not any(line.startswith("[Intended-") for line in
                   report.measurement_lines(m, "BASELINE-"))
    assert set(m.histograms) == {"READ", "Intended-READ", "UPDATE", "Intended-UPDATE"}  # kept


def test_select_interval_names_intended_latency_as_ycsb_does():
    m = Measurements()
    m.record("READ", 10)
    m.record("Intended-READ", 99)
    m.record("SCAN", 5)  # no intended latency: keeps its own
    assert set(client_properties.select_interval(m, "op").histograms) == {"READ", "SCAN"}
    intended = client_properties.select_interval(m, "intended").histograms
    assert set(intended) == {"READ", "SCAN"} and intended["READ"].get_max_value() == 99
    assert set(client_properties.select_interval(m, "both").histograms) == set(m.histograms)
    with pytest.raises(WorkloadError, match="measurement.interval"):
        client_properties.measurement_interval({"measurement.interval": "ops"})


def test_one_warning_per_name_ycsb_acts_on_and_quiet_binding_properties():
    proc = bench("load", "workloada", "-db", "memory", "-l", "mylabel", "-p", "table=t",
                 "-p", "redis.host=example", "-p", "dataintegrity=false", *SMALL)
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "not honoured" in line]
    assert len(warned) == 2 and any("label" in w for w in warned) \
        and any("table" in w for w in warned), proc.stderr
    assert "redis.host" not in proc.stderr
    assert "[INSERT], Operations, 50" in proc.stdout


def test_workload_class_and_zeropadding():
    client_properties.check_workload({"workload": "com.yahoo.ycsb.workloads.CoreWorkload"})
    with pytest.raises(WorkloadError, match="CoreWorkload only"):
        client_properties.check_workload({"workload": "site.ycsb.workloads.TimeSeriesWorkload"})
    spec = properties.spec_from({"zeropadding": "12", "insertorder": "ordered"})
    assert core.CoreWorkload(spec).key(7) == "user000000000007"
    with pytest.raises(WorkloadError, match="zeropadding"):
        properties.spec_from({"zeropadding": "0"})
    proc = bench("run", "workloada", "-db", "memory", "-p", "workload=site.ycsb.RestWorkload",
                 *SMALL)
    assert proc.returncode == 2 and "CoreWorkload only" in proc.stderr


def test_json_dash_is_standard_output_and_version(tmp_path):
    proc = bench("run", "workloada", "-db", "memory", *SMALL, "--json", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "-").exists()
    doc = json.loads(proc.stdout[proc.stdout.index("\n{") + 1:])
    assert doc["phases"]["run"]
    version = bench("--version")
    assert version.returncode == 0 and re.match(r"bench \S+", version.stdout), version


def test_timeseries_prints_ycsbs_time_series_lines():
    proc = bench("run", "workloada", "-db", "memory", "-p", "recordcount=50", "-p",
                 "operationcount=2000000000", "-p", "maxexecutiontime=1", "-p",
                 "measurementtype=timeseries", "-p", "timeseries.granularity=200", "-target",
                 "2000", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "Percentile" not in proc.stdout
    buckets = [int(m.group(1)) for m in
               re.finditer(r"^\[READ\], (\d+), [0-9.]+(?:E-?\d+)?$", proc.stdout, re.M)]
    assert len(buckets) >= 3 and buckets == sorted(set(buckets)), proc.stdout
    assert all(t % 200 == 0 for t in buckets) and buckets[0] == 0
    for metric in ("Operations", "AverageLatency(us)", "MinLatency(us)", "MaxLatency(us)",
                   "Return=OK"):
        assert f"[READ], {metric}, " in proc.stdout


def test_measurementtype_other_than_ycsbs_is_refused_and_histogram_warns():
    bad = bench("run", "workloada", "-db", "memory", "-p", "measurementtype=bogus", *SMALL)
    assert bad.returncode == 2 and "measurementtype" in bad.stderr
    other = bench("run", "workloada", "-db", "memory", "-p", "measurementtype=raw", *SMALL)
    assert other.returncode == 0 and "measurementtype=raw is not implemented" in other.stderr
    assert "50thPercentileLatency" in other.stdout


def test_ycsbs_load_flag_picks_the_phase():
    proc = bench("run", "-load", "-P", "workloada", "-db", "memory", *SMALL)
    assert proc.returncode == 0, proc.stderr
    assert "[INSERT], Operations, 50" in proc.stdout and "[READ]" not in proc.stdout


def test_dataintegrity_verifies_every_read_under_verify(tmp_path):
    assert core.deterministic_field("user1", "field0", 30) == b"user1:field0:-1268391216:95720"  # Java's
    store = f"path={tmp_path / 'store'}"
    common = ("-P", "workloada", "--backend", "indexed_fs", "--opt", store, "-p",
              "dataintegrity=true", *SMALL)
    assert bench("load", *common).returncode == 0
    proc = bench("run", *common, "-s", "-p", "status.interval=0.05")
    assert proc.returncode == 0, proc.stderr
    reads = re.search(r"^\[READ\], Operations, (\d+)$", proc.stdout, re.M).group(1)
    assert f"[VERIFY], Operations, {reads}" in proc.stdout
    assert f"[VERIFY], Return=OK, {reads}" in proc.stdout and "UNEXPECTED" not in proc.stdout
    # a store loaded without it holds other values: every check fails, visibly
    other = tmp_path / "other"
    assert bench("load", "workloada", "--backend", "indexed_fs", "--opt", f"path={other}",
                 *SMALL).returncode == 0
    bad = bench("run", "workloada", "--backend", "indexed_fs", "--opt", f"path={other}",
                "-p", "dataintegrity=true", *SMALL)
    assert "[VERIFY], Return=UNEXPECTED_STATE" in bad.stdout
    with pytest.raises(WorkloadError, match="dataintegrity needs"):
        properties.spec_from({"dataintegrity": "true", "valuesize": "100"})
