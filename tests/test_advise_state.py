"""`bench advise --from STATE-SWEEP.json --state --dirty`: carrying each store x layout along its
measured slopes, the extrapolation factor, the refusal to rank beyond the limit and
``--extrapolate``, on a small synthetic sweep whose curves are exact power laws (no run)."""

from __future__ import annotations

import json
import math

import pytest

from bench.cli import main
from test_bad_input import _usage_error_in_process
from experiments.spark.advise import AdviseError, young_interval
from experiments.spark.advise_state import (FIT, HELD, LAST, MAX_EXTRAPOLATION, SIZE_SWEEP_DIRTY, WITHIN,
                                            AdviseState, advise_lines, advise_state, carry, dirtied_share,
                                            format_table)
from experiments.spark.state_sweep_result import DIRTY, SIZE, Conditions, Point, StateSweep

MiB, GiB = 1 << 20, 1 << 30
SIZES = (16 * MiB, 64 * MiB, 256 * MiB)


def _point(sweep, line, size, hot=1.0, ckpt_ms=100.0, detect_ms=1000.0, load_ms=100.0, tput=10_000.0,
           space=2.0, error=None):
    store, _, layout = line.partition("/")
    keys = size // 1024
    metrics = {} if error else {"CheckpointP50(ms)": ckpt_ms, "Recovery.Detect(ms)": detect_ms,
                                "Recovery.Load(ms)": load_ms, "Recovery.Restore(ms)": 0.0,
                                "SteadyThroughput(events/sec)": tput, "SpaceAmplification": space,
                                "ExactlyOnce": True}
    return Point(sweep, store, layout, keys, max(1, round(hot * keys)), size, "bench spark ...", error=error,
                 metrics=metrics)


def sweep_doc() -> StateSweep:
    """``linear/chunks``: every cost grows as the state (slope 1), throughput flat;
    ``bent/changelog``: its checkpoint flat then growing as the square (a bend), with a dirty
    sweep at 64 MiB where 1 % of the keys hot checkpoints in a tenth of the time;
    ``short/chunks``: one size only (its larger run failed)."""
    points = []
    for size in SIZES:
        k = size / SIZES[0]
        points.append(_point(SIZE, "linear/chunks", size, ckpt_ms=100 * k, load_ms=100 * k, space=2.0))
        points.append(_point(SIZE, "bent/changelog", size, ckpt_ms=100.0 if size < SIZES[-1] else 1600.0,
                             load_ms=100 * k))
    points += [_point(DIRTY, "bent/changelog", 64 * MiB, hot=0.01, ckpt_ms=10.0, space=1.0),
               _point(DIRTY, "bent/changelog", 64 * MiB, hot=0.1, ckpt_ms=20.0, space=1.5),
               _point(SIZE, "short/chunks", SIZES[0]),
               _point(SIZE, "short/chunks", SIZES[1], error="OutOfMemoryError")]
    return StateSweep(quick=False, full=True, lines=["linear/chunks", "bent/changelog", "short/chunks"],
                      points=points, conditions=Conditions(
                          job="wordcount", protocol="coordinated", state_bytes_per_key=1024,
                          sizes=list(SIZES), dirty=[0.01, 0.1, 1.0], dirty_size=64 * MiB, schedule="K events ...",
                          memory_bytes=8 * GiB))


def _row(doc: AdviseState, name: str):
    return next(a for a in doc.ranking if a.name == name)


def test_carry_interpolates_inside_fits_outside_and_follows_a_bend():
    xs, ys = [1.0, 4.0, 16.0], [10.0, 40.0, 160.0]  # y = 10 x
    inside = carry(xs, ys, 8.0)
    assert inside.along == WITHIN and inside.value == pytest.approx(80.0) and (inside.x_from, inside.x_to) == (4, 16)
    above = carry(xs, ys, 160.0)
    assert above.along == FIT and above.value == pytest.approx(1600.0) and above.slope == pytest.approx(1.0)
    # flat, then as the square: the fit's slope 1 is neither, so the last segment carries it
    bent = carry(xs, [10.0, 10.0, 160.0], 64.0)
    assert bent.along == LAST and bent.slope == pytest.approx(2.0) and bent.value == pytest.approx(2560.0)
    # a time flattening at the top is carried along the fit, not the flat last segment
    flat = carry(xs, [10.0, 160.0, 170.0], 64.0, grows=True)
    assert flat.along == FIT and flat.slope > 1.0
    assert carry(xs, [10.0, 160.0, 170.0], 64.0).along == LAST  # a figure of no direction follows it
    # a time falling at the top is held there, never carried below its last value
    held = carry([1.0, 2.0, 4.0], [100.0, 200.0, 50.0], 8.0, grows=True)
    assert held.along == HELD and held.value == 50.0
    # and a rate rising at the top (the sweep's batching) is held at its last value
    assert carry(xs, ys, 64.0, grows=False).value == 160.0 and carry(xs, ys, 8.0, grows=False).value == pytest.approx(80.0)
    assert carry([1.0, 2.0, 4.0], [100.0, 200.0, 50.0], 8.0).value == pytest.approx(12.5)
    assert carry(xs, ys, 0.5, hold_below=True).value == 10.0  # below the range: its first value
    assert carry([1.0], [1.0], 2.0) is None and carry([1.0, 2.0], [None, 3.0], 2.0) is None


def test_dirtied_share_of_the_sweeps_intervals():
    assert SIZE_SWEEP_DIRTY == pytest.approx(1 - math.exp(-1))
    assert dirtied_share(0.01) == pytest.approx(0.01)


def test_each_line_is_carried_to_the_state_with_its_factor():
    doc = advise_state(sweep_doc(), 1 * GiB, SIZE_SWEEP_DIRTY, mtbf_s=3600.0)
    linear = _row(doc, "linear/chunks")
    assert linear.factor == pytest.approx(4.0) and linear.ranked and linear.rank >= 1
    assert linear.cost_ms == pytest.approx(6400.0)  # 100 ms x 64
    assert linear.restore_ms == pytest.approx(6400.0) and linear.restart_ms == pytest.approx(7400.0)
    assert linear.restore_mbps == pytest.approx(GiB / 6.4 / 1e6)
    assert linear.space_bytes == pytest.approx(2.0 * GiB) and linear.dirty_ratio is None
    assert linear.optimal_interval_s == pytest.approx(young_interval(6.4, 3600.0))
    assert linear.expected_recovery_s == pytest.approx(7.4 + linear.optimal_interval_s / 2)  # flat out
    bent = _row(doc, "bent/changelog")
    assert bent.carried["checkpoint"].along == LAST and bent.cost_ms == pytest.approx(1600.0 * 16)
    assert doc.not_fitted == ["short/chunks: 1 measured state size (a slope needs 2); 1 of its runs failed"]
    inside = advise_state(sweep_doc(), 32 * MiB, 0.5, mtbf_s=3600.0)
    assert _row(inside, "linear/chunks").factor == 1.0 and _row(inside, "linear/chunks").cost_ms == pytest.approx(200.0)
    assert "within" in format_table(inside)
    below = advise_state(sweep_doc(), 4 * MiB, 0.5, mtbf_s=3600.0)
    assert _row(below, "linear/chunks").factor == pytest.approx(4.0) and "4.0x below" in format_table(below)


def test_the_dirty_share_scales_the_checkpoint_by_the_dirty_sweep():
    doc = advise_state(sweep_doc(), 1 * GiB, 0.01, mtbf_s=3600.0)
    bent = _row(doc, "bent/changelog")
    # at 1 % dirty the dirty sweep checkpointed in 10 ms against 100 ms at the size sweep's share
    # (655 of 65,536 keys hot: 0.9994 %, so 1 % lies a hair above the measured share)
    assert bent.dirty_ratio == pytest.approx(0.1, rel=1e-3) and bent.cost_ms == pytest.approx(2560.0, rel=1e-3)
    assert bent.space_amplification == pytest.approx(1.0, rel=1e-3)  # 2.0 x (1.0 / 2.0)
    lower = advise_state(sweep_doc(), 1 * GiB, 0.0001, mtbf_s=3600.0)  # below the sweep: held
    assert _row(lower, "bent/changelog").dirty_ratio == pytest.approx(0.1)


def test_rows_beyond_the_limit_are_shown_not_ranked_unless_asked():
    far = 64 * 256 * MiB  # 64x the largest measured state
    doc = advise_state(sweep_doc(), far, 0.02, mtbf_s=3600.0)
    assert doc.recommended is None and all(not a.ranked and a.rank == 0 for a in doc.ranking)
    assert {a.name for a in doc.ranking} == {"linear/chunks", "bent/changelog"}
    lines = advise_lines(doc)
    assert any(ln.startswith("[ADVISE], Recommended, none") and "--extrapolate" in ln for ln in lines)
    assert any(ln.startswith("[ADVISE], NotRanked, ") and "(64.0x)" in ln for ln in lines)
    assert "64.0x (not ranked)" in format_table(doc)
    asked = advise_state(sweep_doc(), far, 0.02, mtbf_s=3600.0, extrapolate=True)
    assert asked.recommended is not None and [a.rank for a in asked.ranking] == [1, 2]
    at_limit = advise_state(sweep_doc(), int(MAX_EXTRAPOLATION * 256 * MiB), 0.02, mtbf_s=3600.0)
    assert all(a.ranked for a in at_limit.ranking)
    assert any("larger than the memory" in ln for ln in lines)


def test_a_sweep_without_a_fitted_line_is_an_error():
    doc = sweep_doc()
    doc.points = [p for p in doc.points if p.line == "short/chunks"]
    with pytest.raises(AdviseError, match="no store x layout measured at 2 state sizes"):
        advise_state(doc, GiB, 0.02, 3600.0)


def test_cli_from_a_sweep_writes_a_document_that_reads_back(tmp_path, capsys):
    src = tmp_path / "sweep.json"
    src.write_text(json.dumps(sweep_doc().to_json()))
    out = tmp_path / "a.json"
    assert main(["advise", "--from", str(src), "--state", "1GiB", "--dirty", "1%", "--mtbf", "6h",
                 "--rto", "1m", "--json", str(out), "--plot", str(tmp_path / "a.png")]) == 0
    text = capsys.readouterr().out
    assert "[ADVISE], Recommended, " in text and "extrapolation" in text and "4.0x" in text
    back = AdviseState.from_json(json.loads(out.read_text()))
    again = advise_state(sweep_doc(), GiB, 0.01, 21600.0, rto_s=60.0, source=str(src))
    assert format_table(back) == format_table(again) and advise_lines(back) == advise_lines(again)
    assert back.ranking[0].carried["checkpoint"].along in (FIT, LAST)
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_reads_the_sweeps_of_a_reproduce_document(tmp_path, capsys):
    """``bench reproduce state-sweep`` runs the stores and Spark's own state store apart: every
    line of both is advised, each within its own sweep."""
    spark = sweep_doc()
    spark.lines = ["spark-state/rocksdb"]
    spark.points = [_point(SIZE, "spark-state/rocksdb", size, ckpt_ms=50.0) for size in SIZES]
    doc = {"schema": "ckptbench.reproduce/1", "name": "state-sweep",
           "runs": [{"label": "run", "document": sweep_doc().to_json()},
                    {"label": "spark-state", "document": spark.to_json()}]}
    src = tmp_path / "state-sweep.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "a.json"
    assert main(["advise", "--from", str(src), "--state", "512MiB", "--dirty", "2%", "--mtbf", "1h",
                 "--json", str(out), "--plot", str(tmp_path / "a.png")]) == 0
    assert "[ADVISE], Recommended, spark-state/rocksdb" in capsys.readouterr().out
    names = {a["name"] for a in json.loads(out.read_text())["ranking"]}
    assert names == {"linear/chunks", "bent/changelog", "spark-state/rocksdb"}


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    src = tmp_path / "sweep.json"
    src.write_text(json.dumps(sweep_doc().to_json()))
    outs = ["--json", str(tmp_path / "a.json"), "--plot", str(tmp_path / "a.png")]
    good = ["advise", "--from", str(src), "--mtbf", "6h", *outs]

    def one_line(*argv: str) -> str:
        return _usage_error_in_process(argv, capsys)

    assert "no such file" in one_line("advise", "--from", str(tmp_path / "none.json"), "--state", "1GiB",
                                      "--dirty", "2%", "--mtbf", "6h", *outs)
    assert "must be at least 1 byte" in one_line(*good, "--state", "0", "--dirty", "2%")
    assert "at most 100 %" in one_line(*good, "--state", "1GiB", "--dirty", "150%")
    assert "give your job's --state" in one_line(*good, "--dirty", "2%")
    failed = sweep_doc()
    for p in failed.points:
        p.error, p.metrics = "OutOfMemoryError", {}
    src.write_text(json.dumps(failed.to_json()))
    err = one_line(*good, "--state", "1GiB", "--dirty", "2%")
    assert "0 of 10 runs succeeded" in err and "run bench state-sweep" in err
    matrix = tmp_path / "m.json"
    matrix.write_text(json.dumps({"job": {}, "rows": []}))
    assert "need a state sweep" in one_line("advise", "--from", str(matrix), "--mtbf", "1h", "--state", "1GiB", *outs)
    assert not (tmp_path / "a.json").exists()
