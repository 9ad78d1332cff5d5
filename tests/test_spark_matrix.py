"""`bench spark-matrix` output (pure logic: table, JSON, PNG from given rows; the runs are in test_spark)."""

from __future__ import annotations

import argparse
import json

from bench.spark_cli import add_matrix_parser, run_matrix
from experiments.plots import plot_spark_matrix as plot
from experiments.spark_matrix import format_table, write_json
from spark_integration.job import JobSpec

ROWS = [
    {"protocol": "none", "backend": "-", "throughput": 200000.0, "checkpoint_ms": 0.0, "recovery_ms": 700.0,
     "exactly_once": False, "ratio_none": 1.0, "ratio_spark_state": 0.8},
    {"protocol": "logio", "backend": "redis", "throughput": 100000.0, "checkpoint_ms": 40.0, "recovery_ms": 1900.0,
     "exactly_once": True, "ratio_none": 0.5, "ratio_spark_state": 0.4},
]


def test_table_json_and_png(tmp_path):
    table = format_table(ROWS)
    assert "x spark-state" in table and "logio" in table and "200,000" in table and "0.50" in table
    write_json(ROWS, JobSpec(), [500000], str(tmp_path / "m.json"))
    assert json.loads((tmp_path / "m.json").read_text())["rows"][1]["ratio_none"] == 0.5
    plot(ROWS, str(tmp_path / "m.png"))
    assert (tmp_path / "m.png").read_bytes()[:4] == b"\x89PNG"


def test_matrix_parser_and_bad_names(capsys):
    parser = argparse.ArgumentParser()
    add_matrix_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["spark-matrix", "--protocols", "none,sometimes", "--backends", "indexed_fs"])
    assert run_matrix(args) == 2 and "'sometimes' is not a protocol" in capsys.readouterr().err
    args = parser.parse_args(["spark-matrix", "--backends", "floppy"])
    assert run_matrix(args) == 2 and "floppy" in capsys.readouterr().err
