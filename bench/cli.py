"""``bench``: run a YCSB-like workload against a checkpoint store and print YCSB's result lines.

    bench write-heavy --backend indexed_fs [--baseline]     # the thesis' 90 % update / 10 % read mix
    bench ycsb-a ... ycsb-f --backend NAME                  # YCSB's core workloads
    bench load|run (WORKLOAD | -P FILE) [-p k=v] ...        # YCSB's two-invocation form
    bench recovery --backend NAME --records N [--crash] [--eager]  # reopen + read-back verification
    bench verify --backend indexed_fs --opt path=DIR        # every record's CRC, damaged keys
    bench audit power-loss|sigkill --backend NAME [--rounds N]  # acknowledged writes vs crashes
    bench checkpoint --backend NAME [--rate 400] [--crash-recover]  # S4 word count via SafeKeeper
    bench compare WORKLOAD --backends A,B,...               # same settings, table + bar chart
    bench sweep WORKLOAD --backends A,B [--targets ...|auto] [--threads-sweep 1,2,4] [--rounds N]
    bench throttle-curve [--rates 25,50,...] [--entropy 8]  # MinIO under S3's 503 SlowDown
    ... [--cpus 0,2-3|irq]                                  # pin the run to CPUs (taskset -a)
    bench report RESULTS.json... [--html PAGE.html] [--csv F]  # one table (and page) of saved results
    bench diff BASE.json NEW.json [--fail-above PCT]        # metric by metric, noise, regressions
    bench thesis fig4.1|fig4.2|fig4.5|fig4.7|table5.2 [--quick]   # the S4 thesis' experiments
    bench storage-compare | peer redis                      # local disk vs NFS; vs redis-benchmark
    bench spark ... | spark-matrix ...                      # protocols on PySpark
    bench mst --job nexmark-q12 --protocol coordinated --backend indexed_fs  # max sustainable rate
    bench state-sweep [--quick]                             # cost against state size, log-log slopes
    bench advise --from results/spark-matrix.json --mtbf 1h  # protocol, backend, interval
    bench advise --from results/state-sweep.json --state 50GiB --dirty 2% --mtbf 6h  # at your state
    bench checkmate | logio-stragglers [--quick]            # the protocol papers' experiments
    bench reproduce NAME... | --all [--quick]               # regenerate results/ and docs tables
    bench services up|down|status|kill [NAME...]            # the real servers

Output (stdout) is YCSB's text format.  ``bench load`` and ``bench run`` are YCSB's own two
invocations; the workload shorthands do both phases in one: the load phase is
printed first under ``[LOAD-...]`` sections (YCSB prints it from a separate ``ycsb load``
run), then the run phase under YCSB's own ``[OVERALL]``, ``[READ]``, ... sections.  See
:mod:`bench.report`.  A progress bar goes to stderr when it is a TTY.

The ``bench`` package only parses, calls :mod:`experiments` and prints: this module builds the
parser from each command family's ``*_cli`` module and runs the chosen command.  Errors are one
line, ``bench: error: <message>``, exit code 2 for usage errors (unknown backend, bad option)
and 1 for runtime errors (backend unavailable, ...).  Every command's output paths (``--json``,
``--csv``, ``--plot``, ``--out``, ...) are checked before it starts (:func:`bench.outputs.check_outputs`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Sequence

from backends import BadOptionError, CkptError, UnknownBackendError
from experiments.core.document import version_line
from experiments.core.spec import SpecError
from workloads.core import WorkloadError

from . import (
    advise_cli,
    audit_cli,
    compare_cli,
    experiments_cli,
    mst_cli,
    papers_cli,
    recovery_cli,
    results_cli,
    run_cli,
    services_cli,
    spark_cli,
    spark_matrix_cli,
    state_sweep_cli,
    throttle_cli,
    verify_cli,
    ycsb_cli,
)
from .args import EXIT_RUNTIME, EXIT_USAGE, PROG, Parser, UsageError
from .outputs import check_outputs


def build_parser() -> Parser:
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"{PROG} {version_line()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run_cli.add_parsers(sub)
    ycsb_cli.add_parsers(sub)
    recovery_cli.add_parsers(sub)
    compare_cli.add_parsers(sub)
    throttle_cli.add_parsers(sub)
    results_cli.add_parsers(sub)
    experiments_cli.add_parsers(sub)
    services_cli.add_parser(sub).set_defaults(func=services_cli.run)
    spark_cli.add_parsers(sub)
    spark_matrix_cli.add_parsers(sub)
    mst_cli.add_parsers(sub)
    state_sweep_cli.add_parsers(sub)
    advise_cli.add_parsers(sub)
    papers_cli.add_parsers(sub)
    verify_cli.add_parsers(sub)
    audit_cli.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_outputs(args)  # before any work: a finished run must not lose its results
        return int(args.func(args) or 0)
    except (UsageError, UnknownBackendError, BadOptionError, WorkloadError, SpecError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CkptError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_RUNTIME


if __name__ == "__main__":
    sys.exit(main())
