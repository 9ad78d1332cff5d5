"""Every ``ckptbench.*`` result document as a type: each round-trips through its JSON
(``from_json(to_json(x)) == x``, through real JSON text), and its JSON has the keys the readers
of written files (the tables, ``bench report``, earlier results) expect."""

from __future__ import annotations

import json

import pytest

from experiments.core import compare, results
from experiments.core.document import Document, DocumentError, Environment, parse
from workloads import core
from workloads.runner import ClientSettings

#: the environment's keys: the machine, the CPUs, the command line, version, commit and load
ENVIRONMENT = {"python", "implementation", "platform", "cpu_count", "cpus_allowed", "hostname",
               "time", "argv", "version", "commit", "loadavg", "cpu_model", "libraries"}
PHASE = {"runtime_ms", "throughput_ops_sec", "operations_done", "operations", "errors"}
OP = {"count", "ok", "errors", "statuses", "mean_us", "min_us", "max_us", "p50_us", "p95_us",
      "p99_us", "p999_us"}
ENTRY = {"backend", "params", "skipped", "throughput_ops_sec", "overall", "intended", "phases"}


def round_trip(doc: Document) -> dict:
    """``doc``'s JSON, after checking it reads back, through JSON text, as an equal document."""
    data = doc.to_json()
    again = type(doc).from_json(json.loads(json.dumps(data)))
    assert again == doc
    assert parse(json.loads(json.dumps(data))) == doc
    assert list(data)[0] == "schema" and data["schema"] == doc.SCHEMA
    assert set(data["environment"]) == ENVIRONMENT
    return data


SPEC = core.preset("write-heavy", records=50, operations=100)


def test_result_round_trips_with_the_keys_bench_run_wrote():
    from experiments.core.run import run
    from experiments.core.spec import RunSpec

    result = run(RunSpec("memory", {}, SPEC, ClientSettings(seed=7), config={"threads": 1}))
    data = round_trip(result.document())
    assert set(data) == {"schema", "workload", "backend", "config", "environment", "phases",
                         "backend_stats", "seed"}
    assert set(data["phases"]) == {"load", "run"}
    assert set(data["phases"]["run"]) == PHASE
    assert all(set(s) == OP for s in data["phases"]["run"]["operations"].values())
    assert data["seed"] == 7 and data["config"]["workload_spec"]["records"] == 50


def test_a_recovery_result_round_trips_with_its_section():
    doc = results.Result(workload="recovery", backend="indexed_fs", config={"records": 10},
                         recovery=results.Reopen(True, False, 12.5, 0, 0, [12.5, 13.0]))
    data = round_trip(doc)
    assert set(data["recovery"]) == {"crash", "eager", "open_ms", "missing", "corrupt",
                                     "open_ms_rounds"}
    assert "open_ms_rounds" not in results.Result(
        workload="recovery", backend="memory",
        recovery=results.Reopen(False, False, 1.0, 0, 0)).to_json()["recovery"]


def test_compare_round_trips_with_skipped_entries_and_ratios():
    doc = compare.compare(["memory", "redis"],  # redis on port 1: refused, so skipped
                          {"port": 1}, SPEC, ClientSettings(), config={"threads": 1}, rounds=2)
    data = round_trip(doc)
    assert set(data) == {"schema", "workload", "config", "environment", "results", "ratios", "warmup"}
    ran, skipped = data["results"]
    assert set(ran) == ENTRY | {"rounds_ops_sec", "backend_stats"}
    assert set(skipped) == {"backend", "params", "skipped"} and skipped["skipped"]
    assert ran["params"] == {} and set(ran["overall"]) == OP
    one = compare.compare(["memory"], {}, SPEC, ClientSettings(), config={})
    assert "ratios" not in one.to_json() and "rounds_ops_sec" not in one.to_json()["results"][0]


def test_sweep_round_trips_with_points_rounds_and_ratios():
    doc = compare.sweep(["memory"], {}, SPEC, config={}, threads_list=[1, 2],
                        point_seconds=0.05, rounds=2)
    data = round_trip(doc)
    assert set(data) == {"schema", "workload", "config", "environment", "results", "ratios"}
    assert [e["params"] for e in data["results"]] == [{"threads": 1}, {"threads": 2}] * 2
    assert [e["round"] for e in data["results"]] == [1, 1, 2, 2]
    assert [r["what"] for r in data["ratios"]] == ["memory threads 2/1"]
    assert set(data["ratios"][0]) == {"what", "median", "rounds"}


def test_a_document_of_another_schema_or_a_newer_version_is_refused():
    doc = results.Compare(workload="w").to_json()
    with pytest.raises(DocumentError, match="not a ckptbench.sweep document"):
        results.Sweep.from_json(doc)
    with pytest.raises(DocumentError, match="newer"):
        results.Compare.from_json({**doc, "schema": "ckptbench.compare/2"})
    with pytest.raises(DocumentError):
        parse({"schema": "something/1"})
    assert isinstance(results.Compare.from_json(doc).environment, Environment)


def test_verify_round_trips_with_the_keys_bench_verify_wrote(tmp_path):
    from backends import open_backend
    from backends.indexed_fs import verify as checker
    from experiments.storage.verify import Verify

    store = open_backend("indexed_fs", path=str(tmp_path / "s"))
    for i in range(20):
        store.put(f"k{i}", b"v" * 100)
    store.close()
    seg = sorted(p for p in (tmp_path / "s").rglob("*") if p.is_file() and p.stat().st_size > 1000)
    data = bytearray(seg[0].read_bytes())
    data[len(data) // 2] ^= 0xFF  # one damaged byte: a damaged range with keys
    seg[0].write_bytes(bytes(data))
    doc = Verify.of("indexed_fs", str(tmp_path / "s"), checker.verify_path(str(tmp_path / "s")))
    data = round_trip(doc)
    assert set(data) == {"schema", "backend", "path", "ok", "segments", "records", "snapshots",
                         "damaged_keys", "lost_keys", "rolled_back_keys", "damaged",
                         "bad_snapshots", "hints", "bad_hints", "notes", "environment"}
    assert not doc.ok and data["damaged"] and set(data["damaged"][0]) == {
        "segment", "start", "end", "what", "keys"}


def test_peer_round_trips_with_the_keys_bench_peer_wrote():
    from experiments.storage.peers import PeerResult

    res = PeerResult(peer_throughput=[100.0, 110.0, 90.0], ours_rounds=[80.0, 85.0], ops=1000,
                     clients=4, pipeline=1, value_size=64, placement="cross")
    data = round_trip(res.document("redis"))
    assert set(data) == {"schema", "server", "clients", "pipeline", "ops", "value_size",
                         "placement", "peer_throughput", "ours_throughput", "round_ratios",
                         "ratio", "environment"}
    assert data["round_ratios"] == res.ratios and data["ratio"] == res.ratio


def test_reproduce_round_trips_with_its_commands_documents():
    from experiments.reproduce.result import Reproduce, StepRun

    inner = results.Result(workload="write-heavy", backend="memory", config={"threads": 1},
                           phases={"run": results.Phase(1.0, 100.0, 100)}).to_json()
    doc = Reproduce(name="harness", shows="the harness", quick=True, commands=["bench x"],
                    started="2026-01-01T00:00:00+0000", finished="2026-01-01T00:00:01+0000",
                    seconds=1.0, machine="cpu, Linux", cpus=2, loadavg_before=[0.5, 0.4, 0.3],
                    loadavg_after=[0.6, 0.4, 0.3],
                    runs=[StepRun("one", "bench x", 0, 1.0, "out/one.log", "out/one.json",
                                  document=inner)],
                    table=["| a |", "| - |"])
    data = round_trip(doc)
    assert set(data) == {"schema", "name", "shows", "quick", "servers", "status", "error",
                         "commands", "started", "finished", "seconds", "environment", "machine",
                         "cpus", "loadavg_before", "loadavg_after", "runs", "table"}
    assert set(data["runs"][0]) == {"label", "command", "returncode", "seconds", "log",
                                    "document_path", "plot", "error", "document"}
    assert results.Result.from_json(doc.documents()["one"]).run.operations_done == 100


def _stats(mean: float) -> results.OpStats:
    return results.OpStats(count=10, ok=10, statuses={"OK": 10}, mean_us=mean, min_us=1,
                           max_us=90, p50_us=40, p95_us=80, p99_us=90, p999_us=90)


def test_thesis_documents_round_trip_with_each_experiments_rows():
    from experiments.storage.thesis_result import Fig42Row, Fig45Row, Fig47Row, Table52Row, Thesis
    from workloads.checkpoint import CheckpointSpec

    spec = CheckpointSpec(rate=400, events=2000, pes=1000)
    summary = dict(spec=spec, submitted=2000, written=1990, dropped=10, dropped_serialization=0,
                   failed=0, event_rate=399.5, write_rate=398.0)
    fig42 = round_trip(Thesis(experiment="fig4.2", quick=True,
                              rows=[Fig42Row(1000, 5.0, 2.5, 1.5)]))
    assert set(fig42) == {"schema", "experiment", "quick", "environment", "rows"}
    assert set(fig42["rows"][0]) == {"pes", "load_ms", "open_after_crash_ms",
                                     "open_after_clean_ms"}
    fig45 = round_trip(Thesis(experiment="fig4.5", quick=True, spec=spec, rows=[
        Fig45Row("indexed_fs", None, results.CheckpointSummary(**summary), _stats(40.0),
                 _stats(4.0), 3.0, 0, 0),
        Fig45Row("redis", "BackendUnavailableError: refused")]))
    assert set(fig45) == {"schema", "experiment", "quick", "spec", "environment", "rows"}
    assert set(fig45["rows"][0]) == {"backend", "skipped", "checkpoint", "write", "read",
                                     "open_ms", "missing", "corrupt"}
    assert fig45["rows"][1] == {"backend": "redis", "skipped": "BackendUnavailableError: refused"}
    fig47 = round_trip(Thesis(experiment="fig4.7", quick=True, events=5000, rate=5000.0,
                              queue=1000, rows=[Fig47Row(backend="default_fs", pes=100,
                                                         **summary)]))
    assert set(fig47["rows"][0]) == {"backend", "pes", *summary}
    table = round_trip(Thesis(experiment="table5.2", rows=[
        Table52Row("indexed_fs", "none", "append log", 900.0, None, 40.0, 4.0, 3.0,
                   {"100": 398.0}),
        Table52Row("redis", "redis-server", "AOF", skipped="refused")]))
    assert set(table) == {"schema", "experiment", "environment", "rows"}
    assert set(table["rows"][1]) == {"backend", "dependency", "durability", "skipped"}


def stragglers_doc():
    """A ``logio-stragglers`` document as a quick run makes it (figures invented)."""
    from experiments.spark.stragglers import FAILURES, PAPER, QUICK, Row, Stragglers

    rows = []
    for st in QUICK:
        runs = [("none", 0)] + [(p, n) for n in FAILURES for p in ("coordinated", "logio")]
        for i, (protocol, failures) in enumerate(runs):
            metrics = {"WallTime(s)": 12.0 + i, "Throughput(events/sec)": 1000.0 - i,
                       "LatencyP50(ms)": 40.0 + i, "ReplayedEvents": 100 * i, "Failures": failures,
                       "Recovery.Detect(ms)": 300.0 * bool(failures), "Recovery.Replay(ms)": 200.0 * bool(failures),
                       "Recovery.OthersTask(ms)": 2.0 * bool(failures)}
            rows.append(Row(setting=st.name, protocol=protocol, failures=failures, wall_s=12.0 + i,
                            throughput=1000.0 - i, latency_p50_ms=40.0 + i, latency_p99_ms=90.0 + i,
                            checkpoint_ms=1.5, recovery_ms=500.0 * bool(failures),
                            restart_ms=20.0 * failures, replayed=100 * i,
                            exactly_once=None if protocol == "none" else True, metrics=metrics,
                            overhead_pct=8.3 * i, latency_vs_none=1.0 + i / 10))
    return Stragglers(quick=True, backend="indexed_fs", parallelism=2, straggler=1, settings=list(QUICK),
                      victims={"straggler_moderate": 0, "no_straggler_fast": 0}, seconds=61.5, rows=rows,
                      paper=PAPER)


def test_stragglers_round_trip_with_the_keys_the_experiment_wrote(tmp_path):
    from experiments.report import plots
    from experiments.spark import stragglers

    doc = stragglers_doc()
    data = round_trip(doc)
    assert set(data) == {"schema", "quick", "backend", "parallelism", "straggler", "settings", "victims",
                         "seconds", "rows", "paper", "environment"}
    assert set(data["rows"][0]) == {"setting", "protocol", "failures", "wall_s", "throughput",
                                    "latency_p50_ms", "latency_p99_ms", "checkpoint_ms",
                                    "recovery_ms", "restart_ms", "replayed", "exactly_once",
                                    "metrics", "verify_detail", "overhead_pct", "latency_vs_none"}
    assert data["settings"][0] == {"name": "straggler_moderate", "events": 12_000, "rate": 1_000, "keys": 1_000,
                                   "batch": 6_000, "skew": "hot:0.9:1", "interval": 2, "fail_fast": True}
    assert stragglers.markdown(data) == stragglers.markdown(doc)
    # coordinated runs before logio at 0 and 2 failures: logio's overheads are higher there
    assert stragglers.verdict(data)[0] == "*not reproduced*"
    assert "straggler_moderate: logio +16.6 / +33.2 / +49.8 / +66.4 %" in stragglers.headline(data)
    plots.plot_stragglers(doc, str(tmp_path / "s.png"))  # the chart reads the type too
    assert (tmp_path / "s.png").stat().st_size > 0


def checkmate_doc():
    """A ``checkmate`` document as a quick run makes it (grid figures invented, the cyclic
    emulation real but small)."""
    from experiments.spark.checkmate import PAPER, QUICK, Checkmate, CyclicMeans, Row
    from experiments.core.document import dump, load
    from spark_integration import cyclic

    rows = []
    for query, skew in (("q1", "uniform"), ("q12", "uniform"), ("q12", "skewed")):
        for i, protocol in enumerate(("none", "coordinated", "uncoordinated", "cic")):
            rows.append(Row(
                query=query, skew=skew, protocol=protocol,
                backend="-" if protocol == "none" else "indexed_fs", throughput=5000.0 - 100 * i,
                latency_p50_ms=30.0 + i, latency_p99_ms=80.0 + i, checkpoint_ms=1.5 * i,
                recovery_ms=200.0 + i, restart_ms=50.0, checkpoints=3 * i, basic=2 * i,
                forced=i, useless=i // 2, replayed=1000,
                logged_messages=12_000 * (protocol in ("uncoordinated", "cic")),
                piggybacked_bytes=48 * i, message_bytes_ratio=1.0 + i / 10, failures=1,
                exactly_once=None if protocol == "none" else True,
                metrics={"Checkpoints": 3 * i}, throughput_vs_none=1.0 - i / 20))
    cyc = {str(n): load(dict[str, CyclicMeans], cyclic.compare(n, 2, batches=20, fail_batch=16))
           for n in (5, 10)}
    return Checkmate(quick=True, backend="indexed_fs", parallelism=2, sizes=QUICK,
                     skews={"uniform": "0.0", "skewed": "hot:0.3:1"}, piggyback_bytes_per_row=48,
                     seconds=300.0, rows=rows, cyclic=cyc, paper=dump(PAPER))


def test_checkmate_round_trips_with_the_keys_the_experiment_wrote(tmp_path):
    from experiments.report import plots
    from experiments.spark import checkmate

    doc = checkmate_doc()
    data = round_trip(doc)
    assert set(data) == {"schema", "quick", "backend", "parallelism", "sizes", "part", "skews",
                         "piggyback_bytes_per_row", "seconds", "rows", "cyclic", "paper", "mst", "paired",
                         "environment"}
    assert set(data["rows"][0]) == {
        "query", "skew", "protocol", "backend", "throughput", "latency_p50_ms", "latency_p99_ms",
        "checkpoint_ms", "recovery_ms", "restart_ms", "checkpoints", "basic", "forced", "useless",
        "replayed", "logged_messages", "piggybacked_bytes", "message_bytes_ratio", "failures",
        "exactly_once", "metrics", "verify_detail", "throughput_vs_none", "rate", "mst_vs_none"}
    assert set(data["cyclic"]["5"]) == {"uncoordinated", "cic"}
    assert data["sizes"]["skewed"] == ["q12"]
    assert checkmate.markdown(data) == checkmate.markdown(doc)
    assert checkmate.headline(data).startswith("smoke run (--quick): uniform input, throughput × none: "
                                               "coordinated 0.95")
    plots.plot_checkmate(doc, str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").stat().st_size > 0


def test_checkmate_with_its_mst_step_has_fig7_and_the_latency_panels(tmp_path):
    """A document whose grid ran paced at 80 % of each protocol's MST: the MST table beside the
    paper's Fig 7, recovery by p50 in the grid, and the per-second latency panels (Figs 9-10)."""
    from experiments.report import plots
    from experiments.spark import checkmate
    from experiments.spark.mst import Probe, Search

    doc = checkmate_doc()
    doc.quick, doc.sizes = False, checkmate.FULL
    latency = {"rate": 4000.0, "failure_s": [48.0], "recovery_by_latency_ms": [3000.0],
               "per_second": [{"second": float(i), "events": 4000, "p50_ms": 900.0 + 2000 * (48 <= i < 51),
                               "p99_ms": 1500.0 + 3000 * (48 <= i < 52)} for i in range(90)], "commits": []}
    for r in doc.rows:
        r.rate, r.latency = 4000.0, dict(latency)
        r.metrics = {"Checkpoints": 40, "SteadySeconds": 80.0, "RecoveryByLatency(ms)": 3000.0}
    mst = lambda rate, high: Search(  # noqa: E731
        [Probe(rate=rate, verdict="sustainable"), Probe(rate=high, verdict="unsustainable", stopped_by="backlog",
                                                        backlog_slope=900.0, window_s=15.0)],
        rate, rate, high, f"bracket {rate:,.0f}-{high:,.0f} within 10%")
    doc.mst = {"q1": {"none": mst(5000.0, 5400.0), "coordinated": mst(5000.0, 5400.0),
                      "uncoordinated": mst(4500.0, 4900.0), "cic": mst(2000.0, 2200.0)}}
    data = round_trip(doc)
    assert data["mst"]["q1"]["cic"]["probes"][1]["stopped_by"] == "backlog"
    table = checkmate.markdown(data)
    assert table == checkmate.markdown(doc)
    fig7 = next(line for line in table if line.startswith("| q1 | 5,000 | 1.00 |"))
    assert "| 4,500 | 0.90 |" in fig7 and "| 2,000 | 0.40 |" in fig7
    assert any("q1 cic: bracket 2,000-2,200 within 10%; backlog grew 900" in line for line in table)
    assert any("80% of its protocol's uniform MST" in line for line in table)
    assert any(line.startswith("| q1 | coordinated |") and "| 3000 |" in line for line in table)
    panels = checkmate.latency_panels(data)
    assert list(panels)[:4] == ["q1 none", "q1 coordinated", "q1 uncoordinated", "q1 cic"]
    plots.plot_latency_over_time(panels, str(tmp_path / "lat.png"), cols=4)
    assert (tmp_path / "lat.png").stat().st_size > 0


def test_checkmate_marks_a_run_too_short_to_compare_with_none():
    """A quick document says it is a smoke run; a row with fewer than 3 checkpoints or 10 s of
    steady state gets `too short` where its ratio to none would be."""
    from experiments.spark import checkmate

    doc = checkmate_doc()
    table = "\n".join(checkmate.markdown(doc))
    assert table.startswith(checkmate.SMOKE)
    for r in doc.rows:
        r.metrics = {"Checkpoints": r.checkpoints, "SteadySeconds": 2.5}  # seconds of Spark per row
    table = checkmate.markdown(doc)
    coordinated = next(line for line in table if line.startswith("| q1 | coordinated |"))
    assert "| too short |" in coordinated
    assert "coordinated too short" in checkmate.headline(doc)
    for r in doc.rows:
        r.metrics = {"Checkpoints": 40, "SteadySeconds": 60.0}
    doc.quick = False
    coordinated = next(line for line in checkmate.markdown(doc) if line.startswith("| q1 | coordinated |"))
    assert "| 0.95 |" in coordinated and not checkmate.markdown(doc)[0].startswith("*Smoke")


def test_storage_compare_round_trips_with_each_sections_rows(tmp_path):
    from experiments.storage import compare as sc
    from experiments.storage.compare_table import table_lines
    from experiments.core.media import Medium

    media = [Medium("local", "local", str(tmp_path)),
             Medium("nfs", "nfs", "", skipped="NFS server not running")]
    doc = sc.run(media, ops=40, sync_ops=10, sizes=[100], threads_list=[1], wh_seconds=1.0,
                 recovery_keys=100, rpc_ops=2)
    data = round_trip(doc)
    assert set(data) == {"schema", "experiment", "config", "environment", "media", "thesis",
                         "rows", "summary"}
    assert data["media"][1] == {"name": "nfs", "kind": "nfs", "location": "",
                                "skipped": "NFS server not running"}
    keys = {(r["section"], r["medium"]): set(r) for r in data["rows"]}
    common = {"section", "medium", "kind", "skipped"}
    assert keys[("table5.1", "local")] == common | {
        "pattern", "sync_per_op", "record_bytes", "ops_requested", "ops", "file_bytes", "capped",
        "elapsed_s", "ops_per_sec", "us_per_op"}
    assert keys[("write-heavy", "local")] == common | {
        "backend", "threads", "durability", "workload", "max_seconds", "throughput_ops_sec",
        "operations_done", "overall", "errors", "phases"}
    assert keys[("recovery", "local")] == common | {
        "backend", "keys", "value_bytes", "index_flush_interval", "crash", "load_ms",
        "open_after_crash_ms", "after_crash", "open_after_clean_ms", "after_clean"}
    assert keys[("rpc", "nfs")] == common | {"operation", "case", "ops", "unit", "value_bytes"}
    assert set(data["summary"]) == {"indexed_over_default/local/x1"}
    read = type(doc).from_json(data)
    assert table_lines(read) == table_lines(doc)


def matrix_doc():
    """A ``spark-matrix`` document summarized from given runs (as test_spark_matrix's), with a
    skipped row, recovery phases and warm-up runs."""
    from experiments.spark.matrix import summarize
    from experiments.spark.matrix_result import Matrix, WarmupRun
    from spark_integration.job import JobSpec

    def run(round_, protocol, backend, tput, ckpts):
        work = {"events": 750000, "measured_events": 700000, "batches": 4, "checkpoints": ckpts,
                "checkpoint_bytes": 150000 * ckpts, "logged_bytes": 0, "backend_ops": 3 * ckpts}
        metrics = {"Throughput(events/sec)": tput, "RecoveryTime(ms)": 300.0 + round_,
                   "Recovery.Detect(ms)": 100.0 * round_, "Checkpoints": ckpts}
        return {"round": round_, "position": round_ % 2, "protocol": protocol, "backend": backend,
                "throughput": tput, "checkpoint_ms": 10.0 * round_, "recovery_ms": 300.0 + round_,
                "restart_ms": 50.0, "failures": 1, "exactly_once": protocol != "none" or None,
                "work": work, "metrics": metrics, "seconds": 3.0, "jvm_cpu_s": 2.5}

    plan = [("none", None), ("coordinated", "indexed_fs"), ("logio", "redis")]
    runs = [run(r, p, b or "-", t * r, c) for r in (1, 2, 3)
            for p, b, t, c in (("none", None, 100.0, 0), ("coordinated", "indexed_fs", 90.0, 4))]
    rows = summarize(plan, runs, {"logio/redis": "BackendUnavailableError: redis is down"})
    return Matrix(job=JobSpec(events=750000), state_bytes="0", fail_at=[400000], interval=1,
                  rounds=3, warmup_rounds=1, order="rotated by one place per round",
                  warmup=[WarmupRun(1, "none", "-", 95.0, 3.0)], rows=rows)


def test_spark_matrix_round_trips_with_the_keys_the_matrix_wrote(tmp_path):
    from experiments.report import plots
    from experiments.spark.matrix import format_table, summary_lines

    doc = matrix_doc()
    data = round_trip(doc)
    assert set(data) == {"schema", "job", "state_bytes", "layout", "chunk_bytes", "cold_restore",
                         "fail_at", "interval", "rounds", "warmup_rounds", "order", "warmup",
                         "rows", "measured", "environment"}
    none, coord, skipped = data["rows"]
    figures = {"throughput", "checkpoint_ms", "recovery_ms", "restart_ms"}
    assert set(coord) == {"protocol", "backend", "skipped", "exactly_once", "failures", "work",
                          "metrics", "recovery_phases", "rounds", "ratio_none", "ratio_spark_state",
                          "ratio_none_spread", "overhead_us", *figures,
                          *(f + "_spread" for f in figures)}
    assert set(skipped) == {"protocol", "backend", "skipped", "exactly_once", "work", "rounds",
                            "ratio_none", "ratio_spark_state", *figures}
    assert coord["ratio_none"] == 0.9 and set(coord["rounds"][0]) == {
        "round", "position", "throughput", "checkpoint_ms", "recovery_ms", "exactly_once", "work",
        "seconds", "jvm_cpu_s", "recovery_phases"}
    read = type(doc).from_json(data)
    assert format_table(read.rows) == format_table(doc.rows)
    assert summary_lines(read) == summary_lines(doc)
    plots.plot_spark_matrix(read.rows, str(tmp_path / "m.png"))
    plots.plot_recovery_phases(read.rows, str(tmp_path / "r.png"))


def test_advise_round_trips_with_the_keys_bench_advise_wrote(tmp_path):
    from experiments.report import plots
    from experiments.spark.advise import Advise, advise, advise_lines, format_table

    matrix = matrix_doc().to_json()
    matrix["job"]["rate"] = 0
    doc = advise(matrix, 3600.0, rto_s=30.0, source="m.json")
    data = round_trip(doc)
    assert set(data) == {"schema", "source", "mtbf_s", "rto_s", "rate", "rate_note", "matrix",
                         "recommended", "ranking", "environment"}
    assert set(data["matrix"]) == {"job", "rounds", "interval", "fail_at"}
    assert set(data["recommended"]) == {"name", "feasible", "interval_s", "overhead",
                                        "expected_recovery_s"}
    assert set(data["ranking"][0]) == {
        "name", "feasible", "protocol", "backend", "cost_ms", "restart_ms", "recovery_measured",
        "throughput", "rate", "optimal_interval_s", "interval_s", "overhead", "per_event",
        "per_event_measured", "expected_recovery_s", "sustains_rate", "meets_rto",
        "events_per_interval", "rank"}
    read = Advise.from_json(data)
    assert format_table(read) == format_table(doc) and advise_lines(read) == advise_lines(doc)
    assert read.ranking[0].name == "coordinated/indexed_fs"
    plots.plot_advise(read, str(tmp_path / "a.png"))


def test_a_spark_job_round_trips_with_the_keys_bench_spark_wrote():
    """From the job's own Metrics (no Spark needed): the keys of ``bench spark --json``."""
    from spark_integration.conf import build
    from spark_integration.job import JobSpec, Metrics
    from experiments.spark.job import SparkJob, job_document

    batch = {"end": 1000, "events": 1000, "ms": 12.5, "checkpoint_ms": 3.0, "recovered": False, "steady": True}
    metrics = Metrics(checkpoints=2, checkpoint_ms=[3.0, 4.0], checkpoint_sizes=[10, 20],
                      state_sizes=[100, 100], exactly_once=True, verify_detail="1000 keys", timeline=[batch])
    doc = job_document(metrics, build("coordinated", "redis"), JobSpec())
    doc.disk_baseline = {"DiskBaseline": "n/a (redis keeps its data on a server)"}
    back = round_trip(doc)
    assert set(back) == {"schema", "settings", "job", "metrics", "checkpoints", "recovery_phases",
                         "timeline", "verify", "disk_baseline", "environment"}
    assert back["metrics"]["ExactlyOnce"] is True and SparkJob.from_json(back).job == JobSpec()
    assert back["timeline"] == [batch]  # every micro-batch, as the runner recorded it


def test_fig47_headline_says_a_store_kept_up_instead_of_quoting_the_offered_rate():
    from experiments.storage.thesis_result import fig47_headline

    def row(backend: str, pes: int, write_rate: float) -> dict:
        return {"spec": {}, "submitted": 100, "written": 100, "dropped": 0,
                "dropped_serialization": 0, "failed": 0, "event_rate": 5000.0,
                "write_rate": write_rate, "backend": backend, "pes": pes}

    doc = {"schema": "ckptbench.thesis/1", "experiment": "fig4.7", "rate": 5000.0,
           "rows": [row("default_fs", 100, 1554.0), row("default_fs", 10000, 836.0),
                    row("indexed_fs", 100, 4999.0), row("indexed_fs", 10000, 4998.7)]}
    assert fig47_headline({"fig4.7": doc}) == (
        "checkpoints/s over 100-10,000 PEs: default_fs 836-1,554, indexed_fs kept up with the "
        "5,000/s offered")
