"""The one owner of matplotlib: every chart ckptbench draws is drawn here.

Charts are drawn from the JSON documents of :mod:`experiments.results` (never from live objects),
so ``bench report`` can re-plot saved results exactly as the run that made them did.  The Agg
backend is selected on first use: no display is needed.
"""

from __future__ import annotations

import statistics
from typing import Any

from experiments.results import COMPARE_SCHEMA, SCHEMA, SWEEP_SCHEMA, ensure_parent, run_operations

def pyplot():
    """matplotlib.pyplot on the Agg backend (imported on first use: it is slow to import)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_compare(doc: dict[str, Any], path: str) -> None:
    """Bar chart: throughput per backend (left), p50/p99 of every op per backend (right)."""
    plt = pyplot()
    ran = [e for e in doc["results"] if not e["skipped"]]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = [e["backend"] for e in ran]
    ax1.bar(names, [e["throughput_ops_sec"] for e in ran], color="tab:blue")
    ax1.set_yscale("log")
    ax1.set_ylabel("throughput (ops/s, log)")
    ax1.set_title(f"{doc.get('workload', '')}: throughput")
    ops = sorted({n for e in ran for n in run_operations(e)})
    width = 0.8 / max(1, 2 * len(ops))
    for i, op in enumerate(ops):
        for j, (pct, hatch) in enumerate((("p50_us", ""), ("p99_us", "//"))):
            xs = [k + (2 * i + j) * width - 0.4 + width / 2 for k in range(len(ran))]
            ys = [(run_operations(e).get(op) or {}).get(pct) or 0 for e in ran]
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
    ensure_parent(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweep(doc: dict[str, Any], path: str) -> None:
    """Latency vs throughput, one curve per backend (the thesis' Fig 4.1 shape).  Target-rate
    sweeps plot the intended latency (queueing included), thread sweeps the service latency."""
    plt = pyplot()
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
    ensure_parent(path)
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


def plot_spark_matrix(rows: list[dict[str, Any]], path: str) -> None:
    """Three panels: throughput, checkpoint time, recovery time — one bar per combination."""
    plt = pyplot()
    labels = [r["protocol"] if r["backend"] == "-" else f"{r['protocol']}\n{r['backend']}" for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(max(10, 1.4 * len(rows) * 1.5), 4.5))
    for ax, key, title in zip(axes, ("throughput", "checkpoint_ms", "recovery_ms"),
                              ("Throughput (events/s)", "Checkpoint time (ms)", "Recovery time (ms)")):
        ax.bar(range(len(rows)), [r[key] for r in rows], color="tab:blue")
        ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
        ax.set_title(title)
    fig.tight_layout()
    ensure_parent(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
