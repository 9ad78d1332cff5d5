"""`bench spark-matrix` method and output (pure logic: rounds, medians, ratios, table, JSON, PNG
from given runs; the Spark runs themselves are in test_spark)."""

from __future__ import annotations

import argparse
import json

from bench.spark_matrix_cli import add_parser, run
from experiments.report.plots import plot_spark_matrix as plot
from experiments.spark.matrix import (MISSING, format_table, plan_for, round_order, summarize,
                                      summary_lines, write_json)
from experiments.spark.matrix_result import Matrix, Row, Spread, WarmupRun
from spark_integration.job import JobSpec

PLAN = [("none", None), ("coordinated", "indexed_fs"), ("logio", "redis")]


def _run(round_, protocol, backend, tput, ckpts=4):
    work = {"events": 750000, "batches": 4, "checkpoints": ckpts, "checkpoint_bytes": 600000 * ckpts // 4,
            "logged_bytes": 0, "backend_ops": 3 * ckpts}
    return {"round": round_, "position": 0, "protocol": protocol, "backend": backend, "throughput": tput,
            "checkpoint_ms": 10.0 * round_, "recovery_ms": 0.0, "restart_ms": 0.0, "failures": 0,
            "exactly_once": protocol != "none" or None, "work": work, "metrics": {}, "seconds": 3.0}


RUNS = [_run(1, "none", "-", 100.0, 0), _run(1, "coordinated", "indexed_fs", 90.0),
        _run(2, "none", "-", 200.0, 0), _run(2, "coordinated", "indexed_fs", 190.0),
        _run(3, "none", "-", 150.0, 0), _run(3, "coordinated", "indexed_fs", 120.0)]


def test_round_order_rotates_every_combination_through_every_position():
    orders = [round_order(PLAN, r) for r in range(3)]
    assert orders[0] == PLAN and orders[1][0] == PLAN[1] and orders[2][0] == PLAN[2]
    for pos in range(3):
        assert {o[pos] for o in orders} == set(PLAN)
    assert round_order([], 2) == []


def test_plan_lists_a_backendless_protocol_once_and_adds_the_baselines():
    plan = plan_for(["coordinated", "none", "none"], ["indexed_fs", "redis"], JobSpec())
    assert plan == [("coordinated", "indexed_fs"), ("coordinated", "redis"), ("none", None), ("spark-state", None)]
    assert ("spark-state", None) not in plan_for(["none"], [], JobSpec(kind="q3"))  # covers counts only


def test_rows_are_medians_with_per_round_ratios_work_and_skips():
    rows = summarize(PLAN, RUNS, {"logio/redis": "BackendUnavailableError: redis is down"})
    none, coord, logio = rows
    assert none.throughput == 150.0 and none.throughput_spread.rounds == [100.0, 200.0, 150.0]
    assert coord.throughput == 120.0 and coord.checkpoint_ms == 20.0
    # ratio per round (0.9, 0.95, 0.8), then the median — not the ratio of the medians (0.8)
    assert coord.ratio["none"] == 0.9 and coord.ratio_spread["none"].min == 0.8
    assert coord.work["checkpoints"] == 4 and coord.work["checkpoint_bytes"] == 600000
    assert coord.exactly_once is True and none.exactly_once is None
    assert coord.ratio["spark_state"] is None  # no baseline ran
    # µs per event over none in each round (1111.1, 263.2, 1666.7), then the median
    assert coord.overhead_us == 1111.111 and none.overhead_us == 0.0
    assert logio.skipped.startswith("BackendUnavailableError") and logio.throughput is None
    table = format_table(rows)
    logio_line = next(line for line in table.splitlines() if line.startswith("logio"))
    assert MISSING in logio_line and "0.00" not in logio_line
    assert "logio/redis skipped: BackendUnavailableError" in table
    assert "100–200" in table  # the range over the rounds
    doc = Matrix(job=JobSpec(), rounds=3, warmup_rounds=1, rows=rows)
    assert "[MATRIX], coordinated/indexed_fs / none (median of rounds), 0.900" in summary_lines(doc)
    assert "[MATRIX], none / fastest other row (medians), 1.250" in summary_lines(doc)
    assert "[MATRIX], coordinated/indexed_fs µs/event over none (median of rounds), 1111.111" in summary_lines(doc)
    assert "1111.11" in next(line for line in table.splitlines() if line.startswith("coordinated"))
    doc.warmup = [WarmupRun(1, "none", "-", 1.0, 4.0), WarmupRun(1, "none", "-", 1.0, 3.0)]
    for row in rows:
        for i, r in enumerate(row.rounds):
            r.jvm_cpu_s = 2.0 - 0.5 * i
    assert "[MATRIX], JVM CPU per run (s; warm-up, then each round), warm-up 1 3.50, round 1 2.00, " \
           "round 2 1.50, round 3 1.00" in summary_lines(doc)


def test_recovery_phases_are_medians_over_the_rounds_not_the_last_round():
    def with_phases(run, detect, replay, events):
        run = dict(run)
        run["metrics"] = {"RecoveryTime(ms)": detect + replay, "Recovery.Detect(ms)": detect,
                          "Recovery.Replay(ms)": replay, "Recovery.ReplayEvents": events, "Checkpoints": 4}
        return run

    # coordinated's rounds: detect 300, 100, 200 and replay 10, 30, 20 — the last round is neither median
    phases = {1: (300.0, 10.0, 900), 2: (100.0, 30.0, 1000), 3: (200.0, 20.0, 800)}
    runs = [with_phases(r, *phases[r["round"]]) if r["protocol"] == "coordinated" else r for r in RUNS]
    coord = summarize(PLAN, runs, {})[1]
    assert coord.metrics["Recovery.Detect(ms)"] == 200.0 and coord.metrics["Recovery.Replay(ms)"] == 20.0
    assert coord.metrics["Recovery.ReplayEvents"] == 900 and coord.metrics["Checkpoints"] == 4
    assert coord.recovery_phases["Recovery.Detect(ms)"] == Spread(200.0, 100.0, 300.0, [300.0, 100.0, 200.0])
    assert [r.recovery_phases["Recovery.Replay(ms)"] for r in coord.rounds] == [10.0, 30.0, 20.0]
    assert "RecoveryTime(ms)" not in coord.rounds[0].recovery_phases


def test_json_and_png_with_a_skipped_row(tmp_path):
    rows = summarize(PLAN, RUNS, {})
    doc = Matrix(job=JobSpec(), rows=rows)
    write_json(doc, str(tmp_path / "out" / "m.json"))
    assert json.loads((tmp_path / "out" / "m.json").read_text())["rows"][1]["ratio_none"] == 0.9
    plot(rows, str(tmp_path / "m.png"))
    assert (tmp_path / "m.png").read_bytes()[:4] == b"\x89PNG"


def _parser():
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    return parser


def test_outputs_default_to_results_and_bad_names_are_one_line(capsys):
    parser = _parser()
    args = parser.parse_args(["spark-matrix"])
    # the JSON's default depends on --cluster (results/spark-matrix.json, else spark-scaling.json)
    assert args.json is None and args.png == "results/spark-matrix.png"
    assert args.rounds == 3 and args.warmup == 2
    args = parser.parse_args(["spark-matrix", "--protocols", "none,sometimes", "--backends", "indexed_fs"])
    assert run(args) == 2 and "'sometimes' is not a protocol" in capsys.readouterr().err
    args = parser.parse_args(["spark-matrix", "--backends", "floppy"])
    assert run(args) == 2 and "floppy" in capsys.readouterr().err
    args = parser.parse_args(["spark-matrix", "--backends", "indexed_fs", "--rounds", "0"])
    assert run(args) == 2 and "--rounds 0" in capsys.readouterr().err


def test_headline_gives_each_protocol_its_range_over_the_stores():
    from experiments.spark.matrix_result import Row, spark_matrix_headline

    def row(protocol, backend, ratio=None, skipped=None):
        return Row(protocol=protocol, backend=backend, skipped=skipped,
                   ratio={} if ratio is None else {"none": ratio})

    rows = [row("none", "-", 1.0), row("coordinated", "indexed_fs", 0.96),
            row("coordinated", "redis", 0.97), row("logio", "indexed_fs", 0.71),
            row("logio", "redis", skipped="redis is not running")]
    doc = Matrix(job=JobSpec(), rows=rows).to_json()
    assert spark_matrix_headline({"run": doc}) == (
        "events/s × none: coordinated 0.96–0.97x, logio 0.71x (on indexed_fs, redis)")


def test_a_run_too_short_to_compare_with_none_prints_too_short_not_a_ratio():
    """Fewer than 3 checkpoints, or fewer than 10 s of steady state (either side's), and the ratio
    to none is `too short` in the table, the [MATRIX] lines and the headline."""
    from experiments.spark.matrix_result import TOO_SHORT, spark_matrix, spark_matrix_headline, too_short

    assert too_short({"Checkpoints": 2, "SteadySeconds": 30.0}, "coordinated") == "2 checkpoints < 3"
    assert too_short({"Checkpoints": 0, "SteadySeconds": 30.0}, "none") is None
    assert too_short({"Checkpoints": 9, "SteadySeconds": 4.2}, "coordinated").startswith("4.2 s of steady state")
    assert too_short({"Checkpoints": 9, "WallTime(s)": 4.2}, "logio")  # a document without SteadySeconds
    assert too_short({"Checkpoints": 9, "SteadySeconds": 12.0}, "coordinated") is None

    runs = []
    for r in RUNS:
        steady = {"Checkpoints": r["work"]["checkpoints"], "SteadySeconds": 20.0}
        runs.append({**r, "metrics": steady if r["protocol"] == "none" else {**steady, "Checkpoints": 1}})
    rows = summarize(PLAN[:2], runs, {})
    coord_line = next(line for line in format_table(rows).splitlines() if line.startswith("coordinated"))
    assert TOO_SHORT in coord_line and "0.90" not in coord_line and "1111" not in coord_line
    doc = Matrix(job=JobSpec(), rounds=3, warmup_rounds=1, rows=rows)
    assert f"[MATRIX], coordinated/indexed_fs / none (median of rounds), {TOO_SHORT}" in summary_lines(doc)
    data = {"run": doc.to_json()}
    assert any(TOO_SHORT in line for line in spark_matrix(data))
    assert TOO_SHORT in spark_matrix_headline(data)
    # long enough on both sides: the ratio is back
    long_rows = summarize(PLAN[:2], [{**r, "metrics": {"Checkpoints": 5, "SteadySeconds": 20.0}} for r in RUNS], {})
    assert "0.90" in format_table(long_rows) and "1111.11" in format_table(long_rows)
    assert "| 0.90x | 1,111 |" in "\n".join(spark_matrix({"run": Matrix(job=JobSpec(), rows=long_rows).to_json()}))


def test_the_matrix_judges_its_targets_at_both_sizes_and_describes_the_state_run():
    """Each protocol with a target gets a cell (met or NOT met) in both tables, noted for bench
    reproduce; a row without a target, or too short to judge, gets none."""
    from experiments.core.format import collect_targets
    from experiments.spark.matrix_result import spark_matrix

    def rows(coordinated: float, logio: float) -> list[Row]:
        steady = {"Checkpoints": 5, "SteadySeconds": 20.0}
        return [Row(protocol="none", backend="-", ratio={"none": 1.0}, metrics=steady),
                Row(protocol="coordinated", backend="indexed_fs", ratio={"none": coordinated}, metrics=steady),
                Row(protocol="logio", backend="indexed_fs", ratio={"none": logio}, metrics=steady),
                Row(protocol="cic", backend="indexed_fs", ratio={"none": 0.5}, metrics=steady)]

    state = Matrix(job=JobSpec(keys=2_000_000, events=10_000_000, max_batch=500_000,
                               skew="load+hot:1:20000"),
                   state_bytes="1024", layout="per-key", interval=4, rows=rows(0.5, 0.9))
    with collect_targets() as judged:
        text = "\n".join(spark_matrix({"run": Matrix(job=JobSpec(), rows=rows(0.98, 0.8)).to_json(),
                                       "state": state.to_json()}))
    assert judged == [("≥ 0.97x none", True), ("≥ 0.85x none", False),
                      ("≥ 0.97x none", False), ("≥ 0.85x none", True)]
    assert "With state that matters: 2,000,000 keys with 1024 bytes of state each" in text
    assert "(skew load+hot:1:20000)" in text and "per-key layout" in text
    cic = [line for line in text.splitlines() if line.startswith("| cic")]
    assert len(cic) == 2 and all(line.endswith("|  |") for line in cic)


def test_rounds_lost_after_a_combination_ran_are_said_in_the_table_lines_and_document():
    """A backend that goes away after a combination ran in round 1 skips its later rounds: the
    row keeps round 1's figures and says why the others are missing, where progress lines
    (a TTY's only) would not."""
    from experiments.spark.matrix_result import spark_matrix

    runs = [r for r in RUNS if not (r["protocol"] == "coordinated" and r["round"] > 1)]
    rows = summarize(PLAN[:2], runs, {"coordinated/indexed_fs": "ConnectionError: reset"})
    coord = rows[1]
    assert coord.lost == "ConnectionError: reset" and len(coord.rounds) == 1 and not coord.skipped
    assert rows[0].lost is None
    assert "coordinated/indexed_fs later rounds lost: ConnectionError: reset" in format_table(rows)
    doc = Matrix(job=JobSpec(), rounds=3, rows=rows)
    assert "[MATRIX], coordinated/indexed_fs later rounds lost, ConnectionError: reset" in summary_lines(doc)
    again = Matrix.from_json(json.loads(json.dumps(doc.to_json())))
    assert again.rows[1].lost == "ConnectionError: reset"
    assert any("; later rounds lost: ConnectionError: reset" in line
               for line in spark_matrix({"run": again.to_json()}))


def test_a_job_with_a_load_phase_is_measured_after_it_and_its_tables_say_so():
    """A ``load+`` job's events/s and ratios are of the micro-batches after the load (as the
    state experiment's steady x none); any other job's of all of them.  The document records
    which, and both tables say it; a document without the field reads as all micro-batches."""
    from experiments.spark.matrix import measured_line
    from experiments.spark.matrix_result import ALL_LINE, STEADY_LINE, spark_matrix

    loaded = JobSpec(keys=2_000_000, events=20_000_000, max_batch=500_000, skew="load+hot:1:20000")
    assert measured_line(loaded) == STEADY_LINE
    assert measured_line(JobSpec(keys=10_000, skew="hot:0.2")) == ALL_LINE
    assert measured_line(JobSpec()) == ALL_LINE

    rows = summarize(PLAN[:2], RUNS, {})
    state = Matrix(job=loaded, state_bytes="1024", layout="per-key", interval=4, rows=rows,
                   measured=STEADY_LINE)
    again = Matrix.from_json(json.loads(json.dumps(state.to_json())))
    assert again.after_load
    text = "\n".join(spark_matrix({"run": Matrix(job=JobSpec(), rows=rows).to_json(), "state": again.to_json()}))
    assert text.count("events/s after the load (median)") == 1 and text.count("events/s (median)") == 1
    assert "the micro-batches after the load phase (its first 2,000,000 events visit every key once)" in text
    assert "after the load phase" in format_table(rows, after_load=True)
    assert "after the load" not in format_table(rows)
    old = state.to_json()
    del old["measured"]
    assert not Matrix.from_json(old).after_load
