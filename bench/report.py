"""Results as text (YCSB's exact line format) and as JSON (schema ``ckptbench.result/1``).

Text: every line is ``[SECTION], Metric, value``.  The run phase uses YCSB's own sections
(``[OVERALL]``, ``[READ]``, ``[UPDATE]``, ``[READ-FAILED]``, ``[Intended-READ]`` ...), so
existing YCSB parsers read it unchanged.  The load phase, which YCSB reports from a separate
``ycsb load`` invocation, is printed first with every section prefixed ``LOAD-`` (``[LOAD-OVERALL]``,
``[LOAD-INSERT-BATCH]`` ...), so the two phases never mix in a parser keyed on ``[INSERT]``.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
from typing import Any, TextIO

from workloads.measure import OK, Measurements
from workloads.runner import PhaseResult

SCHEMA = "ckptbench.result/1"


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


def print_lines(lines: list[str], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write("".join(line + "\n" for line in lines))
    out.flush()


def print_errors(phase: PhaseResult, err: TextIO | None = None) -> None:
    """The distinct error messages of a phase, on stderr, so a failing backend is visible."""
    err = err or sys.stderr
    for text, n in phase.errors.items():
        print(f"bench: {phase.name}: {n} op(s) failed: {text}", file=err)


# ----------------------------------------------------------------------------------------- json
def phase_json(phase: PhaseResult) -> dict[str, Any]:
    m = phase.measurements
    out: dict[str, Any] = {
        "runtime_ms": phase.runtime_ms,
        "throughput_ops_sec": phase.throughput,
        "operations_done": phase.operations,
        "operations": {name: m.summary(name) for name in m.names()},
        "errors": dict(phase.errors),
    }
    if phase.keys:
        out["records"] = phase.keys
    return out


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv,
    }


def result_json(
    *,
    workload: str,
    backend: str,
    config: dict[str, Any],
    phases: dict[str, PhaseResult],
    backend_stats: dict[str, Any] | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "workload": workload,
        "backend": backend,
        "config": config,
        "environment": environment(),
        "phases": {name: phase_json(p) for name, p in phases.items()},
        "backend_stats": backend_stats,
    }
    if extra:
        doc.update(extra)
    return doc


def write_json(path: str, doc: dict[str, Any]) -> None:
    """Write atomically (temp file + rename) so a reader never sees half a result."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, sort_keys=False, default=str)
        fh.write("\n")
    os.replace(tmp, path)
