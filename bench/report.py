"""Results as text, in YCSB's exact line format (the JSON and CSV forms: :mod:`experiments.results`).

Text: every line is ``[SECTION], Metric, value``.  The run phase uses YCSB's own sections
(``[OVERALL]``, ``[READ]``, ``[UPDATE]``, ``[READ-FAILED]``, ``[Intended-READ]`` ...), so
existing YCSB parsers read it unchanged.  The load phase, which YCSB reports from a separate
``ycsb load`` invocation, is printed first with every section prefixed ``LOAD-`` (``[LOAD-OVERALL]``,
``[LOAD-INSERT-BATCH]`` ...), so the two phases never mix in a parser keyed on ``[INSERT]``.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from workloads.measure import OK, Measurements
from workloads.runner import PhaseResult


def _num(value: Any) -> str:
    """Java's formatting of YCSB's numbers: longs as integers, doubles with their repr."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def measurement_lines(measurements: Measurements, prefix: str = "") -> list[str]:
    """Per-operation lines; ``Return=`` lines only where statuses are counted (the op names)."""
    lines = []
    for name in measurements.names():
        section = f"[{prefix}{name}]"
        s = measurements.summary(name)
        if s["count"]:
            lines += [
                f"{section}, Operations, {s['count']}",
                f"{section}, AverageLatency(us), {_num(float(s['mean_us']))}",
                f"{section}, MinLatency(us), {s['min_us']}",
                f"{section}, MaxLatency(us), {s['max_us']}",
                f"{section}, 50thPercentileLatency(us), {s['p50_us']}",
                f"{section}, 95thPercentileLatency(us), {s['p95_us']}",
                f"{section}, 99thPercentileLatency(us), {s['p99_us']}",
                f"{section}, 99.9PercentileLatency(us), {s['p999_us']}",
            ]
        if s["statuses"]:
            lines.append(f"{section}, Return={OK}, {s['ok']}")
            lines.append(f"{section}, Return=ERROR, {s['statuses'].get('ERROR', 0)}")
            for status, n in sorted(s["statuses"].items()):
                if status not in (OK, "ERROR"):
                    lines.append(f"{section}, Return={status}, {n}")
    return lines


def phase_lines(phase: PhaseResult, prefix: str = "") -> list[str]:
    """``[OVERALL]`` (or ``[<prefix>OVERALL]``) runtime/throughput, then the per-op lines."""
    section = f"[{prefix}OVERALL]"
    lines = [
        f"{section}, RunTime(ms), {int(round(phase.runtime_ms))}",
        f"{section}, Throughput(ops/sec), {_num(float(phase.throughput))}",
    ]
    if phase.keys:
        lines.append(f"{section}, Records, {phase.keys}")
    return lines + measurement_lines(phase.measurements, prefix)


def checkpoint_lines(result: Any) -> list[str]:
    """The checkpoint workload: ``[OVERALL]`` (throughput = checkpoints written/s), the
    SafeKeeper's counts under ``[CHECKPOINT]``, then ``[CHECKPOINT-WRITE]`` and ``[EVENT-LAG]``."""
    lines = phase_lines(result.phase)
    at = lines.index(next(line for line in lines if "Throughput" in line)) + 1
    lines[at:at] = [
        f"[CHECKPOINT], Events, {result.submitted}",
        f"[CHECKPOINT], EventRate(events/sec), {_num(float(result.event_rate))}",
        f"[CHECKPOINT], Written, {result.written}",
        f"[CHECKPOINT], Dropped, {result.dropped}",
        f"[CHECKPOINT], Failed, {result.failed}",
        f"[CHECKPOINT], WriteRate(ckpt/sec), {_num(float(result.write_rate))}",
    ]
    return lines


def recovery_lines(recovery: Any) -> list[str]:
    """``[RECOVERY]``: crash or clean close, lazy or eager read-back, the timed reopen, what was
    read back and what was missing or corrupt (:class:`experiments.recovery.Recovery`).  The
    read-back's per-operation lines follow from the caller."""
    verified = recovery.verified
    return [
        f"[RECOVERY], Crash, {'true' if recovery.crash else 'false'}",
        f"[RECOVERY], Eager, {'true' if recovery.eager else 'false'}",
        f"[RECOVERY], OpenTime(ms), {_num(float(recovery.open_ms))}",
        f"[RECOVERY], Records, {verified.phase.operations}",
        f"[RECOVERY], Missing, {verified.missing}",
        f"[RECOVERY], Corrupt, {verified.corrupt}",
        f"[RECOVERY], RunTime(ms), {int(round(verified.phase.runtime_ms))}",
    ]


def print_lines(lines: list[str], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write("".join(line + "\n" for line in lines))
    out.flush()


def print_errors(phase: PhaseResult, err: TextIO | None = None) -> None:
    """The distinct error messages of a phase, on stderr, so a failing backend is visible."""
    err = err or sys.stderr
    for text, n in phase.errors.items():
        print(f"bench: {phase.name}: {n} op(s) failed: {text}", file=err)


def baseline_lines(baseline: Any) -> list[str]:
    """``[BASELINE]`` (the bare loop in Python) and ``[BASELINE-C]`` (in C, where built): each
    floor's throughput and runtime, and the run's throughput over it
    (:class:`experiments.baselines.Baseline`)."""
    def floor(tag: str, f: Any) -> list[str]:
        return [f"[{tag}], Throughput(ops/sec), {_num(float(f.phase.throughput))}",
                f"[{tag}], RunTime(ms), {int(round(f.phase.runtime_ms))}",
                f"[{tag}], Ratio, {_num(float(f.ratio))}"]

    lines = floor("BASELINE", baseline.python)
    lines += measurement_lines(baseline.python.phase.measurements, "BASELINE-")
    if baseline.native is not None:
        lines += floor("BASELINE-C", baseline.native)
    return lines


def clients_lines(lines: list[str], clients: int) -> list[str]:
    """YCSB's run lines with ``[OVERALL], Clients, N`` after the throughput line (a run whose
    clients were Spark tasks)."""
    at = next(i for i, line in enumerate(lines) if line.startswith("[OVERALL], Throughput")) + 1
    return lines[:at] + [f"[OVERALL], Clients, {clients}"] + lines[at:]
