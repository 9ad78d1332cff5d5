"""``bench``: run a YCSB-like workload against a checkpoint store and print YCSB's result lines.

    bench write-heavy --backend indexed_fs [--baseline]     # the thesis' 90 % update / 10 % read mix
    bench ycsb-a ... ycsb-f --backend NAME                  # YCSB's core workloads
    bench recovery --backend NAME --records N [--crash] [--eager]  # reopen + read-back verification
    bench checkpoint --backend NAME [--rate 400] [--crash-recover]  # S4 word count via SafeKeeper
    bench compare WORKLOAD --backends A,B,...               # same settings, table + bar chart
    bench sweep WORKLOAD --backends A,B [--targets ...|auto] [--threads-sweep 1,2,4] [--rounds N]
    ... [--cpus 0,2-3|irq]                                  # pin the run to CPUs (taskset -a)
    bench report RESULTS.json... --plot FILE.png            # re-plot saved results
    bench thesis fig4.1|fig4.2|fig4.5|fig4.7|table5.2 [--quick]   # the S4 thesis' experiments
    bench spark ...                                         # spark_integration (when present)
    bench services up|down|status|kill [NAME...]            # the real servers (services)

Output (stdout) is YCSB's text format.  One invocation does both phases: the load phase is
printed first under ``[LOAD-...]`` sections (YCSB prints it from a separate ``ycsb load``
run), then the run phase under YCSB's own ``[OVERALL]``, ``[READ]``, ... sections.  See
:mod:`bench.report`.  A progress bar goes to stderr when it is a TTY.

This module only parses, wires and prints; workloads live in :mod:`workloads`, stores in
:mod:`backends`.  Errors are one line, ``bench: error: <message>``, exit code 2 for usage
errors (unknown backend, bad option) and 1 for runtime errors (backend unavailable, ...).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Sequence

from backends import (
    BadOptionError,
    CkptError,
    UnknownBackendError,
    backend_class,
    open_backend,
    parse_kv,
)
from workloads import core, placement, runner, session
from workloads.core import PRESETS, WorkloadError

from experiments import plots, results, tables

from . import experiments_cli, report, spark_cli, spark_clients_cli
from .args import (
    EXIT_RUNTIME,
    EXIT_USAGE,
    PROG,
    Parser,
    UsageError,
    add_backend_args,
    add_cpus_arg,
    csv_list,
    positive_float,
    positive_int,
    proportion,
)
from .progress import ProgressBar







# ------------------------------------------------------------------------------------- parsing








def _add_workload_parser(sub: Any, name: str) -> None:
    spec = PRESETS[name]
    mix = ", ".join(f"{p:g} {op}" for op, p in spec.proportions().items() if p > 0)
    p = sub.add_parser(
        name,
        help=f"{mix}; {spec.distribution}",
        description=f"Workload {name}: {mix}, request distribution {spec.distribution}, "
                    f"{spec.records} records, {spec.operations} operations by default.  "
                    "Proportions are weights (normalized to sum 1); where the preset mixes only "
                    "reads and updates, --read-proportion alone sets update = 1 - read.",
    )
    add_backend_args(p)
    _add_spec_args(p, spec)
    p.add_argument("--processes", type=int, default=1, metavar="N",
                   help="client processes, each with --threads threads (beyond the GIL; "
                        "histograms merged exactly).  memory: each process has its own store; "
                        "file backends lock their directory and refuse N > 1")
    spark_clients_cli.add_arguments(p)
    add_cpus_arg(p)
    p.add_argument("--target", type=positive_float, metavar="OPS",
                   help="target ops/s over all processes and threads; adds Intended-<OP> "
                        "latencies")
    p.add_argument("--skip-load", action="store_true",
                   help="do not load (the store at --opt path= already holds the records)")
    p.add_argument("--status-interval", type=positive_float, metavar="SECONDS",
                   help="print a status line to stderr this often")
    p.add_argument("--csv", metavar="FILE", help="also write per-operation results as CSV")
    if name == "write-heavy":
        p.add_argument("--baseline", action="store_true",
                       help="around the run, time bare os.write+fdatasync appends of the same "
                            "values in the same kind of directory (with --threads N: N threads "
                            "sharing fdatasyncs), in Python ([BASELINE]) and in C ([BASELINE-C], "
                            "the machine's ceiling), and print the ratios")
    p.set_defaults(func=cmd_workload, workload=name)


def _add_spec_args(p: argparse.ArgumentParser, spec: core.WorkloadSpec | None) -> None:
    """The workload's YCSB property overrides (shared by a run, ``compare`` and ``sweep``)."""
    dflt = (lambda v: f" (default {v})") if spec is not None else (lambda v: "")
    p.add_argument("--records", type=positive_int,
                   help="records loaded" + dflt(spec.records if spec else None))
    p.add_argument("--ops", type=positive_int,
                   help="operations run" + dflt(spec.operations if spec else None))
    p.add_argument("--duration", type=positive_float, metavar="SECONDS",
                   help="stop the run phase after this long (with --ops: whichever comes first)")
    p.add_argument("--value-size", type=positive_int,
                   help="bytes per value" + dflt(spec.value_size if spec else None))
    p.add_argument("--read-proportion", type=proportion)
    p.add_argument("--update-proportion", type=proportion)
    p.add_argument("--insert-proportion", type=proportion)
    p.add_argument("--scan-proportion", type=proportion)
    p.add_argument("--rmw-proportion", type=proportion, help="read-modify-write proportion")
    p.add_argument("--distribution", "--request-distribution", dest="distribution",
                   choices=core.DISTRIBUTIONS,
                   help="key popularity" + dflt(spec.distribution if spec else None))
    p.add_argument("--max-scan-length", type=positive_int, help="longest scan (default 100)")
    p.add_argument("--threads", type=int, default=1, help="client threads (default 1)")
    p.add_argument("--load-batch", type=int, default=1000, metavar="N",
                   help="keys per put_many in the load phase; 1 = one put per key, measured as "
                        "INSERT like YCSB (default 1000)")




def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in PRESETS:
        _add_workload_parser(sub, name)

    p = sub.add_parser("recovery", help="load N keys, close (or crash), reopen, verify all",
                       description="Time reopening a store after a clean close or a SIGKILL "
                                   "(--crash), then read back and verify every key.")
    add_backend_args(p)
    p.add_argument("--records", type=positive_int, default=10_000,
                   help="keys loaded and verified (default 10000)")
    p.add_argument("--value-size", type=positive_int, default=1024)
    p.add_argument("--crash", action="store_true",
                   help="load in a child process that is SIGKILLed before it closes the store")
    p.add_argument("--load-batch", type=int, default=1000, metavar="N")
    p.add_argument("--eager", action="store_true",
                   help="prefetch every key with get_many before the PEs use them (READ-PREFETCH "
                        "latency per batch); default lazy: one get per key on first use")
    p.set_defaults(func=cmd_recovery)

    # hidden: the child side of `recovery --crash`
    p = sub.add_parser("_recovery-load")
    add_backend_args(p)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--value-size", type=int, required=True)
    p.add_argument("--load-batch", type=int, default=1000)
    p.set_defaults(func=cmd_recovery_child)
    sub._choices_actions = [a for a in sub._choices_actions if a.dest != "_recovery-load"]

    _add_checkpoint_parser(sub)
    _add_compare_parsers(sub)
    experiments_cli.add_parsers(sub)
    _add_services(sub)
    spark_cli.add_parsers(sub)
    return parser


CHECKPOINT_EPILOG = """\
The storage queue drops its oldest checkpoint when full, so drops show the rate a backend cannot
sustain (thesis Fig 4.7).  Measured on this shared 2-core VM (local disk, 1 writer, 10000 events):
  bench checkpoint --backend default_fs --rate 1200    # Dropped 5697 (wrote ~410/s)
  bench checkpoint --backend indexed_fs --rate 1200    # Dropped 0    (kept up: 1200/s)
  --rate 1500: default_fs dropped 6889, indexed_fs 0; --rate 3000 --queue 10 --events 3000:
  default_fs dropped 2383, indexed_fs 1249 (the test's setting).  default_fs sustained 300-900
  checkpoints/s depending on the machine's load, indexed_fs 1,900-4,400/s.
"""


def _add_checkpoint_parser(sub: Any) -> None:
    p = sub.add_parser(
        "checkpoint", help="S4 word-count checkpointing through the SafeKeeper model",
        description="A zipfian stream of word events at --rate events/s; each event updates its "
                    "PE's counter and checkpoints it through the S4 SafeKeeper (serialization "
                    "queue -> bounded drop-oldest storage queue -> writer threads -> callback). "
                    "Prints checkpoints written/dropped/failed and CHECKPOINT-WRITE latencies.",
        epilog=CHECKPOINT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_backend_args(p)
    p.add_argument("--rate", type=float, default=400.0,
                   help="events/s, paced to intended times; 0 = unpaced (default 400)")
    p.add_argument("--events", type=positive_int, default=10_000, help="events (default 10000)")
    p.add_argument("--pes", type=positive_int, default=1000, help="distinct words/PEs (default 1000)")
    p.add_argument("--queue", type=positive_int, default=1000,
                   help="storage queue capacity (default 1000, S4's)")
    p.add_argument("--serialization-queue", type=positive_int, default=1000, metavar="N",
                   help="serialization queue capacity (default 1000, S4's)")
    p.add_argument("--writers", type=positive_int, default=1, help="writer threads (default 1)")
    p.add_argument("--skew", type=float, default=0.99,
                   help="zipfian constant of the word stream; 0 = uniform (default 0.99)")
    p.add_argument("--crash-recover", action="store_true",
                   help="run in a child process, SIGKILL it after the queue drained, reopen the "
                        "store (timed) and read each PE's state on first use (RECOVERY-READ), "
                        "verifying the last acknowledged checkpoint")
    p.add_argument("--eager", action="store_true",
                   help="with --crash-recover: prefetch all states with get_many instead")
    p.set_defaults(func=cmd_checkpoint)








def _add_compare_parsers(sub: Any) -> None:
    for name, helptext in (
        ("compare", "run one workload on several backends with identical settings"),
        ("sweep", "raise the target rate (or threads) per backend until throughput stops growing"),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext + ".  Backends that cannot "
                           "open are reported as skipped with the reason.")
        p.add_argument("workload", choices=list(PRESETS), metavar="WORKLOAD",
                       help=", ".join(PRESETS))
        p.add_argument("--backends", type=csv_list(str), required=True, metavar="A,B,...")
        p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                       help="option given to every backend that has it")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--json", metavar="FILE", help="write the results here")
        p.add_argument("--csv", metavar="FILE", help="also write per-operation results as CSV")
        p.add_argument("--plot", metavar="FILE.png",
                       help=f"chart (default results/{name}-<workload>.png)")
        p.add_argument("--no-progress", action="store_true", help=argparse.SUPPRESS)
        _add_spec_args(p, None)
        add_cpus_arg(p)
        if name == "compare":
            p.add_argument("--target", type=positive_float, metavar="OPS")
            p.set_defaults(func=cmd_compare)
        else:
            p.add_argument("--targets", default="auto", metavar="R1,R2,...|auto",
                           help="target rates to try (default auto: 100, 200, 400, ...)")
            p.add_argument("--threads-sweep", type=csv_list(int), metavar="1,2,4,...",
                           help="sweep the thread count instead of the target rate")
            p.add_argument("--point-seconds", type=positive_float, default=3.0,
                           help="length of each point (default 3 s)")
            p.add_argument("--rounds", type=int, default=1, metavar="N",
                           help="run the whole sweep N times, backends interleaved, and print "
                                "the median of each round's ratios (a noisy machine's answer)")
            p.set_defaults(func=cmd_sweep)
    p = sub.add_parser("report", help="re-plot (and tabulate) saved JSON results",
                       description="Re-plot saved results: sweeps as latency-vs-throughput "
                                   "curves, compares and single runs as bar charts.")
    p.add_argument("results", nargs="+", metavar="RESULTS.json")
    p.add_argument("--plot", metavar="FILE.png", required=True)
    p.add_argument("--csv", metavar="FILE", help="also write the first document as CSV")
    p.set_defaults(func=cmd_report)




def _add_services(sub: Any) -> None:
    from . import services_cli

    services_cli.add_parser(sub).set_defaults(func=services_cli.run)




# ------------------------------------------------------------------------------------- helpers
def _backend_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = dict(parse_kv(args.opt))
    if args.durability is not None:
        if "durability" in options and options["durability"] != args.durability:
            raise UsageError("--durability and --opt durability= disagree; give only one")
        options["durability"] = args.durability
    cls = backend_class(args.backend)  # UnknownBackendError names the valid ones
    cls.parse_options(options)  # BadOptionError before any work starts
    return options


def _progress(args: argparse.Namespace, label: str, total: int | None) -> ProgressBar:
    return ProgressBar(label, total, enabled=not args.no_progress)


def _spec(args: argparse.Namespace) -> core.WorkloadSpec:
    base = PRESETS[args.workload]
    overrides = dict(
        records=args.records,
        operations=args.ops,
        value_size=args.value_size,
        read=args.read_proportion,
        update=args.update_proportion,
        insert=args.insert_proportion,
        scan=args.scan_proportion,
        rmw=args.rmw_proportion,
        distribution=args.distribution,
        max_scan_length=args.max_scan_length,
    )
    read_update_only = base.insert == base.scan == base.rmw == 0
    if read_update_only and args.read_proportion is not None and args.update_proportion is None:
        overrides["update"] = max(0.0, 1.0 - args.read_proportion)
    return core.preset(args.workload, **overrides)


def _config(args: argparse.Namespace, options: dict[str, Any], **extra: Any) -> dict[str, Any]:
    skip = {"func", "opt"}
    config = {k: v for k, v in vars(args).items() if k not in skip}
    config["backend_options"] = dict(options)
    config.update(extra)
    return config


def _place(args: argparse.Namespace, backends: list[str], options: dict[str, Any]) -> None:
    """``--cpus``: pin the whole process before any store or client thread starts (they
    inherit it, and so do client processes), and say so on stderr (YCSB's result lines
    carry no settings; the JSON does)."""
    if not getattr(args, "cpus", None):
        return
    data_path = None  # for --cpus irq: the disk that will hold the file backends' data
    given = options.get("path")
    if any("path" in (_options_of(b) or ()) for b in backends) and "://" not in str(given or ""):
        data_path = str(given) if given else tempfile.gettempdir()
    try:
        cpus = placement.resolve(args.cpus, data_path)
    except placement.PlacementError as exc:
        raise UsageError(str(exc)) from None
    placement.pin(cpus)
    args.cpus_pinned = cpus  # in the JSON's config, beside the --cpus as given
    print(f"{PROG}: running on CPU {placement.format_cpus(cpus)} (--cpus {args.cpus})",
          file=sys.stderr)


def _options_of(backend: str) -> set[str] | None:
    """The option names of ``backend``; ``None`` when it cannot be loaded (an unknown name is
    reported by the run, a missing client package makes it skipped there)."""
    try:
        return set(backend_class(backend).all_options())
    except CkptError:
        return None


# ------------------------------------------------------------------------------------ commands
def cmd_workload(args: argparse.Namespace) -> int:
    if args.threads < 1:
        raise UsageError(f"--threads must be >= 1 (got {args.threads})")
    spec = _spec(args)
    options = _backend_options(args)
    if args.skip_load and "path" in backend_class(args.backend).all_options() and not options.get("path"):
        raise UsageError("--skip-load needs the existing store's --opt path=DIR")
    if args.processes < 1:
        raise UsageError(f"--processes must be >= 1 (got {args.processes})")
    _place(args, [args.backend], options)
    if spark_clients_cli.wanted(args):
        return spark_clients_cli.run_distributed(args, spec, options)
    if args.processes > 1:
        return _workload_processes(args, spec, options)
    out_lines: list[str] = []
    phases: dict[str, runner.PhaseResult] = {}
    with session.data_dir(args.backend, options) as path:
        workload = core.CoreWorkload(spec, seed=args.seed)
        store = open_backend(args.backend, **options)
        try:
            if not args.skip_load:
                bar = _progress(args, "load", spec.records)
                try:
                    phases["load"] = runner.load(store, workload, batch=args.load_batch,
                                                 progress=bar.update,
                                                 status_interval=args.status_interval,
                                                 status_out=sys.stderr)
                finally:
                    bar.close()
                report.print_errors(phases["load"])
                out_lines = report.phase_lines(phases["load"], "LOAD-")
                report.print_lines(out_lines)
            # --duration alone: run until the time is up; otherwise the op count
            operations = None if args.duration and args.ops is None else spec.operations
            # --baseline brackets the run (half of its loop before, half after) so that a disk
            # whose speed drifts during the run affects both sides alike
            leg = _baseline_leg(args, spec, path, (operations or 2000) // 2) if getattr(args, "baseline", False) else None
            bar = _progress(args, "run", operations)
            try:
                phases["run"] = runner.run(store, workload, threads=args.threads,
                                           operations=operations, duration=args.duration,
                                           target=args.target, progress=bar.update,
                                           status_interval=args.status_interval,
                                           status_out=sys.stderr)
            finally:
                bar.close()
            report.print_errors(phases["run"])
            report.print_lines(report.phase_lines(phases["run"]))
            stats = store.stats()
        finally:
            store.close()
        extra: dict[str, Any] = {}
        if getattr(args, "baseline", False):
            extra["baseline"] = _baseline(args, spec, path, phases["run"], leg)
    write_results(args, options, spec, phases, stats, extra)
    return 0


def _workload_processes(args: argparse.Namespace, spec: core.WorkloadSpec,
                        options: dict[str, Any]) -> int:
    """``--processes N > 1``: load once (shared stores) or per process (memory), run, merge."""
    from workloads import parallel

    if getattr(args, "baseline", False):
        raise UsageError("--baseline needs a file backend, which cannot run with --processes > 1")
    mode = parallel.check_backend(args.backend)
    phases: dict[str, runner.PhaseResult] = {}
    stats = None
    if mode == "shared" and not args.skip_load:
        store = open_backend(args.backend, **options)
        try:
            phases["load"] = runner.load(store, core.CoreWorkload(spec, seed=args.seed),
                                         batch=args.load_batch)
        finally:
            store.close()
    operations = None if args.duration and args.ops is None else spec.operations
    bar = _progress(args, "run", operations)
    try:
        own_load, phases["run"] = parallel.run_processes(
            args.backend, options, spec, processes=args.processes, threads=args.threads,
            seed=args.seed, operations=operations, duration=args.duration, target=args.target,
            load_batch=args.load_batch, progress=bar.update,
            status_interval=args.status_interval, status_out=sys.stderr)
    finally:
        bar.close()
    if own_load is not None:
        phases = {"load": own_load, **phases}
    for name, phase in phases.items():
        report.print_errors(phase)
        report.print_lines(report.phase_lines(phase, "LOAD-" if name == "load" else ""))
    write_results(args, options, spec, phases, stats)
    return 0


def write_results(args: argparse.Namespace, options: dict[str, Any], spec: core.WorkloadSpec,
                  phases: dict[str, runner.PhaseResult], stats: dict[str, Any] | None,
                  extra: dict[str, Any] | None = None) -> None:
    """``--json`` and ``--csv`` of a workload run, however its clients ran (threads, processes
    or Spark tasks), so every run has the same schema."""
    if args.json:
        results.write_json(args.json, results.result_json(
            workload=args.workload, backend=args.backend,
            config=_config(args, options, workload_spec=spec.to_dict()),
            phases=phases, backend_stats=stats, extra=extra))
    _maybe_csv(args, phases)


def _maybe_csv(args: argparse.Namespace, phases: dict[str, runner.PhaseResult]) -> None:
    if getattr(args, "csv", None):
        results.write_csv(args.csv, {"schema": results.SCHEMA, "backend": args.backend,
                                    "phases": {n: results.phase_json(p) for n, p in phases.items()}})


def _baseline_leg(args: argparse.Namespace, spec: core.WorkloadSpec, store_path: str | None,
                  operations: int) -> tuple[runner.PhaseResult, runner.PhaseResult | None]:
    """One leg of the bare append+fdatasync loop, in Python and in C (the latter ``None``
    without the C committer), in the same kind of directory as the store."""
    parent = os.path.dirname(store_path) if store_path else None
    directory = tempfile.mkdtemp(prefix="ckptbench-baseline-", dir=parent)
    try:
        bar = _progress(args, "baseline", operations)
        try:
            bare = runner.fsync_baseline(directory, operations=max(1, operations),
                                         value_size=spec.value_size, seed=args.seed,
                                         threads=args.threads, progress=bar.update)
        finally:
            bar.close()
        return bare, runner.native_baseline(directory, operations=max(1, operations),
                                            value_size=spec.value_size, threads=args.threads)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _joined(name: str, legs: list[runner.PhaseResult]) -> runner.PhaseResult:
    """Two legs of a baseline as one phase (time and operations added up)."""
    merged = legs[0].measurements
    for leg in legs[1:]:
        merged = merged.merge(leg.measurements)
    return runner.PhaseResult(name, sum(x.runtime_ms for x in legs),
                              sum(x.operations for x in legs), merged)


def _baseline_lines(tag: str, legs: list[runner.PhaseResult], run: runner.PhaseResult
                    ) -> tuple[runner.PhaseResult, float, list[str]]:
    """The legs of one bare loop as one phase, the run's throughput over it, and its
    ``[TAG]`` lines."""
    joined = _joined(tag.lower(), legs)
    ratio = run.throughput / joined.throughput if joined.throughput else 0.0
    return joined, ratio, [f"[{tag}], Throughput(ops/sec), {float(joined.throughput)!r}",
                           f"[{tag}], RunTime(ms), {int(round(joined.runtime_ms))}",
                           f"[{tag}], Ratio, {ratio!r}"]


def _baseline(args: argparse.Namespace, spec: core.WorkloadSpec, store_path: str | None,
              run: runner.PhaseResult,
              before: tuple[runner.PhaseResult, runner.PhaseResult | None]) -> dict[str, Any]:
    """Second leg of the bare loops after the run; prints the [BASELINE] lines for both legs,
    and [BASELINE-C] for the loop in C (the ceiling: no Python, no GIL)."""
    after = _baseline_leg(args, spec, store_path, max(1, run.operations - before[0].operations))
    base, ratio, lines = _baseline_lines("BASELINE", [before[0], after[0]], run)
    lines += report.measurement_lines(base.measurements, "BASELINE-")
    native: dict[str, Any] | None = None
    if before[1] is not None and after[1] is not None:
        ceiling, c_ratio, c_lines = _baseline_lines("BASELINE-C", [before[1], after[1]], run)
        lines += c_lines
        native = {"throughput": ceiling.throughput, "runtime_ms": ceiling.runtime_ms,
                  "operations": ceiling.operations, "ratio": c_ratio,
                  "legs_throughput": [before[1].throughput, after[1].throughput]}
    report.print_lines(lines)
    parent = os.path.dirname(store_path) if store_path else None
    return {"directory_parent": parent or tempfile.gettempdir(), "ratio": ratio,
            "legs_throughput": [before[0].throughput, after[0].throughput],
            "native": native, **results.phase_json(base)}


def _recovery_workload(args: argparse.Namespace) -> core.CoreWorkload:
    spec = core.WorkloadSpec(name="recovery", records=max(1, args.records), operations=0,
                             read=1.0, update=0.0, value_size=args.value_size)
    return core.CoreWorkload(spec, seed=args.seed)


def _value_for(args: argparse.Namespace):
    size, seed = args.value_size, args.seed
    return lambda key: core.deterministic_value(key, size, seed)


def cmd_recovery(args: argparse.Namespace) -> int:
    if args.records < 1:
        raise UsageError("--records must be >= 1")
    options = _backend_options(args)
    cls = backend_class(args.backend)
    if not cls.persistent:
        raise UsageError(f"backend {args.backend!r} keeps nothing after close; recovery needs a "
                         f"persistent backend (e.g. indexed_fs, default_fs)")
    workload = _recovery_workload(args)
    value_for = _value_for(args)
    phases: dict[str, runner.PhaseResult] = {}
    with session.data_dir(args.backend, options):
        if args.crash:
            load_ms, loaded = _crash_load(args, options)
            print_load = [f"[LOAD-OVERALL], RunTime(ms), {int(round(load_ms))}",
                          f"[LOAD-OVERALL], Records, {loaded}"]
            report.print_lines(print_load)
        else:
            store = open_backend(args.backend, **options)
            try:
                bar = _progress(args, "load", args.records)
                try:
                    phases["load"] = runner.load(store, workload, batch=args.load_batch,
                                                 value_for=value_for, progress=bar.update)
                finally:
                    bar.close()
            finally:
                store.close()
            report.print_errors(phases["load"])
            report.print_lines(report.phase_lines(phases["load"], "LOAD-"))
        t0 = time.perf_counter()
        store = open_backend(args.backend, **options)
        open_ms = (time.perf_counter() - t0) * 1000.0
        try:
            bar = _progress(args, "verify", args.records)
            try:
                result = runner.verify(store, workload.load_keys(), value_for,
                                       eager=args.eager, progress=bar.update)
            finally:
                bar.close()
            stats = store.stats()
        finally:
            store.close()
    phases["run"] = result.phase
    report.print_errors(result.phase)
    report.print_lines([
        f"[RECOVERY], Crash, {'true' if args.crash else 'false'}",
        f"[RECOVERY], Eager, {'true' if args.eager else 'false'}",
        f"[RECOVERY], OpenTime(ms), {open_ms!r}",
        f"[RECOVERY], Records, {args.records}",
        f"[RECOVERY], Missing, {result.missing}",
        f"[RECOVERY], Corrupt, {result.corrupt}",
    ] + report.phase_lines(result.phase))
    if args.json:
        results.write_json(args.json, results.result_json(
            workload="recovery", backend=args.backend, config=_config(args, options),
            phases=phases, backend_stats=stats,
            extra={"recovery": {"crash": args.crash, "eager": args.eager, "open_ms": open_ms,
                                "missing": result.missing, "corrupt": result.corrupt}}))
    return 0 if result.missing == 0 and result.corrupt == 0 else EXIT_RUNTIME


def cmd_checkpoint(args: argparse.Namespace) -> int:
    from workloads import checkpoint as ck

    spec = ck.CheckpointSpec(rate=args.rate, events=args.events, pes=args.pes, queue=args.queue,
                             serialization_queue=args.serialization_queue, writers=args.writers, skew=args.skew, seed=args.seed).validate()
    if args.eager and not args.crash_recover:
        raise UsageError("--eager only applies to --crash-recover; add --crash-recover")
    options = _backend_options(args)
    if args.crash_recover and not backend_class(args.backend).persistent:
        raise UsageError(f"backend {args.backend!r} keeps nothing after a crash; --crash-recover "
                         f"needs a persistent backend (e.g. indexed_fs, default_fs)")
    recovery = None
    with session.data_dir(args.backend, options):
        if args.crash_recover:
            result = ck.run_checkpoint_then_crash(args.backend, options, spec)
            bar = _progress(args, "recover", len(result.last_written))
            try:
                recovery = ck.reopen_and_recover(args.backend, options, result,
                                                 eager=args.eager, progress=bar.update)
            finally:
                bar.close()
        else:
            store = open_backend(args.backend, **options)
            try:
                bar = _progress(args, "checkpoint", spec.events)
                try:
                    result = ck.run_checkpoint(store, spec, progress=bar.update)
                finally:
                    bar.close()
            finally:
                store.close()
    report.print_errors(result.phase)
    lines = report.checkpoint_lines(result)
    extra: dict[str, Any] = {"checkpoint": result.summary()}
    phases = {"run": result.phase}
    if recovery is not None:
        open_ms, verified = recovery
        report.print_errors(verified.phase)
        lines += report.recovery_lines(open_ms, verified, crash=True, eager=args.eager)
        phases["recovery"] = verified.phase
        extra["recovery"] = {"crash": True, "eager": args.eager, "open_ms": open_ms,
                             "missing": verified.missing, "corrupt": verified.corrupt}
    report.print_lines(lines)
    if args.json:
        results.write_json(args.json, results.result_json(
            workload="checkpoint", backend=args.backend, config=_config(args, options),
            phases=phases, backend_stats=None, extra=extra))
    if recovery is not None and (recovery[1].missing or recovery[1].corrupt):
        return EXIT_RUNTIME
    return 0


def _multi_spec(args: argparse.Namespace) -> tuple[core.WorkloadSpec, dict[str, Any]]:
    """The workload and the options shared by every backend of a compare/sweep (checked first,
    so a typo fails before any backend runs)."""
    if args.threads < 1:
        raise UsageError(f"--threads must be >= 1 (got {args.threads})")
    spec = _spec(args)
    options: dict[str, Any] = dict(parse_kv(args.opt))
    for backend in args.backends:
        try:
            cls = backend_class(backend)
        except CkptError:
            if isinstance(sys.exc_info()[1], UnknownBackendError):
                raise
            continue  # missing client package: reported as skipped by the run
        own = {k: v for k, v in options.items() if k in cls.all_options()}
        cls.parse_options(own)
    return spec, options


def _options_for(backend: str, options: dict[str, Any]) -> dict[str, Any]:
    names = _options_of(backend)
    return dict(options) if names is None else {k: v for k, v in options.items() if k in names}


def _finish_multi(args: argparse.Namespace, kind: str, doc: dict[str, Any],
                  table: list[str]) -> int:
    print("\n".join(table))
    if args.json:
        results.write_json(args.json, doc)
    if args.csv:
        results.write_csv(args.csv, doc)
    plot = args.plot or os.path.join("results", f"{kind}-{args.workload}.png")
    (plots.plot_compare if kind == "compare" else plots.plot_sweep)(doc, plot)
    print(f"plot: {plot}", file=sys.stderr)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    spec, options = _multi_spec(args)
    _place(args, args.backends, options)
    operations = None if args.duration and args.ops is None else spec.operations
    outcomes = []
    for backend in args.backends:
        outcome = session.run_workload(backend, _options_for(backend, options), spec,
                                       seed=args.seed, threads=args.threads,
                                       operations=operations, duration=args.duration,
                                       target=args.target, load_batch=args.load_batch)
        print(f"bench: compare: {backend}: "
              + (f"skipped: {outcome.skipped}" if outcome.skipped
                 else f"{outcome.run.throughput:.1f} ops/s"), file=sys.stderr)
        outcomes.append(outcome)
    doc = {"schema": results.COMPARE_SCHEMA, "workload": args.workload,
           "config": _config(args, options, workload_spec=spec.to_dict()),
           "environment": results.environment(),
           "results": [results.outcome_json(o) for o in outcomes]}
    return _finish_multi(args, "compare", doc, tables.compare_table(doc))


def cmd_sweep(args: argparse.Namespace) -> int:
    spec, options = _multi_spec(args)
    if args.rounds < 1:
        raise UsageError("--rounds must be >= 1")
    _place(args, args.backends, options)
    targets = None
    if args.targets != "auto" and not args.threads_sweep:
        targets = csv_list(float)(args.targets)
    entries = []
    for r in range(args.rounds):
        tag = f" round {r + 1}" if args.rounds > 1 else ""
        for backend in args.backends:
            points = session.sweep(
                backend, _options_for(backend, options), spec, targets=targets,
                threads_list=args.threads_sweep, point_seconds=args.point_seconds,
                seed=args.seed,
                on_point=lambda o: print(
                    f"bench: sweep{tag}: {o.backend} {o.params}: "
                    + (f"skipped: {o.skipped}" if o.skipped
                       else f"{o.run.throughput:.1f} ops/s"), file=sys.stderr))
            for o in points:
                entry = results.outcome_json(o)
                if args.rounds > 1:
                    entry["round"] = r + 1
                entries.append(entry)
    doc = {"schema": results.SWEEP_SCHEMA, "workload": args.workload,
           "config": _config(args, options, workload_spec=spec.to_dict()),
           "environment": results.environment(), "results": entries}
    doc["ratios"] = results.sweep_ratios(doc)
    return _finish_multi(args, "sweep", doc,
                         tables.sweep_table(doc) + tables.ratio_lines(doc["ratios"]))


def cmd_report(args: argparse.Namespace) -> int:
    import json

    docs = []
    for path in args.results:
        try:
            with open(path, encoding="utf-8") as fh:
                docs.append(json.load(fh))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read results file {path}: {exc}")
    try:
        plots.plot_results(docs, args.plot)
    except (ValueError, KeyError) as exc:
        raise UsageError(f"cannot plot these results: {exc}")
    for doc in docs:
        if doc.get("schema") == results.SWEEP_SCHEMA:
            print("\n".join(tables.sweep_table(doc)))
        elif doc.get("schema") == results.COMPARE_SCHEMA:
            print("\n".join(tables.compare_table(doc)))
    if args.csv:
        results.write_csv(args.csv, docs[0])
    print(f"plot: {args.plot}", file=sys.stderr)
    return 0


def _crash_load(args: argparse.Namespace, options: dict[str, Any]) -> tuple[float, int]:
    """Run the load in a child, SIGKILL it once it reports done (before it closes the store)."""
    cmd = [sys.executable, "-m", "bench", "_recovery-load", "--backend", args.backend,
           "--records", str(args.records), "--value-size", str(args.value_size),
           "--seed", str(args.seed), "--load-batch", str(args.load_batch), "--no-progress"]
    for key, value in options.items():
        cmd += ["--opt", f"{key}={value}"]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline() if child.stdout else ""
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
        _, err = child.communicate()
    parts = line.split()
    if len(parts) != 3 or parts[0] != "LOADED":
        detail = (err or "").strip().splitlines()
        raise CkptError("the crash-load child failed before finishing the load"
                        + (f": {detail[-1]}" if detail else ""))
    return float(parts[1]), int(parts[2])


def cmd_recovery_child(args: argparse.Namespace) -> int:
    """Load, report ``LOADED <ms> <keys>``, then wait to be SIGKILLed with the store open."""
    options = _backend_options(args)
    store = open_backend(args.backend, **options)
    result = runner.load(store, _recovery_workload(args), batch=args.load_batch,
                         value_for=_value_for(args))
    if result.errors:
        first = next(iter(result.errors))
        raise CkptError(f"load failed: {first}")
    print(f"LOADED {result.runtime_ms!r} {result.keys}", flush=True)
    while True:  # the parent kills us here, before close()
        time.sleep(3600)


# ---------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UsageError, UnknownBackendError, BadOptionError, WorkloadError) as exc:
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
