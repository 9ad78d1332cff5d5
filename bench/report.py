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
import statistics
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


def recovery_lines(open_ms: float, verified: Any, *, crash: bool, eager: bool) -> list[str]:
    """``[RECOVERY]`` summary (open time, missing/corrupt) and the read phase's op lines."""
    return [
        f"[RECOVERY], Crash, {'true' if crash else 'false'}",
        f"[RECOVERY], Eager, {'true' if eager else 'false'}",
        f"[RECOVERY], OpenTime(ms), {_num(float(open_ms))}",
        f"[RECOVERY], Records, {verified.phase.operations}",
        f"[RECOVERY], Missing, {verified.missing}",
        f"[RECOVERY], Corrupt, {verified.corrupt}",
        f"[RECOVERY], RunTime(ms), {int(round(verified.phase.runtime_ms))}",
    ] + measurement_lines(verified.phase.measurements)


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
        "cpus_allowed": sorted(os.sched_getaffinity(0)),  # narrowed by --cpus or taskset
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


# ------------------------------------------------------------------- compare / sweep documents
COMPARE_SCHEMA = "ckptbench.compare/1"
SWEEP_SCHEMA = "ckptbench.sweep/1"


def outcome_json(outcome: Any) -> dict[str, Any]:
    """One backend's entry in a compare/sweep document: ``skipped`` + reason, or its phases and
    the all-ops summary (``overall``: count, mean/p50/p99 µs)."""
    from workloads.session import overall

    if outcome.skipped:
        return {"backend": outcome.backend, "params": outcome.params, "skipped": outcome.skipped}
    run = outcome.run
    return {"backend": outcome.backend, "params": outcome.params, "skipped": None,
            "throughput_ops_sec": run.throughput,
            "overall": overall(run.measurements),
            "intended": overall(run.measurements, intended=True),
            "phases": {name: phase_json(p) for name, p in outcome.phases.items()}}


def _ops(entry: dict[str, Any]) -> dict[str, Any]:
    ops = entry["phases"]["run"]["operations"]
    return {n: s for n, s in ops.items()
            if s.get("count") and not n.startswith("Intended-") and not n.endswith("-FAILED")}


def compare_table(doc: dict[str, Any]) -> list[str]:
    """Throughput, p50/p99 per op and ratios to the first backend that ran."""
    entries = doc["results"]
    ran = [e for e in entries if not e["skipped"]]
    op_names = sorted({n for e in ran for n in _ops(e)})
    head = f"{'backend':<12} {'ops/s':>10} {'x first':>8}"
    for n in op_names:
        head += f" {n + ' p50':>14} {n + ' p99':>14}"
    lines = [head]
    base = ran[0] if ran else None
    for e in entries:
        if e["skipped"]:
            lines.append(f"{e['backend']:<12} skipped: {e['skipped']}")
            continue
        ratio = e["throughput_ops_sec"] / base["throughput_ops_sec"] if base["throughput_ops_sec"] else 0
        row = f"{e['backend']:<12} {e['throughput_ops_sec']:>10.1f} {ratio:>7.3g}x"
        for n in op_names:
            s = _ops(e).get(n)
            row += (f" {s['p50_us']:>11}us {s['p99_us']:>11}us" if s else f" {'-':>14} {'-':>14}")
        lines.append(row)
    return lines


def sweep_table(doc: dict[str, Any]) -> list[str]:
    """One row per sweep point: backend, target/threads, throughput, mean/p50/p99 latency
    (and the round, for ``--rounds``)."""
    rounds = any("round" in e for e in doc["results"])
    lines = [("round " if rounds else "")
             + f"{'backend':<12} {'target':>8} {'threads':>7} {'ops/s':>10} {'mean us':>10} "
             f"{'p50 us':>8} {'p99 us':>8} {'int.mean us':>12} {'int.p99 us':>11}"]
    for e in doc["results"]:
        p = e["params"]
        target = f"{p['target']:.0f}" if p.get("target") else "-"
        head = f"{e.get('round', ''):>5} " if rounds else ""
        if e["skipped"]:
            lines.append(f"{head}{e['backend']:<12} {target:>8} {p.get('threads', 1):>7} "
                         f"skipped: {e['skipped']}")
            continue
        o, i = e["overall"], e.get("intended") or {}
        lines.append(f"{head}{e['backend']:<12} {target:>8} {p.get('threads', 1):>7} "
                     f"{e['throughput_ops_sec']:>10.1f} {o['mean_us'] or 0:>10.1f} "
                     f"{o['p50_us'] or 0:>8} {o['p99_us'] or 0:>8}"
                     + (f" {i['mean_us']:>12.1f} {i['p99_us']:>11}" if i.get("count") else ""))
    return lines


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


def ratio_lines(ratios: list[dict[str, Any]]) -> list[str]:
    """``[RATIO], <what>, <median>`` (and each round's ratio when there were several)."""
    lines = []
    for r in ratios:
        line = f"[RATIO], {r['what']}, {r['median']:.2f}"
        if len(r["rounds"]) > 1:
            line += f", median of {len(r['rounds'])} rounds: " + " ".join(
                f"{x:.2f}" for x in r["rounds"])
        lines.append(line)
    return lines


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ensure_dir(path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)


def plot_compare(doc: dict[str, Any], path: str) -> None:
    """Bar chart: throughput per backend (left), p50/p99 of every op per backend (right)."""
    plt = _pyplot()
    ran = [e for e in doc["results"] if not e["skipped"]]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = [e["backend"] for e in ran]
    ax1.bar(names, [e["throughput_ops_sec"] for e in ran], color="tab:blue")
    ax1.set_yscale("log")
    ax1.set_ylabel("throughput (ops/s, log)")
    ax1.set_title(f"{doc.get('workload', '')}: throughput")
    ops = sorted({n for e in ran for n in _ops(e)})
    width = 0.8 / max(1, 2 * len(ops))
    for i, op in enumerate(ops):
        for j, (pct, hatch) in enumerate((("p50_us", ""), ("p99_us", "//"))):
            xs = [k + (2 * i + j) * width - 0.4 + width / 2 for k in range(len(ran))]
            ys = [(_ops(e).get(op) or {}).get(pct) or 0 for e in ran]
            ax2.bar(xs, ys, width, hatch=hatch, label=f"{op} {pct[:3]}")
    ax2.set_xticks(range(len(ran)), names)
    ax2.set_yscale("log")
    ax2.set_ylabel("latency (us, log)")
    ax2.set_title("latency per op")
    ax2.legend(fontsize=7)
    skipped = [f"{e['backend']}: skipped" for e in doc["results"] if e["skipped"]]
    if skipped:
        fig.text(0.01, 0.01, "; ".join(skipped), fontsize=7)
    fig.tight_layout()
    _ensure_dir(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweep(doc: dict[str, Any], path: str) -> None:
    """Latency vs throughput, one curve per backend (the thesis' Fig 4.1 shape).  Target-rate
    sweeps plot the intended latency (queueing included), thread sweeps the service latency."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_backend: dict[str, list[dict[str, Any]]] = {}
    for e in doc["results"]:
        by_backend.setdefault(e["backend"], []).append(e)
    for backend, entries in by_backend.items():
        cells: dict[str, list[tuple[float, float]]] = {}  # one point per params (--rounds: medians)
        for e in entries:
            if e["skipped"]:
                continue
            lat = e.get("intended") if (e.get("intended") or {}).get("count") else e["overall"]
            if lat["mean_us"] is not None:
                cells.setdefault(repr(sorted(e["params"].items())), []).append(
                    (e["throughput_ops_sec"], lat["mean_us"] / 1000.0))
        pts = [(statistics.median(x for x, _ in c), statistics.median(y for _, y in c))
               for c in cells.values()]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=backend)
        else:
            ax.plot([], [], label=f"{backend} (skipped)")
    ax.set_xlabel("throughput (ops/s)")
    ax.set_ylabel("average latency (ms)")
    ax.set_title(f"{doc.get('workload', '')}: latency vs throughput")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    _ensure_dir(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_results(docs: list[dict[str, Any]], path: str) -> None:
    """Re-plot saved results: sweeps as curves, compares as bars, single runs as one compare."""
    if all(d.get("schema") == SWEEP_SCHEMA for d in docs):
        plot_sweep({"workload": docs[0].get("workload"),
                    "results": [e for d in docs for e in d["results"]]}, path)
        return
    results = []
    for d in docs:
        if d.get("schema") in (COMPARE_SCHEMA, SWEEP_SCHEMA):
            results += d["results"]
        elif d.get("schema") == SCHEMA:
            run = d["phases"]["run"]
            ops = run["operations"]
            results.append({"backend": d["backend"], "params": {}, "skipped": None,
                            "throughput_ops_sec": run["throughput_ops_sec"],
                            "phases": {"run": {"operations": ops}}})
        else:
            raise ValueError(f"not a ckptbench result (schema {d.get('schema')!r})")
    plot_compare({"workload": docs[0].get("workload"), "results": results}, path)


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
    _ensure_dir(path)
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
