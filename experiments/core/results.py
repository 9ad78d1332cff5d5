"""Results as data: the JSON documents every experiment writes, and their CSV form.

Schemas: ``ckptbench.result/1`` (one run: config, environment, phases, backend stats),
``ckptbench.compare/1`` and ``ckptbench.sweep/1`` (a list of such runs, one per backend or point).
Every document carries :func:`environment`, so a figure can always be traced to the machine, the
CPUs it was allowed and the command line that produced it.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import tempfile
from typing import Any

from experiments.core.document import Environment, dump
from workloads.measure import Measurements
from workloads.runner import PhaseResult

SCHEMA = "ckptbench.result/1"


COMPARE_SCHEMA = "ckptbench.compare/1"


SWEEP_SCHEMA = "ckptbench.sweep/1"


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
    """The :class:`~experiments.core.document.Environment` of a result made here, as JSON."""
    return dump(Environment.here())


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
    """Write atomically (temp file + rename) so a reader never sees half a result.  The temp
    file sits beside ``path`` in its own directory, and is removed if the write fails."""
    if path == "-":  # the usual spelling of standard output
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
        sys.stdout.flush()
        return
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; give a file name for the results")
    directory, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide results from other users
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def overall(measurements: Measurements, intended: bool = False) -> dict[str, Any]:
    """All successful ops merged: count, mean, p50, p99 in µs.  ``intended``: the
    ``Intended-<OP>`` histograms instead (latency from the intended start, queueing included)."""
    merged = Measurements()
    merged.histogram("ALL")
    for name, hist in measurements.histograms.items():
        if name.endswith("-FAILED") or name.startswith("Intended-") != intended:
            continue
        merged.histogram("ALL").add(hist)
    return merged.summary("ALL")


def outcome_json(outcome: Any) -> dict[str, Any]:
    """One backend's entry in a compare/sweep document: ``skipped`` + reason, or its phases and
    the all-ops summary (``overall``: count, mean/p50/p99 µs)."""
    if outcome.skipped:
        return {"backend": outcome.backend, "params": outcome.params, "skipped": outcome.skipped}
    run = outcome.run
    return {"backend": outcome.backend, "params": outcome.params, "skipped": None,
            "throughput_ops_sec": run.throughput,
            "overall": overall(run.measurements),
            "intended": overall(run.measurements, intended=True),
            "phases": {name: phase_json(p) for name, p in outcome.phases.items()}}


def run_operations(entry: dict[str, Any]) -> dict[str, Any]:
    """The operations a compare/sweep entry's run phase really did (no intended or failed
    sections): what its tables and charts show per operation."""
    ops = entry["phases"]["run"]["operations"]
    return {n: s for n, s in ops.items()
            if s.get("count") and not n.startswith("Intended-") and not n.endswith("-FAILED")}


def sweep_ratios(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The ratios a thread sweep is run for, per round and their median: each backend's
    throughput at the most threads over the fewest, and at each thread count the first
    backend's throughput over each other's.  (Empty for target-rate sweeps.)"""
    tput: dict[tuple[int, str, int], float] = {}
    for e in doc["results"]:
        threads = e["params"].get("threads")
        if threads is None or e["skipped"]:
            continue
        tput[(e.get("round", 1), e["backend"], threads)] = e["throughput_ops_sec"]
    if not tput:
        return []
    rounds = sorted({k[0] for k in tput})
    backends = list(dict.fromkeys(k[1] for k in tput))
    counts = sorted({k[2] for k in tput})
    wanted = [(f"{b} threads {counts[-1]}/{counts[0]}", (b, counts[-1]), (b, counts[0]))
              for b in backends if len(counts) > 1]
    wanted += [(f"{backends[0]}/{b} threads {t}", (backends[0], t), (b, t))
               for t in counts for b in backends[1:]]
    out = []
    for what, num, den in wanted:
        per_round = [tput[(r, *num)] / tput[(r, *den)] for r in rounds
                     if (r, *num) in tput and tput.get((r, *den))]
        if per_round:
            out.append({"what": what, "median": statistics.median(per_round),
                        "rounds": per_round})
    return out


def write_csv(path: str, doc: dict[str, Any]) -> None:
    """One row per (backend, point, phase, operation): counts, throughput and latencies in µs."""
    import csv

    if doc.get("schema") == SCHEMA:
        entries = [{"backend": doc["backend"], "params": {}, "skipped": None,
                    "phases": doc["phases"]}]
    else:
        entries = doc["results"]
    cols = ["backend", "target", "threads", "phase", "operation", "count", "throughput_ops_sec",
            "mean_us", "p50_us", "p95_us", "p99_us", "p999_us", "errors", "skipped"]
    ensure_parent(path)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for e in entries:
            p = e.get("params") or {}
            if e.get("skipped"):
                w.writerow([e["backend"], p.get("target"), p.get("threads")] + [""] * 10
                           + [e["skipped"]])
                continue
            for phase, pj in e["phases"].items():
                for op, s in pj["operations"].items():
                    w.writerow([e["backend"], p.get("target"), p.get("threads"), phase, op,
                                s["count"], pj.get("throughput_ops_sec"), s["mean_us"],
                                s["p50_us"], s["p95_us"], s["p99_us"], s["p999_us"],
                                s["errors"], ""])


def ensure_parent(path: str) -> None:
    """Create the directory that will hold ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
