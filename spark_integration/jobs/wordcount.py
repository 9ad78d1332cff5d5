"""S4 word count: running count per word, checkpointed per ``spark.ckptbench.*``.

    PYSPARK_PYTHON=.venv/bin/python spark-submit --master 'local[2]' \\
        --conf spark.ckptbench.protocol=coordinated \\
        --conf spark.ckptbench.backend=default_fs --conf spark.ckptbench.backend.path=DIR \\
        spark_integration/jobs/wordcount.py --events 1000000 [--rate R] [--verify]

Backend and protocol come from the Spark conf only (validated on the driver; any registered
protocol, the ``spark-state`` baseline included); the arguments describe the input.  Prints the
``[SPARK], ...`` lines of ``bench spark``.
"""

from __future__ import annotations

import argparse
import os
import sys


def parse(argv: list[str] | None = None, kind: str = "wordcount") -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--rate", type=float, default=0.0, help="events/s (0: as fast as possible)")
    from spark_integration.skew import SYNTAX, skew_arg

    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--skew", type=skew_arg, default="1.0", help=SYNTAX)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--batch", type=int, default=250_000)
    p.add_argument("--verify", action="store_true")
    p.set_defaults(kind=kind)
    return p.parse_args(argv)


def main(argv: list[str] | None = None, kind: str = "wordcount") -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from spark_integration.conf import from_conf
    from spark_integration.job import JobSpec, print_metrics
    from spark_integration.runner import run_job

    args = parse(argv, kind)
    spark = SparkSession.builder.appName(f"ckptbench-{kind}").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        settings = from_conf(spark)
        spec = JobSpec(kind=args.kind, events=args.events, keys=args.keys, skew=args.skew, seed=args.seed,
                       rate=args.rate, parallelism=args.parallelism, max_batch=args.batch, verify=args.verify)
        metrics = run_job(spark, settings, spec)
        master = spark.sparkContext.master
    finally:
        spark.stop()
    print(f"[SPARK], Master, {master}")
    print_metrics(metrics)
    return 0 if metrics.exactly_once in (None, True) else 1


if __name__ == "__main__":
    sys.exit(main())
