"""``bench``: run a YCSB-like workload against a checkpoint store and print YCSB's result lines.

    bench write-heavy --backend indexed_fs [--baseline]     # the thesis' 90 % update / 10 % read mix
    bench ycsb-a ... ycsb-f --backend NAME                  # YCSB's core workloads
    bench recovery --backend NAME --records N [--crash]     # reopen time + read-back verification
    bench services up|down|status|kill [NAME...]            # the real servers (bench.services)

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
from typing import Any, Iterator, NoReturn, Sequence

from backends import (
    BadOptionError,
    CkptError,
    UnknownBackendError,
    backend_class,
    backend_names,
    open_backend,
    parse_kv,
)
from workloads import core, runner
from workloads.core import PRESETS, WorkloadError

from . import report
from .progress import ProgressBar

PROG = "bench"
EXIT_RUNTIME = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A command line that cannot work; printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog.split()[0]}: error: {message} (see {self.prog} --help)\n")


# ------------------------------------------------------------------------------------- parsing
def _positive_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _proportion(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _add_backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", required=True, metavar="NAME",
                   help=f"checkpoint store: {', '.join(backend_names())}")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="backend option, repeatable (e.g. --opt path=/data/ckpt); file backends "
                        "default to a fresh temporary directory removed after the run")
    p.add_argument("--durability", metavar="MODE",
                   help="durability mode of the backend (its first mode by default)")
    p.add_argument("--json", metavar="FILE", help="also write machine-readable results here")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1: reproducible)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


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
    _add_backend_args(p)
    p.add_argument("--records", type=_positive_int, help=f"records loaded (default {spec.records})")
    p.add_argument("--ops", type=_positive_int, help=f"operations run (default {spec.operations})")
    p.add_argument("--duration", type=_positive_float, metavar="SECONDS",
                   help="stop the run phase after this long (with --ops: whichever comes first)")
    p.add_argument("--value-size", type=_positive_int, help=f"bytes per value (default {spec.value_size})")
    p.add_argument("--read-proportion", type=_proportion)
    p.add_argument("--update-proportion", type=_proportion)
    p.add_argument("--insert-proportion", type=_proportion)
    p.add_argument("--scan-proportion", type=_proportion)
    p.add_argument("--rmw-proportion", type=_proportion, help="read-modify-write proportion")
    p.add_argument("--distribution", "--request-distribution", dest="distribution",
                   choices=core.DISTRIBUTIONS, help=f"key popularity (default {spec.distribution})")
    p.add_argument("--max-scan-length", type=_positive_int, help="longest scan (default 100)")
    p.add_argument("--threads", type=int, default=1, help="client threads (default 1)")
    p.add_argument("--target", type=_positive_float, metavar="OPS",
                   help="target ops/s over all threads; adds Intended-<OP> latencies")
    p.add_argument("--load-batch", type=int, default=1000, metavar="N",
                   help="keys per put_many in the load phase; 1 = one put per key, measured as "
                        "INSERT like YCSB (default 1000)")
    p.add_argument("--skip-load", action="store_true",
                   help="do not load (the store at --opt path= already holds the records)")
    p.add_argument("--status-interval", type=_positive_float, metavar="SECONDS",
                   help="print a status line to stderr this often")
    if name == "write-heavy":
        p.add_argument("--baseline", action="store_true",
                       help="after the run, time bare os.write+fdatasync appends of the same "
                            "values in the same kind of directory, and print the ratio")
    p.set_defaults(func=cmd_workload, workload=name)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in PRESETS:
        _add_workload_parser(sub, name)

    p = sub.add_parser("recovery", help="load N keys, close (or crash), reopen, verify all",
                       description="Time reopening a store after a clean close or a SIGKILL "
                                   "(--crash), then read back and verify every key.")
    _add_backend_args(p)
    p.add_argument("--records", type=_positive_int, default=10_000,
                   help="keys loaded and verified (default 10000)")
    p.add_argument("--value-size", type=_positive_int, default=1024)
    p.add_argument("--crash", action="store_true",
                   help="load in a child process that is SIGKILLed before it closes the store")
    p.add_argument("--load-batch", type=int, default=1000, metavar="N")
    p.set_defaults(func=cmd_recovery)

    # hidden: the child side of `recovery --crash`
    p = sub.add_parser("_recovery-load")
    _add_backend_args(p)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--value-size", type=int, required=True)
    p.add_argument("--load-batch", type=int, default=1000)
    p.set_defaults(func=cmd_recovery_child)
    sub._choices_actions = [a for a in sub._choices_actions if a.dest != "_recovery-load"]

    _add_services(sub)
    return parser


def _add_services(sub: Any) -> None:
    """``bench services`` comes from bench.services.cli when that module exists."""
    try:
        from bench.services import cli as services_cli
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("bench.services"):
            raise
        p = sub.add_parser("services", help="manage the real servers (not available yet)")
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=lambda args: _fail_usage(
            "bench services is not available in this installation (bench/services/cli.py is missing)"))
        return
    p = services_cli.add_parser(sub)
    p.set_defaults(func=services_cli.run)


def _fail_usage(message: str) -> int:
    raise UsageError(message)


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


@contextlib.contextmanager
def _data_dir(backend: str, options: dict[str, Any]) -> Iterator[str | None]:
    """A fresh temporary ``path`` for file backends unless one was given; removed afterwards."""
    if "path" not in backend_class(backend).all_options():
        yield None
        return
    if options.get("path"):
        yield os.path.abspath(os.path.expanduser(options["path"]))
        return
    tmp = tempfile.mkdtemp(prefix=f"ckptbench-{backend}-")
    options["path"] = os.path.join(tmp, "store")
    try:
        yield options["path"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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


# ------------------------------------------------------------------------------------ commands
def cmd_workload(args: argparse.Namespace) -> int:
    if args.threads < 1:
        raise UsageError(f"--threads must be >= 1 (got {args.threads})")
    spec = _spec(args)
    options = _backend_options(args)
    if args.skip_load and "path" in backend_class(args.backend).all_options() and not options.get("path"):
        raise UsageError("--skip-load needs the existing store's --opt path=DIR")
    out_lines: list[str] = []
    phases: dict[str, runner.PhaseResult] = {}
    with _data_dir(args.backend, options) as path:
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
            extra["baseline"] = _baseline(args, spec, path, phases["run"])
    if args.json:
        report.write_json(args.json, report.result_json(
            workload=args.workload, backend=args.backend,
            config=_config(args, options, workload_spec=spec.to_dict()),
            phases=phases, backend_stats=stats, extra=extra))
    return 0


def _baseline(args: argparse.Namespace, spec: core.WorkloadSpec, store_path: str | None,
              run: runner.PhaseResult) -> dict[str, Any]:
    """Bare append+fdatasync loop beside the store; prints the [BASELINE] lines."""
    parent = os.path.dirname(store_path) if store_path else None
    directory = tempfile.mkdtemp(prefix="ckptbench-baseline-", dir=parent)
    try:
        bar = _progress(args, "baseline", run.operations)
        try:
            base = runner.fsync_baseline(directory, operations=run.operations,
                                         value_size=spec.value_size, seed=args.seed,
                                         progress=bar.update)
        finally:
            bar.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    ratio = run.throughput / base.throughput if base.throughput else 0.0
    lines = [
        f"[BASELINE], Throughput(ops/sec), {float(base.throughput)!r}",
        f"[BASELINE], RunTime(ms), {int(round(base.runtime_ms))}",
        f"[BASELINE], Ratio, {ratio!r}",
    ] + report.measurement_lines(base.measurements, "BASELINE-")
    report.print_lines(lines)
    return {"directory_parent": parent or tempfile.gettempdir(), "ratio": ratio,
            **report.phase_json(base)}


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
    with _data_dir(args.backend, options) as _path:
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
                result = runner.verify(store, workload.load_keys(), value_for, progress=bar.update)
            finally:
                bar.close()
            stats = store.stats()
        finally:
            store.close()
    phases["run"] = result.phase
    report.print_errors(result.phase)
    report.print_lines([
        f"[RECOVERY], Crash, {'true' if args.crash else 'false'}",
        f"[RECOVERY], OpenTime(ms), {open_ms!r}",
        f"[RECOVERY], Records, {args.records}",
        f"[RECOVERY], Missing, {result.missing}",
        f"[RECOVERY], Corrupt, {result.corrupt}",
    ] + report.phase_lines(result.phase))
    if args.json:
        report.write_json(args.json, report.result_json(
            workload="recovery", backend=args.backend, config=_config(args, options),
            phases=phases, backend_stats=stats,
            extra={"recovery": {"crash": args.crash, "open_ms": open_ms,
                                "missing": result.missing, "corrupt": result.corrupt}}))
    return 0 if result.missing == 0 and result.corrupt == 0 else EXIT_RUNTIME


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
