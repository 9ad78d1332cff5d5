"""``bench recovery`` and ``bench checkpoint``: crash or close, reopen (timed), verify.

The experiments are :mod:`experiments.storage.recovery`; this module parses, calls and prints
``[RECOVERY]`` / ``[CHECKPOINT]`` lines (for a store that rebuilds an index on open, also how:
snapshot used, segments taken from hint files, segments and records scanned), and exits 1 when a read-back found missing or corrupt
values.
"""

from __future__ import annotations

import argparse
from typing import Any

from experiments.storage import recovery as experiment
from experiments.core import results
from workloads import checkpoint as ck

from . import report
from .args import (
    EXIT_RUNTIME,
    add_backend_args,
    backend_options,
    config,
    positive_int,
    progress,
)
from .outputs import save

CHECKPOINT_EPILOG = """\
The storage queue drops its oldest checkpoint when full, so drops show the rate a backend cannot
sustain (thesis Fig 4.7).  Compare two backends at one rate:
  bench checkpoint --backend default_fs --rate 1200
  bench checkpoint --backend indexed_fs --rate 1200
`bench reproduce checkpoint-drops` runs both and records the measured drops in docs/results.md.
"""


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("recovery", help="load N keys, close (or crash), reopen, verify all",
                       description="Time reopening a store after a clean close or a SIGKILL "
                                   "(--crash), then read back and verify every key.")
    add_backend_args(p)
    p.add_argument("--records", type=positive_int, default=10_000,
                   help="keys loaded and verified (default 10000)")
    p.add_argument("--value-size", type=positive_int, default=1024)
    p.add_argument("--crash", action="store_true",
                   help="load in a child process that is SIGKILLed before it closes the store")
    p.add_argument("--reopens", type=positive_int, default=1, metavar="N",
                   help="time N reopens, each in a fresh process killed with the store open "
                        "(the directory stays as the close or crash left it), and report their "
                        "median; default 1: the reopen that verifies is the one timed")
    p.add_argument("--load-batch", type=int, default=1000, metavar="N")
    p.add_argument("--eager", action="store_true",
                   help="prefetch every key with get_many before the PEs use them (READ-PREFETCH "
                        "latency per batch); default lazy: one get per key on first use")
    p.set_defaults(func=cmd_recovery)

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


def cmd_recovery(args: argparse.Namespace) -> int:
    options = backend_options(args)
    out = experiment.recovery(args.backend, options, records=args.records,
                              value_size=args.value_size, seed=args.seed,
                              load_batch=args.load_batch, crash_load=args.crash,
                              eager=args.eager, reopens=args.reopens,
                              progress=progress(args))
    if out.crash_load is not None:
        report.print_lines([f"[LOAD-OVERALL], RunTime(ms), {int(round(out.crash_load.load_ms))}",
                            f"[LOAD-OVERALL], Records, {out.crash_load.keys}"])
    else:
        report.print_errors(out.phases["load"])
        report.print_lines(report.phase_lines(out.phases["load"], "LOAD-"))
    verified = out.recovery.verified
    report.print_warnings(out.backend_stats)
    report.print_errors(verified.phase)
    report.print_lines(report.recovery_lines(out.recovery) + _rebuild_lines(out.backend_stats)
                       + report.phase_lines(verified.phase))
    if args.json or args.html:
        save(args, results.result(
            workload="recovery", backend=args.backend, config=config(args, options),
            phases=out.phases, backend_stats=out.backend_stats, recovery=out.recovery.reopen()))
    return 0 if out.recovery.intact else EXIT_RUNTIME


#: what a store that rebuilds an index on open reports of the rebuild (indexed_fs's stats)
_REBUILD = (("snapshot_used", "SnapshotUsed"), ("hints_used", "HintsUsed"),
            ("segments_scanned", "SegmentsScanned"), ("records_scanned", "RecordsScanned"))


def _rebuild_lines(stats: dict[str, Any] | None) -> list[str]:
    """``[RECOVERY]`` lines for how the reopened store rebuilt its index, where it says."""
    stats = stats or {}
    lines = [f"[RECOVERY], {label}, {stats[key]}" for key, label in _REBUILD[1:] if key in stats]
    if "snapshot_used" in stats:
        used = "true" if stats["snapshot_used"] else "false"
        lines.insert(0, f"[RECOVERY], SnapshotUsed, {used}")
        if "delta_used" in stats:  # an index delta of that snapshot (indexed_fs)
            lines.insert(1, f"[RECOVERY], DeltaUsed, {str(bool(stats['delta_used'])).lower()}")
    return lines


def cmd_checkpoint(args: argparse.Namespace) -> int:
    spec = ck.CheckpointSpec(rate=args.rate, events=args.events, pes=args.pes, queue=args.queue,
                             serialization_queue=args.serialization_queue, writers=args.writers,
                             skew=args.skew, seed=args.seed).validate()
    options = backend_options(args)
    out = experiment.checkpoint(args.backend, options, spec, crash_recover=args.crash_recover,
                                eager=args.eager, progress=progress(args))
    result = out.result
    report.print_errors(result.phase)
    lines = report.checkpoint_lines(result)
    extra: dict[str, Any] = {"checkpoint": results.CheckpointSummary.of(result)}
    phases = {"run": result.phase}
    if out.recovery is not None:
        verified = out.recovery.verified
        report.print_errors(verified.phase)
        lines += report.recovery_lines(out.recovery)
        lines += report.measurement_lines(verified.phase.measurements)
        phases["recovery"] = verified.phase
        extra["recovery"] = out.recovery.reopen()
    report.print_lines(lines)
    if args.json or args.html:
        save(args, results.result(
            workload="checkpoint", backend=args.backend, config=config(args, options),
            phases=phases, backend_stats=None, **extra))
    return EXIT_RUNTIME if out.recovery is not None and not out.recovery.intact else 0
