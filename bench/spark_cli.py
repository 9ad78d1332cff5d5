"""``bench spark`` and ``bench spark-matrix``: parse, call the Spark job or matrix, print."""

from __future__ import annotations

from typing import Any


def add_parsers(sub: Any) -> None:
    from spark_integration import cli as spark_cli

    spark_cli.add_parser(sub).set_defaults(func=spark_cli.run)
    spark_cli.add_matrix_parser(sub).set_defaults(func=spark_cli.run_matrix)
