"""``bench state-sweep``: the log-log fit and its bends (pure), the plan and its caps, the tables
and the document from given points, bad input as one line, and one real run of three sizes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from experiments.core.loglog import Fit, bends, fit, segment_slopes
from experiments.spark import state_sweep as sweep
from experiments.spark import state_sweep_result as sweep_result
from experiments.spark.state_sweep_result import (DIRTY, SIZE, Conditions, Point, StateSweep, fit_slopes, merged,
                                                  headline, markdown, table, text_report)

MiB, GiB = 1 << 20, 1 << 30


# ------------------------------------------------------------------------------- the fit (pure)
def test_a_power_law_is_a_straight_line_of_its_exponent():
    xs = [1e6, 4e6, 16e6, 64e6]
    line = fit(xs, [3 * x for x in xs])
    assert line.slope == pytest.approx(1.0) and line.r2 == pytest.approx(1.0)
    assert line.points == 4 and (line.x_min, line.x_max) == (1e6, 64e6)
    assert line.predict(256e6) == pytest.approx(768e6)  # extrapolated along the slope
    assert fit(xs, [5.0] * 4).slope == pytest.approx(0.0)  # a cost that does not grow
    assert fit(xs, [math.sqrt(x) for x in xs]).slope == pytest.approx(0.5)


def test_values_without_a_logarithm_are_left_out_and_counted_never_made_up():
    line = fit([1, 2, 4, 8, 16], [1, 2, 0, None, 16])
    assert line.points == 3 and line.left_out == 2 and line.slope == pytest.approx(1.0)
    assert fit([1, 2], [0, 5]) is None  # one usable point: no line
    assert fit([4, 4, 4], [1, 2, 3]) is None  # no two distinct x
    assert fit([], []) is None
    with pytest.raises(ValueError):
        fit([1, 2], [1])


def test_least_squares_through_scattered_points():
    xs, ys = [10, 100, 1000], [10, 1000, 1000]  # logs (1,1) (2,3) (3,3): slope 1, r2 3/4
    line = fit(xs, ys)
    assert line.slope == pytest.approx(1.0) and line.intercept == pytest.approx(1 / 3)
    assert line.r2 == pytest.approx(0.75)
    assert isinstance(line, Fit)


def test_a_bend_is_a_segment_off_the_fit_by_more_than_the_tolerance():
    xs = [1, 4, 16, 64, 256]
    ys = [1, 4, 16, 64, 256 * 64]  # linear, then x^4 over the last segment (a cache ran out)
    segments = segment_slopes(xs, ys)
    assert [round(s, 3) for _, _, s in segments] == [1.0, 1.0, 1.0, 4.0]
    found = bends(xs, ys, tolerance=0.5)
    steep = [b for b in found if b.steeper]
    assert [(b.x_from, b.x_to) for b in steep] == [(64, 256)] and steep[0].slope == pytest.approx(4.0)
    assert all(not b.steeper for b in found if b not in steep)  # the rest lie below a fit pulled up
    assert bends(xs, [3 * x for x in xs]) == []  # a straight line bends nowhere
    assert bends([1, 2], [1, 100]) == []  # two points are their own fit
    assert bends(xs, ys, tolerance=10) == []


def test_a_fixed_cost_that_stops_dominating_bends_flatter_at_the_small_end():
    xs = [16, 64, 256, 1024, 4096]
    ys = [100 + x for x in xs]  # a constant 100 beside a linear part
    found = bends(xs, ys, tolerance=0.3)
    assert found and found[0].x_from == 16 and not found[0].steeper


# ----------------------------------------------------------------------------------- the plan
def test_quick_has_three_sizes_on_three_stores_in_chunks_and_runs_the_dirty_hundred_once():
    p = sweep.plan(quick=True)
    size_points = [pt for pt in p.points() if pt[0] == SIZE]
    assert len({pt[3] for pt in size_points}) >= 3 and len({pt[1] for pt in size_points}) >= 3
    assert {layout for _, _, layout, _, _ in size_points} == {"chunks"}
    dirty = [pt for pt in p.points() if pt[0] == DIRTY]
    assert dirty and all(hot < keys for *_, keys, hot in dirty)  # 100 %: the size sweep's point
    assert all(keys % sweep.BATCHES_PER_INTERVAL == 0 for *_, keys, _ in p.points())


def test_the_full_sweep_covers_every_store_and_layout_and_caps_redis_saying_why():
    p = sweep.plan()
    assert p.full and not sweep.plan(quick=True).full and not sweep.plan(sizes=[16 * MiB, 64 * MiB]).full
    lines = set(p.lines)
    assert {("indexed_fs", "chunks"), ("indexed_fs", "per-key"), ("indexed_fs", "changelog")} <= lines
    assert {s for s, _ in lines} == set(sweep.STORES)
    assert max(p.sizes) >= 4 * GiB and min(p.sizes) <= 16 * MiB
    assert all(b / a == 4 for a, b in zip(sorted(p.sizes), sorted(p.sizes)[1:]))
    redis = [pt for pt in p.points() if pt[1] == "redis" and pt[0] == SIZE]
    assert max(keys for *_, keys, _ in redis) * p.state_bytes <= sweep.CAPS["redis"][0]
    assert any(note.startswith("redis above 1 GiB (4 GiB): ") for note in p.cap_notes())
    assert min(p.dirty) == 0.001 and max(p.dirty) == 1.0


def test_every_point_is_a_bench_spark_command_that_parses_and_file_stores_go_to_disk():
    from bench import cli

    parser = cli.build_parser()
    disk = sweep.argv("rocksdb", "chunks", 4096, 40, 1024, "x.json")
    args = parser.parse_args(disk)
    assert (args.command, args.protocol, args.skew, args.medium) == ("spark", "coordinated", "load+hot:1.0:40", "local")
    assert args.events == 4 * 4096 and args.batch * args.interval == 4096 and args.fail_at == [10240]
    assert args.cold_restore and args.verify
    assert "--medium" not in sweep.argv("redis", "chunks", 4096, 4096, 1024, "x.json")
    assert "--timeout" not in sweep.argv("rocksdb", "chunks", GiB // 1024, 40, 1024, "x.json")  # bench's own limit
    big = parser.parse_args(sweep.argv("rocksdb", "chunks", 4 * GiB // 1024, 40, 1024, "x.json"))
    assert big.timeout == sweep.FULL_TIMEOUT - 60
    assert "--timeout" in sweep.argv("spark-state", "rocksdb", GiB // 1024, 40, 1024, "x.json")  # the slowest line
    assert "--timeout" not in sweep.argv("spark-state", "rocksdb", 256 * MiB // 1024, 40, 1024, "x.json")


def test_spark_state_is_a_line_run_the_same_way_under_its_own_baseline():
    from bench import cli

    p = sweep.plan(stores=["spark-state"])
    assert p.lines == (("spark-state", "rocksdb"),) and p.full  # its line at every full size
    assert not sweep.plan(stores=["indexed_fs"]).full
    args = cli.build_parser().parse_args(sweep.argv("spark-state", "rocksdb", 4096, 40, 1024, "x.json"))
    assert (args.protocol, args.skew, args.medium, args.backend) == ("spark-state", "load+hot:1.0:40", "local", None)
    assert args.events == 4 * 4096 and args.fail_at == [10240] and args.cold_restore and args.verify
    assert sweep.protocols(p.lines).startswith("spark-state")
    assert sweep.protocols((("redis", "chunks"), *p.lines)).startswith("coordinated; spark-state")


# ---------------------------------------------------------------------- document and tables
def _point(store, layout, size, hot=1.0, p50=None, error=None):
    keys = size // 1024
    if error:
        return Point(SIZE if hot == 1.0 else DIRTY, store, layout, keys, keys, size, "bench spark ...", error=error)
    p50 = p50 if p50 is not None else 10 + size / 1e6
    metrics = {"StateBytes": size, "CheckpointP50(ms)": p50 * hot, "CheckpointP99(ms)": 2 * p50,
               "RecoveryTime(ms)": 500 + size / 1e5, "SpaceAmplification": 2.0,
               "CheckpointBytes": 2.5 * size, "LargestCheckpointBytes": size, "Checkpoints": 4,
               "SteadyThroughput(events/sec)": 1e5 / hot ** 0.5, "ExactlyOnce": True}
    return Point(SIZE if hot == 1.0 else DIRTY, store, layout, keys, max(1, round(hot * keys)), size,
                 "bench spark ...", 1.0, metrics=metrics)


def _doc(points, quick=False):
    doc = StateSweep(quick=quick, full=not quick, lines=["indexed_fs/chunks", "redis/chunks"], points=points,
                     conditions=Conditions(job="wordcount", protocol="coordinated", state_bytes_per_key=1024,
                                           sizes=[16 * MiB, 64 * MiB, 256 * MiB], dirty=[0.01, 0.1, 1.0],
                                           dirty_size=16 * MiB, schedule=sweep.SCHEDULE,
                                           caps=["redis above 1 GiB (4 GiB): it holds it all in memory"],
                                           memory_bytes=24 * GiB))
    doc.slopes = fit_slopes(doc)
    return doc


def test_slopes_tables_and_a_failed_point_that_is_shown_failed_never_zero(tmp_path):
    from experiments.report.plots import plot_state_sweep

    pts = [_point("indexed_fs", "chunks", s) for s in (16 * MiB, 64 * MiB, 256 * MiB)]
    pts += [_point("indexed_fs", "chunks", 16 * MiB, hot=h) for h in (0.01, 0.1)]
    pts += [_point("redis", "chunks", 16 * MiB), _point("redis", "chunks", 64 * MiB, error="bench: error: OOM")]
    doc = _doc(pts)
    assert doc.slope("indexed_fs/chunks", SIZE, "SpaceAmplification").slope == pytest.approx(0.0)
    assert doc.slope("indexed_fs/chunks", SIZE, "CheckpointBytes").slope == pytest.approx(1.0)
    assert 0 < doc.slope("indexed_fs/chunks", SIZE, "CheckpointP50(ms)").slope < 1  # a fixed part
    assert doc.slope("indexed_fs/chunks", DIRTY, "CheckpointP50(ms)").slope == pytest.approx(1.0)
    assert doc.slope("redis/chunks", SIZE, "CheckpointP50(ms)") is None  # one point left: no slope
    assert len(doc.of(DIRTY, "indexed_fs/chunks")) == 3  # with the size sweep's 16 MiB point as 100 %
    text = "\n".join(text_report(doc))
    assert "# Slopes against state size (log-log)" in text and "failed: bench: error: OOM" in text
    assert "Left out: redis above 1 GiB" in text and "the full sweep" in text
    assert "# Dirty fraction at 16 MiB" in text
    back = StateSweep.from_json(json.loads(json.dumps(doc.to_json())))
    assert back.to_json() == doc.to_json() and back.points[-1].metrics == {}
    doc.points[0].loadavg = 3.25
    assert "from 3.2 to 3.2 on" in "\n".join(text_report(doc)) and "| 3.2 |" in "\n".join(markdown(doc))
    block = "\n".join(table({"run": doc.to_json()}))
    assert "| indexed_fs | chunks | 3 |" in block and "`--quick`" not in block
    assert "checkpoint p50 0.0" not in headline({"run": doc.to_json()})
    assert headline({"run": doc.to_json()}).startswith("log-log slope against state (16 MiB to 256 MiB")
    assert "`--quick`: a small subset" in "\n".join(markdown(_doc(pts, quick=True)))
    spark = _doc([_point("spark-state", "rocksdb", s) for s in (16 * MiB, 64 * MiB)])
    spark.lines, spark.conditions.protocol, spark.conditions.caps = ["spark-state/rocksdb"], "spark-state", []
    both = merged([doc, spark])
    assert both.lines[-1] == "spark-state/rocksdb" and len(both.points) == len(pts) + 2
    assert both.conditions.protocol == "coordinated; spark-state" and both.full
    assert both.slope("spark-state/rocksdb", SIZE, "CheckpointBytes").slope == pytest.approx(1.0)
    assert "| spark-state | rocksdb | 2 |" in "\n".join(table({"run": doc.to_json(), "spark-state": spark.to_json()}))
    with pytest.raises(ValueError, match="not run alike"):
        merged([doc, _doc(pts, quick=True)])
    drawn = plot_state_sweep(doc, str(tmp_path / "s.png"))
    assert drawn == [str(tmp_path / "s.png"), str(tmp_path / "s-dirty.png")]
    assert all(os.path.getsize(p) > 0 for p in drawn)


# --------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("args, says", [
    (["--stores", "nosuch"], "nosuch"),
    (["--layouts", "rows"], "'rows' is not a layout"),
    (["--sizes", "16XB,64MiB"], "not a size"),
    (["--dirty", "200%"], "at most 100 %"),
    (["--sizes", "16KiB,32KiB"], "give sizes of at least"),
    (["--sizes", "16MiB", "--dirty", "none"], "at least two sizes"),
    (["--stores", "memory"], "keeps nothing across the injected failure"),
    (["--json", "-"], "give a file"),
])
def test_bad_input_is_one_line_and_exit_2_before_anything_runs(tmp_path, capsys, args, says):
    from bench import cli

    outputs = ["--json", str(tmp_path / "s.json")] if "--json" not in args else []
    try:
        code = cli.main(["state-sweep", *args, *outputs, "--plot", str(tmp_path / "s.png")])
    except SystemExit as exc:  # argparse's own (a value of the wrong type): the same one line
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and says in err and err.startswith("bench: error: ")
    assert not (tmp_path / "s.json").exists()


# -------------------------------------------------------------------------------- a real run
@pytest.mark.slow
def test_a_real_sweep_of_two_sizes_writes_json_plot_and_slopes(tmp_path):
    """Two sizes on indexed_fs (chunks), each a real ``bench spark`` run with a failure and a
    cold restore: the fewest runs a slope needs (``--quick`` makes 12)."""
    out = tmp_path / "sweep.json"
    proc = subprocess.run([sys.executable, "-m", "bench", "state-sweep", "--stores", "indexed_fs",
                           "--layouts", "chunks", "--sizes", "1MiB,4MiB", "--dirty", "none", "--json", str(out),
                           "--plot", str(tmp_path / "sweep.png")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "# Slopes against state size (log-log)" in proc.stdout
    assert "a sweep its options narrowed, not the full sweep" in proc.stdout
    doc = StateSweep.from_json(json.loads(out.read_text()))
    assert [p.ok for p in doc.points] == [True] * 2 and doc.lines == ["indexed_fs/chunks"]
    assert all(p.metrics["ExactlyOnce"] is True and p.metrics["Failures"] == 1 for p in doc.points)
    assert doc.slope("indexed_fs/chunks", SIZE, "CheckpointBytes") is not None
    assert (tmp_path / "sweep.png").stat().st_size > 0
    assert (tmp_path / "sweep" / "indexed_fs-chunks-1MiB.json").exists()


def test_a_steeper_bend_says_what_the_store_held_against_the_machines_memory():
    pts = [_point("indexed_fs", "chunks", s) for s in (16 * MiB, 64 * MiB, 256 * MiB, 1 * GiB)]
    pts[-1].metrics.update({"RecoveryTime(ms)": 1e6, "StoreBytes": 4.2e9})  # a cliff at the last size
    text = "\n".join(text_report(_doc(pts)))
    assert ("indexed_fs/chunks recovery: from 256 MiB to 1 GiB slope" in text
            and "steeper" in text and "the store held 3.91 GiB at 1 GiB, of the machine's 24 GiB" in text)


def test_resume_takes_over_the_points_that_ran_and_runs_the_rest(tmp_path, monkeypatch):
    """``--resume``: a point whose command is the same and that succeeded is taken over (and says
    from when); a new size, a failed point and a point of another command run again."""
    ran = []

    def fake_run_point(sweep_, store, layout, keys, hot, state_bytes, points_dir, timeout):
        name = sweep.label(sweep_, store, layout, keys, hot, state_bytes)
        document = os.path.join(points_dir, f"{name}.json")
        args = sweep.argv(store, layout, keys, hot, state_bytes, document)
        ran.append(keys)
        failed = keys == 128 and len(ran) == 2  # the first sitting's 128 KiB point fails: no document
        if not failed:
            with open(document, "w", encoding="utf-8") as fh:
                json.dump({"environment": {"argv": ["bench", *args], "time": "T0"},
                           "metrics": {"CheckpointP50(ms)": 1.0, "StateBytes": keys * state_bytes}}, fh)
        command = "bench " + sweep.shlex.join(args)
        return Point(sweep_, store, layout, keys, hot, keys * state_bytes, command, 1.0,
                     error="bench: error: out of memory" if failed else None,
                     metrics={} if failed else {"CheckpointP50(ms)": 1.0, "ExactlyOnce": True},
                     document=document)

    monkeypatch.setattr(sweep, "run_point", fake_run_point)
    path = str(tmp_path / "s.json")
    first = sweep.plan(stores=["indexed_fs"], layouts=["chunks"], sizes=[64 * 1024, 128 * 1024], dirty=[])
    sweep.run(first, path)
    assert ran == [64, 128]
    second = sweep.plan(stores=["indexed_fs"], layouts=["chunks"], sizes=[64 * 1024, 128 * 1024, 256 * 1024],
                        dirty=[])
    doc = sweep.run(second, path, resume=True)
    assert ran == [64, 128, 128, 256]  # 64 taken over; the failed 128 and the new 256 ran
    assert [bool(p.resumed) for p in doc.points] == [True, False, False] and all(p.ok for p in doc.points)
    assert doc.points[0].loadavg is None  # its document has no load average
    assert "1 of 3 points were taken over (`--resume`)" in "\n".join(text_report(doc))
    when = [Point(SIZE, "x", "y", 1, 1, 1, "c", resumed=r) for r in (
        "2026-11-27T09:53:42+0000 at commit abc", "2026-11-27T10:36:01+0000 at commit abc", "T0")]
    assert sweep_result.sittings(when) == "2026-11-27T09:53 to 10:36 at commit abc; T0"
    os.remove(path)  # the sweep's document gone: each run's own document still says what it measured
    doc = sweep.run(second, path, resume=True)
    assert ran == [64, 128, 128, 256] and all(p.resumed for p in doc.points)
    assert doc.points[2].resumed == "T0" and doc.points[2].value("CheckpointP50(ms)") == 1.0
    assert os.path.exists(path)  # written though nothing ran
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("not json")
    with pytest.raises(sweep.ResumeError, match="run without --resume"):
        sweep.run(second, path, resume=True)


def test_the_budget_leaves_out_a_slow_lines_largest_size_unless_sizes_are_named(monkeypatch):
    monkeypatch.setattr(sweep, "BUDGET_CAPS", {"hbase": (1 * GiB, "slow"), "indexed_fs/per-key": (1 * GiB, "slow")})
    p = sweep.plan()
    biggest = {(store, layout) for _, store, layout, keys, _ in p.points() if keys * p.state_bytes > 1 * GiB}
    assert ("hbase", "chunks") not in biggest and ("indexed_fs", "per-key") not in biggest
    assert ("indexed_fs", "chunks") in biggest and ("indexed_fs", "changelog") in biggest
    assert "indexed_fs/per-key, hbase above 1 GiB (4 GiB): slow" in p.cap_notes()
    named = sweep.plan(sizes=[1 * GiB, 4 * GiB])
    assert ("hbase", "chunks", 4 * GiB) in {(s, lay, k * named.state_bytes) for _, s, lay, k, _ in named.points()}
    assert not any(n.startswith("indexed_fs/per-key") for n in named.cap_notes())
