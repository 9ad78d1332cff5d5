"""`bench advise`: the Young/Daly arithmetic on known inputs, duration and rate parsing, the
ranking, and the command on a small matrix document (no Spark run)."""

from __future__ import annotations

import json
import math

import pytest

from bench.cli import main
from experiments.spark.advise import (AdviseError, advise, advise_row, overhead, parse_duration, parse_rate,
                                recovery_time, rto_interval, young_interval)


def _row(protocol, backend, ckpt_ms, tput, recovery_ms=0.0, failures=0, checkpoints=4):
    return {"protocol": protocol, "backend": backend, "throughput": tput, "checkpoint_ms": ckpt_ms,
            "recovery_ms": recovery_ms, "failures": failures, "skipped": None,
            "work": {"checkpoints": checkpoints}}


MATRIX = {"job": {"rate": 0.0, "events": 1000000}, "rounds": 3, "interval": 1, "fail_at": [600000], "rows": [
    _row("none", "-", 0.0, 700000.0, 900.0, 1, checkpoints=0),
    _row("coordinated", "indexed_fs", 50.0, 600000.0, 2000.0, 1),
    _row("logio", "indexed_fs", 20.0, 400000.0, 1500.0, 1),
    {"protocol": "coordinated", "backend": "redis", "throughput": None, "checkpoint_ms": None,
     "skipped": "BackendUnavailableError: down", "work": None},
]}


def test_durations_and_rates_parse_or_say_how_to_fix():
    assert parse_duration("30m") == 1800 and parse_duration("1h") == 3600 and parse_duration("2d") == 172800
    assert parse_duration("1h30m") == 5400 and parse_duration("250ms") == 0.25 and parse_duration("45") == 45
    assert parse_duration(" 1.5H ") == 5400 and parse_duration("1h 30m") == 5400
    for bad in ("", "1x", "h", "-1h", "0s", "1h 2", "2 1h", "1e9999h"):
        with pytest.raises(AdviseError, match="duration|more than 0"):
            parse_duration(bad)
    assert parse_rate("50k") == 50000 and parse_rate("2M") == 2e6 and parse_rate("1234.5") == 1234.5
    for bad in ("fast", "0", "-3", "k"):
        with pytest.raises(AdviseError, match="rate"):
            parse_rate(bad)


def test_young_daly_on_known_inputs():
    assert young_interval(0.5, 3600) == pytest.approx(60.0)  # sqrt(2 * 0.5 * 3600)
    assert young_interval(10.0, 4.0) == 10.0  # never shorter than the checkpoint itself
    assert overhead(60.0, 0.5, 3600) == pytest.approx(0.5 / 60 + 60 / 7200)
    assert overhead(60.0, 0.5, 3600, restart_s=36.0) == pytest.approx(0.5 / 60 + 60 / 7200 + 0.01)
    # T_opt is the minimum of the overhead curve
    assert all(overhead(60.0, 0.5, 3600) < overhead(t, 0.5, 3600) for t in (30.0, 59.0, 61.0, 120.0))
    assert recovery_time(60.0, 36.0, rate=1000.0, throughput=2000.0) == pytest.approx(51.0)
    assert rto_interval(40.0, 36.0, 1000.0, 2000.0) == pytest.approx(16.0)
    assert rto_interval(30.0, 36.0, 1000.0, 2000.0) is None


def test_a_row_under_an_rto_and_a_rate():
    row = _row("coordinated", "indexed_fs", 500.0, 2000.0, recovery_ms=36000.0, failures=1)
    a = advise_row(row, 3600.0, rate=1000.0, rto_s=40.0)
    assert a.optimal_interval_s == pytest.approx(60.0) and a.interval_s == pytest.approx(16.0)
    assert a.meets_rto and a.sustains_rate and a.expected_recovery_s == pytest.approx(40.0)
    assert a.events_per_interval == pytest.approx(16000.0)
    a = advise_row(row, 3600.0, rate=1000.0, rto_s=30.0)
    assert a.meets_rto is False and a.interval_s is None
    a = advise_row(row, 3600.0, rate=5000.0, rto_s=None)
    assert not a.sustains_rate and a.meets_rto is None
    a = advise_row({**row, "failures": 0}, 3600.0, rate=None, rto_s=None)  # recovery not measured
    assert not a.recovery_measured and a.restart_ms == 0 and a.rate == 2000.0


def test_ranking_prefers_feasible_then_low_overhead():
    doc = advise(MATRIX, 3600.0)
    names = [a.name for a in doc.ranking]
    assert names == ["logio/indexed_fs", "coordinated/indexed_fs"]  # none and the skipped row are no candidates
    assert doc.recommended.name == "logio/indexed_fs"
    assert doc.ranking[0].interval_s == pytest.approx(math.sqrt(2 * 0.02 * 3600))
    # at 500k events/s logio cannot keep up: coordinated comes first although it costs more
    doc = advise(MATRIX, 3600.0, rate=500000.0)
    assert [a.name for a in doc.ranking] == ["coordinated/indexed_fs", "logio/indexed_fs"]
    assert not doc.ranking[1].sustains_rate
    with pytest.raises(AdviseError, match="no row that took checkpoints"):
        advise({"rows": [MATRIX["rows"][0]]}, 3600.0)


def test_cli_from_a_matrix_file(tmp_path, capsys):
    src = tmp_path / "m.json"
    src.write_text(json.dumps(MATRIX))
    out_json, out_png = tmp_path / "a.json", tmp_path / "a.png"
    assert main(["advise", "--from", str(src), "--mtbf", "1h", "--rto", "30s",
                 "--json", str(out_json), "--plot", str(out_png)]) == 0
    out = capsys.readouterr().out
    assert "[ADVISE], Recommended, logio/indexed_fs" in out
    assert "[ADVISE], Interval(s), 12.000" in out  # sqrt(2 * 0.020 s * 3600 s)
    assert "[ADVISE], RecoveryMeasured, true" in out
    assert json.loads(out_json.read_text())["recommended"]["name"] == "logio/indexed_fs"
    assert out_png.read_bytes()[:4] == b"\x89PNG"


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["advise", "--from", str(tmp_path / "m.json"), "--mtbf", "soon"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and "30m, 1h, 2d" in err
    assert main(["advise", "--from", str(tmp_path / "missing.json"), "--mtbf", "1h",
                 "--json", str(tmp_path / "a.json"), "--png", str(tmp_path / "a.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "run bench spark-matrix first" in err


def test_per_event_cost_is_the_slowdown_left_after_the_checkpoints():
    from experiments.spark.advise import per_event_cost

    # 0.5x none: 1.0 more time per event; 3 of 4 checkpoints in the measured 750k events, 50 ms
    # each at none's 1,000,000 events/s take 0.2 of it; 0.8 is per-event work
    assert per_event_cost(0.5, 4, 0.05, 750_000, 1_000_000, 1e6) == pytest.approx(0.8)
    assert per_event_cost(0.95, 4, 0.05, 750_000, 1_000_000, 1e6) == 0.0  # all of it checkpoints
    assert per_event_cost(None, 4, 0.05, 750_000, 1_000_000, 1e6) is None  # no none row
    rows = [_row("none", "-", 0.0, 1e6, checkpoints=0),
            {**_row("logio", "indexed_fs", 5.0, 5e5), "ratio_none": 0.5},
            {**_row("coordinated", "indexed_fs", 50.0, 9e5), "ratio_none": 0.9}]
    for r in rows:
        r["work"].update(events=1_000_000, measured_events=750_000)
    doc = advise({"job": {}, "rows": rows}, 3600.0)
    # logio's checkpoints are cheaper, but its logging costs every event: coordinated wins
    assert [a.name for a in doc.ranking] == ["coordinated/indexed_fs", "logio/indexed_fs"]
    assert doc.ranking[1].per_event == pytest.approx(1.0 - 3 * 0.005 * 1e6 / 750_000)
    assert doc.ranking[0].per_event_measured


def test_per_event_cost_takes_the_injected_failures_recovery_out():
    from experiments.spark.advise import per_event_cost

    # 0.5x none: 1.0 more time per event over 750k events at 1M/s = 0.75 s; checkpoints 0.15 s,
    # its recovery 0.3 s less none's 0.15 s: 0.3 s explained, 0.45 s (0.6 of none's time) per event
    assert per_event_cost(0.5, 4, 0.05, 750_000, 1_000_000, 1e6, recovery_s=0.3,
                          none_recovery_s=0.15) == pytest.approx(0.6)


def _spark_run(protocol: str, backend: str | None, layout: str, steady: float, ckpt_ms: float) -> dict:
    metrics = {"SteadyThroughput(events/sec)": steady, "Throughput(events/sec)": steady * 0.8,
               "CheckpointTime(ms)": ckpt_ms, "RecoveryTime(ms)": 4000.0 if backend else 0.0,
               "Failures": 1 if backend else 0, "Checkpoints": 5 if backend else 0, "Events": 7_000_000}
    return {"schema": "ckptbench.spark/1", "settings": {"protocol": protocol, "backend": backend, "layout": layout},
            "job": {"kind": "wordcount", "events": 7_500_000, "keys": 2_200_000, "rate": 0.0},
            "metrics": metrics}


def test_cli_reads_the_state_experiments_runs_as_a_matrix(tmp_path, capsys):
    runs = [("none", _spark_run("none", None, "changelog", 100_000.0, 0.0)),
            ("indexed_fs-chunks", _spark_run("coordinated", "indexed_fs", "chunks", 90_000.0, 3000.0)),
            ("redis-chunks", _spark_run("coordinated", "redis", "chunks", 60_000.0, 9000.0))]
    on_nfs = _spark_run("coordinated", "indexed_fs", "chunks", 50_000.0, 8000.0)
    on_nfs["settings"]["backend_options"] = {"path": "nfs://127.0.0.1/export/x?version=3"}
    other_workload = _spark_run("coordinated", "indexed_fs", "per-key", 999_000.0, 300.0)
    other_workload["job"]["skew"] = "load+hot:1.0:20000"  # the 1 %-dirty rounds: their own none
    runs += [("indexed_fs-nfs-chunks", on_nfs), ("dirty-indexed_fs-per-key-r1", other_workload)]
    doc = {"schema": "ckptbench.reproduce/1", "name": "state",
           "runs": [{"label": label, "document": d} for label, d in runs]}
    path = tmp_path / "state.json"
    path.write_text(json.dumps(doc))
    assert main(["advise", "--from", str(path), "--mtbf", "1h", "--json", str(tmp_path / "a.json"),
                 "--plot", str(tmp_path / "a.png")]) == 0
    out = capsys.readouterr().out
    assert "[ADVISE], Recommended, coordinated/indexed_fs (chunks)" in out
    assert "coordinated/redis (chunks)" in out and "RecoveryMeasured, true" in out
    assert "coordinated/indexed_fs on nfs (chunks)" in out and "(per-key)" not in out


# ------------------------------------------------------------------------------ --optimize cost
def _priced(row, backend, requests, stored):
    return {**row, "cost": {"backend": backend, "requests": requests, "stored_bytes": stored}}


COSTED = {**MATRIX, "rows": [
    MATRIX["rows"][0],
    # per-key on MinIO: fast, but 16,000 PUTs a checkpoint
    _priced(_row("coordinated", "minio (per-key)", 40.0, 600000.0, 2000.0, 1), "minio",
            {"PutObject": 16000.0}, 20 << 20),
    # chunks on MinIO: slower checkpoints, 5 PUTs
    _priced(_row("coordinated", "minio (chunks)", 400.0, 600000.0, 2000.0, 1), "minio",
            {"PutObject": 5.0, "HeadBucket": 1.0}, 20 << 20),
    # Redis: no provider prices it
    _priced(_row("coordinated", "redis", 10.0, 650000.0, 2000.0, 1), "redis", {"MSET": 2.0}, 20 << 20),
]}


def test_cost_ranks_by_dollars_a_month_at_the_rpo():
    from experiments.core import prices

    table = prices.load()
    doc = advise(COSTED, 3600.0, rto_s=None, optimize="cost", rpo_s=60.0, table=table, provider="s3-standard")
    names = [a.name for a in doc.ranking]
    assert names == ["coordinated/minio (chunks)", "coordinated/minio (per-key)", "coordinated/redis"]
    s3 = next(p for p in table.providers if p.name == "s3-standard")
    per_key = doc.ranking[1].dollars
    month = prices.monthly(s3, {"PutObject": 16000.0}, 60.0, 20 << 20, table.gb_bytes)
    assert per_key.interval_s == 60.0 and per_key.total == pytest.approx(month["total"])
    assert doc.ranking[2].dollars.total is None  # no list price: after every priced row
    assert doc.recommended.dollars_month == pytest.approx(doc.ranking[0].dollars.total)
    from experiments.spark.advise import Advise, advise_lines, format_cost_table

    read = Advise.from_json(json.loads(json.dumps(doc.to_json())))  # as bench advise --json wrote it
    assert format_cost_table(read) == format_cost_table(doc) and advise_lines(read) == advise_lines(doc)
    # a checkpoint longer than the RPO's interval cannot meet it: ranked after those that can
    slow = advise(COSTED, 3600.0, optimize="cost", rpo_s=0.1, table=table, provider="s3-standard")
    assert slow.ranking[0].name == "coordinated/minio (per-key)" and not slow.ranking[-1].dollars.meets_rpo


def test_cost_needs_an_rpo_and_cost_data(tmp_path, capsys):
    with pytest.raises(AdviseError, match="--rpo"):
        advise(COSTED, 3600.0, optimize="cost")
    with pytest.raises(AdviseError, match=r"\[COST\] data"):
        advise(MATRIX, 3600.0, optimize="cost", rpo_s=60.0)
    src = tmp_path / "m.json"
    src.write_text(json.dumps(COSTED))
    assert main(["advise", "--from", str(src), "--mtbf", "1h", "--rpo", "1m"]) == 2  # no --optimize cost
    assert capsys.readouterr().err.count("\n") == 1
    out_json = tmp_path / "a.json"
    assert main(["advise", "--from", str(src), "--mtbf", "1h", "--optimize", "cost", "--rpo", "1m",
                 "--json", str(out_json), "--plot", str(tmp_path / "a.png")]) == 0
    out = capsys.readouterr().out
    assert "[ADVISE], Optimize, cost" in out and "[ADVISE], Recommended, coordinated/minio (chunks)" in out
    assert json.loads(out_json.read_text())["optimize"] == "cost"
